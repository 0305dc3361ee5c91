// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "roots.h"

static void root_path(uint32_t pid, char *buf, size_t len)
{
	if (pid)
		snprintf(buf, len, "/proc/%u/root", pid);
	else
		snprintf(buf, len, "/");
}

int roots__id(uint32_t pid, dev_t *dev, ino_t *ino)
{
	char path[32];
	struct stat st;

	root_path(pid, path, sizeof(path));
	if (stat(path, &st))
		return -errno;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

/* PATH opened read-only inside the directory ROOT_FD as if it were '/': -errno. */
static int open_in(int root_fd, const char *path)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
	int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

bool roots__runtime_name(const char *name)
{
	static const char *const stems[] = { "libcuda", "libnrt" };	/* libcudart too */
	size_t i;

	for (i = 0; i < sizeof(stems) / sizeof(stems[0]); i++)
		if (!strncmp(name, stems[i], strlen(stems[i])) && strstr(name, ".so"))
			return true;
	return false;
}

int roots__each_runtime(uint32_t pid, roots_file_fn fn, void *ctx)
{
	static const char *const tools[] = { "/sbin/ldconfig", "/usr/sbin/ldconfig" };
	static const char *const names[] = { "libcuda.so", "libcudart.so", "libnrt.so" };
	char root[32], cmd[96], line[4096 + 128], *arrow, *soname;
	int root_fd, cache_fd, fd, found = 0, err;
	const char *tool = NULL;
	size_t i;
	FILE *f;

	for (i = 0; i < sizeof(tools) / sizeof(tools[0]) && !tool; i++)
		if (!access(tools[i], X_OK))
			tool = tools[i];
	if (!tool)
		return -ENOENT;
	root_path(pid, root, sizeof(root));
	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return -errno;
	/* the root's own cache, found inside it: ldconfig reads it through this descriptor */
	cache_fd = open_in(root_fd, "/etc/ld.so.cache");
	if (cache_fd < 0) {
		close(root_fd);
		return cache_fd;
	}
	fcntl(cache_fd, F_SETFD, 0);
	snprintf(cmd, sizeof(cmd), "%s -p -C /proc/self/fd/%d 2>/dev/null", tool, cache_fd);
	f = popen(cmd, "re");
	err = f ? 0 : -errno;
	close(cache_fd);
	if (!f) {
		close(root_fd);
		return err;
	}
	/* "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1" */
	while (fgets(line, sizeof(line), f)) {
		soname = line + strspn(line, " \t");
		arrow = strstr(line, " => ");
		if (!arrow)
			continue;
		arrow[strcspn(arrow, "\n")] = '\0';
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			if (strncmp(soname, names[i], strlen(names[i])))
				continue;
			fd = open_in(root_fd, arrow + 4);
			if (fd < 0)
				break;
			fn(ctx, fd, arrow + 4);
			close(fd);
			found++;
			break;
		}
	}
	pclose(f);
	close(root_fd);
	return found;
}
