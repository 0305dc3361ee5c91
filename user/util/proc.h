/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What /proc says about a process. */
#ifndef MEMTRAIL_PROC_H
#define MEMTRAIL_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Running (not a zombie, not gone). */
bool proc__alive(uint32_t pid);
/* Exiting (PF_EXITING: its files and cgroups going), a zombie or gone. */
bool proc__exiting(uint32_t pid);
/* The file execvp would run for NAME (searching PATH), malloc'ed; NULL if none. */
char *proc__which(const char *name);
/*
 * The file a uprobe on NAME attaches to, as libbpf looks for it: a path as it
 * is; a library ("*.so*") in LD_LIBRARY_PATH, then the system's library
 * folders; else a program in PATH. malloc'ed; NULL if none.
 */
char *proc__find_file(const char *name);
/*
 * ARGV run (its program found in PATH, stderr discarded; killed after 10 s
 * without output), the first line of its output into OUT (LEN >= 1): its
 * exit status, or -errno.
 */
int proc__run_line(char *const argv[], char *out, size_t len);
/* /proc/PID/NAME into BUF (NUL-terminated, at most LEN - 1 bytes): the bytes read, or -errno. */
ssize_t proc__read(uint32_t pid, const char *name, char *buf, size_t len);
/* PID's CPU time so far (user and system, /proc/PID/stat, in clock ticks): false when gone. */
bool proc__cpu_ns(uint32_t pid, uint64_t *ns);
/* Parent's PID, or 0 when unknown. */
uint32_t proc__ppid(uint32_t pid);
/* 0 and the comm in buf, or -errno. */
int proc__comm(uint32_t pid, char *buf, size_t len);
/* argv joined by spaces (malloc'd), or NULL. */
char *proc__cmdline(uint32_t pid);
/* argv as the kernel stores it (NUL-separated) joined by spaces (malloc'd). */
char *proc__join_args(const char *args, size_t len);

/* What /proc/PID/status shows of a process's memory; kB fields in bytes, -1 absent. */
struct proc_status {
	char state;		/* 'R', 'S', 'D', 'Z', ... */
	int64_t vm_rss, rss_anon, rss_file, rss_shmem, vm_data;
	uint32_t ns_pid;	/* its pid in its own pid namespace (NSpid's last); 0: unknown */
};

/* 0, or -ESRCH when the process is gone. */
int proc__status(uint32_t pid, struct proc_status *st);

/* One line of /proc/PID/maps. */
struct proc_map_line {
	unsigned long long start, end, pgoff;
	dev_t dev;
	ino_t ino;
	bool exec;
	const char *path;	/* NULL: anonymous */
};

/* Parse LINE (its newline is cut); false when it does not parse. */
bool proc__parse_map(char *line, struct proc_map_line *m);
/*
 * The file PID maps at M, opened (O_RDONLY|O_CLOEXEC): the descriptor, its
 * path from here ("/proc/self/fd/N", for libelf, libdw and uprobes) in BUF;
 * or -ENOENT. Through its map_files link (needs CAP_SYS_ADMIN: the kernel's
 * reference to the file mapped, so nothing the target controls, no path in
 * a container and no link planted there, decides what is opened); without
 * that, M's path through the target's root, kept only when the file opened
 * is M's (device, inode): a file swapped in since, or a symbolic link that
 * leaves the container's root, is refused. The caller closes it.
 */
int proc__open_mapped(uint32_t pid, const struct proc_map_line *m, char *buf, size_t len);
/*
 * The file PID maps at M, stat()ed the same way (not opened): 0, or -errno
 * (-ENOENT when the path found is another file than M's device and inode).
 */
struct stat;
int proc__stat_mapped(uint32_t pid, const struct proc_map_line *m, struct stat *st);
/* PATH opened as above, when the file opened is (DEV, INO); else -ENOENT. */
int proc__open_file(const char *path, dev_t dev, ino_t ino, char *buf, size_t len);
/* PATH (memtrail's own descriptor's, /proc/self/fd/N) opened again as above. */
int proc__reopen(const char *path, char *buf, size_t len);

/*
 * Who a file is to the kernel's views of a mapping of it: MAPS as
 * /proc/PID/maps shows it, HOOK as the mapping hook's struct file is (BPF's
 * lib_files keys). Both use the superblock's device where fstat gives
 * another (btrfs subvolumes, overlayfs's device per layer); on overlayfs,
 * maps shows the layer's inode before Linux 6.9 and the overlay's from
 * then, the hook the overlay's everywhere.
 */
struct file_ids {
	dev_t maps_dev, hook_dev;
	ino_t maps_ino, hook_ino;
};
/*
 * FD's (a regular file, open for reading), opened in PID's mount namespace
 * (0: memtrail's); MAPS: maps's read too (else taken as the hook's). What
 * cannot be read is fstat's. 0, or -errno when FD cannot be fstat()ed.
 */
int proc__file_ids(int fd, uint32_t pid, bool maps, struct file_ids *ids);
/*
 * The file at FS_PATH from the root of the filesystem on DEV (its
 * superblock's device), opened as above through a mount of that filesystem
 * whose root holds it: one of memtrail's, else one of PID 1's through its
 * root (memtrail in a pod that shares the node's PIDs); kept only when the
 * file opened is (DEV, INO) to the kernel. The descriptor (its path from here
 * in BUF, the path that was opened in PATH), or -ENOENT.
 */
int proc__open_on_fs(dev_t dev, ino_t ino, const char *fs_path, char *buf, size_t len,
		     char *path, size_t path_len);
/* mountinfo's octal escapes (\040 for a space) undone in place. */
void proc__mount_unescape(char *s);
/* Whether FD is a file on overlayfs. */
bool proc__overlayfs(int fd);

#endif
