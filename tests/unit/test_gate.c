// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The gate's protocol (record -- CMD's command waits at each open of an ELF
 * file until memtrail has looked at it), on the real fanotify group and its
 * keeper process, without BPF: what waits and what does not, who lets an
 * open go (memtrail's answer, a memtrail that does nothing for a second,
 * the gate closed), and that nothing outside the command ever waits.
 *
 * The test is memtrail; a forked child is the command: it enters the gate,
 * then opens each path it is sent and says when the open returned.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "gate.h"

/* A hang guard, not a timing: an open the gate let go returns at once. */
#define GUARD_MS 10000

struct command {
	pid_t pid;
	int to, from;		/* paths to it; a byte from it per open returned */
};

struct served {
	int calls;
	pid_t pid;
	struct stat st;		/* the file it was handed */
	bool open_returned;	/* the command's open had returned when memtrail looked */
	int from;
};

static char elf_path[4096], text_path[] = "/tmp/memtrail-unit-gate-XXXXXX";

/* In the child: enter the gate, say how that went, then open what comes. */
static void __attribute__((noreturn)) command_main(struct gate *g, int in, int out)
{
	char path[4096];
	int marked, failed, err = gate__enter(g, &marked, &failed), fd;
	ssize_t n;

	if (write(out, &err, sizeof(err)) != sizeof(err))
		_exit(1);
	while ((n = read(in, path, sizeof(path) - 1)) > 0) {
		path[n] = '\0';
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (write(out, fd >= 0 ? "o" : "e", 1) != 1)
			_exit(1);
		if (fd >= 0)
			close(fd);
	}
	_exit(0);
}

/* A command in the gate's namespace, the keeper started for it. */
static void start_command(struct gate **g, struct command *c)
{
	int to[2], from[2], err = 0, rc;

	rc = gate__open(g);
	if (rc == -EPERM || rc == -EINVAL) {
		/* no fanotify permission events, or not root: CI has both */
		if (getenv("CI") && !strcmp(getenv("CI"), "true"))
			fail_msg("gate__open: %s (CI runs as root on a kernel with "
				 "CONFIG_FANOTIFY_ACCESS_PERMISSIONS)", strerror(-rc));
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(pipe2(to, O_CLOEXEC), 0);
	assert_int_equal(pipe2(from, O_CLOEXEC), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (!c->pid) {
		close(to[1]);
		close(from[0]);
		command_main(*g, to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	c->to = to[1];
	c->from = from[0];
	assert_int_equal(read(c->from, &err, sizeof(err)), sizeof(err));
	assert_int_equal(err, 0);
	assert_int_equal(gate__start(*g, c->pid), 0);
}

/* The command opens PATH (its open may wait at the gate). */
static void command_opens(struct command *c, const char *path)
{
	assert_int_equal(write(c->to, path, strlen(path)), (ssize_t)strlen(path));
}

/* The command ends, then the gate closes (G NULL: closed already). */
static void end_command(struct gate *g, struct command *c)
{
	int status;

	close(c->to);
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(c->from);
	gate__close(g);
}

/* Whether FD is readable within MS. */
static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

/* The command's open of PATH returned ('o'), within the guard. */
static void expect_returned(struct command *c)
{
	char b;

	assert_true(readable(c->from, GUARD_MS));
	assert_int_equal(read(c->from, &b, 1), 1);
	assert_int_equal(b, 'o');
}

static void look(void *ctx, int fd, pid_t pid)
{
	struct served *s = ctx;

	s->calls++;
	s->pid = pid;
	assert_int_equal(fstat(fd, &s->st), 0);
	s->open_returned = readable(s->from, 0);
}

/* An ELF file the command opens waits until memtrail looked at it: handed over, then let go. */
static void elf_open_waits_for_memtrail(void **state)
{
	struct served s = { 0 };
	struct command c;
	struct gate *g;
	struct stat st;
	uint64_t waited, opens, refused;

	(void)state;
	start_command(&g, &c);
	s.from = c.from;
	command_opens(&c, elf_path);
	/* the keeper hands the open over while the command waits in it */
	assert_true(readable(gate__wake_fd(g), GUARD_MS));
	gate__serve(g, look, &s);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.pid, c.pid);
	assert_false(s.open_returned);
	assert_int_equal(stat(elf_path, &st), 0);
	assert_int_equal(s.st.st_ino, st.st_ino);
	assert_int_equal(s.st.st_dev, st.st_dev);
	expect_returned(&c);
	gate__counts(g, &waited, &opens, &refused);
	assert_int_equal(waited, 1);
	assert_int_equal(refused, 0);
	assert_true(opens >= 1);
	end_command(g, &c);
}

/* What is not ELF never waits, and memtrail is never handed it. */
static void other_files_pass(void **state)
{
	struct served s = { 0 };
	struct command c;
	struct gate *g;

	(void)state;
	start_command(&g, &c);
	s.from = c.from;
	command_opens(&c, text_path);
	expect_returned(&c);
	gate__serve(g, look, &s);
	assert_int_equal(s.calls, 0);
	end_command(g, &c);
}

/* A process outside the command's namespace opens the same ELF file at once. */
static void outside_the_namespace_passes(void **state)
{
	struct served s = { 0 };
	struct command c;
	struct gate *g;
	int status, p[2];
	pid_t other;
	char b;

	(void)state;
	start_command(&g, &c);
	assert_int_equal(pipe(p), 0);
	other = fork();
	assert_true(other >= 0);
	if (!other) {
		int fd = open(elf_path, O_RDONLY);

		_exit(fd >= 0 && write(p[1], "o", 1) == 1 ? 0 : 1);
	}
	close(p[1]);
	assert_true(readable(p[0], GUARD_MS));
	assert_int_equal(read(p[0], &b, 1), 1);
	assert_int_equal(waitpid(other, &status, 0), other);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(p[0]);
	gate__serve(g, look, &s);
	assert_int_equal(s.calls, 0);
	end_command(g, &c);
}

/*
 * memtrail that does nothing (stopped, frozen): the keeper lets the open go
 * after a second of it, and memtrail is still told of it afterwards.
 */
static void idle_memtrail_lets_go(void **state)
{
	struct served s = { 0 };
	struct command c;
	struct gate *g;

	(void)state;
	start_command(&g, &c);
	s.from = c.from;
	command_opens(&c, elf_path);
	/* no serve: the test sleeps in poll, as a stopped memtrail would */
	expect_returned(&c);
	gate__serve(g, look, &s);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.pid, c.pid);
	end_command(g, &c);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * memtrail that works on (a third of a second of CPU after the open) and
 * then does nothing: the open goes about a second after its last work, not
 * a second after a second (the keeper once dated work it saw at its first
 * deadline to that deadline, and held the open a whole second more).
 */
static void worked_then_idle_lets_go_a_second_after(void **state)
{
	struct served s = { 0 };
	struct command c;
	struct gate *g;
	double t0, worked, back;
	volatile unsigned long spin = 0;

	(void)state;
	start_command(&g, &c);
	s.from = c.from;
	command_opens(&c, elf_path);
	assert_true(readable(gate__wake_fd(g), GUARD_MS));	/* the keeper holds it */
	t0 = mono_s();
	while (mono_s() - t0 < 0.3)
		spin++;
	worked = mono_s();
	expect_returned(&c);
	back = mono_s();
	/* the keeper reads CPU time in clock ticks every 50 ms: a margin of 0.3 s */
	if (back - worked < 0.9 || back - worked > 1.3)
		fail_msg("the open came back %.2f s after memtrail's last work (want about 1 s)",
			 back - worked);
	gate__serve(g, look, &s);
	assert_int_equal(s.calls, 1);
	end_command(g, &c);
}

/* The gate closed (memtrail ends, however) while an open waits: it is let go. */
static void close_lets_waiting_opens_go(void **state)
{
	struct command c;
	struct gate *g;

	(void)state;
	start_command(&g, &c);
	command_opens(&c, elf_path);
	assert_true(readable(gate__wake_fd(g), GUARD_MS));
	assert_false(readable(c.from, 0));
	gate__close(g);
	expect_returned(&c);
	end_command(NULL, &c);
}

static int setup(void **state)
{
	ssize_t n = readlink("/proc/self/exe", elf_path, sizeof(elf_path) - 1);
	static const char text[] = "a text file, long enough to be read as one that could "
				   "be ELF, but is not one\n";
	int fd = mkstemp(text_path);

	(void)state;
	if (n <= 0 || fd < 0)
		return -1;
	elf_path[n] = '\0';
	/* 64 bytes and more, as ELF files are, but not ELF */
	if (write(fd, text, sizeof(text) - 1) != (ssize_t)sizeof(text) - 1) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(text_path);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(elf_open_waits_for_memtrail),
		cmocka_unit_test(other_files_pass),
		cmocka_unit_test(outside_the_namespace_passes),
		cmocka_unit_test(idle_memtrail_lets_go),
		cmocka_unit_test(worked_then_idle_lets_go_a_second_after),
		cmocka_unit_test(close_lets_waiting_opens_go),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
