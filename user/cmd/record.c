// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail record: trace targets until they exit or Ctrl-C, sample their
 * levels into a timeline, print the summary and write the trail.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cmdopts.h"
#include "commands.h"
#include "container.h"
#include "format.h"
#include "gate.h"
#include "kfeatures.h"
#include "kinds.h"
#include "log.h"
#include "loop.h"
#include "opts.h"
#include "outfile.h"
#include "phase.h"
#include "proc.h"
#include "session.h"
#include "sites.h"
#include "statusline.h"
#include "table.h"
#include "tracer.h"
#include "trail.h"
#include "unnamed.h"

#define DEFAULT_INTERVAL_MS 100
#define SCAN_PERIOD_MS 1000
#define GRACE_MS 1000

struct record {
	struct session s;
	bool follow_pids;	/* stop when no target is left */
	pid_t child;		/* the command, in -- CMD mode */
	struct gate *gate;	/* where the command waits at opens of new files; NULL: none */
	uint32_t stacks;	/* the stack table's size (tracer__stacks) */
	uint64_t grace_end;	/* stopped by a signal: the command's exit awaited until then */
};

/* ---- the command to run ---- */

struct held_child {
	pid_t pid;
	int go_fd;	/* write a byte to let it exec */
	int err_fd;	/* carries exec's errno back, closes on success */
};

/* What the child says before it waits: how its gate went (gate__enter). */
struct child_gate {
	int err, marked, failed;
};

/*
 * The command, forked and waiting on a pipe until memtrail lets it exec; if
 * memtrail ends first, the pipe closes and it exits 127 unrun. With GATE,
 * it first enters a mount namespace of its own and marks it (gate.h); *CG
 * says how that went (err -ENODEV: no gate).
 */
static int spawn_held(char **argv, struct held_child *c, struct gate *gate,
		      struct child_gate *cg)
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
		struct child_gate said = { .err = -ENODEV };
		char b;
		int e;

		close(go[1]);
		close(ep[0]);
		if (gate)
			said.err = gate__enter(gate, &said.marked, &said.failed);
		if (write(ep[1], &said, sizeof(said)) != sizeof(said))
			_exit(127);
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
	/* the child's word on its gate, before it waits (no wait of memtrail's in between) */
	cg->err = -ENODEV;
	while (read(c->err_fd, cg, sizeof(*cg)) < 0 && errno == EINTR)
		;
	return 0;
}

/*
 * PID of the command opens FD, an ELF file, and waits: the file probed if it
 * is a runtime new to memtrail, and PID's mappings read while it waits (its
 * program and the libraries before this one: its call sites named after it
 * exits, however soon).
 */
static void gate_file(void *ctx, int fd, pid_t pid)
{
	struct record *r = ctx;

	bool live = pid > 0 && session__live(&r->s, (uint32_t)pid);

	if (!r->s.devices)
		return;
	/* a target is a user of the runtime it opens; another process only has it probed */
	devices__gate_file(r->s.devices, fd, pid > 0 ? (uint32_t)pid : 0, live);
	if (live)
		(void)devices__scan(r->s.devices, (uint32_t)pid);
}

static void close_gate(struct record *r);

static void serve_gate(void *ctx)
{
	struct record *r = ctx;

	gate__serve(r->gate, gate_file, r);
	/* its keeper gone (killed): the kernel let the group go, nothing waits */
	if (gate__wake_fd(r->gate) < 0) {
		log__warn("the gate's keeper ended: the command runs without a gate");
		close_gate(r);
	}
}

/*
 * Let the held child exec; 0, or the errno of a failed exec. Its exec opens
 * files at the gate: served while it runs.
 */
static int release_child(struct record *r, struct held_child *c)
{
	ssize_t n = -1;
	int e = 0;

	if (write(c->go_fd, "g", 1) != 1)
		e = errno;
	close(c->go_fd);
	c->go_fd = -1;
	for (;;) {
		struct pollfd p[2] = { { c->err_fd, POLLIN, 0 }, { gate__wake_fd(r->gate), POLLIN, 0 } };

		if (poll(p, r->gate ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		/* the gate served after the events before its opens (the exec): may close it */
		if (r->gate && p[1].revents)
			tracer__poll(r->s.tracer, 0);
		if (!p[0].revents)
			continue;
		n = read(c->err_fd, &e, sizeof(e));
		if (n >= 0 || errno != EINTR)
			break;
	}
	close(c->err_fd);
	c->err_fd = -1;
	return n == sizeof(e) ? e : 0;
}

/* The command's opens go on without waiting, from now on. */
static void close_gate(struct record *r)
{
	uint64_t waited, opens, refused;

	if (!r->gate)
		return;
	if (r->s.tracer)
		tracer__watch_fd(r->s.tracer, -1, NULL, NULL);
	gate__counts(r->gate, &waited, &opens, &refused);
	log__debug("the command opened %" PRIu64 " files at the gate, %" PRIu64 " of them ELF "
		   "files that waited to be looked at", opens, waited);
	if (refused)
		log__warn("%" PRIu64 " of the command's opens failed at the gate: memtrail had no "
			  "descriptor left to read them (raise its open file limit)", refused);
	gate__close(r->gate);
	r->gate = NULL;
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
	struct target_opts t;
	struct engine_opts e;
	const char *output;
	uint32_t interval_ms;
	char **cmd;
	bool quiet;
	bool no_sites;
	bool heap;
	bool heap_sample_given;
	bool unwind_fp;		/* --unwind fp: heap sites by frame pointers */
	bool deep;		/* heap sites by call-frame information (--heap's default) */
	bool faults;
	uint32_t fault_sample;
	uint32_t stacks;
	struct heap_config heap_cfg;
	struct phase_rule rules[MEMTRAIL_RULES_MAX];
	size_t n_rules;
	uint32_t phase_history;
};

/* The colon that ends a rule's BINARY: the first one that is not half of a "::". */
static char *rule_colon(char *s)
{
	char *c;

	for (c = strchr(s, ':'); c; c = strchr(c, ':')) {
		if (c[1] != ':')
			return c;
		c += 2 + strspn(c + 2, ":");
	}
	return NULL;
}

/*
 * NAME=BINARY:SYMBOL of --phase, or of --scope where SCOPED, into O's next
 * rule; the symbol is after BINARY's colon and may hold "::" (C++, Rust).
 */
static int add_rule(struct record_opts *o, const char *value, bool scoped)
{
	char *arg = (char *)value;
	char *eq = strchr(arg, '='), *colon = eq ? rule_colon(eq + 1) : NULL, why[128];
	const char *opt = scoped ? "--scope" : "--phase";
	struct phase_rule *rule = &o->rules[o->n_rules];

	if (o->n_rules == MEMTRAIL_RULES_MAX) {
		log__error("too many --phase and --scope rules: the most is %d", MEMTRAIL_RULES_MAX);
		return -EINVAL;
	}
	if (!eq || !colon || colon < eq || colon == eq + 1 || !colon[1]) {
		log__error("invalid %s '%s': give NAME=BINARY:SYMBOL", opt, arg);
		return -EINVAL;
	}
	*eq = '\0';
	if (phase__check_name(arg, why, sizeof(why))) {
		log__error("invalid %s name '%s': %s", opt, arg, why);
		*eq = '=';
		return -EINVAL;
	}
	snprintf(rule->name, sizeof(rule->name), "%s", arg);
	*eq = '=';
	*colon = '\0';
	rule->binary = eq + 1;
	rule->symbol = colon + 1;
	rule->scoped = scoped;
	o->n_rules++;
	return 0;
}

static int opt_phase(void *base, const char *arg)
{
	return add_rule(base, arg, false);
}

static int opt_scope(void *base, const char *arg)
{
	return add_rule(base, arg, true);
}

static int opt_heap_sample(void *base, const char *arg)
{
	struct record_opts *o = base;
	uint64_t v;

	if (format__option_bytes("--heap-sample", arg, 40, &v))
		return -EINVAL;
	o->heap_cfg.sample_bytes = v;
	o->heap_sample_given = true;
	o->heap = true;
	return 0;
}

/* deep stacks' sampling unless --heap-sample says: a stack copy costs about 16 KiB */
#define DEEP_SAMPLE_DEFAULT 262144

static int opt_unwind(void *base, const char *arg)
{
	struct record_opts *o = base;

	if (!strcmp(arg, "dwarf")) {
		o->unwind_fp = false;
		o->heap = true;
	} else if (!strcmp(arg, "fp")) {
		o->unwind_fp = true;
	} else {
		log__error("invalid --unwind '%s': give dwarf or fp", arg);
		return -EINVAL;
	}
	return 0;
}

static int opt_overhead_budget(void *base, const char *arg)
{
	struct record_opts *o = base;

	if (format__option_pct("--overhead-budget", arg, "a percentage", &o->heap_cfg.budget_pct))
		return -EINVAL;
	o->heap = true;
	return 0;
}

static int opt_fault_sample(void *base, const char *arg)
{
	struct record_opts *o = base;

	if (format__option_u32("--fault-sample", arg, 1, 1000000, &o->fault_sample))
		return -EINVAL;
	o->faults = true;
	return 0;
}

static const struct opt target_rows[] = {
	CMDOPTS_ROW_PID,
	CMDOPTS_ROW_CGROUP,
	CMDOPTS_ROW_COMM,
	CMDOPTS_ROW_ALL,
	OPT_ROW_DOC("-- CMD [ARGS...]", "run CMD once the probes are attached; memtrail exits "
		    "with its status (128+N when killed by signal N)"),
	OPT_ROW_END,
};

static const struct opt record_rows[] = {
	OPT_ROW_STR("output", 'o', "FILE", struct record_opts, output,
		    "trail file, mode 0600, written whole or not at all (default "
		    "memtrail-YYYYMMDD-HHMMSS-PID.json, PID memtrail's own; never replacing a "
		    "file: -2, -3, ...)"),
	OPT_ROW_U32("interval", 'i', "MS", struct record_opts, interval_ms, 10, 60000,
		    "timeline sample interval, {range}; a sample is stored only when a level "
		    "changed", 0),
	OPT_ROW_FN("phase", 'P', "NAME=BINARY:SYMBOL", opt_phase,
		   "start phase NAME whenever a target enters SYMBOL in BINARY (an executable "
		   "or library, path or name); SYMBOL as in the ELF file or demangled, with or "
		   "without its parameters ('lib.so:ns::f', quoted: 'lib.so:ns::f(int)'); "
		   "repeatable, at most " OPT_XSTR(MEMTRAIL_RULES_MAX) " rules with --scope"),
	OPT_ROW_FN("scope", 0, "NAME=BINARY:SYMBOL", opt_scope,
		   "phase NAME while a target runs SYMBOL: from its entry to its return, then "
		   "the phase it interrupted goes on (as a new row of that name); scopes nest, "
		   "kept per thread (16 deep); SYMBOL as for --phase"),
	OPT_ROW_U32("phase-history", 0, "N", struct record_opts, phase_history, 2, 1000000,
		    "phases listed per target, the first N/2 and the latest N/2, {range}; all "
		    "are in the summary by name", 0),
	OPT_ROW_END,
};

static const struct opt site_rows[] = {
	OPT_ROW_FLAG("no-sites", 0, struct record_opts, no_sites,
		     "no mapping or device sites (the stacks of mmap, mremap and brk calls "
		     "that grow mapped memory, and of CUDA and Neuron allocations; on by "
		     "default)"),
	OPT_ROW_FLAG("heap", 0, struct record_opts, heap,
		     "heap sites: probe the malloc family (glibc, jemalloc, tcmalloc, mimalloc) "
		     "of each target; every call traps (several microseconds): costly for "
		     "malloc-heavy code; heap levels are exact, sites sampled (see --unwind)"),
	OPT_ROW_FN("heap-sample", 0, "BYTES", opt_heap_sample,
		   "implies --heap: take a stack for about one allocation per BYTES allocated, "
		   "weighted, 0..2^40 (0: every allocation; default " OPT_XSTR(DEEP_SAMPLE_DEFAULT)
		   ", or 0 with --unwind fp); every call still traps: it saves the stack only"),
	OPT_ROW_FN("unwind", 0, "MODE", opt_unwind,
		   "how heap and mapping sites' stacks are walked: dwarf (the default: the "
		   "binaries' call-frame information, through code built without frame "
		   "pointers: BPF copies each sampled allocation's, and each mapping's, "
		   "registers and the top 16 KiB of its stack, "
		   "memtrail unwinds them, and CPython 3.10 to 3.14's frames, function and "
		   "line, stand in for the interpreter's) or fp (frame pointers, walked in the "
		   "kernel: stops at the first function built without them; with "
		   "--heap-sample 0, its default then, every allocation's site is exact); "
		   "dwarf implies --heap"),
	OPT_ROW_FN("overhead-budget", 0, "PCT", opt_overhead_budget,
		   "implies --heap: attach the heap probes in windows so that their measured "
		   "cost stays within PCT% of each target's CPU time, 0.1..100; a window opens "
		   "once per second of its CPU time at most (heap levels and in-use figures are "
		   "then not measured; coverage is reported)"),
	OPT_ROW_FLAG("faults", 0, struct record_opts, faults,
		     "fault sites: stacks of user page faults"),
	OPT_ROW_FN("fault-sample", 0, "N", opt_fault_sample,
		   "one fault in N, 1..1000000 (default 1); implies --faults"),
	OPT_ROW_U32("stacks", 0, "N", struct record_opts, stacks, 1024, 4194304,
		    "distinct stacks kept, 1024..4194304 (default " OPT_XSTR(TRACER_STACKS)
		    ", with --heap " OPT_XSTR(TRACER_STACKS_HEAP) "); about 0.5 KiB of kernel "
		    "memory per stack kept and 32 bytes per slot. Stacks beyond it are lost, "
		    "counted, and said", OPT_RANGE_SAID),
	OPT_ROW_FLAG("quiet", 'q', struct record_opts, quiet,
		     "no summary table on stdout (losses are still said)"),
	OPT_ROW_END,
};

static void usage(FILE *f, const struct opts_cmd *c)
{
	fprintf(f,
"usage: memtrail record [options] (--pid PID ... | --cgroup PATH ... |\n"
"                                  --comm NAME | --all | -- CMD [ARGS...])\n"
"\n"
"Trace the memory of processes until they exit (or Ctrl-C), print a summary\n"
"per process and write a trail file that 'memtrail report' reads back.\n"
"\n");
	opts__help(f, c);
	fputc('\n', f);
	opts__wrap(f,
"Stops when every target has exited (--pid, CMD) or on Ctrl-C/SIGTERM (all "
"modes). Kinds recorded: heap (with --heap, exact), mapped (private writable "
"mappings, VmData), rss_anon, rss_file, rss_shmem (resident memory); cuda_device, "
"cuda_host, cuda_managed, neuron_device, neuron_host (the runtimes' allocation "
"calls, found in every target's libraries, also inside containers and when loaded "
"later). No process is ever stopped: a runtime memtrail knows before it is mapped "
"has its probes in place; one new to it is probed as it is mapped, and what was "
"called before is said (late). CMD runs at a gate: each ELF file it opens is "
"probed before it can map it. Needs root and a kernel with BTF.", 0);
	fputc('\n', f);
	opts__wrap(f,
"Phases: every target starts in 'start'; an exec starts 'exec:COMM'; --phase "
"rules, 'memtrail mark PID NAME' and the in-program marker (memtrail_marker.h, "
"memtrail_marker.py) start named phases, --scope rules end theirs too. Names: "
"printable, at most 63 bytes. Accelerator runtimes start 'runtime_init' (first "
"call), 'model_load' (nrt_load, cuModuleLoad*, cuLibraryLoad*) and 'execute' "
"(first launch after a load).", 0);
}

/* 0, 1 when --help was printed, or -EINVAL once the error is said. */
static int parse_opts(int argc, char **argv, struct record_opts *o)
{
	const struct opt_group groups[] = {
		{ "targets (choose one)", target_rows, &o->t },
		{ "options", record_rows, o },
		{ NULL, cmdopts__engine, &o->e },
		{ "allocation sites (user stacks, per target and phase; 'memtrail report' lists\n"
		  "them, --pprof exports them)", site_rows, o },
		{ NULL, cmdopts__tail, NULL },
	};
	const struct opts_cmd cmd = { .name = "record", .groups = groups,
				      .n_groups = sizeof(groups) / sizeof(groups[0]),
				      .usage = usage, .stop_at_arg = true };
	int first, err, modes;

	o->interval_ms = DEFAULT_INTERVAL_MS;
	o->phase_history = PHASE_HISTORY_DEFAULT;
	cmdopts__engine_defaults(&o->e);
	err = opts__parse(&cmd, argc, argv, &first);
	if (err)
		return err;
	if (first < argc)
		o->cmd = &argv[first];
	o->deep = o->heap && !o->unwind_fp;
	if (o->deep && !o->heap_sample_given)
		o->heap_cfg.sample_bytes = DEEP_SAMPLE_DEFAULT;
	modes = cmdopts__target_modes(&o->t) + !!o->cmd;
	if (modes != 1) {
		opts__usage_error("record", "%s: give one of --pid, --cgroup, --comm, --all or -- CMD",
				  modes ? "too many targets" : "no target");
		return -EINVAL;
	}
	return 0;
}

/*
 * memtrail-YYYYMMDD-HHMMSS-PID.json, in a PATH_MAX buffer: records started
 * in one second differ by their pid (and finish never replaces it).
 */
static char *default_output(void)
{
	char stamp[32], *buf = malloc(PATH_MAX);
	time_t now = time(NULL);
	struct tm tm;

	if (!buf)
		return NULL;
	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(buf, PATH_MAX, "memtrail-%s-%d.json", stamp, (int)getpid());
	return buf;
}

/* Fail before tracing, not after, when the trail cannot be written. */
static int check_writable(const char *path)
{
	struct stat st;
	int err;

	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		err = -EISDIR;
	else
		err = outfile__probe(path);
	if (err)
		log__error("cannot write trail '%s': %s", path, strerror(-err));
	return err;
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
	} else if (o->t.n_pids) {
		n = snprintf(buf, sizeof(buf), "pid");
		for (i = 0; i < o->t.n_pids && n < sizeof(buf); i++)
			n += snprintf(buf + n, sizeof(buf) - n, " %u", o->t.pids[i]);
	} else if (o->t.n_cgroups) {
		n = snprintf(buf, sizeof(buf), "cgroup");
		for (i = 0; i < o->t.n_cgroups && n < sizeof(buf); i++)
			n += snprintf(buf + n, sizeof(buf) - n, " %s", o->t.cgroups[i]);
	} else if (o->t.comm) {
		snprintf(buf, sizeof(buf), "comm %s", o->t.comm);
	} else {
		snprintf(buf, sizeof(buf), "all");
	}
	return strdup(buf);
}

static int build_config(const struct record_opts *o, struct tracer_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cmdopts__engine_config(&o->e, cfg);
	cfg->sites = (struct tracer_sites){
		.mapping = !o->no_sites,
		.device = !o->no_sites,
		.faults = o->faults,
		.fault_sample = o->fault_sample ? o->fault_sample : 1,
		.stacks = o->stacks,
		.heap = o->heap,
		/* with a budget the probes come and go: frees would go unseen */
		.heap_track = o->heap && o->heap_cfg.budget_pct <= 0,
		.heap_sample = o->heap_cfg.sample_bytes,
		.heap_budget = o->heap && o->heap_cfg.budget_pct > 0,
		.heap_deep = o->deep,
		/* mapping sites are deep too unless --unwind fp */
		.map_deep = !o->no_sites && !o->unwind_fp,
	};
	cfg->rules = o->rules;
	cfg->n_rules = o->n_rules;
	if (cmdopts__targets(&o->t, cfg))
		return -1;
	/* the command: its pid once it is started (start_command) */
	if (o->cmd)
		cfg->mode = MEMTRAIL_FILTER_PID;
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

/* The loop's turn (loop.h): on until the targets followed are gone, or a stop signal. */
static int record_turn(void *ctx, uint64_t now)
{
	struct record *r = ctx;

	if (r->follow_pids && !r->s.live)
		return 1;
	if (!session__stop_signal)
		return 0;
	/* a terminal's Ctrl-C reached the command too: let its exit land */
	if (!r->child || !r->s.live)
		return 1;
	if (!r->grace_end)
		r->grace_end = now + GRACE_MS;
	return now >= r->grace_end;
}

/* What deep stacks' samples gave: how many chains reached their thread's first frame. */
static void say_deep(const struct sites_deep_stats *d)
{
	uint64_t unwound = d->samples - d->fp_named;

	if (!d->samples)
		return;
	log__info("deep stacks: %llu sample%s unwound, %.1f%% to the thread's first frame; "
		  "%llu stopped at code without call-frame information (JIT code, a file not "
		  "read), %llu at the end of the stack copy", (unsigned long long)unwound,
		  unwound == 1 ? "" : "s", unwound ? 100.0 * d->complete / unwound : 0.0,
		  (unsigned long long)d->cut_code, (unsigned long long)d->cut_stack);
	if (d->fp_named)
		log__info("deep stacks: %llu mapping%s named by frame pointers instead: the "
			  "process was gone before its mappings were read",
			  (unsigned long long)d->fp_named, d->fp_named == 1 ? "" : "s");
}

static int finish(struct record *r, const struct record_opts *o, char *output)
{
	struct trail *t = &r->s.trail;
	uint64_t now = session__now_ms(&r->s);
	int err;

	/* stopped by a signal: a second one leaves without the trail, at once */
	if (session__stop_signal)
		log__info("writing trail '%s' (%zu target%s); %s again to leave without it", output,
			  t->n_targets, t->n_targets == 1 ? "" : "s",
			  session__stop_signal == SIGINT ? "Ctrl-C" :
			  session__stop_signal == SIGTERM ? "SIGTERM" : "SIGHUP");
	outfile__set_cancel(&session__stop_again);
	session__close_all(&r->s, now);
	session__finish_sites(&r->s);
	tracer__lost(r->s.tracer, t->lost);
	/* deep chains beyond --stacks are lost stacks too */
	if (r->s.sites)
		t->lost[MEMTRAIL_LOST_STACKS] += sites__deep_stats(r->s.sites)->lost;
	t->duration_ms = now;
	/* said whatever -q: sites without a stack are what a user looks at first */
	if (t->lost[MEMTRAIL_LOST_STACKS]) {
		uint32_t had = r->stacks;
		uint64_t more = (uint64_t)had * 4 > 4194304 ? 4194304 : (uint64_t)had * 4;

		log__warn("%llu stack%s lost (listed as '[no stack]' sites): the table of %u distinct "
			  "stacks filled; --stacks %llu makes room (up to %llu MiB of kernel "
			  "memory, as stacks are seen)", (unsigned long long)t->lost[MEMTRAIL_LOST_STACKS],
			  t->lost[MEMTRAIL_LOST_STACKS] == 1 ? "" : "s", had, (unsigned long long)more,
			  (unsigned long long)(more * TRACER_STACK_BYTES >> 20));
	}
	if (r->s.sites)
		say_deep(sites__deep_stats(r->s.sites));
	if (!session__stop_again)
		unnamed__say(t);
	if (!o->quiet && !session__stop_again) {
		table__print_summary(stdout, t);
		table__print_phases(stdout, t);
	}
	if (!session__stop_again) {
		table__print_verdicts(stdout, t);
		table__print_device_failures(stdout, t);
	}
	fflush(stdout);
	/* a default name is another record's too when pids repeat: not replaced */
	err = session__stop_again ? -ECANCELED :
	      o->output ? trail__write(t, output) : trail__write_new(t, output, PATH_MAX);
	outfile__set_cancel(NULL);
	if (err == -ECANCELED) {
		log__error("trail '%s' not written: stopped again", output);
		return err;
	}
	if (err) {
		log__error("cannot write trail '%s': %s", output, strerror(-err));
		return err;
	}
	log__info("trail written to '%s'", output);
	return 0;
}

/*
 * Start O's command, held until it is let go (release_child), at its gate
 * where the kernel gives record one; it is the one target of CFG. An error
 * is said.
 */
static int start_command(struct record *r, struct record_opts *o, struct tracer_config *cfg,
			 struct held_child *child)
{
	struct child_gate cg;
	int err;

	/* the runtimes it may write and map at once: probed at its opens */
	if (!o->e.no_devices && (err = gate__open(&r->gate)))
		log__debug("no gate for the command: %s", strerror(-err));
	err = spawn_held(o->cmd, child, r->gate, &cg);
	if (err) {
		log__error("cannot start '%s': %s", o->cmd[0], strerror(-err));
		return err;
	}
	if (r->gate && cg.err) {
		log__warn("the command runs without a gate (%s): a runtime it writes and "
			  "maps at once is probed as it is mapped", strerror(-cg.err));
		close_gate(r);
	} else if (r->gate && cg.failed) {
		log__debug("the gate marks %d mounts; %d could not be marked", cg.marked,
			   cg.failed);
	}
	r->child = child->pid;
	o->t.pids = calloc(1, sizeof(*o->t.pids));
	if (!o->t.pids) {
		log__error("out of memory");
		return -ENOMEM;
	}
	o->t.pids[0] = child->pid;
	o->t.n_pids = 1;
	cfg->pids = o->t.pids;
	cfg->n_pids = 1;
	cfg->await_exec = true;
	return 0;
}

/*
 * Open the tracer on CFG and everything record adds to it (targets, device
 * probes, the gate, sites), the command's own libraries probed before it
 * runs; -1 once an error is said.
 */
static int attach(struct record *r, const struct record_opts *o, const struct tracer_config *cfg,
		  pid_t child_pid)
{
	size_t i;
	int err = 0;

	session__install_signals();
	r->s.t0_ns = clock__mono_ns();
	r->s.keep_events = true;
	r->s.attribute = true;
	r->s.pods_dir = o->e.pods_dir;
	if (tracer__open(&r->s.tracer, cfg, session__on_event, &r->s))
		return -1;
	r->s.trail.kernel = features__json(tracer__features(r->s.tracer));
	for (i = 0; i < cfg->n_pids; i++)
		if (!session__new_target(&r->s, cfg->pids[i], proc__ppid(cfg->pids[i]), NULL, 0, false))
			return -1;
	/* twice: the first pass adopts children of listed PIDs, the second theirs */
	if (tracer__scan(r->s.tracer) || tracer__scan(r->s.tracer))
		return -1;
	tracer__poll(r->s.tracer, 0);
	if (session__open_devices(&r->s, o->e.no_devices))
		return -1;
	/* nothing to probe at the gate without device probes (a kernel without them) */
	if (r->gate && (!r->s.devices || (err = gate__start(r->gate, child_pid)))) {
		if (r->s.devices)
			log__warn("the command runs without a gate: %s", strerror(-err));
		close_gate(r);
	}
	if (r->gate)
		tracer__watch_fd(r->s.tracer, gate__wake_fd(r->gate), serve_gate, r);
	if ((!o->no_sites || o->heap || o->faults) &&
	    session__open_sites(&r->s, o->heap ? &o->heap_cfg : NULL))
		return -1;
	if (r->s.sites)
		sites__deep_cap(r->s.sites, r->stacks);
	if (o->heap && o->heap_cfg.budget_pct <= 0)
		r->s.trail.kinds |= 1U << MEMTRAIL_KIND_HEAP;
	if (o->cmd && (r->s.devices || r->s.heap)) {
		char *path = proc__which(o->cmd[0]);

		/* its libraries are probed before it runs: it may call them at once */
		if (path && r->s.devices)
			devices__prepare_command(r->s.devices, path);
		if (path && r->s.heap)
			heap__prepare_command(r->s.heap, child_pid, path);
		free(path);
	}
	return 0;
}

int cmd_record(int argc, char **argv)
{
	struct held_child child = { .pid = 0, .go_fd = -1, .err_fd = -1 };
	struct loop_hooks hooks = { .status = true, .turn = record_turn };
	struct record_opts o = { 0 };
	struct record r = { 0 };
	struct tracer_config cfg;
	char *output = NULL;
	int ret = 1, err, wstatus = 0;
	size_t i;

	err = parse_opts(argc, argv, &o);
	if (err) {
		ret = err > 0 ? 0 : 2;
		goto out_opts;
	}
	if (tracer__check_caps())
		goto out_opts;
	output = o.output ? strdup(o.output) : default_output();
	if (!output || check_writable(output))
		goto out_opts;
	if (build_config(&o, &cfg))
		goto out_opts;
	r.stacks = tracer__stacks(&cfg);
	if (trail__init(&r.s.trail))
		goto out_opts;
	r.s.trail.interval_ms = o.interval_ms;
	r.s.trail.phase_history = o.phase_history;
	r.s.trail.kinds = kind__sourced();
	r.s.trail.command = describe(&o);
	trail__set_started(&r.s.trail);
	r.follow_pids = cfg.mode == MEMTRAIL_FILTER_PID;

	if (o.cmd && start_command(&r, &o, &cfg, &child))
		goto out_child;
	if (attach(&r, &o, &cfg, child.pid))
		goto out_child;
	if (!o.cmd) {
		for (i = 0; i < o.t.n_pids; i++) {
			if (session__live(&r.s, o.t.pids[i]) && !proc__alive(o.t.pids[i])) {
				log__error("process %u exited while memtrail was attaching", o.t.pids[i]);
				goto out_child;
			}
		}
	} else {
		err = release_child(&r, &child);
		if (err) {
			log__error("cannot run '%s': %s", o.cmd[0], strerror(err));
			waitpid(child.pid, NULL, 0);
			child.pid = 0;
			ret = err == ENOENT ? 127 : 126;
			goto out;
		}
	}
	log__info("tracing %s; Ctrl-C to stop", r.s.trail.command);
	/* not with a command: its own output shares the terminal */
	statusline__start(!o.quiet && !o.cmd);
	hooks.interval_ms = o.interval_ms;
	hooks.scan_ms = cfg.mode != MEMTRAIL_FILTER_PID ? SCAN_PERIOD_MS : 0;
	(void)loop__run(&r.s, &hooks, &r);	/* a failure to read events is said: the trail still */
	close_gate(&r);
	statusline__stop();
	if (r.s.err)
		log__warn("out of memory while recording: the trail may be incomplete");

	ret = 0;
	if (o.cmd) {
		pid_t w = waitpid(child.pid, &wstatus, session__stop_signal ? WNOHANG : 0);

		ret = w == child.pid ? exit_status_of(wstatus) : 128 + session__stop_signal;
		child.pid = 0;
	}
	err = finish(&r, &o, output);
	if (err == -ECANCELED)
		ret = 128 + session__stop_again;
	else if (err)
		ret = ret ? ret : 1;
	goto out;

out_child:
	if (child.pid > 0)
		abandon_child(&child);
out:
	close_gate(&r);
	session__destroy(&r.s);
out_opts:
	free(o.t.pids);
	free(output);
	return ret;
}
