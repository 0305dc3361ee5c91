// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail demo: record a bundled workload and explain what the output
 * shows. The workload is synthetic: it does what a model server does to
 * memory (map and fill weights, share a buffer, fork a worker, grow and
 * shrink a cache), with sizes it announces, and nothing else.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "log.h"
#include "memtrail_marker.h"

#define MiB (1024UL * 1024)
#define STEP_MS 300

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void say(const char *fmt, size_t mib)
{
	fprintf(stderr, "  [workload %d] ", (int)getpid());
	fprintf(stderr, fmt, mib);
	fputc('\n', stderr);
}

/* Map SIZE bytes of private memory and write every page: mapped and rss_anon grow. */
static char *fill(size_t size)
{
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t i;

	if (p == MAP_FAILED)
		return NULL;
	for (i = 0; i < size; i += 4096)
		p[i] = (char)i | 1;
	return p;
}

int cmd_demo_workload(int argc, char **argv)
{
	char *weights, *cache[4], *shared;
	size_t i;
	pid_t worker;
	int fd;

	(void)argc;
	(void)argv;
	memtrail_phase("load_weights");
	say("loading model weights: 192 MiB mapped and written", 192);
	weights = fill(192 * MiB);
	if (!weights)
		return 1;
	pause_ms(STEP_MS);

	memtrail_phase("share_input");
	say("sharing a 32 MiB input buffer (memfd, counted as rss_shmem)", 32);
	fd = memfd_create("demo-input", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 32 * MiB))
		return 1;
	shared = mmap(NULL, 32 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (shared == MAP_FAILED)
		return 1;
	memset(shared, 1, 32 * MiB);
	pause_ms(STEP_MS);

	memtrail_phase("tokenizer");
	say("forking a tokenizer worker that fills %zu MiB and exits", 48);
	worker = fork();
	if (worker == 0) {
		if (!fill(48 * MiB))
			_exit(1);
		pause_ms(STEP_MS);
		_exit(0);
	}
	if (worker < 0 || waitpid(worker, NULL, 0) < 0)
		return 1;

	say("serving 4 requests: each grows the KV cache by %zu MiB; then it is freed", 64);
	for (i = 0; i < 4; i++) {
		memtrail_phase("request");
		cache[i] = fill(64 * MiB);
		if (!cache[i])
			return 1;
		pause_ms(STEP_MS / 2);
	}
	memtrail_phase("evict_cache");
	for (i = 0; i < 4; i++)
		munmap(cache[i], 64 * MiB);
	pause_ms(STEP_MS);

	memtrail_phase("shutdown");
	say("shutting down: weights and buffer released (%zu MiB)", 224);
	munmap(weights, 192 * MiB);
	munmap(shared, 32 * MiB);
	close(fd);
	pause_ms(STEP_MS);
	return 0;
}

static const char explanation[] =
"\n"
"What this shows (the workload above is a synthetic stand-in for a model server):\n"
"  - Two targets: the workload and the worker it forked. memtrail followed the fork\n"
"    by itself; the EXIT column says how each ended. BASELINE is what a process\n"
"    held when memtrail first saw it (here: at exec, and the worker at its fork,\n"
"    the 192 MiB of weights it shares copy-on-write with its parent, as the\n"
"    kernel's own counters in /proc/PID/status count them); levels are absolute.\n"
"  - mapped is private writable memory (VmData): 192 MiB of weights plus up to\n"
"    4 x 64 MiB of cache put its PEAK near 450 MiB above the program's own baseline;\n"
"    FINAL is what was still mapped when the process exited.\n"
"  - rss_anon is the part of it actually resident. The peak was reached while the\n"
"    cache was full although no sample may have fallen on that moment: peaks are\n"
"    kept in the kernel at every change.\n"
"  - rss_shmem is the 32 MiB shared buffer; rss_file is code and files in memory.\n"
"  - The phase table below the summary splits the workload's life into the phases\n"
"    it marked with memtrail_phase() (include/memtrail_marker.h): what each phase\n"
"    allocated and freed, its own peak (SEG_PEAK, relative to where it started)\n"
"    and the process's level and peak so far (CUM_*). 'request' ran 4 times: the\n"
"    summary by name gives its mean and max per invocation.\n"
"  - The trail file holds all of it, the timeline (a sample every 100 ms) and the\n"
"    events. Try: memtrail report %s --json\n"
"Next: trace your own program with 'memtrail record -- CMD', or a running one with\n"
"'memtrail record --pid PID'; name phases without changing it with --phase\n"
"NAME=BINARY:SYMBOL, or from outside with 'memtrail mark PID NAME'.\n";

int cmd_demo(int argc, char **argv)
{
	char self[PATH_MAX], out[PATH_MAX];
	char *rec_argv[8];
	ssize_t n;
	int ret;

	if (argc > 1) {
		if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
			printf("usage: memtrail demo\n\n"
			       "Record a bundled synthetic workload (a stand-in for a model server:\n"
			       "it maps and fills memory in announced steps and forks a worker)\n"
			       "with 'memtrail record', then explain the table. Writes\n"
			       "memtrail-demo.json in the current directory or, where it cannot\n"
			       "write, in a new private folder /tmp/memtrail-demo.XXXXXX.\n");
			return 0;
		}
		log__error("demo takes no arguments");
		return 2;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		log__error("cannot find the memtrail binary: %s", strerror(errno));
		return 1;
	}
	self[n] = '\0';
	if (!access(".", W_OK)) {
		snprintf(out, sizeof(out), "memtrail-demo.json");
	} else {
		/* not a fixed name in a shared folder: another user could hold it */
		char dir[] = "/tmp/memtrail-demo.XXXXXX";

		if (!mkdtemp(dir)) {
			log__error("cannot create a folder in /tmp for the demo's trail: %s",
				   strerror(errno));
			return 1;
		}
		snprintf(out, sizeof(out), "%s/memtrail-demo.json", dir);
	}
	printf("memtrail demo: recording '%s demo-workload', a synthetic workload bundled with\n"
	       "memtrail that maps and fills memory in steps, like a model server would.\n\n",
	       self);
	fflush(stdout);
	rec_argv[0] = "record";
	rec_argv[1] = "-o";
	rec_argv[2] = out;
	rec_argv[3] = "--";
	rec_argv[4] = self;
	rec_argv[5] = "demo-workload";
	rec_argv[6] = NULL;
	ret = cmd_record(6, rec_argv);
	if (ret == 0)
		printf(explanation, out);
	return ret;
}
