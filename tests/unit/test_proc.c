// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* /proc/PID/maps lines: the hand-written parser against sscanf on this machine's own maps. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "proc.h"

/* The reference: the format the kernel documents, read by sscanf. */
static bool reference(char *line, struct proc_map_line *m)
{
	char perms[8];
	unsigned int maj, min;
	unsigned long long inode;
	int pos = 0;

	line[strcspn(line, "\n")] = '\0';
	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &m->start, &m->end, perms,
		   &m->pgoff, &maj, &min, &inode, &pos) < 7)
		return false;
	m->exec = perms[2] == 'x';
	m->dev = makedev(maj, min);
	m->ino = inode;
	m->path = pos && line[pos] == '/' && inode && !strstr(line + pos, " (deleted)") ?
		  line + pos : NULL;
	return true;
}

static void same(const char *text)
{
	char a[4096], b[4096];
	struct proc_map_line got = { 0 }, want = { 0 };
	bool ok_got, ok_want;

	snprintf(a, sizeof(a), "%s", text);
	snprintf(b, sizeof(b), "%s", text);
	ok_got = proc__parse_map(a, &got);
	ok_want = reference(b, &want);
	if (ok_got != ok_want)
		print_error("line '%s'\n", text);
	assert_int_equal(ok_got, ok_want);
	if (!ok_want)
		return;
	assert_int_equal(got.start, want.start);
	assert_int_equal(got.end, want.end);
	assert_int_equal(got.pgoff, want.pgoff);
	assert_int_equal(got.dev, want.dev);
	assert_int_equal(got.ino, want.ino);
	assert_int_equal(got.exec, want.exec);
	if (want.path)
		assert_string_equal(got.path, want.path);
	else
		assert_null(got.path);
}

/* Every line of every process's maps here: thousands of real lines. */
static void matches_sscanf_on_real_maps(void **state)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t lines = 0;

	(void)state;
	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[300], line[4096];
		FILE *f;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/maps", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			same(line);
			lines++;
		}
		fclose(f);
	}
	closedir(d);
	assert_true(lines > 20);	/* at least this process's own */
}

static void odd_lines(void **state)
{
	static const char *const lines[] = {
		"",
		"\n",
		"7f00-7f10 r-xp 00000000 fd:01 1234 /usr/lib/libc.so.6\n",
		"7f00-7f10 r-xp 00000000 fd:01 1234      /usr/lib/a b (deleted)\n",
		"7f00-7f10 rw-p 00000000 00:00 0 [heap]\n",
		"7f00-7f10 rw-p 00000000 00:00 0\n",
		"7f00-7f10 r-xp 00000000 fd:01 0 /memfd:x\n",
		"7f00-7f10 r-xp 00001000 103:05 99999999999 /x\n",
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n",
		"zz-7f10 r-xp 00000000 fd:01 1234 /x\n",
		"7f00 r-xp 00000000 fd:01 1234 /x\n",
		"7f00-7f10 r-xp 00000000 fd01 1234 /x\n",
		"7f00-7f10 r-xp 00000000 fd:01 /x\n",
		"7f00-7f10 r-xp\n",
		"7f00-7f10",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		same(lines[i]);
}

/* Refused where sscanf would take a part: 17 hex digits (it wraps), an inode with a letter. */
static void stricter_than_sscanf(void **state)
{
	char wide[] = "10000000000000000-7f10 r-xp 00000000 fd:01 1 /x";
	char inode[] = "7f00-7f10 r-xp 00000000 fd:01 12x4 /x";
	struct proc_map_line m;

	(void)state;
	assert_false(proc__parse_map(wide, &m));
	assert_false(proc__parse_map(inode, &m));
}

static void temp_file(char *path, size_t len, const char *text, struct stat *st)
{
	int fd;

	snprintf(path, len, "/tmp/memtrail-test-proc.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fstat(fd, st), 0);
	close(fd);
}

/* The file descriptor FD opened (its /proc/self/fd path BUF) is the file A. */
static void opened_is(int fd, const char *buf, const struct stat *a)
{
	char want[32];
	struct stat st;

	assert_true(fd >= 0);
	snprintf(want, sizeof(want), "/proc/self/fd/%d", fd);
	assert_string_equal(buf, want);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(st.st_dev == a->st_dev && st.st_ino == a->st_ino);
	close(fd);
}

/*
 * What proc__open_mapped opens is the file mapped, whatever the path the
 * maps line gave names by then: a file swapped in at that path (a container
 * racing its own filesystem) is never opened in its place.
 */
static void open_mapped_opens_the_mapped_file(void **state)
{
	char mapped[64], other[64], buf[32];
	struct proc_map_line m;
	struct stat a, b;
	void *p;
	int fd;

	(void)state;
	temp_file(mapped, sizeof(mapped), "the file mapped", &a);
	temp_file(other, sizeof(other), "another file", &b);
	fd = open(mapped, O_RDONLY);
	assert_true(fd >= 0);
	p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(p != MAP_FAILED);
	close(fd);
	/* the mapping's line, its path now naming another file */
	m = (struct proc_map_line){ .start = (uintptr_t)p, .end = (uintptr_t)p + 4096,
				    .dev = a.st_dev, .ino = a.st_ino, .path = other };
	fd = proc__open_mapped(getpid(), &m, buf, sizeof(buf));
	if (geteuid() == 0)
		opened_is(fd, buf, &a);		/* root reads map_files */
	else
		assert_int_equal(fd, -ENOENT);	/* and the path names another file */
	/* no such mapping (map_files has none): the path, only when it is that file */
	m.start = m.end = 4096;
	assert_int_equal(proc__open_mapped(getpid(), &m, buf, sizeof(buf)), -ENOENT);
	m.path = mapped;
	opened_is(proc__open_mapped(getpid(), &m, buf, sizeof(buf)), buf, &a);
	m.path = NULL;
	assert_int_equal(proc__open_mapped(getpid(), &m, buf, sizeof(buf)), -ENOENT);
	/* memtrail's own path: the same rule */
	opened_is(proc__open_file(mapped, a.st_dev, a.st_ino, buf, sizeof(buf)), buf, &a);
	assert_int_equal(proc__open_file(other, a.st_dev, a.st_ino, buf, sizeof(buf)), -ENOENT);
	/* never a device's open, even the one named */
	assert_int_equal(stat("/dev/null", &b), 0);
	assert_int_equal(proc__open_file("/dev/null", b.st_dev, b.st_ino, buf, sizeof(buf)),
			 -ENOENT);
	munmap(p, 4096);
	unlink(mapped);
	unlink(other);
}

/* A process's id in its own pid namespace: getpid()'s, whatever namespace the test runs in. */
static void status_ns_pid(void **state)
{
	struct proc_status st;

	(void)state;
	assert_int_equal(proc__status((uint32_t)getpid(), &st), 0);
	assert_int_equal(st.ns_pid, (uint32_t)getpid());
}

/*
 * The CPU time /proc/PID/stat gives (in clock ticks) against the kernel's
 * own clock of this process, around a busy loop of 50 ms: within a tick
 * either side.
 */
static void cpu_ns_against_the_process_clock(void **state)
{
	uint64_t tick = 1000000000ULL / (uint64_t)sysconf(_SC_CLK_TCK), before, after, ns;
	struct timespec a, b;
	volatile uint64_t spin = 0;

	(void)state;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	do {
		spin++;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	} while ((uint64_t)(b.tv_sec - a.tv_sec) * 1000000000ULL + (uint64_t)b.tv_nsec -
		 (uint64_t)a.tv_nsec < 50000000ULL);
	assert_true(proc__cpu_ns((uint32_t)getpid(), &ns));
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	before = (uint64_t)a.tv_sec * 1000000000ULL + (uint64_t)a.tv_nsec;
	after = (uint64_t)b.tv_sec * 1000000000ULL + (uint64_t)b.tv_nsec;
	assert_true(ns + 2 * tick >= before);
	assert_true(ns <= after + 2 * tick);
	assert_true(ns % tick == 0);
	assert_false(proc__cpu_ns(0x7fffffff, &ns));
	/* proc__read: the same file as stdio reads it */
	{
		char mine[256], theirs[256];
		FILE *f = fopen("/proc/self/comm", "r");
		size_t n;

		assert_non_null(f);
		n = fread(theirs, 1, sizeof(theirs) - 1, f);
		fclose(f);
		theirs[n] = '\0';
		assert_int_equal(proc__read((uint32_t)getpid(), "comm", mine, sizeof(mine)),
				 (ssize_t)n);
		assert_string_equal(mine, theirs);
		assert_true(proc__read(0x7fffffff, "comm", mine, sizeof(mine)) < 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(matches_sscanf_on_real_maps),
		cmocka_unit_test(odd_lines),
		cmocka_unit_test(stricter_than_sscanf),
		cmocka_unit_test(open_mapped_opens_the_mapped_file),
		cmocka_unit_test(status_ns_pid),
		cmocka_unit_test(cpu_ns_against_the_process_clock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
