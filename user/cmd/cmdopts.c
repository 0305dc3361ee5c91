// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The options the tracing commands share (cmdopts.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup.h"
#include "cmdopts.h"
#include "container.h"
#include "format.h"
#include "log.h"
#include "proc.h"
#include "session.h"
#include "tracer.h"

void cmdopts__engine_defaults(struct engine_opts *e)
{
	e->max_targets = SESSION_MAX_TARGETS;
	e->no_devices = false;
	e->pods_dir = DEFAULT_PODS_DIR;
}

int cmdopts__add_pid(void *base, const char *arg)
{
	struct target_opts *t = base;
	uint64_t v;
	uint32_t *p;

	if (format__parse_u64(arg, 1, INT32_MAX, &v)) {
		log__error("invalid --pid '%s': give a process ID", arg);
		return -EINVAL;
	}
	p = realloc(t->pids, (t->n_pids + 1) * sizeof(*p));
	if (!p) {
		log__error("out of memory");
		return -ENOMEM;
	}
	t->pids = p;
	t->pids[t->n_pids++] = v;
	return 0;
}

int cmdopts__add_cgroup(void *base, const char *arg)
{
	struct target_opts *t = base;

	if (t->n_cgroups == MEMTRAIL_FILTER_CGROUPS_MAX) {
		log__error("too many --cgroup: the most is %d", MEMTRAIL_FILTER_CGROUPS_MAX);
		return -EINVAL;
	}
	t->cgroups[t->n_cgroups++] = arg;
	return 0;
}

int cmdopts__set_comm(void *base, const char *arg)
{
	struct target_opts *t = base;

	if (!arg[0] || strlen(arg) >= MEMTRAIL_COMM_LEN) {
		log__error("invalid --comm '%s': give 1 to %d characters", arg, MEMTRAIL_COMM_LEN - 1);
		return -EINVAL;
	}
	t->comm = arg;
	return 0;
}

int cmdopts__verbose(void *unused, const char *arg)
{
	(void)unused;
	(void)arg;
	log__set_verbose(true);
	return 0;
}

const struct opt cmdopts__engine[] = {
	OPT_ROW_U32("max-targets", 0, "N", struct engine_opts, max_targets, 16, 1 << 20,
		    "most processes traced at once, {range}; kernel memory: about 930 bytes per "
		    "process, and 16 per CPU for each live one", 0),
	OPT_ROW_FLAG("no-devices", 0, struct engine_opts, no_devices,
		     "do not probe CUDA and Neuron runtimes"),
	OPT_ROW_STR("pods-dir", 0, "DIR", struct engine_opts, pods_dir,
		    "the kubelet's pod log directory, which names each process's pod and "
		    "container (default " DEFAULT_PODS_DIR ")"),
	OPT_ROW_END,
};

const struct opt cmdopts__tail[] = {
	OPT_ROW_FN("verbose", 'v', NULL, cmdopts__verbose, "debug messages"),
	OPT_ROW_HELP,
	OPT_ROW_END,
};

int cmdopts__target_modes(const struct target_opts *t)
{
	return !!t->n_pids + !!t->n_cgroups + !!t->comm + t->all;
}

int cmdopts__targets(const struct target_opts *t, struct tracer_config *cfg)
{
	struct cgroup_ref ref;
	char err[512];
	size_t i;

	cfg->cgroup_subsys = -1;
	cfg->mode = MEMTRAIL_FILTER_ALL;
	if (t->n_pids) {
		for (i = 0; i < t->n_pids; i++) {
			if (!proc__alive(t->pids[i])) {
				log__error("no process with PID %u", t->pids[i]);
				return -ESRCH;
			}
		}
		cfg->mode = MEMTRAIL_FILTER_PID;
		cfg->pids = t->pids;
		cfg->n_pids = t->n_pids;
		return 0;
	}
	if (t->comm) {
		cfg->mode = MEMTRAIL_FILTER_COMM;
		cfg->comm = t->comm;
		return 0;
	}
	for (i = 0; i < t->n_cgroups; i++) {
		if (cgroup__resolve(t->cgroups[i], &ref, err, sizeof(err))) {
			log__error("%s", err);
			return -ENOENT;
		}
		if (i && ref.subsys != cfg->cgroup_subsys) {
			log__error("--cgroup '%s' is in another hierarchy than '%s': give cgroups "
				   "of one (v2, or one v1 controller)", t->cgroups[i], t->cgroups[0]);
			return -EINVAL;
		}
		cfg->cgroup_ids[i] = ref.id;
		cfg->cgroup_subsys = ref.subsys;
	}
	cfg->n_cgroups = t->n_cgroups;
	if (t->n_cgroups)
		cfg->mode = MEMTRAIL_FILTER_CGROUP;
	return 0;
}

void cmdopts__engine_config(const struct engine_opts *e, struct tracer_config *cfg)
{
	cfg->max_targets = e->max_targets;
	cfg->no_devices = e->no_devices;
}
