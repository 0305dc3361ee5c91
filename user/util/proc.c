// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

ssize_t proc__read(uint32_t pid, const char *name, char *buf, size_t len)
{
	char path[64];
	ssize_t n, total = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/%s", pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while ((size_t)total < len - 1) {
		n = read(fd, buf + total, len - 1 - total);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += n;
	}
	close(fd);
	buf[total] = '\0';
	return total;
}

/* The state letter, ppid and task flags (PF_*) from /proc/PID/stat, whose comm may hold spaces. */
static int read_stat_flags(uint32_t pid, char *state, uint32_t *ppid, unsigned int *flags)
{
	char buf[512], *p;
	unsigned int pp;
	int pgrp, session, tty, tpgid;

	if (proc__read(pid, "stat", buf, sizeof(buf)) <= 0)
		return -ESRCH;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %u %d %d %d %d %u", state, &pp, &pgrp, &session, &tty,
			 &tpgid, flags) != 7)
		return -EINVAL;
	*ppid = pp;
	return 0;
}

bool proc__cpu_ns(uint32_t pid, uint64_t *ns)
{
	unsigned long long utime, stime;
	char buf[1024], *p;

	if (proc__read(pid, "stat", buf, sizeof(buf)) <= 0)
		return false;
	p = strrchr(buf, ')');	/* comm may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &utime, &stime) != 2)
		return false;
	*ns = (utime + stime) * (1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK));
	return true;
}

static int read_stat(uint32_t pid, char *state, uint32_t *ppid)
{
	unsigned int flags;

	return read_stat_flags(pid, state, ppid, &flags);
}

bool proc__alive(uint32_t pid)
{
	uint32_t ppid;
	char state;

	if (read_stat(pid, &state, &ppid))
		return false;
	return state != 'Z' && state != 'X';
}

bool proc__exiting(uint32_t pid)
{
	unsigned int flags;
	uint32_t ppid;
	char state;

	if (read_stat_flags(pid, &state, &ppid, &flags))
		return true;
	return state == 'Z' || state == 'X' || (flags & 0x4);	/* PF_EXITING */
}

uint32_t proc__ppid(uint32_t pid)
{
	uint32_t ppid;
	char state;

	return read_stat(pid, &state, &ppid) ? 0 : ppid;
}

int proc__comm(uint32_t pid, char *buf, size_t len)
{
	ssize_t n = proc__read(pid, "comm", buf, len);

	if (n < 0)
		return n;
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

char *proc__join_args(const char *args, size_t len)
{
	char *s = malloc(len + 1);
	size_t i;

	if (!s)
		return NULL;
	memcpy(s, args, len);
	s[len] = '\0';
	while (len && s[len - 1] == '\0')
		len--;
	for (i = 0; i < len; i++)
		if (s[i] == '\0')
			s[i] = ' ';
	s[len] = '\0';
	return s;
}

char *proc__cmdline(uint32_t pid)
{
	char buf[4096];
	ssize_t n = proc__read(pid, "cmdline", buf, sizeof(buf));

	if (n <= 0)
		return NULL;
	return proc__join_args(buf, n);
}

static int64_t status_kb(const char *buf, const char *key)
{
	const char *p = strstr(buf, key);

	return p ? strtoll(p + strlen(key), NULL, 10) * 1024 : -1;
}

int proc__status(uint32_t pid, struct proc_status *st)
{
	char buf[4096];
	const char *p;

	memset(st, 0, sizeof(*st));
	if (proc__read(pid, "status", buf, sizeof(buf)) <= 0)
		return -ESRCH;
	p = strstr(buf, "\nState:");
	st->state = p ? p[strspn(p + 7, " \t") + 7] : '?';
	st->vm_rss = status_kb(buf, "\nVmRSS:");
	st->rss_anon = status_kb(buf, "\nRssAnon:");
	st->rss_file = status_kb(buf, "\nRssFile:");
	st->rss_shmem = status_kb(buf, "\nRssShmem:");
	st->vm_data = status_kb(buf, "\nVmData:");
	p = strstr(buf, "\nNSpid:");
	if (p) {
		char *end;
		unsigned long v;

		for (p += 7; (v = strtoul(p, &end, 10)), end != p; p = end)
			st->ns_pid = (uint32_t)v;
	}
	return 0;
}

/* NAME in the first of the ':'-separated DIRS that has it as a regular file (executable: EXEC). */
static char *search_dirs(const char *name, const char *dirs, bool exec)
{
	const char *p, *end;
	char buf[4096];
	struct stat st;

	for (p = dirs; *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ':');
		if (end == p)
			snprintf(buf, sizeof(buf), "./%s", name);
		else
			snprintf(buf, sizeof(buf), "%.*s/%s", (int)(end - p), p, name);
		if (!stat(buf, &st) && S_ISREG(st.st_mode) && (!exec || !access(buf, X_OK)))
			return strdup(buf);
	}
	return NULL;
}

char *proc__which(const char *name)
{
	const char *path = getenv("PATH");

	if (strchr(name, '/'))
		return strdup(name);
	return search_dirs(name, path ? path : "/usr/local/bin:/usr/bin:/bin", true);
}

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#else
#define MULTIARCH "."
#endif

char *proc__find_file(const char *name)
{
	const char *env = getenv("LD_LIBRARY_PATH");
	char *found;

	if (strchr(name, '/'))
		return strdup(name);
	if (!strstr(name, ".so"))
		return proc__which(name);
	found = env && *env ? search_dirs(name, env, false) : NULL;
	return found ? found : search_dirs(name, "/usr/lib64:/usr/lib:/lib64:/lib:/usr/lib/" MULTIARCH
					   ":/lib/" MULTIARCH, false);
}

/* One line of /proc/PID/maps; false when it does not parse. */
/* A hex number ending at END; *P moves past END. */
static bool map_hex(const char **p, unsigned long long *v, char end)
{
	const char *s = *p;
	unsigned long long x = 0;

	for (; isxdigit((unsigned char)*s); s++) {
		if (x >> 60)
			return false;
		x = x << 4 | (unsigned long long)(isdigit((unsigned char)*s) ? *s - '0'
								     : (*s | 0x20) - 'a' + 10);
	}
	if (s == *p || *s != end)
		return false;
	*v = x;
	*p = s + 1;
	return true;
}

/*
 * By hand, not sscanf: devices and heap parse every line of a process's
 * maps at each exec, and sscanf was most of watch's own time in a storm.
 */
bool proc__parse_map(char *line, struct proc_map_line *m)
{
	unsigned long long maj, min, inode = 0;
	const char *p = line, *perms;

	line[strcspn(line, "\n")] = '\0';
	if (!map_hex(&p, &m->start, '-') || !map_hex(&p, &m->end, ' '))
		return false;
	perms = p;
	p += strcspn(p, " ");
	if (p - perms < 3 || *p++ != ' ')
		return false;
	if (!map_hex(&p, &m->pgoff, ' ') || !map_hex(&p, &maj, ':') || !map_hex(&p, &min, ' ') ||
	    !isdigit((unsigned char)*p))
		return false;
	for (; isdigit((unsigned char)*p); p++) {
		if (inode > (~0ULL - 9) / 10)
			return false;
		inode = inode * 10 + (unsigned long long)(*p - '0');
	}
	if (*p && !isspace((unsigned char)*p))
		return false;
	while (isspace((unsigned char)*p))
		p++;
	m->exec = perms[2] == 'x';
	m->dev = makedev(maj, min);
	m->ino = inode;
	m->path = *p == '/' && inode && !strstr(p, " (deleted)") ? p : NULL;
	return true;
}

/* PATH opened as a regular file (never a device's open), when ANY or it is (DEV, INO). */
static int open_file(const char *path, bool any, dev_t dev, ino_t ino, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;

	if (fd < 0)
		return -ENOENT;
	/* what was opened, not what the path names by now */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (!any && (st.st_dev != dev || st.st_ino != ino))) {
		close(fd);
		return -ENOENT;
	}
	snprintf(buf, len, "/proc/self/fd/%d", fd);
	return fd;
}

int proc__open_file(const char *path, dev_t dev, ino_t ino, char *buf, size_t len)
{
	return open_file(path, false, dev, ino, buf, len);
}

int proc__reopen(const char *path, char *buf, size_t len)
{
	return open_file(path, true, 0, 0, buf, len);
}

#define OVERLAYFS_MAGIC 0x794c7630

/* Mounts' superblock devices by mount id (ids are the system's, never reused while mounted). */
#define MNT_CACHE 64
static struct {
	int id;
	dev_t dev;
} mnt_cache[MNT_CACHE];
static unsigned int mnt_next;

/*
 * The device of the filesystem FD is on: its superblock's (s_dev, as maps
 * and the kernel's hook see its files; stat differs on btrfs subvolumes and
 * overlayfs), by its mount's line in PID's mountinfo (0: memtrail's, also
 * tried after PID's); 0 or -errno.
 */
static int fd_sb_dev(int fd, uint32_t pid, dev_t *dev)
{
	char name[64], line[4096];
	unsigned int maj, min, i;
	int id = -1, mid, err = -ENOENT, tries;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/self/fdinfo/%d", fd);
	f = fopen(name, "re");
	if (!f)
		return -errno;
	while (id < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "mnt_id: %d", &mid) == 1)
			id = mid;
	fclose(f);
	if (id < 0)
		return -ENOENT;
	for (i = 0; i < MNT_CACHE; i++)
		if (mnt_cache[i].id == id && mnt_cache[i].dev) {
			*dev = mnt_cache[i].dev;
			return 0;
		}
	for (tries = pid ? 2 : 1; err && tries--;) {
		if (tries && pid)
			snprintf(name, sizeof(name), "/proc/%u/mountinfo", pid);
		else
			snprintf(name, sizeof(name), "/proc/self/mountinfo");
		f = fopen(name, "re");
		while (f && err && fgets(line, sizeof(line), f))
			if (sscanf(line, "%d %*d %u:%u", &mid, &maj, &min) == 3 && mid == id) {
				*dev = makedev(maj, min);
				err = 0;
			}
		if (f)
			fclose(f);
	}
	if (!err) {
		mnt_cache[mnt_next % MNT_CACHE].id = id;
		mnt_cache[mnt_next % MNT_CACHE].dev = *dev;
		mnt_next++;
	}
	return err;
}

/* The (dev, ino) of this process's own mapping of FD, as its maps line shows it: 0 or -errno. */
static int own_mapping(int fd, dev_t *dev, ino_t *ino)
{
	long page = sysconf(_SC_PAGESIZE);
	char line[4096 + 128];
	int err = -ENOENT;
	void *map;
	FILE *f;

	map = mmap(NULL, 1, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	f = fopen("/proc/self/maps", "re");
	while (f && err && fgets(line, sizeof(line), f)) {
		struct proc_map_line m;

		if (proc__parse_map(line, &m) && m.start == (unsigned long long)(uintptr_t)map &&
		    m.end == (unsigned long long)(uintptr_t)map + (unsigned long long)page) {
			*dev = m.dev;
			*ino = m.ino;
			err = 0;
		}
	}
	if (f)
		fclose(f);
	munmap(map, 1);
	return err;
}

bool proc__overlayfs(int fd)
{
	struct statfs sf;

	return !fstatfs(fd, &sf) && sf.f_type == OVERLAYFS_MAGIC;
}

int proc__file_ids(int fd, uint32_t pid, bool maps, struct file_ids *ids)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	/* where the refinements fail, what fstat says: as before them */
	*ids = (struct file_ids){ st.st_dev, st.st_dev, st.st_ino, st.st_ino };
	/* the hook's: the file's own inode, on its superblock's device; maps's the same */
	if (!fd_sb_dev(fd, pid, &ids->hook_dev))
		ids->maps_dev = ids->hook_dev;
	/* but on overlayfs, maps shows the layer's inode before Linux 6.9: read from a mapping */
	if (maps && proc__overlayfs(fd))
		(void)own_mapping(fd, &ids->maps_dev, &ids->maps_ino);
	return 0;
}

void proc__mount_unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/* FS_PATH through the mount of MOUNTINFO's LINE (DEV's, holding it), opened as it must be; or -1. */
static int open_through_mount(char *line, dev_t dev, ino_t ino, const char *fs_path,
			      const char *prefix, uint32_t pid, char *buf, size_t len, char *name,
			      size_t name_len)
{
	char root[4096], point[4096];
	unsigned int maj, min;
	struct file_ids ids;
	size_t n;
	int fd;

	/* "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw" */
	if (sscanf(line, "%*d %*d %u:%u %4095s %4095s", &maj, &min, root, point) != 4 ||
	    makedev(maj, min) != dev)
		return -1;
	proc__mount_unescape(root);
	proc__mount_unescape(point);
	n = strcmp(root, "/") ? strlen(root) : 0;
	if (strncmp(fs_path, root, n) || fs_path[n] != '/')
		return -1;
	if ((size_t)snprintf(name, name_len, "%s%s%s", prefix, strcmp(point, "/") ? point : "",
			     fs_path + n) >= name_len)
		return -1;
	fd = open_file(name, true, 0, 0, buf, len);
	if (fd < 0)
		return -1;
	if (proc__file_ids(fd, pid, false, &ids) || ids.hook_dev != dev || ids.hook_ino != ino) {
		close(fd);
		return -1;
	}
	return fd;
}

int proc__open_on_fs(dev_t dev, ino_t ino, const char *fs_path, char *buf, size_t len,
		     char *path, size_t path_len)
{
	static const struct {
		const char *mountinfo, *prefix;
		uint32_t pid;
	} views[] = { { "/proc/self/mountinfo", "", 0 }, { "/proc/1/mountinfo", "/proc/1/root", 1 } };
	char line[3 * 4096];
	size_t v;
	int fd = -1;
	FILE *f;

	if (fs_path[0] != '/')
		return -ENOENT;
	for (v = 0; fd < 0 && v < sizeof(views) / sizeof(views[0]); v++) {
		f = fopen(views[v].mountinfo, "re");
		while (f && fd < 0 && fgets(line, sizeof(line), f))
			fd = open_through_mount(line, dev, ino, fs_path, views[v].prefix,
						views[v].pid, buf, len, path, path_len);
		if (f)
			fclose(f);
	}
	return fd < 0 ? -ENOENT : fd;
}

int proc__open_mapped(uint32_t pid, const struct proc_map_line *m, char *buf, size_t len)
{
	char name[4096 + 64];
	int fd;

	/* the kernel's own reference to the mapped file: no path of the target's is walked */
	snprintf(name, sizeof(name), "/proc/%u/map_files/%llx-%llx", pid, m->start, m->end);
	fd = open_file(name, true, 0, 0, buf, len);
	if (fd >= 0 || !m->path)
		return fd;
	snprintf(name, sizeof(name), "/proc/%u/root%s", pid, m->path);
	return open_file(name, false, m->dev, m->ino, buf, len);
}

int proc__stat_mapped(uint32_t pid, const struct proc_map_line *m, struct stat *st)
{
	char name[4096 + 64];

	snprintf(name, sizeof(name), "/proc/%u/map_files/%llx-%llx", pid, m->start, m->end);
	if (!stat(name, st))
		return 0;
	if (!m->path)
		return -errno;
	snprintf(name, sizeof(name), "/proc/%u/root%s", pid, m->path);
	if (stat(name, st))
		return -errno;
	return st->st_dev == m->dev && st->st_ino == m->ino ? 0 : -ENOENT;
}

int proc__run_line(char *const argv[], char *out, size_t len)
{
	extern char **environ;
	posix_spawn_file_actions_t fa;
	struct pollfd pfd;
	size_t used = 0;
	int fds[2], status, err = 0;
	pid_t pid;
	ssize_t n;

	out[0] = '\0';
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (err) {
		close(fds[0]);
		return -err;
	}
	pfd = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	/* read to its end (the line, then the rest discarded) or for 10 s at most */
	for (;;) {
		char buf[4096];

		if (poll(&pfd, 1, 10000) <= 0) {
			kill(pid, SIGKILL);
			err = -ETIMEDOUT;
			break;
		}
		n = read(fds[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (used + 1 < len) {
			size_t take = (size_t)n < len - 1 - used ? (size_t)n : len - 1 - used;

			memcpy(out + used, buf, take);
			used += take;
			out[used] = '\0';
		}
	}
	close(fds[0]);
	out[strcspn(out, "\n")] = '\0';
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (err)
		return err;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -ECHILD;
}
