// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail record: trace targets until they exit or Ctrl-C, sample their
 * levels into a timeline, print the summary and write the trail.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "commands.h"
#include "format.h"
#include "kinds.h"
#include "log.h"
#include "phase.h"
#include "proc.h"
#include "table.h"
#include "tracer.h"
#include "trail.h"

#define DEFAULT_INTERVAL_MS 100
#define DEFAULT_MAX_TARGETS 8192
#define SCAN_PERIOD_MS 1000
#define POLL_MS 50
#define GRACE_MS 1000

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

struct record {
	struct trail trail;
	struct tracer *tracer;
	uint64_t t0_ns;
	size_t live;		/* targets that have not exited */
	bool follow_pids;	/* stop when no target is left */
	pid_t child;		/* the command, in -- CMD mode */
	int err;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static uint64_t rel_ms(const struct record *r, uint64_t ts_ns)
{
	return ts_ns > r->t0_ns ? (ts_ns - r->t0_ns) / 1000000 : 0;
}

static struct trail_target *live_record(struct record *r, uint32_t pid)
{
	struct trail_target *tt = trail__find_target(&r->trail, pid);

	return tt && !tt->exited && !tt->end_ms ? tt : NULL;
}

enum sample_mode {
	SAMPLE_CHANGED,	/* only when a level moved since the last sample */
	SAMPLE_ALWAYS,
};

static bool same_levels(const struct trail_target *tt, const int64_t level[])
{
	return tt->n_samples &&
	       !memcmp(tt->timeline[tt->n_samples - 1].level, level, sizeof(int64_t) * MEMTRAIL_KIND_MAX);
}

/*
 * The target's levels now: the closed phases folded (phase_log's cumulative
 * state) plus the open phase's cell, by the identities of the phase fields.
 * Adds a timeline sample; an idle process adds none: the timeline is a step
 * function, and a node-wide recording would otherwise grow by every idle
 * process at every interval.
 */
static void refresh(struct record *r, struct trail_target *tt, uint64_t t_ms,
		    enum sample_mode sample)
{
	const struct phase_log *l = &tt->phases;
	struct memtrail_cell cell;
	int64_t level[MEMTRAIL_KIND_MAX];
	int k;

	if (tracer__read_cell(r->tracer, tt->pid, tt->phase_seq, &cell))
		memset(&cell, 0, sizeof(cell));	/* nothing accounted in this phase yet */
	for (k = 0; k < MEMTRAIL_KIND_MAX; k++) {
		int64_t peak = l->cum_current[k] + cell.kinds[k].peak;

		level[k] = l->cum_current[k] + cell.kinds[k].current;
		tt->current[k] = level[k];
		if (l->cum_peak[k] > peak)
			peak = l->cum_peak[k];
		if (peak > tt->peak[k])
			tt->peak[k] = peak;
	}
	if (sample == SAMPLE_CHANGED && same_levels(tt, level))
		return;
	if (trail__add_sample(tt, t_ms, level))
		r->err = -ENOMEM;
}

static struct trail_target *new_target(struct record *r, uint32_t pid, uint32_t ppid,
				       const char *comm, uint64_t t_ms)
{
	struct trail_target *parent = trail__find_target(&r->trail, ppid);
	struct trail_target *tt = trail__add_target(&r->trail, pid);

	if (!tt) {
		r->err = -ENOMEM;
		return NULL;
	}
	tt->ppid = ppid;
	tt->start_ms = t_ms;
	tt->phase_start_ms = t_ms;
	snprintf(tt->phase_name, sizeof(tt->phase_name), "start");
	if (comm)
		snprintf(tt->comm, sizeof(tt->comm), "%s", comm);
	else if (proc__comm(pid, tt->comm, sizeof(tt->comm)))
		snprintf(tt->comm, sizeof(tt->comm), "?");
	tt->cmdline = proc__cmdline(pid);
	if (!tt->cmdline && parent && parent->cmdline)
		tt->cmdline = strdup(parent->cmdline);	/* a fork runs its parent's argv */
	tt->cgroup = cgroup__of_pid(pid);
	r->live++;
	return tt;
}

static void add_event(struct record *r, json_t *e)
{
	if (trail__add_event(&r->trail, e))
		r->err = -ENOMEM;
}

static void on_target(struct record *r, const struct memtrail_event_target *e)
{
	uint64_t t_ms = rel_ms(r, e->hdr.ts_ns);
	char comm[MEMTRAIL_COMM_LEN];

	if (live_record(r, e->hdr.tgid))
		return;
	memcpy(comm, e->comm, sizeof(comm));
	comm[sizeof(comm) - 1] = '\0';
	if (!new_target(r, e->hdr.tgid, e->ppid, comm, t_ms))
		return;
	add_event(r, json_pack("{s:I, s:s, s:i, s:i}", "t_ms", (json_int_t)t_ms,
			       "type", e->reason == MEMTRAIL_REASON_FORK ? "fork" : "attach",
			       "pid", e->hdr.tgid, "ppid", e->ppid));
}

static void on_exec(struct record *r, const struct memtrail_event_exec *e)
{
	struct trail_target *tt = live_record(r, e->hdr.tgid);
	uint64_t t_ms = rel_ms(r, e->hdr.ts_ns);
	size_t len = e->args_len < MEMTRAIL_ARGS_LEN ? e->args_len : MEMTRAIL_ARGS_LEN;
	char *cgroup;

	if (!tt)
		return;
	memcpy(tt->comm, e->comm, sizeof(tt->comm));
	tt->comm[sizeof(tt->comm) - 1] = '\0';
	if (len) {
		free(tt->cmdline);
		tt->cmdline = proc__join_args(e->args, len);
	}
	/* runtimes move a process into its container's cgroup, then exec */
	cgroup = cgroup__of_pid(tt->pid);
	if (cgroup) {
		free(tt->cgroup);
		tt->cgroup = cgroup;
	}
	add_event(r, json_pack("{s:I, s:s, s:i, s:s}", "t_ms", (json_int_t)t_ms, "type", "exec",
			       "pid", e->hdr.tgid, "comm", tt->comm));
}

/*
 * Close the target's phases before sequence number UNTIL. A gap means a phase
 * event was lost: that phase's figures still count, under "(lost)".
 */
static void close_phases(struct record *r, struct trail_target *tt, uint32_t until,
			 uint64_t t_ms)
{
	struct memtrail_cell cell;

	for (; tt->phase_seq < until; tt->phase_seq++) {
		if (tracer__read_cell(r->tracer, tt->pid, tt->phase_seq, &cell))
			memset(&cell, 0, sizeof(cell));
		tracer__drop_cell(r->tracer, tt->pid, tt->phase_seq);
		if (phase_log__close(&tt->phases, tt->phase_name, tt->phase_start_ms, t_ms, &cell))
			r->err = -ENOMEM;
		snprintf(tt->phase_name, sizeof(tt->phase_name), "(lost)");
		tt->phase_start_ms = t_ms;
	}
}

/* Close every phase of a target that ends, up to the kernel's current one. */
static void close_all_phases(struct record *r, struct trail_target *tt, uint64_t t_ms)
{
	uint32_t seq = tt->phase_seq;

	tracer__read_phase(r->tracer, tt->pid, &seq);
	if (seq < tt->phase_seq)
		seq = tt->phase_seq;
	close_phases(r, tt, seq + 1, t_ms);
}

static void on_phase(struct record *r, const struct memtrail_event_phase *e)
{
	struct trail_target *tt = live_record(r, e->hdr.tgid);
	uint64_t t_ms = rel_ms(r, e->hdr.ts_ns);

	if (!tt || e->seq <= tt->phase_seq)
		return;
	close_phases(r, tt, e->seq, t_ms);
	memcpy(tt->phase_name, e->name, sizeof(tt->phase_name));
	tt->phase_name[sizeof(tt->phase_name) - 1] = '\0';
	tt->phase_start_ms = t_ms;
}

static void end_target(struct record *r, struct trail_target *tt, uint64_t t_ms)
{
	close_all_phases(r, tt, t_ms);
	refresh(r, tt, t_ms, SAMPLE_ALWAYS);
	tt->end_ms = t_ms ? t_ms : 1;
	tracer__forget(r->tracer, tt->pid);
	if (r->live)
		r->live--;
}

/* The OOM killer chose it: the kill follows; its memory is still intact. */
static void on_oom(struct record *r, const struct memtrail_event_oom *e)
{
	struct trail_target *tt = live_record(r, e->hdr.tgid);
	struct verdict_facts *f;

	if (!tt)
		return;
	f = &tt->facts;
	f->oom = true;
	f->memcg_level = e->memcg_level;
	f->usage = e->usage;
	f->limit = e->limit;
	f->trigger_pid = e->trigger_tgid;
	memcpy(f->trigger_comm, e->trigger_comm, sizeof(f->trigger_comm));
	f->trigger_comm[sizeof(f->trigger_comm) - 1] = '\0';
	free(f->oom_cgroup);
	f->oom_cgroup = e->memcg_id ? cgroup__memory_path_of_id(e->memcg_id) : NULL;
}

static void on_signal_event(struct record *r, const struct memtrail_event_signal *e)
{
	struct trail_target *tt = live_record(r, e->hdr.tgid);
	uint64_t t_ms = rel_ms(r, e->hdr.ts_ns);
	char comm[MEMTRAIL_COMM_LEN];
	struct verdict_facts *f;

	if (!tt)
		return;
	memcpy(comm, e->sender_comm, sizeof(comm));
	comm[sizeof(comm) - 1] = '\0';
	f = &tt->facts;
	if (e->sig == SIGTERM && !f->sigterm) {
		f->sigterm = true;
		f->sigterm_ms = t_ms;
	} else if (e->sig == SIGKILL && !f->sigkill) {
		f->sigkill = true;
		f->sigkill_ms = t_ms;
		f->sender_pid = e->sender_tgid;
		f->sender_ppid = e->sender_ppid;
		memcpy(f->sender_comm, comm, sizeof(f->sender_comm));
		/* the sender may be gone already (a kill command): then these stay unknown */
		f->sender_cgroup = cgroup__of_pid(e->sender_tgid);
		f->sender_cmdline = proc__cmdline(e->sender_tgid);
	}
	add_event(r, json_pack("{s:I, s:s, s:i, s:i, s:i, s:s}", "t_ms", (json_int_t)t_ms,
			       "type", "signal", "pid", e->hdr.tgid, "signal", e->sig,
			       "sender", e->sender_tgid, "sender_comm", comm));
}

static void on_exit_event(struct record *r, const struct memtrail_event_exit *e)
{
	struct trail_target *tt = live_record(r, e->hdr.tgid);
	uint64_t t_ms = rel_ms(r, e->hdr.ts_ns);

	if (!tt)
		return;
	tt->exited = true;
	tt->exit_code = e->code;
	tt->exit_signal = e->signal;
	if (e->signal == SIGKILL) {
		tt->verdict = verdict__decide(&tt->facts, tt->cgroup);
		if (!tt->verdict)
			r->err = -ENOMEM;
	}
	end_target(r, tt, t_ms);
	add_event(r, json_pack("{s:I, s:s, s:i, s:i, s:i}", "t_ms", (json_int_t)t_ms,
			       "type", "exit", "pid", e->hdr.tgid, "code", e->code,
			       "signal", e->signal));
}

static int on_event(void *ctx, const void *data, size_t size)
{
	const struct memtrail_event_hdr *h = data;
	struct record *r = ctx;

	if (size < sizeof(*h))
		return 0;
	switch (h->type) {
	case MEMTRAIL_EV_TARGET:
		if (size >= sizeof(struct memtrail_event_target))
			on_target(r, data);
		break;
	case MEMTRAIL_EV_EXEC:
		if (size >= sizeof(struct memtrail_event_exec))
			on_exec(r, data);
		break;
	case MEMTRAIL_EV_EXIT:
		if (size >= sizeof(struct memtrail_event_exit))
			on_exit_event(r, data);
		break;
	case MEMTRAIL_EV_PHASE:
		if (size >= sizeof(struct memtrail_event_phase))
			on_phase(r, data);
		break;
	case MEMTRAIL_EV_OOM:
		if (size >= sizeof(struct memtrail_event_oom))
			on_oom(r, data);
		break;
	case MEMTRAIL_EV_SIGNAL:
		if (size >= sizeof(struct memtrail_event_signal))
			on_signal_event(r, data);
		break;
	}
	return 0;
}

static void sample_all(struct record *r, uint64_t t_ms)
{
	size_t i;

	for (i = 0; i < r->trail.n_targets; i++) {
		struct trail_target *tt = &r->trail.targets[i];

		if (tt->exited || tt->end_ms)
			continue;
		refresh(r, tt, t_ms, SAMPLE_CHANGED);
		if (proc__alive(tt->pid))
			continue;
		/* its exit event may still wait in the ring buffer (which may add targets) */
		tracer__poll(r->tracer, 0);
		tt = &r->trail.targets[i];
		if (!tt->exited && !tt->end_ms)
			end_target(r, tt, t_ms);	/* the exit event was lost: status unknown */
	}
}

/* ---- the command to run ---- */

struct held_child {
	pid_t pid;
	int go_fd;	/* write a byte to let it exec */
	int err_fd;	/* carries exec's errno back, closes on success */
};

static int spawn_held(char **argv, struct held_child *c)
{
	int go[2], ep[2];

	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(ep, O_CLOEXEC)) {
		close(go[0]);
		close(go[1]);
		return -errno;
	}
	c->pid = fork();
	if (c->pid < 0) {
		int err = -errno;

		close(go[0]);
		close(go[1]);
		close(ep[0]);
		close(ep[1]);
		return err;
	}
	if (c->pid == 0) {
		char b;
		int e;

		close(go[1]);
		close(ep[0]);
		if (read(go[0], &b, 1) != 1)
			_exit(127);
		execvp(argv[0], argv);
		e = errno;
		if (write(ep[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(ep[1]);
	c->go_fd = go[1];
	c->err_fd = ep[0];
	return 0;
}

/* Let the held child exec; 0, or the errno of a failed exec. */
static int release_child(struct held_child *c)
{
	ssize_t n;
	int e = 0;

	if (write(c->go_fd, "g", 1) != 1)
		e = errno;
	close(c->go_fd);
	c->go_fd = -1;
	do {
		n = read(c->err_fd, &e, sizeof(e));
	} while (n < 0 && errno == EINTR);
	close(c->err_fd);
	c->err_fd = -1;
	return n == sizeof(e) ? e : 0;
}

static void abandon_child(struct held_child *c)
{
	if (c->go_fd >= 0)
		close(c->go_fd);	/* the child reads EOF and exits 127 */
	if (c->err_fd >= 0)
		close(c->err_fd);
	if (c->pid > 0)
		waitpid(c->pid, NULL, 0);
}

/* ---- options ---- */

struct record_opts {
	const char *output;
	uint32_t interval_ms;
	uint32_t max_targets;
	uint32_t *pids;
	size_t n_pids;
	const char *cgroup;
	const char *comm;
	bool all;
	char **cmd;
	bool quiet;
	struct phase_rule rules[MEMTRAIL_RULES_MAX];
	size_t n_rules;
	uint32_t phase_history;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: memtrail record [options] (--pid PID ... | --cgroup PATH | --comm NAME | --all | -- CMD [ARGS...])\n"
"\n"
"Trace the memory of processes until they exit (or Ctrl-C), print a summary\n"
"per process and write a trail file that 'memtrail report' reads back.\n"
"\n"
"targets (choose one):\n"
"  -p, --pid PID         a running process and the children it forks; repeatable\n"
"  -c, --cgroup PATH     every process in a cgroup or below it, v1 or v2, given as\n"
"                        a directory (/sys/fs/cgroup/memory/x) or a cgroup path (/x)\n"
"      --comm NAME       every process whose name (comm, 15 chars) is NAME\n"
"  -a, --all             every process on the node but memtrail itself\n"
"  -- CMD [ARGS...]      run CMD, held until the probes are attached; memtrail exits\n"
"                        with its status (128+N when killed by signal N)\n"
"\n"
"options:\n"
"  -o, --output FILE     trail file (default memtrail-YYYYMMDD-HHMMSS.json)\n"
"  -i, --interval MS     timeline sample interval, 10..60000 (default %d); a sample\n"
"                        is stored only when a level changed\n"
"      --max-targets N   most processes traced at once, 16..1048576 (default %d);\n"
"                        kernel memory: about 800 bytes per target\n"
"  -P, --phase NAME=BINARY:SYMBOL\n"
"                        start phase NAME whenever a target enters SYMBOL in\n"
"                        BINARY (an executable or library, path or name);\n"
"                        repeatable, at most %d\n"
"      --phase-history N phases listed per target, the first N/2 and the latest\n"
"                        N/2, 2..1000000 (default %d); all are in the summary\n"
"                        by name\n"
"  -q, --quiet           no summary table on stdout\n"
"  -v, --verbose         debug messages\n"
"  -h, --help            this help\n"
"\n"
"Stops when every target has exited (--pid, CMD) or on Ctrl-C/SIGTERM (all modes).\n"
"Kinds recorded: mapped (private writable mappings, VmData), rss_anon, rss_file,\n"
"rss_shmem (resident memory). Needs root and a kernel with BTF.\n"
"\n"
"Phases: every target starts in 'start'; an exec starts 'exec:COMM'; --phase\n"
"rules, 'memtrail mark PID NAME' and the in-program marker (memtrail_marker.h,\n"
"memtrail_marker.py) start named phases. Names: printable, at most 63 bytes.\n",
		DEFAULT_INTERVAL_MS, DEFAULT_MAX_TARGETS, MEMTRAIL_RULES_MAX, PHASE_HISTORY_DEFAULT);
}

/* NAME=BINARY:SYMBOL; the symbol is after the last colon. */
static int parse_rule(char *arg, struct phase_rule *rule)
{
	char *eq = strchr(arg, '='), *colon = strrchr(arg, ':'), why[128];

	if (!eq || !colon || colon < eq || colon == eq + 1 || !colon[1]) {
		log__error("invalid --phase '%s': give NAME=BINARY:SYMBOL", arg);
		return -EINVAL;
	}
	*eq = '\0';
	if (phase__check_name(arg, why, sizeof(why))) {
		log__error("invalid --phase name '%s': %s", arg, why);
		*eq = '=';
		return -EINVAL;
	}
	snprintf(rule->name, sizeof(rule->name), "%s", arg);
	*eq = '=';
	*colon = '\0';
	rule->binary = eq + 1;
	rule->symbol = colon + 1;
	return 0;
}

static int parse_opts(int argc, char **argv, struct record_opts *o)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'i' },
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "comm", required_argument, NULL, 'C' },
		{ "all", no_argument, NULL, 'a' },
		{ "max-targets", required_argument, NULL, 'M' },
		{ "phase", required_argument, NULL, 'P' },
		{ "phase-history", required_argument, NULL, 'H' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t v;
	int c, modes;

	o->interval_ms = DEFAULT_INTERVAL_MS;
	o->phase_history = PHASE_HISTORY_DEFAULT;
	o->max_targets = DEFAULT_MAX_TARGETS;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:o:i:p:c:aqvhP:", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			o->output = optarg;
			break;
		case 'i':
			if (format__parse_u64(optarg, 10, 60000, &v)) {
				log__error("invalid --interval '%s': give milliseconds, 10 to 60000", optarg);
				return -EINVAL;
			}
			o->interval_ms = v;
			break;
		case 'M':
			if (format__parse_u64(optarg, 16, 1 << 20, &v)) {
				log__error("invalid --max-targets '%s': give 16 to 1048576", optarg);
				return -EINVAL;
			}
			o->max_targets = v;
			break;
		case 'p': {
			uint32_t *p;

			if (format__parse_u64(optarg, 1, INT32_MAX, &v)) {
				log__error("invalid --pid '%s': give a process ID", optarg);
				return -EINVAL;
			}
			p = realloc(o->pids, (o->n_pids + 1) * sizeof(*p));
			if (!p)
				return -ENOMEM;
			o->pids = p;
			o->pids[o->n_pids++] = v;
			break;
		}
		case 'c':
			o->cgroup = optarg;
			break;
		case 'P':
			if (o->n_rules == MEMTRAIL_RULES_MAX) {
				log__error("too many --phase rules: the most is %d", MEMTRAIL_RULES_MAX);
				return -EINVAL;
			}
			if (parse_rule(optarg, &o->rules[o->n_rules]))
				return -EINVAL;
			o->n_rules++;
			break;
		case 'H':
			if (format__parse_u64(optarg, 2, 1000000, &v)) {
				log__error("invalid --phase-history '%s': give 2 to 1000000", optarg);
				return -EINVAL;
			}
			o->phase_history = v;
			break;
		case 'C':
			if (!optarg[0] || strlen(optarg) >= MEMTRAIL_COMM_LEN) {
				log__error("invalid --comm '%s': give 1 to %d characters",
					   optarg, MEMTRAIL_COMM_LEN - 1);
				return -EINVAL;
			}
			o->comm = optarg;
			break;
		case 'a':
			o->all = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			log__set_verbose(true);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			log__error("option '%s' needs a value", argv[optind - 1]);
			fprintf(stderr, "Try 'memtrail record --help'.\n");
			return -EINVAL;
		default:
			log__error("unknown option '%s'", argv[optind - 1]);
			fprintf(stderr, "Try 'memtrail record --help'.\n");
			return -EINVAL;
		}
	}
	if (optind < argc)
		o->cmd = &argv[optind];
	modes = !!o->n_pids + !!o->cgroup + !!o->comm + o->all + !!o->cmd;
	if (modes != 1) {
		log__error("%s: give one of --pid, --cgroup, --comm, --all or -- CMD",
			   modes ? "too many targets" : "no target");
		fprintf(stderr, "Try 'memtrail record --help'.\n");
		return -EINVAL;
	}
	return 0;
}

static char *default_output(void)
{
	char buf[64];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(buf, sizeof(buf), "memtrail-%Y%m%d-%H%M%S.json", &tm);
	return strdup(buf);
}

/* Fail before tracing, not after, when the trail cannot be written. */
static int check_writable(const char *path)
{
	char tmp[PATH_MAX];
	struct stat st;
	int fd;

	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		log__error("cannot write trail '%s': %s", path, strerror(EISDIR));
		return -EISDIR;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
		log__error("cannot write trail '%s': %s", path, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		int err = -errno;

		log__error("cannot write trail '%s': %s", path, strerror(-err));
		return err;
	}
	close(fd);
	unlink(tmp);
	return 0;
}

static char *describe(const struct record_opts *o)
{
	char buf[4096];
	size_t n = 0, i;

	buf[0] = '\0';
	if (o->cmd) {
		n = snprintf(buf, sizeof(buf), "command");
		for (i = 0; o->cmd[i] && n < sizeof(buf); i++)
			n += snprintf(buf + n, sizeof(buf) - n, " %s", o->cmd[i]);
	} else if (o->n_pids) {
		n = snprintf(buf, sizeof(buf), "pid");
		for (i = 0; i < o->n_pids && n < sizeof(buf); i++)
			n += snprintf(buf + n, sizeof(buf) - n, " %u", o->pids[i]);
	} else if (o->cgroup) {
		snprintf(buf, sizeof(buf), "cgroup %s", o->cgroup);
	} else if (o->comm) {
		snprintf(buf, sizeof(buf), "comm %s", o->comm);
	} else {
		snprintf(buf, sizeof(buf), "all");
	}
	return strdup(buf);
}

static void set_started(struct trail *t)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(t->started, sizeof(t->started), "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int build_config(const struct record_opts *o, struct tracer_config *cfg,
			struct cgroup_ref *cg)
{
	char err[512];
	size_t i;

	memset(cfg, 0, sizeof(*cfg));
	cfg->max_targets = o->max_targets;
	cfg->rules = o->rules;
	cfg->n_rules = o->n_rules;
	cfg->cgroup_subsys = -1;
	if (o->cgroup) {
		if (cgroup__resolve(o->cgroup, cg, err, sizeof(err))) {
			log__error("%s", err);
			return -ENOENT;
		}
		cfg->mode = MEMTRAIL_FILTER_CGROUP;
		cfg->cgroup_ids[0] = cg->id;
		cfg->n_cgroups = 1;
		cfg->cgroup_subsys = cg->subsys;
	} else if (o->comm) {
		cfg->mode = MEMTRAIL_FILTER_COMM;
		cfg->comm = o->comm;
	} else if (o->all) {
		cfg->mode = MEMTRAIL_FILTER_ALL;
	} else {
		cfg->mode = MEMTRAIL_FILTER_PID;
		for (i = 0; i < o->n_pids; i++) {
			if (!proc__alive(o->pids[i])) {
				log__error("no process with PID %u", o->pids[i]);
				return -ESRCH;
			}
		}
		cfg->pids = o->pids;
		cfg->n_pids = o->n_pids;
	}
	return 0;
}

static int exit_status_of(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 1;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void trace_loop(struct record *r, const struct record_opts *o, bool rescan)
{
	uint64_t next_sample = 0, next_scan = SCAN_PERIOD_MS, grace_end = 0;

	for (;;) {
		uint64_t now;

		if (tracer__poll(r->tracer, POLL_MS) < 0 && !stop_signal) {
			log__error("cannot read BPF events: %s", strerror(errno));
			break;
		}
		now = rel_ms(r, mono_ns());
		if (now >= next_sample) {
			sample_all(r, now);
			next_sample = now + o->interval_ms;
		}
		if (rescan && now >= next_scan) {
			tracer__scan(r->tracer);
			next_scan = now + SCAN_PERIOD_MS;
		}
		if (r->follow_pids && !r->live)
			break;
		if (stop_signal) {
			/* a terminal's Ctrl-C reached the command too: let its exit land */
			if (!r->child || !r->live)
				break;
			if (!grace_end)
				grace_end = now + GRACE_MS;
			else if (now >= grace_end)
				break;
		}
	}
}

static int finish(struct record *r, const struct record_opts *o, const char *output)
{
	uint64_t now = rel_ms(r, mono_ns());
	size_t i;
	int err;

	tracer__poll(r->tracer, 0);
	for (i = 0; i < r->trail.n_targets; i++) {
		struct trail_target *tt = &r->trail.targets[i];

		if (!tt->exited && !tt->end_ms) {
			close_all_phases(r, tt, now);
			refresh(r, tt, now, SAMPLE_ALWAYS);
		}
	}
	tracer__lost(r->tracer, r->trail.lost);
	r->trail.duration_ms = now;
	if (!o->quiet) {
		table__print_summary(stdout, &r->trail);
		table__print_phases(stdout, &r->trail);
	}
	table__print_verdicts(stdout, &r->trail);
	fflush(stdout);
	err = trail__write(&r->trail, output);
	if (err) {
		log__error("cannot write trail '%s': %s", output, strerror(-err));
		return err;
	}
	log__info("trail written to '%s'", output);
	return 0;
}

int cmd_record(int argc, char **argv)
{
	struct held_child child = { .pid = 0, .go_fd = -1, .err_fd = -1 };
	struct record_opts o = { 0 };
	struct record r = { 0 };
	struct tracer_config cfg;
	struct cgroup_ref cg;
	char *output = NULL;
	int ret = 1, err, wstatus = 0;
	size_t i;

	if (parse_opts(argc, argv, &o)) {
		ret = 2;
		goto out_opts;
	}
	output = o.output ? strdup(o.output) : default_output();
	if (!output || check_writable(output))
		goto out_opts;
	if (build_config(&o, &cfg, &cg))
		goto out_opts;
	if (trail__init(&r.trail))
		goto out_opts;
	r.trail.interval_ms = o.interval_ms;
	r.trail.phase_history = o.phase_history;
	r.trail.kinds = kind__sourced();
	r.trail.command = describe(&o);
	set_started(&r.trail);
	r.follow_pids = cfg.mode == MEMTRAIL_FILTER_PID;

	if (o.cmd) {
		err = spawn_held(o.cmd, &child);
		if (err) {
			log__error("cannot start '%s': %s", o.cmd[0], strerror(-err));
			goto out;
		}
		r.child = child.pid;
		o.pids = calloc(1, sizeof(*o.pids));
		if (!o.pids)
			goto out_child;
		o.pids[0] = child.pid;
		o.n_pids = 1;
		cfg.pids = o.pids;
		cfg.n_pids = 1;
		cfg.await_exec = true;
	}
	install_signals();
	r.t0_ns = mono_ns();
	if (tracer__open(&r.tracer, &cfg, on_event, &r))
		goto out_child;
	for (i = 0; i < cfg.n_pids; i++)
		if (!new_target(&r, cfg.pids[i], proc__ppid(cfg.pids[i]), NULL, 0))
			goto out_child;
	/* twice: the first pass adopts children of listed PIDs, the second theirs */
	if (tracer__scan(r.tracer) || tracer__scan(r.tracer))
		goto out_child;
	tracer__poll(r.tracer, 0);
	if (!o.cmd) {
		for (i = 0; i < o.n_pids; i++) {
			if (live_record(&r, o.pids[i]) && !proc__alive(o.pids[i])) {
				log__error("process %u exited while memtrail was attaching", o.pids[i]);
				goto out_child;
			}
		}
	} else {
		err = release_child(&child);
		if (err) {
			log__error("cannot run '%s': %s", o.cmd[0], strerror(err));
			waitpid(child.pid, NULL, 0);
			child.pid = 0;
			ret = err == ENOENT ? 127 : 126;
			goto out;
		}
	}
	log__info("tracing %s; Ctrl-C to stop", r.trail.command);
	trace_loop(&r, &o, cfg.mode != MEMTRAIL_FILTER_PID);
	if (r.err)
		log__warn("out of memory while recording: the trail may be incomplete");

	ret = 0;
	if (o.cmd) {
		pid_t w = waitpid(child.pid, &wstatus, stop_signal ? WNOHANG : 0);

		ret = w == child.pid ? exit_status_of(wstatus) : 128 + stop_signal;
		child.pid = 0;
	}
	if (finish(&r, &o, output))
		ret = ret ? ret : 1;
	goto out;

out_child:
	if (child.pid > 0)
		abandon_child(&child);
out:
	tracer__destroy(r.tracer);
	trail__free(&r.trail);
out_opts:
	free(o.pids);
	free(output);
	return ret;
}
