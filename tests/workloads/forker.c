// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * A process tree with known endings:
 *   forker [--wait] [--die]
 * child A maps and touches 8 MiB and exits 3; child B maps 4 MiB, forks a
 * grandchild that exits 5, and is killed by SIGKILL; the parent exits 0, or
 * kills itself with SIGKILL with --die. Prints the PIDs as JSON first.
 */
#include <signal.h>
#include <sys/wait.h>

#include "common.h"

int main(int argc, char **argv)
{
	int die = argc > 1 && !strcmp(argv[argc - 1], "--die");
	pid_t a, b, g = 0;
	int pfd[2];

	wait_go(argc, argv);
	if (pipe(pfd))
		return 2;
	a = fork();
	if (a == 0) {
		map_touch(8 * MiB);
		_exit(3);
	}
	b = fork();
	if (b == 0) {
		map_touch(4 * MiB);
		g = fork();
		if (g == 0)
			_exit(5);
		waitpid(g, NULL, 0);
		if (write(pfd[1], &g, sizeof(g)) != sizeof(g))
			_exit(6);
		raise(SIGKILL);
		_exit(7);
	}
	if (read(pfd[0], &g, sizeof(g)) != sizeof(g))
		return 2;
	waitpid(a, NULL, 0);
	waitpid(b, NULL, 0);
	report("{\"parent\": %d, \"a\": %d, \"b\": %d, \"grandchild\": %d}\n",
	       (int)getpid(), (int)a, (int)b, (int)g);
	if (die)
		raise(SIGKILL);
	return 0;
}
