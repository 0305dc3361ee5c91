// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A heap that grows at one line until the kernel stops it, beside one that
 * churns: the ground truth of watch's heap windows.
 *
 *   grow_cache  64 x 16 KiB malloc'd, touched and kept per step (below
 *               glibc's mmap threshold: the brk heap grows)
 *   churn       256 malloc(64)/free pairs per step
 *
 * Usage: heap_grow LEDGER [PAUSE_MS]: a step every PAUSE_MS (default 20),
 * for ever; after each step LEDGER is rewritten (atomically) with
 * {"pid", "grow_calls", "grow_bytes", "churn_calls", "churn_bytes",
 * "frees"} as its own arithmetic counts them. No stdio: snprintf into a
 * static buffer, one write().
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (16 * 1024)
#define BLOCKS 64
#define PAIRS 256
#define SMALL 64

static long long grow_calls, grow_bytes, churn_calls, churn_bytes, frees;
/* the kept blocks, chained through their first word */
static void *kept;
void *volatile sink;

__attribute__((noinline)) void grow_cache(void)
{
	for (int i = 0; i < BLOCKS; i++) {
		void **b = malloc(BLOCK);

		if (!b)
			_exit(3);
		memset(b, 1, BLOCK);
		*b = kept;
		kept = b;
		grow_calls++;
		grow_bytes += BLOCK;
	}
}

__attribute__((noinline)) void churn(void)
{
	for (int i = 0; i < PAIRS; i++) {
		sink = malloc(SMALL);
		churn_calls++;
		churn_bytes += SMALL;
		free(sink);
		frees++;
	}
}

static void write_ledger(const char *path, const char *tmp)
{
	static char buf[512];
	int n = snprintf(buf, sizeof(buf),
			 "{\"pid\": %d, \"grow_calls\": %lld, \"grow_bytes\": %lld, "
			 "\"churn_calls\": %lld, \"churn_bytes\": %lld, \"frees\": %lld}\n",
			 (int)getpid(), grow_calls, grow_bytes, churn_calls, churn_bytes, frees);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, buf, n) != n || close(fd) || rename(tmp, path))
		_exit(4);
}

int main(int argc, char **argv)
{
	static char tmp[4096];
	long pause_ms = argc > 2 ? atol(argv[2]) : 20;
	struct timespec pause = { pause_ms / 1000, (pause_ms % 1000) * 1000000L };

	if (argc < 2 || snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]) >= (int)sizeof(tmp))
		return 2;
	for (;;) {
		grow_cache();
		churn();
		write_ledger(argv[1], tmp);
		nanosleep(&pause, NULL);
	}
}
