// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A process storm, as a busy node has (health checks, sidecars, shells):
 *   storm RATE SECONDS [PROGRAM]
 * starts RATE short-lived processes a second (PROGRAM, default /bin/true,
 * each a fork and an exec) for SECONDS, from as many spawners as it takes
 * to keep up, and prints {"started": N, "seconds": S, "failed": F} as JSON.
 * Each spawner paces itself against the clock, so a slow second is made up
 * in the next; "started" over "seconds" is the rate reached.
 */
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

#include "common.h"

extern char **environ;

#define SPAWNERS 4

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* One spawner: RATE a second until END; the counts go up the pipe. */
static void spawner(double rate, uint64_t end, char *prog, int out)
{
	uint64_t t0 = now_ns(), started = 0, failed = 0;
	char *argv[] = { prog, NULL };

	for (;;) {
		uint64_t now = now_ns(), due = t0 + (uint64_t)(started * 1e9 / rate);
		pid_t pid;
		int st;

		if (now >= end)
			break;
		if (due > now) {
			struct timespec ts = { 0, (long)(due - now) };

			nanosleep(&ts, NULL);
			continue;
		}
		if (posix_spawn(&pid, prog, NULL, NULL, argv, environ) ||
		    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			failed++;
		started++;
	}
	uint64_t counts[2] = { started, failed };

	if (write(out, counts, sizeof(counts)) != sizeof(counts))
		_exit(2);
	_exit(0);
}

int main(int argc, char **argv)
{
	double rate = argc > 1 ? atof(argv[1]) : 0, seconds = argc > 2 ? atof(argv[2]) : 0;
	char *prog = argc > 3 ? argv[3] : "/bin/true";
	uint64_t t0, end, started = 0, failed = 0;
	int i, pfd[2];

	if (rate <= 0 || seconds <= 0) {
		dprintf(2, "usage: storm RATE SECONDS [PROGRAM]\n");
		return 2;
	}
	if (pipe(pfd))
		return 2;
	t0 = now_ns();
	end = t0 + (uint64_t)(seconds * 1e9);
	for (i = 0; i < SPAWNERS; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return 2;
		if (pid == 0)
			spawner(rate / SPAWNERS, end, prog, pfd[1]);
	}
	for (i = 0; i < SPAWNERS; i++) {
		uint64_t counts[2];

		if (read(pfd[0], counts, sizeof(counts)) != sizeof(counts))
			return 2;
		started += counts[0];
		failed += counts[1];
	}
	while (wait(NULL) > 0)
		;
	report("{\"started\": %llu, \"seconds\": %.3f, \"failed\": %llu}\n",
	       (unsigned long long)started, (now_ns() - t0) / 1e9, (unsigned long long)failed);
	return failed ? 1 : 0;
}
