// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Maps 64 MiB, writes one byte of it and exits at once: a process whose
 * whole life after its dynamic linker is microseconds. With --fork N, N
 * forked children do so instead (no exec: their code lies where the
 * parent's does), one after another. Reports its own arithmetic as one JSON
 * line on stdout:
 *   blink [--fork N]
 */
#include <sys/wait.h>

#include "common.h"

#define BLINK_BYTES (64 * MiB)
#define BLINK_CHILDREN_MAX 64

static void blink(void)
{
	char *p = mmap(NULL, BLINK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		_exit(3);
	p[0] = 1;
}

int main(int argc, char **argv)
{
	int n = argc > 2 && !strcmp(argv[1], "--fork") ? atoi(argv[2]) : 0, i, status;
	pid_t kids[BLINK_CHILDREN_MAX];
	char list[BLINK_CHILDREN_MAX * 12 + 1] = "";
	size_t len = 0;

	if (n < 0 || n > BLINK_CHILDREN_MAX)
		return 2;
	if (!n) {
		blink();
		report("{\"pid\": %d, \"mapped\": %lu, \"children\": []}\n", (int)getpid(),
		       BLINK_BYTES);
		return 0;
	}
	for (i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 4;
		if (!kids[i]) {
			blink();
			_exit(0);
		}
		if (waitpid(kids[i], &status, 0) != kids[i] || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			return 5;
		len += snprintf(list + len, sizeof(list) - len, "%s%d", i ? ", " : "", (int)kids[i]);
	}
	report("{\"pid\": %d, \"mapped\": %lu, \"children\": [%s]}\n", (int)getpid(), BLINK_BYTES,
	       list);
	return 0;
}
