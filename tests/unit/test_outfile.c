// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Output files: whole, 0600 whatever the umask, never through a planted
 * link, nothing left on failure, stale temporary files removed, numbered
 * names that replace nothing; with O_TMPFILE and with named temporaries.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "outfile.h"

static const char content[] = "{\"memtrail\": 1}\n";

static int fill_content(int fd, void *ctx)
{
	(void)ctx;
	return outfile__put(fd, content, strlen(content));
}

static int fill_fails(int fd, void *ctx)
{
	(void)ctx;
	outfile__put(fd, content, strlen(content));
	return -EIO;
}

static char *new_dir(void)
{
	char tmpl[] = "/tmp/memtrail-unit-XXXXXX";

	assert_non_null(mkdtemp(tmpl));
	return strdup(tmpl);
}

static size_t entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void remove_dir(char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			assert_int_equal(unlinkat(dirfd(d), e->d_name, 0), 0);
	closedir(d);
	assert_int_equal(rmdir(dir), 0);
	free(dir);
}

static void put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(outfile__put(fd, text, strlen(text)), 0);
	close(fd);
}

static void check_file(const char *path, const char *text)
{
	char buf[256];
	int fd = open(path, O_RDONLY | O_NOFOLLOW);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	assert_string_equal(buf, text);
}

/* Each test twice: with O_TMPFILE, then with named temporary files. */
static void each_way(void (*fn)(void))
{
	unsetenv("MEMTRAIL_NO_O_TMPFILE");
	fn();
	setenv("MEMTRAIL_NO_O_TMPFILE", "1", 1);
	fn();
	unsetenv("MEMTRAIL_NO_O_TMPFILE");
}

static void mode_whatever_umask(void)
{
	static const mode_t masks[] = { 0, 022, 0777 };
	char *dir = new_dir(), path[PATH_MAX];
	struct stat st;
	mode_t old;
	size_t i;

	snprintf(path, sizeof(path), "%s/t.json", dir);
	for (i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		old = umask(masks[i]);
		assert_int_equal(outfile__write(path, fill_content, NULL), 0);
		umask(old);
		assert_int_equal(lstat(path, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0600);
		check_file(path, content);
		assert_int_equal(entries(dir), 1);
	}
	remove_dir(dir);
}

static void writes_0600_whatever_umask(void **state)
{
	(void)state;
	each_way(mode_whatever_umask);
}

static void link_replaced(void)
{
	char *dir = new_dir(), path[PATH_MAX], victim[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/r.html", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	put_file(victim, "victim\n");
	assert_int_equal(symlink(victim, path), 0);
	assert_int_equal(outfile__write(path, fill_content, NULL), 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	check_file(path, content);
	check_file(victim, "victim\n");
	assert_int_equal(entries(dir), 2);
	remove_dir(dir);
}

static void replaces_a_link_not_its_target(void **state)
{
	(void)state;
	each_way(link_replaced);
}

static void failure_clean(void)
{
	char *dir = new_dir(), path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/t.json", dir);
	put_file(path, "before\n");
	assert_int_equal(outfile__write(path, fill_fails, NULL), -EIO);
	check_file(path, "before\n");
	assert_int_equal(entries(dir), 1);
	snprintf(path, sizeof(path), "%s/missing/t.json", dir);
	assert_int_equal(outfile__write(path, fill_content, NULL), -ENOENT);
	assert_int_equal(outfile__probe(path), -ENOENT);
	snprintf(path, sizeof(path), "%s/", dir);
	assert_int_equal(outfile__write(path, fill_content, NULL), -EISDIR);
	snprintf(path, sizeof(path), "%s/probe", dir);
	assert_int_equal(outfile__probe(path), 0);
	assert_int_equal(entries(dir), 1);
	remove_dir(dir);
}

static void failure_leaves_nothing(void **state)
{
	(void)state;
	each_way(failure_clean);
}

/* A pid no process has: a child's, reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (!pid)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return pid;
}

static void stale(void)
{
	char *dir = new_dir(), path[PATH_MAX], name[PATH_MAX + 64];
	pid_t dead = dead_pid();
	int locked;

	snprintf(path, sizeof(path), "%s/t.json", dir);
	/* removed: a dead memtrail's, as it left it */
	snprintf(name, sizeof(name), "%s.tmp.%d.0123abcd", path, (int)dead);
	put_file(name, "stale\n");
	/* kept: of a live pid; a link; not the name; another output's; locked */
	snprintf(name, sizeof(name), "%s.tmp.%d.0123abcd", path, (int)getpid());
	put_file(name, "live\n");
	snprintf(name, sizeof(name), "%s.tmp.%d.0000abcd", path, (int)dead);
	assert_int_equal(symlink("/etc/hostname", name), 0);
	snprintf(name, sizeof(name), "%s.tmp.%d", path, (int)dead);
	put_file(name, "user's\n");
	snprintf(name, sizeof(name), "%s.tmp.%d.0123abcdx", path, (int)dead);
	put_file(name, "user's\n");
	snprintf(name, sizeof(name), "%s/u.json.tmp.%d.0123abcd", dir, (int)dead);
	put_file(name, "other\n");
	snprintf(name, sizeof(name), "%s.tmp.%d.1111abcd", path, (int)dead);
	put_file(name, "in another pid namespace\n");
	locked = open(name, O_RDONLY);
	assert_true(locked >= 0);
	assert_int_equal(flock(locked, LOCK_EX), 0);

	assert_int_equal(entries(dir), 7);
	assert_int_equal(outfile__write(path, fill_content, NULL), 0);
	snprintf(name, sizeof(name), "%s.tmp.%d.0123abcd", path, (int)dead);
	assert_int_equal(access(name, F_OK), -1);
	assert_int_equal(entries(dir), 7);	/* six kept and the output */
	close(locked);
	remove_dir(dir);
}

static void removes_stale_temporaries(void **state)
{
	(void)state;
	each_way(stale);
}

static void numbered(void)
{
	char *dir = new_dir(), path[PATH_MAX], first[PATH_MAX], want[PATH_MAX];

	snprintf(first, sizeof(first), "%s/memtrail-1-42.json", dir);
	snprintf(path, sizeof(path), "%s", first);
	assert_int_equal(outfile__write_new(path, sizeof(path), fill_content, NULL), 0);
	assert_string_equal(path, first);
	check_file(first, content);
	put_file(first, "first\n");
	assert_int_equal(outfile__write_new(path, sizeof(path), fill_content, NULL), 0);
	snprintf(want, sizeof(want), "%s/memtrail-1-42-2.json", dir);
	assert_string_equal(path, want);
	check_file(want, content);
	check_file(first, "first\n");
	snprintf(path, sizeof(path), "%s", first);
	assert_int_equal(outfile__write_new(path, sizeof(path), fill_content, NULL), 0);
	snprintf(want, sizeof(want), "%s/memtrail-1-42-3.json", dir);
	assert_string_equal(path, want);
	/* a link at the name is taken too, and not followed */
	snprintf(path, sizeof(path), "%s/plain", dir);
	assert_int_equal(symlink(first, path), 0);
	assert_int_equal(outfile__write_new(path, sizeof(path), fill_content, NULL), 0);
	snprintf(want, sizeof(want), "%s/plain-2", dir);
	assert_string_equal(path, want);
	check_file(first, "first\n");
	/* no room for the number: an error, the buffer as it was */
	snprintf(path, sizeof(path), "%s", first);
	assert_int_equal(outfile__write_new(path, strlen(first) + 1, fill_content, NULL),
			 -ENAMETOOLONG);
	assert_string_equal(path, first);
	assert_int_equal(entries(dir), 5);
	remove_dir(dir);
}

static void new_names_replace_nothing(void **state)
{
	(void)state;
	each_way(numbered);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(writes_0600_whatever_umask),
		cmocka_unit_test(replaces_a_link_not_its_target),
		cmocka_unit_test(failure_leaves_nothing),
		cmocka_unit_test(removes_stale_temporaries),
		cmocka_unit_test(new_names_replace_nothing),
	};

	return cmocka_run_group_tests_name("outfile", tests, NULL, NULL);
}
