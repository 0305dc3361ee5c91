// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A library unmapped while the memory it mapped lives on: dlopen(LIBPATH) (tests/workloads/lib/plugin.c), plugin_map(8 MiB),
 * dlclose, then 1.5 s with no other mapping (memtrail harvests its sites
 * meanwhile, after the unmapping), and exit. Prints its ledger:
 *   {"pid": P, "plugin_bytes": 8388608, "unmapped": true}
 * where "unmapped" says the library was gone from /proc/self/maps.
 *   unload LIBPATH
 */
#include <dlfcn.h>
#include <time.h>

#include "common.h"

#define PLUGIN_BYTES (8 * MiB)

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

/* Whether NAME's last path component is in /proc/self/maps. */
static int mapped(const char *name)
{
	const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	static char buf[1 << 16];
	ssize_t n, len = 0;
	int fd = open("/proc/self/maps", O_RDONLY);

	if (fd < 0)
		return -1;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = '\0';
	return strstr(buf, base) != NULL;
}

int main(int argc, char **argv)
{
	void *(*plugin_map)(size_t);
	void *h, *p;
	int unmapped;

	if (argc != 2) {
		dprintf(2, "usage: unload LIBPATH\n");
		return 2;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h || !(plugin_map = (void *(*)(size_t))dlsym(h, "plugin_map"))) {
		dprintf(2, "unload: %s\n", dlerror());
		return 1;
	}
	p = plugin_map(PLUGIN_BYTES);
	if (!p || dlclose(h)) {
		dprintf(2, "unload: plugin_map or dlclose failed\n");
		return 1;
	}
	unmapped = !mapped(argv[1]);
	sleep_ms(1500);
	report("{\"pid\": %d, \"plugin_bytes\": %lu, \"unmapped\": %s}\n", getpid(),
	       PLUGIN_BYTES, unmapped ? "true" : "false");
	return 0;
}
