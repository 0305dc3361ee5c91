// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Output files, written as root in directories others may write to. The
 * content goes to an unnamed file (O_TMPFILE) in the destination's
 * directory, is synced, gets a random temporary name (linkat: never follows
 * nor replaces what is there) and is renamed onto the destination: rename
 * replaces a file or a link there and writes through neither. Where the
 * filesystem has no O_TMPFILE the temporary name is made first, with
 * O_CREAT | O_EXCL | O_NOFOLLOW. Either way the file is 0600 whatever the
 * umask, and its writer holds a lock on it while it lives.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

#define OUTFILE_MODE 0600
#define TMP_TRIES 100		/* random temporary names tried before giving up */
#define NEW_TRIES 1000		/* numbered names tried by outfile__write_new */
#define RAND_DIGITS 8

/* A file being written: unnamed (O_TMPFILE) or at a temporary name. */
struct out {
	int fd;
	char dir[PATH_MAX];	/* the destination's directory, "." for a bare name */
	const char *base;	/* the destination's last component */
	char tmp[PATH_MAX];	/* the temporary name; "" while the file has none */
};

static volatile sig_atomic_t *cancel;

void outfile__set_cancel(volatile sig_atomic_t *flag)
{
	cancel = flag;
}

int outfile__put(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	if (cancel && *cancel)
		return -ECANCELED;
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

static int split(struct out *o, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	o->base = slash ? slash + 1 : path;
	if (!*o->base)
		return -EISDIR;
	if (!slash) {
		strcpy(o->dir, ".");
		return 0;
	}
	n = slash == path ? 1 : (size_t)(slash - path);	/* "/x": the root */
	if (n >= sizeof(o->dir))
		return -ENAMETOOLONG;
	memcpy(o->dir, path, n);
	o->dir[n] = '\0';
	return 0;
}

/* <path>.tmp.<pid>.<random hex> */
static int tmp_name(char *buf, size_t len, const char *path)
{
	uint32_t r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return -errno;
	if (snprintf(buf, len, "%s.tmp.%d.%0*x", path, (int)getpid(), RAND_DIGITS, r) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* NAME is <base>.tmp.<pid>.<random hex>, of a pid that no longer runs here. */
static bool stale_name(const char *name, const char *base, size_t len)
{
	const char *p = name + len;
	char *end;
	long pid;
	int i;

	if (strncmp(name, base, len) || strncmp(p, ".tmp.", 5) || !isdigit((unsigned char)p[5]))
		return false;
	errno = 0;
	pid = strtol(p + 5, &end, 10);
	if (errno || pid <= 0 || pid > INT_MAX || *end != '.')
		return false;
	for (i = 1; i <= RAND_DIGITS; i++)
		if (!isxdigit((unsigned char)end[i]))
			return false;
	return !end[i] && kill(pid, 0) && errno == ESRCH;
}

/*
 * Temporary files of BASE that a memtrail killed while writing left in DIR:
 * removed when regular, this user's, of a pid gone, and unlocked (a writer
 * in another pid namespace still holds its lock).
 */
static void remove_stale(const char *dir, const char *base)
{
	size_t len = strlen(base);
	struct dirent *e;
	struct stat st;
	DIR *d = opendir(dir);
	int fd;

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!stale_name(e->d_name, base, len))
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		    !flock(fd, LOCK_EX | LOCK_NB))
			unlinkat(dirfd(d), e->d_name, 0);
		close(fd);
	}
	closedir(d);
}

/* Give the unnamed file FD the name NAME, where nothing is (EEXIST otherwise). */
static int link_fd(int fd, const char *name)
{
	char proc[32];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (!linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW))
		return 0;
	/* no /proc: by the descriptor itself, which takes CAP_DAC_READ_SEARCH */
	if (errno == ENOENT && !linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH))
		return 0;
	return -errno;
}

/* A temporary name for the unnamed file, beside PATH. */
static int name_tmp(struct out *o, const char *path)
{
	int i, err = -EEXIST;

	for (i = 0; i < TMP_TRIES && err == -EEXIST; i++) {
		err = tmp_name(o->tmp, sizeof(o->tmp), path);
		if (!err)
			err = link_fd(o->fd, o->tmp);
	}
	if (err)
		o->tmp[0] = '\0';
	return err;
}

/* Without O_TMPFILE: a new file at a temporary name beside PATH. */
static int create_named(struct out *o, const char *path)
{
	int i, err = -EEXIST;

	for (i = 0; i < TMP_TRIES && err == -EEXIST; i++) {
		err = tmp_name(o->tmp, sizeof(o->tmp), path);
		if (err)
			break;
		o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     OUTFILE_MODE);
		err = o->fd < 0 ? -errno : 0;
	}
	if (err)
		o->tmp[0] = '\0';
	return err;
}

/*
 * Descriptors kept for the output files: probes (before uprobe_multi, a
 * perf event per function and file) can take every other one, and the
 * trail, a snapshot or a verdict must still be written. Given back while a
 * file is written, taken again after it.
 */
#define RESERVE 8
static int reserve[RESERVE] = { -1, -1, -1, -1, -1, -1, -1, -1 };
static bool reserving;

static void reserve_take(void)
{
	size_t i;

	for (i = 0; reserving && i < RESERVE; i++)
		if (reserve[i] < 0)
			reserve[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void reserve_give(void)
{
	size_t i;

	for (i = 0; i < RESERVE; i++) {
		if (reserve[i] >= 0)
			close(reserve[i]);
		reserve[i] = -1;
	}
}

void outfile__reserve(void)
{
	reserving = true;
	reserve_take();
}

static void out_close(struct out *o)
{
	if (o->tmp[0])
		unlink(o->tmp);
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	reserve_take();
}

static int out_open(struct out *o, const char *path)
{
	int err;

	o->fd = -1;
	o->tmp[0] = '\0';
	reserve_give();
	err = split(o, path);
	if (err)
		return err;
	remove_stale(o->dir, o->base);
	/* MEMTRAIL_NO_O_TMPFILE=1: named from the start, as where there is none (its tests) */
	if (!getenv("MEMTRAIL_NO_O_TMPFILE")) {
		o->fd = open(o->dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, OUTFILE_MODE);
		/* EISDIR: a kernel without O_TMPFILE; EOPNOTSUPP: a filesystem */
		if (o->fd < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
			return -errno;
	}
	if (o->fd < 0 && (err = create_named(o, path)))
		return err;
	if (fchmod(o->fd, OUTFILE_MODE) || flock(o->fd, LOCK_EX))
		return -errno;
	return 0;
}

/* The synced file at PATH: replacing what is there, or only where nothing is. */
static int out_publish(struct out *o, const char *path, bool replace)
{
	int err;

	if (!o->tmp[0]) {
		if (!replace)
			return link_fd(o->fd, path);
		err = name_tmp(o, path);
		if (err)
			return err;
	}
	if (replace) {
		if (rename(o->tmp, path))
			return -errno;
	} else if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, path, RENAME_NOREPLACE)) {
		/* a filesystem without RENAME_NOREPLACE: a second link, then one */
		if ((errno != EINVAL && errno != ENOSYS) || link(o->tmp, path))
			return -errno;
		unlink(o->tmp);
	}
	o->tmp[0] = '\0';
	return 0;
}

/* Open, fill, sync: ready to publish, or -errno (and O closed). */
static int out_fill(struct out *o, const char *path, int (*fill)(int fd, void *ctx), void *ctx)
{
	int err = out_open(o, path);

	if (!err)
		err = fill(o->fd, ctx);
	if (!err && fsync(o->fd))
		err = -errno;
	if (err)
		out_close(o);
	return err;
}

int outfile__write(const char *path, int (*fill)(int fd, void *ctx), void *ctx)
{
	struct out o;
	int err = out_fill(&o, path, fill, ctx);

	if (err)
		return err;
	err = out_publish(&o, path, true);
	out_close(&o);
	return err;
}

/* PATH with "-N" before its extension (the last '.' of its last component). */
static int numbered(char *buf, size_t len, const char *path, int n)
{
	const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
	int at;

	if (!dot || dot <= (slash ? slash + 1 : path))
		dot = path + strlen(path);
	at = dot - path;
	if (snprintf(buf, len, "%.*s-%d%s", at, path, n, dot) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

int outfile__write_new(char *path, size_t size, int (*fill)(int fd, void *ctx), void *ctx)
{
	char name[PATH_MAX];
	struct out o;
	int n, err;

	if (snprintf(name, sizeof(name), "%s", path) >= (int)sizeof(name))
		return -ENAMETOOLONG;
	err = out_fill(&o, path, fill, ctx);
	if (err)
		return err;
	for (n = 2; ; n++) {
		err = out_publish(&o, name, false);
		if (err != -EEXIST || n > NEW_TRIES)
			break;
		err = numbered(name, sizeof(name), path, n);
		if (!err && strlen(name) >= size)
			err = -ENAMETOOLONG;
		if (err)
			break;
	}
	out_close(&o);
	if (!err)
		strcpy(path, name);
	return err;
}

int outfile__probe(const char *path)
{
	struct out o;
	int err = out_open(&o, path);

	out_close(&o);
	return err;
}
