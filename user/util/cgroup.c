// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <linux/magic.h>

#include "cgroup.h"
#include "proc.h"

static const char *const roots[] = {
	"/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified",
};

/* Index of controller NAME in the running kernel's enum cgroup_subsys_id. */
static int subsys_index(const char *name)
{
	struct btf *btf = btf__load_vmlinux_btf();
	char want[128];
	int id, i, ret = -ENOENT;

	if (!btf)
		return -errno;
	snprintf(want, sizeof(want), "%s_cgrp_id", name);
	id = btf__find_by_name_kind(btf, "cgroup_subsys_id", BTF_KIND_ENUM);
	if (id > 0) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		const struct btf_enum *e = btf_enum(t);

		for (i = 0; i < btf_vlen(t); i++)
			if (!strcmp(btf__name_by_offset(btf, e[i].name_off), want))
				ret = e[i].val;
	}
	btf__free(btf);
	return ret;
}

/* The v1 controller of the hierarchy mounted above DIR, from mountinfo. */
static int v1_controller(const char *dir, char *name, size_t len)
{
	char line[4096], best[64] = "";
	size_t best_len = 0;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX], *sep, *opts, *tok, *save;
		size_t ml;

		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		sep = strstr(line, " - cgroup ");
		if (!sep)
			continue;
		ml = strlen(mnt);
		if (strncmp(dir, mnt, ml) || (dir[ml] && dir[ml] != '/') || ml < best_len)
			continue;
		opts = strrchr(sep, ' ');
		if (!opts)
			continue;
		best[0] = '\0';
		for (tok = strtok_r(opts + 1, ",\n", &save); tok; tok = strtok_r(NULL, ",\n", &save)) {
			if (!strcmp(tok, "rw") || !strcmp(tok, "ro") || strchr(tok, '='))
				continue;
			/* memory wins where controllers share a hierarchy */
			if (!best[0] || !strcmp(tok, "memory"))
				snprintf(best, sizeof(best), "%s", tok);
		}
		best_len = ml;
	}
	fclose(f);
	if (!best[0])
		return -ENOENT;
	snprintf(name, len, "%s", best);
	return 0;
}

static int try_dir(const char *dir, struct cgroup_ref *ref, char *err, size_t errlen)
{
	char ctl[64];
	struct statfs sfs;
	struct stat st;
	int idx;

	if (stat(dir, &st) || !S_ISDIR(st.st_mode) || statfs(dir, &sfs))
		return -ENOENT;
	if (!realpath(dir, ref->dir))
		return -errno;
	ref->id = st.st_ino;
	if (sfs.f_type == CGROUP2_SUPER_MAGIC) {
		ref->subsys = -1;
		return 0;
	}
	if (sfs.f_type != CGROUP_SUPER_MAGIC) {
		snprintf(err, errlen, "'%s' is not a cgroup directory", dir);
		return -ENOTDIR;
	}
	if (v1_controller(ref->dir, ctl, sizeof(ctl))) {
		snprintf(err, errlen, "cannot tell which cgroup v1 controller '%s' belongs to", dir);
		return -ENOENT;
	}
	idx = subsys_index(ctl);
	if (idx < 0) {
		snprintf(err, errlen, "cgroup v1 controller '%s' of '%s' is unknown to this kernel",
			 ctl, dir);
		return -ENOENT;
	}
	ref->subsys = idx;
	return 0;
}

int cgroup__resolve(const char *arg, struct cgroup_ref *ref, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	size_t i;
	int ret;

	snprintf(err, errlen, "no cgroup '%s' (give its directory, e.g. /sys/fs/cgroup/memory/NAME)",
		 arg);
	if (strlen(arg) >= sizeof(dir) / 2)
		return -ENAMETOOLONG;
	ret = try_dir(arg, ref, err, errlen);
	if (ret != -ENOENT || arg[0] != '/')
		return ret;
	for (i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		snprintf(dir, sizeof(dir), "%s%s", roots[i], arg);
		ret = try_dir(dir, ref, err, errlen);
		if (ret != -ENOENT)
			return ret;
	}
	return -ENOENT;
}

char *cgroup__parse_proc(const char *text)
{
	const char *line = text, *v2 = NULL, *mem = NULL;
	const char *p;
	size_t len;

	while (line && *line) {
		const char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		const char *nl = strchr(line, '\n');

		if (c2 && (!nl || c2 < nl)) {
			if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1)
				v2 = c2 + 1;
			else {
				char ctl[256];
				size_t n = (size_t)(c2 - c1 - 1);
				char *tok, *save;

				if (n > sizeof(ctl) - 1)
					n = sizeof(ctl) - 1;
				memcpy(ctl, c1 + 1, n);
				ctl[n] = '\0';
				for (tok = strtok_r(ctl, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
					if (!strcmp(tok, "memory"))
						mem = c2 + 1;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	p = mem ? mem : v2;
	if (!p)
		return NULL;
	len = strcspn(p, "\n");
	return strndup(p, len);
}

char *cgroup__of_pid(uint32_t pid)
{
	char buf[8192], *cg;

	if (proc__read(pid, "cgroup", buf, sizeof(buf)) < 0)
		return NULL;
	cg = cgroup__parse_proc(buf);
	/*
	 * The kernel shows a v1 hierarchy's path of a task that is exiting as
	 * "/": not where it ran (a short process read at its exec), so unknown
	 */
	if (cg && !strcmp(cg, "/") && proc__exiting(pid)) {
		free(cg);
		return NULL;
	}
	return cg;
}

int cgroup__paths_subsys(void)
{
	static int subsys = -2;
	char line[4096];
	FILE *f;

	if (subsys != -2)
		return subsys;
	subsys = -1;
	if (cgroup__unified())
		return subsys;
	/* a v1 hierarchy with the memory controller: /proc/PID/cgroup names it */
	f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return subsys;
	while (subsys < 0 && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - cgroup "), *opts, *tok, *save;

		if (!sep || !(opts = strrchr(sep, ' ')))
			continue;
		for (tok = strtok_r(opts + 1, ",\n", &save); tok; tok = strtok_r(NULL, ",\n", &save))
			if (!strcmp(tok, "memory")) {
				subsys = subsys_index("memory");	/* loads the kernel's BTF: once */
				break;
			}
		if (subsys < 0 && tok)
			break;	/* mounted, but the kernel's BTF names no memory controller */
	}
	fclose(f);
	if (subsys < 0)
		subsys = -1;
	return subsys;
}

bool cgroup__unified(void)
{
	static int unified = -1;
	struct statfs sfs;

	if (unified < 0)
		unified = !statfs("/sys/fs/cgroup", &sfs) && sfs.f_type == CGROUP2_SUPER_MAGIC;
	return unified;
}

static uint64_t find_ino;
static char found[PATH_MAX];

static int match_ino(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_D && st->st_ino == find_ino) {
		snprintf(found, sizeof(found), "%s", path);
		return 1;
	}
	return 0;
}

char *cgroup__memory_path_of_id(uint64_t id)
{
	static const char *const mounts[] = { "/sys/fs/cgroup/memory", "/sys/fs/cgroup" };
	struct statfs sfs;
	size_t i, n;

	for (i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		if (statfs(mounts[i], &sfs) ||
		    (sfs.f_type != CGROUP_SUPER_MAGIC && sfs.f_type != CGROUP2_SUPER_MAGIC))
			continue;
		find_ino = id;
		found[0] = '\0';
		if (nftw(mounts[i], match_ino, 32, FTW_PHYS | FTW_MOUNT) != 1)
			continue;
		n = strlen(mounts[i]);
		return strdup(found[n] ? found + n : "/");
	}
	return NULL;
}

/* ---- memory files ---- */

/* A v1 limit this large, or v2's "max", is no limit (PAGE_COUNTER_MAX pages). */
#define UNLIMITED_BYTES (1LL << 60)

char *cgroup__memory_dir(const char *path)
{
	static const char *const mounts[] = { "/sys/fs/cgroup/memory", "/sys/fs/cgroup" };
	char dir[PATH_MAX];
	struct statfs sfs;
	size_t i;

	if (!path)
		return NULL;
	for (i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		if (statfs(mounts[i], &sfs) ||
		    (sfs.f_type != CGROUP_SUPER_MAGIC && sfs.f_type != CGROUP2_SUPER_MAGIC))
			continue;
		if (snprintf(dir, sizeof(dir), "%s%s", mounts[i], strcmp(path, "/") ? path : "")
		    >= (int)sizeof(dir))
			return NULL;
		return strdup(dir);
	}
	return NULL;
}

static ssize_t read_small(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return n;
}

/* A byte count, or -1 for "max", a v1 "unlimited" or a missing file. */
static int64_t read_bytes(const char *dir, const char *name)
{
	char buf[64];
	long long v;

	if (read_small(dir, name, buf, sizeof(buf)) <= 0 || !strncmp(buf, "max", 3))
		return -1;
	v = strtoll(buf, NULL, 10);
	return v >= UNLIMITED_BYTES ? -1 : v;
}

static int64_t keyed(const char *text, const char *key)
{
	size_t n = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, key, n) && p[n] == ' ')
			return strtoll(p + n + 1, NULL, 10);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -1;
}

int cgroup__read_memory(const char *dir, struct cgroup_memory *m)
{
	char buf[1024];
	const char *p;

	memset(m, 0, sizeof(*m));
	m->high = m->ev_high = m->ev_max = m->ev_oom = m->ev_oom_kill = m->failcnt = -1;
	m->psi_some_avg10 = -1;
	m->usage = read_bytes(dir, "memory.current");
	if (m->usage >= 0) {
		m->v2 = true;
		m->limit = read_bytes(dir, "memory.max");
		m->high = read_bytes(dir, "memory.high");
		if (read_small(dir, "memory.events", buf, sizeof(buf)) > 0) {
			m->ev_high = keyed(buf, "high");
			m->ev_max = keyed(buf, "max");
			m->ev_oom = keyed(buf, "oom");
			m->ev_oom_kill = keyed(buf, "oom_kill");
		}
		if (read_small(dir, "memory.pressure", buf, sizeof(buf)) > 0 &&
		    (p = strstr(buf, "some avg10=")))
			m->psi_some_avg10 = strtod(p + 11, NULL);
		return 0;
	}
	m->usage = read_bytes(dir, "memory.usage_in_bytes");
	if (m->usage < 0)
		return -ENOENT;
	m->limit = read_bytes(dir, "memory.limit_in_bytes");
	m->failcnt = read_bytes(dir, "memory.failcnt");
	if (read_small(dir, "memory.oom_control", buf, sizeof(buf)) > 0)
		m->ev_oom_kill = keyed(buf, "oom_kill");
	return 0;
}

char *cgroup__limited(const char *path)
{
	char *p = path ? strdup(path) : NULL;

	while (p) {
		struct cgroup_memory m;
		char *dir = cgroup__memory_dir(p), *slash;
		int err = dir ? cgroup__read_memory(dir, &m) : -ENOENT;

		free(dir);
		if (!err && (m.limit >= 0 || m.high >= 0))
			return p;
		slash = strrchr(p, '/');
		if (!slash || !strcmp(p, "/"))
			break;
		if (slash == p)
			slash[1] = '\0';	/* up to the root */
		else
			*slash = '\0';
	}
	free(p);
	return NULL;
}

static json_t *int_or_null(int64_t v)
{
	return v >= 0 ? json_integer(v) : json_null();
}

json_t *cgroup__memory_json(const char *path)
{
	char *dir = cgroup__memory_dir(path), *buf = NULL, *line, *save;
	struct cgroup_memory m;
	json_t *o, *stat;
	ssize_t n;

	if (!dir || cgroup__read_memory(dir, &m)) {
		free(dir);
		return json_pack("{s:s, s:b}", "path", path ? path : "?", "gone", 1);
	}
	o = json_pack("{s:s, s:s, s:I, s:o, s:o}", "path", path, "version", m.v2 ? "v2" : "v1",
		      "usage", (json_int_t)m.usage, "limit", int_or_null(m.limit),
		      "high", int_or_null(m.high));
	if (m.v2)
		json_object_set_new(o, "events",
			json_pack("{s:o, s:o, s:o, s:o}", "high", int_or_null(m.ev_high),
				  "max", int_or_null(m.ev_max), "oom", int_or_null(m.ev_oom),
				  "oom_kill", int_or_null(m.ev_oom_kill)));
	else
		json_object_set_new(o, "events",
			json_pack("{s:o, s:o}", "failcnt", int_or_null(m.failcnt),
				  "oom_kill", int_or_null(m.ev_oom_kill)));
	json_object_set_new(o, "psi_some_avg10",
			    m.psi_some_avg10 >= 0 ? json_real(m.psi_some_avg10) : json_null());
	stat = json_object();
	buf = malloc(16384);
	if (buf && (n = read_small(dir, "memory.stat", buf, 16384)) > 0) {
		for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *sp = strchr(line, ' ');

			if (sp) {
				*sp = '\0';
				json_object_set_new(stat, line, json_integer(strtoll(sp + 1, NULL, 10)));
			}
		}
	}
	json_object_set_new(o, "stat", stat);
	free(buf);
	free(dir);
	return o;
}

struct procs_walk {
	uint32_t *pids;
	size_t n, max;
};

static struct procs_walk procs_walk;

static int collect_procs(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	char buf[PATH_MAX];
	FILE *f;
	unsigned int pid;

	(void)st;
	(void)ftw;
	if (type != FTW_D || snprintf(buf, sizeof(buf), "%s/cgroup.procs", path) >= (int)sizeof(buf))
		return 0;
	f = fopen(buf, "r");
	if (!f)
		return 0;
	while (procs_walk.n < procs_walk.max && fscanf(f, "%u", &pid) == 1)
		procs_walk.pids[procs_walk.n++] = pid;
	fclose(f);
	return procs_walk.n < procs_walk.max ? 0 : 1;
}

uint32_t *cgroup__procs(const char *path, size_t max, size_t *n)
{
	char *dir = cgroup__memory_dir(path);

	*n = 0;
	procs_walk.pids = dir ? calloc(max ? max : 1, sizeof(uint32_t)) : NULL;
	procs_walk.n = 0;
	procs_walk.max = max;
	if (procs_walk.pids)
		nftw(dir, collect_procs, 16, FTW_PHYS | FTW_MOUNT);
	free(dir);
	*n = procs_walk.n;
	return procs_walk.pids;
}
