// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Runtimes probed before a process maps them: those memtrail's command links
 * and the files it opens at record's gate; whether a file had its probes in time.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "devices_int.h"
#include "elfsym.h"
#include "proc.h"

static void prepare_lib(void *ctx, const char *lib)
{
	struct devices *d = ctx;
	int fd = open(lib, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct file_ids ids;
	struct dev_file *f;
	size_t idx;

	if (fd < 0)
		return;
	if (!proc__file_ids(fd, 0, true, &ids) && (f = devices_file_get_fd(d, fd, &ids, lib, &idx)))
		f->pinned = true;
	close(fd);
}

bool devices__probed(const struct devices *d, uint64_t kdev, uint64_t ino, uint64_t at_ns)
{
	dev_t dev = makedev(kdev >> 20, kdev & 0xfffff);
	const struct dev_file *f;
	size_t i;

	if (!d)
		return false;
	f = devices_file_find(d, dev, ino, &i);
	return f && !f->released && devices_file_probed(f) && f->probed_ns <= at_ns;
}

/*
 * PID opened probed runtime IDX at the gate and is about to map it: a user
 * of it from now on (until it execs or exits), so that the release of a
 * copy whose last user just exited cannot come between the open and
 * memtrail's scan of the mapping, leaving the mapping unprobed.
 */
static void gate_user(struct devices *d, uint32_t pid, size_t idx)
{
	const struct dev_file *f = &d->files[idx];
	struct dev_proc *p;

	if (!pid || pid == (uint32_t)getpid() || !f->runtime || !devices_file_probed(f) ||
	    f->pinned)
		return;
	p = devices_proc_get(d, pid, true);
	if (p)
		devices_proc_file_add(p, idx);
}

void devices__gate_file(struct devices *d, int fd, uint32_t pid, bool user)
{
	char path[64], name[4096];
	struct file_ids ids;
	struct dev_file *f;
	struct stat st;
	size_t idx;
	ssize_t n;

	if (d->loader_only || fstat(fd, &st) || proc__file_ids(fd, pid, true, &ids))
		return;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, name, sizeof(name) - 1);
	name[n > 0 ? n : 0] = '\0';
	f = devices_file_find(d, ids.maps_dev, ids.maps_ino, &idx);
	if (f && !f->released) {
		/* another file on a deleted one's inode, or written since: read again */
		if (!devices_file_idle(f) || (st.st_ctim.tv_sec == f->ctime.tv_sec &&
					      st.st_ctim.tv_nsec == f->ctime.tv_nsec &&
					      st.st_size == f->size)) {
			if (user)
				gate_user(d, pid, idx);
			return;
		}
		f->released = true;
	}
	if (devices_file_get_fd(d, fd, &ids, n > 0 ? name : NULL, &idx) && user)
		gate_user(d, pid, idx);
}

void devices__prepare_command(struct devices *d, const char *path)
{
	if (d->loader_only)
		return;
	prepare_lib(d, path);	/* a runtime linked in */
	elfsym__needed(path, prepare_lib, d);
}
