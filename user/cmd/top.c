// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail top: a live table of what processes (or pods) hold, per kind,
 * with the phase each is in, its peak and its trend, refreshed every
 * interval. On a terminal it draws one screen in place and quits on q,
 * Ctrl-C or SIGTERM; elsewhere it prints one plain table per interval.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "clock.h"
#include "cmdopts.h"
#include "commands.h"
#include "container.h"
#include "format.h"
#include "kinds.h"
#include "log.h"
#include "loop.h"
#include "opts.h"
#include "proc.h"
#include "sanitize.h"
#include "session.h"
#include "sites.h"
#include "table.h"
#include "term.h"
#include "topview.h"

#define DEFAULT_INTERVAL_MS 1000
#define DEFAULT_SORT MEMTRAIL_KIND_RSS_ANON
/* the trend: bytes per second over this many intervals */
#define TREND_INTERVALS 5
/* per target: phases listed and phase names aggregated (top shows the open one) */
#define TOP_PHASE_HISTORY 2
#define TOP_PHASE_NAMES 2
#define SCAN_PERIOD_MS 2000
/* how long a cgroup's pod or container name is taken as known */
#define GROUP_TTL_MS 10000
#define TITLE_LINES 2
/* pod view labels besides "namespace/pod" */
#define LABEL_POD "pod:"
#define LABEL_CONTAINER "ctr:"
#define LABEL_NONE "-"
/* the sites pane: lines of sites shown, and what a mapping section needs for deep stacks */
#define PANE_SITES 8
#define DEEP_FROM (1 << 20)

struct top_opts {
	uint32_t interval_ms;
	uint32_t iterations;		/* 0: until stopped */
	enum topview_by by;
	int sort;
	struct target_opts t;	/* --pid or --cgroup */
	struct engine_opts e;
	bool no_sites;
};

/* The pod view's label of a cgroup path, looked up again after a while. */
struct group_of {
	char *cgroup;
	char label[TOPVIEW_KEY_LEN];
	uint64_t until_ms;
	bool used;
};

struct top {
	struct session s;
	const struct top_opts *o;
	struct topview view;
	struct group_of *groups;
	size_t n_groups, cap_groups;
	bool screen;		/* stdout is a terminal: draw in place */
	bool out_failed;	/* stdout cannot be written: stop */
	bool out_error;		/* and not because its reader went away */
	uint32_t frames;	/* drawn so far (-n) */
	size_t cursor;		/* the row selected (a screen) */
	int esc;		/* an escape sequence's bytes read so far (arrow keys) */
	uint32_t sites_pid;	/* the process whose sites the pane shows; 0: no pane */
	struct table_line pane[PANE_SITES];
	size_t n_pane;
};

/* ---- pods ---- */

/*
 * "namespace/pod" from the kubelet's log directory, "pod:UID" when it has no
 * entry, "ctr:ID" (12 digits) for a container outside a pod, "-" for the rest.
 */
static void group_label(const char *cgroup, const char *pods_dir, char *buf, size_t len)
{
	struct container_ref c;
	struct pod_names n;

	snprintf(buf, len, LABEL_NONE);
	if (!cgroup || container__parse(cgroup, &c))
		return;
	if (c.pod_uid[0] && !container__pod_names(pods_dir, c.pod_uid, c.id, &n))
		snprintf(buf, len, "%s/%s", n.namespace, n.pod);
	else if (c.pod_uid[0])
		snprintf(buf, len, LABEL_POD "%s", c.pod_uid);
	else if (c.id[0])
		snprintf(buf, len, LABEL_CONTAINER "%.12s", c.id);
}

static const char *group_of(struct top *t, const char *cgroup, uint64_t now)
{
	struct group_of *g;
	size_t i;

	if (!cgroup)
		return LABEL_NONE;
	for (i = 0; i < t->n_groups; i++) {
		g = &t->groups[i];
		if (strcmp(g->cgroup, cgroup))
			continue;
		if (now >= g->until_ms) {
			group_label(cgroup, t->o->e.pods_dir, g->label, sizeof(g->label));
			g->until_ms = now + GROUP_TTL_MS;
		}
		g->used = true;
		return g->label;
	}
	if (array__grow((void **)&t->groups, &t->cap_groups, t->n_groups + 1, sizeof(*g)))
		return LABEL_NONE;
	g = &t->groups[t->n_groups];
	g->cgroup = strdup(cgroup);
	if (!g->cgroup)
		return LABEL_NONE;
	group_label(cgroup, t->o->e.pods_dir, g->label, sizeof(g->label));
	g->until_ms = now + GROUP_TTL_MS;
	g->used = true;
	t->n_groups++;
	return g->label;
}

/* Forget the cgroups no live process is in. */
static void sweep_groups(struct top *t)
{
	size_t i, j;

	for (i = j = 0; i < t->n_groups; i++) {
		if (t->groups[i].used) {
			t->groups[i].used = false;
			t->groups[j++] = t->groups[i];
		} else {
			free(t->groups[i].cgroup);
		}
	}
	t->n_groups = j;
}

/* ---- drawing ---- */

static int refresh_view(struct top *t, uint64_t now)
{
	uint64_t window = (uint64_t)TREND_INTERVALS * t->o->interval_ms;
	size_t i;

	topview__begin(&t->view);
	for (i = 0; i < t->s.trail.n_targets; i++) {
		const struct trail_target *tt = &t->s.trail.targets[i];
		const char *group = NULL;

		if (tt->exited || tt->end_ms)
			continue;
		if (t->o->by == TOPVIEW_BY_POD)
			group = group_of(t, tt->cgroup, now);
		if (topview__add(&t->view, tt, group, now, window))
			return -ENOMEM;
	}
	if (t->o->by == TOPVIEW_BY_POD)
		sweep_groups(t);
	return topview__end(&t->view, now);
}

/* The pane's lines: the sites of sites_pid holding the most live bytes now. */
static void refresh_pane(struct top *t)
{
	struct trail_target *tt = t->sites_pid ? session__live(&t->s, t->sites_pid) : NULL;
	struct trail_sites *ts;

	t->n_pane = 0;
	if (!tt || !t->s.sites)
		return;
	sites__harvest(t->s.sites);
	ts = sites__collect(t->s.sites, tt);
	t->n_pane = table__live_lines(ts, t->pane, PANE_SITES);
	trail_sites__free(ts);
}

/* Lines the pane takes below the table: an empty one, its title, its sites (one at least). */
static unsigned pane_lines(const struct top *t)
{
	return t->sites_pid ? 2 + (t->n_pane ? (unsigned)t->n_pane : 1) : 0;
}

/* Line I of the pane (pane_lines), at most COLS columns (0: any). */
static void pane_line(struct top *t, unsigned i, char *buf, size_t len, unsigned cols)
{
	const struct trail_target *tt = session__live(&t->s, t->sites_pid);
	char size[32], comm[SANITIZE_LEN(MEMTRAIL_COMM_LEN)];

	if (i == 0) {
		buf[0] = '\0';
	} else if (i == 1) {
		snprintf(buf, len, "sites of %u (%s), by bytes held now:", t->sites_pid,
			 tt ? sanitize__str(comm, sizeof(comm), tt->comm) : "gone");
	} else if (!t->n_pane) {
		snprintf(buf, len, "  %s", !t->s.sites ? "(no sites: --no-sites)" :
			 !tt ? "(the process ended)" :
			 "(none of what it allocated since top started is held)");
	} else {
		const struct table_line *l = &t->pane[i - 2];
		char more[32] = "";

		if (l->chains > 1)
			snprintf(more, sizeof(more), " [%zu chains]", l->chains);
		snprintf(buf, len, "  %-12s %10s  %s%s", kind__name(l->kind),
			 format__bytes(size, sizeof(size), (int64_t)l->inuse), l->label, more);
	}
	if (cols && strlen(buf) > cols)
		buf[cols] = '\0';
}

/* Rows that are pods: not containers outside pods, not the rest. */
static size_t count_pods(const struct topview *v)
{
	size_t pods = 0, i;

	for (i = 0; i < v->n_rows; i++)
		pods += strcmp(v->rows[i].key, LABEL_NONE) &&
			strncmp(v->rows[i].key, LABEL_CONTAINER, strlen(LABEL_CONTAINER));
	return pods;
}

/* The first line: what is shown, and how to quit when it fits COLS (0: any). */
static void title(struct top *t, char *buf, size_t len, unsigned cols)
{
	static const char hint[] = "; q quits";
	uint64_t lost[MEMTRAIL_LOST_MAX], total = 0;
	size_t procs = t->view.n_procs, pods, n;
	char clock[16], who[64];
	time_t now = time(NULL);
	struct tm tm;
	int k;

	tracer__lost(t->s.tracer, lost);
	for (k = 0; k < MEMTRAIL_LOST_MAX; k++)
		total += lost[k];
	localtime_r(&now, &tm);
	strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	if (t->o->by == TOPVIEW_BY_POD) {
		pods = count_pods(&t->view);
		snprintf(who, sizeof(who), "%zu pod%s, %zu process%s", pods, pods == 1 ? "" : "s",
			 procs, procs == 1 ? "" : "es");
	} else {
		snprintf(who, sizeof(who), "%zu process%s", procs, procs == 1 ? "" : "es");
	}
	n = snprintf(buf, len, "memtrail top %s, %s, sort %s, every %.1f s, lost %llu", clock,
		     who, kind__name(t->o->sort), t->o->interval_ms / 1000.0,
		     (unsigned long long)total);
	if (t->screen && n + sizeof(hint) - 1 <= cols && n + sizeof(hint) <= len)
		memcpy(buf + n, hint, sizeof(hint));
	if (cols && strlen(buf) > cols)
		buf[cols] = '\0';
}

/* One line of a frame: on a screen, the rest of the row erased. */
static void emit_line(const struct top *t, FILE *fp, const char *text, unsigned width,
		      bool last)
{
	fputs(text, fp);
	if (!t->screen) {
		fputc('\n', fp);
		return;
	}
	/* a full row leaves the cursor past the edge, where erasing would eat a character */
	if (strlen(text) < width)
		fputs("\x1b[K", fp);
	if (!last)
		fputs("\r\n", fp);
}

/*
 * The screen: title, column header, as many rows as fit. Built in memory
 * and written at once, so the terminal never shows half a frame. Not on a
 * terminal: the whole table, then an empty line.
 */
static void draw(struct top *t)
{
	unsigned cols = 0, lines = 0, n_lines, i, pane;
	struct topview_layout l;
	char buf[1024], *frame = NULL;
	size_t frame_len = 0;
	FILE *fp;

	if (t->screen && !term__size(STDOUT_FILENO, &cols, &lines))
		cols = 80, lines = 24;
	if (t->screen && cols > sizeof(buf) - 1)
		cols = sizeof(buf) - 1;
	fp = open_memstream(&frame, &frame_len);
	if (!fp) {
		log__error("out of memory");
		t->out_failed = t->out_error = true;
		return;
	}
	topview__layout(&t->view, t->screen ? cols : 0, &l);
	pane = pane_lines(t);
	n_lines = t->view.n_rows + TITLE_LINES;
	if (t->screen && pane + TITLE_LINES >= lines)
		pane = 0;	/* no room for it */
	if (t->screen && n_lines + pane > lines)
		n_lines = lines - pane;
	if (t->screen)
		fputs("\x1b[H", fp);
	for (i = 0; i < n_lines; i++) {
		bool selected = t->screen && i >= TITLE_LINES && i - TITLE_LINES == t->cursor;

		if (i == 0)
			title(t, buf, sizeof(buf), cols);
		else if (i == 1)
			topview__header(&t->view, &l, buf, sizeof(buf));
		else
			topview__line(&t->view, &l, i - TITLE_LINES, buf, sizeof(buf));
		/* the selected row in reverse video */
		if (selected)
			fputs("\x1b[7m", fp);
		emit_line(t, fp, buf, cols, i + 1 == n_lines + pane);
		if (selected)
			fputs("\x1b[m", fp);
	}
	for (i = 0; i < pane; i++) {
		pane_line(t, i, buf, sizeof(buf), cols);
		emit_line(t, fp, buf, cols, i + 1 == pane);
	}
	/* on a screen, nothing left below of a bigger frame */
	fputs(t->screen ? "\x1b[J" : "\n", fp);
	if (fclose(fp)) {
		log__error("out of memory");
		t->out_failed = t->out_error = true;
	} else if (fwrite(frame, 1, frame_len, stdout) != frame_len || fflush(stdout)) {
		/* a reader that went away (top | head) is an end, not an error */
		if (errno != EPIPE) {
			log__error("cannot write the table: %s", strerror(errno));
			t->out_error = true;
		}
		t->out_failed = true;
	}
	free(frame);
}

/* ---- options ---- */

/* --sort's help, "... one of: mapped rss_anon ...": the kinds top shows (not heap) */
static const char *sort_help(void)
{
	static char buf[512];
	size_t n;
	int k;

	n = snprintf(buf, sizeof(buf), "the kind rows are sorted by, whose PEAK and TREND are "
		     "shown (default %s); one of:", kind__name(DEFAULT_SORT));
	for (k = 0; k < MEMTRAIL_KIND_MAX && n < sizeof(buf); k++)
		if (k != MEMTRAIL_KIND_HEAP)
			n += snprintf(buf + n, sizeof(buf) - n, " %s", kind__name(k));
	return buf;
}

static int opt_sort(void *base, const char *arg)
{
	struct top_opts *o = base;
	int k = kind__from_name(arg);

	if (k < 0 || k == MEMTRAIL_KIND_HEAP) {
		log__error("invalid --sort '%s': give a kind top shows (rss_anon, rss_file, "
			   "rss_shmem, mapped, cuda_device, cuda_host, cuda_managed, "
			   "neuron_device, neuron_host)", arg);
		return -EINVAL;
	}
	o->sort = k;
	return 0;
}

static int opt_by(void *base, const char *arg)
{
	struct top_opts *o = base;

	if (!strcmp(arg, "process")) {
		o->by = TOPVIEW_BY_PROCESS;
	} else if (!strcmp(arg, "pod")) {
		o->by = TOPVIEW_BY_POD;
	} else {
		log__error("invalid --by '%s': give 'process' or 'pod'", arg);
		return -EINVAL;
	}
	return 0;
}

static const struct opt target_rows[] = {
	CMDOPTS_ROW_PID,
	CMDOPTS_ROW_CGROUP,
	OPT_ROW_END,
};

static void usage(FILE *f, const struct opts_cmd *c)
{
	fprintf(f,
"usage: memtrail top [options]\n"
"\n"
"A live view of what every process (or pod) holds, per kind of memory, with\n"
"the phase it is in, its peak and its trend, refreshed every interval. On a\n"
"terminal: one screen redrawn in place; q or Ctrl-C quits; up and down (or k\n"
"and j) select a row, s or Enter shows the allocation sites of its process\n"
"below the table (the code holding its memory now, as 'memtrail report' names\n"
"it) or hides them. When stdout is not a terminal: one plain table per\n"
"interval, without escape codes. With --pid, the first PID's sites are shown\n"
"from the start.\n"
"\n");
	opts__help(f, c);
	fprintf(f,
"\n"
"Columns: PID, COMM and PHASE of the process (the pod view: POD, PROCS, and the\n"
"PHASE of its largest process); bytes now of RSS_ANON, RSS_FILE and MAPPED, of\n"
"the sort kind, and of device kinds some process holds (K, M, G: KiB, MiB,\n"
"GiB); PEAK, the sort kind's highest level since top started, exact (pods: the\n"
"highest total seen at a refresh); TREND, its change per second over the last\n"
"%d intervals. Columns that do not fit the screen are left out, rows that do\n"
"not fit are not shown. Needs root and BTF.\n", TREND_INTERVALS);
}

/* 0, 1 when --help was printed, or -EINVAL once the error is said. */
static int parse_opts(int argc, char **argv, struct top_opts *o)
{
	/* here, not static: --sort's help is made at run time from the kinds' table */
	const struct opt top_rows[] = {
		OPT_ROW_U32("interval", 'i', "MS", struct top_opts, interval_ms, 100, 60000,
			    "refresh interval", 0),
		OPT_ROW_U32("iterations", 'n', "N", struct top_opts, iterations, 1, 1000000,
			    "print N plain tables (as when not on a terminal), then exit, {range} "
			    "(default: until q, Ctrl-C or SIGTERM)", OPT_NO_DEFAULT),
		OPT_ROW_FN("by", 'b', "WHAT", opt_by,
			   "'process' (default) or 'pod': one row per pod, from the cgroup paths of "
			   "the kubelet and the container runtimes; processes outside a pod grouped "
			   "by container, or '-'"),
		OPT_ROW_FN("sort", 's', "KIND", opt_sort, sort_help()),
		OPT_ROW_FLAG("no-sites", 0, struct top_opts, no_sites,
			     "no allocation sites (the pane of a selected process, and --pid's)"),
		OPT_ROW_END,
	};
	const struct opt_group groups[] = {
		{ "options", top_rows, o },
		{ NULL, target_rows, &o->t },
		{ NULL, cmdopts__engine, &o->e },
		{ NULL, cmdopts__tail, NULL },
	};
	const struct opts_cmd cmd = { .name = "top", .groups = groups,
				      .n_groups = sizeof(groups) / sizeof(groups[0]),
				      .usage = usage, .no_args = true };
	int first, err;

	o->interval_ms = DEFAULT_INTERVAL_MS;
	o->sort = DEFAULT_SORT;
	o->by = TOPVIEW_BY_PROCESS;
	cmdopts__engine_defaults(&o->e);
	err = opts__parse(&cmd, argc, argv, &first);
	if (err)
		return err;
	if (o->t.n_pids && o->t.n_cgroups) {
		opts__usage_error("top", "too many targets: give --pid or --cgroup, not both");
		return -EINVAL;
	}
	return 0;
}

static int build_config(const struct top_opts *o, struct tracer_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cmdopts__engine_config(&o->e, cfg);
	/* as watch takes them: mapping and device sites, deep for large sections */
	cfg->sites = (struct tracer_sites){
		.mapping = !o->no_sites,
		.device = !o->no_sites,
		.map_deep = !o->no_sites,
		.map_deep_min = DEEP_FROM,
	};
	return cmdopts__targets(&o->t, cfg);
}

/* ---- running ---- */

/* Forget targets that ended: top shows the living. */
static void sweep(struct top *t)
{
	session__remove_ended(&t->s, NULL, NULL);
}

/* After each sample (loop.h): a frame; the last of -n N stops. */
static int top_sampled(void *ctx, uint64_t now)
{
	struct top *t = ctx;

	if (refresh_view(t, now)) {
		log__error("out of memory");
		return -ENOMEM;
	}
	if (t->view.n_rows && t->cursor >= t->view.n_rows)
		t->cursor = t->view.n_rows - 1;
	refresh_pane(t);
	term__resized = 0;
	draw(t);
	return t->o->iterations && ++t->frames >= t->o->iterations;
}

/*
 * Up and down (arrows, k, j) select a row; s or Enter shows the sites of its
 * process below the table, or hides them. Whether the screen changed.
 */
static bool on_key(struct top *t, int key)
{
	int move = 0;

	if (t->esc == 1 && key == '[') {
		t->esc = 2;
		return false;
	}
	if (t->esc == 2)
		move = key == 'A' ? -1 : key == 'B' ? 1 : 0;
	t->esc = key == 27;
	if (key == 'k')
		move = -1;
	else if (key == 'j')
		move = 1;
	if (move < 0 && t->cursor > 0) {
		t->cursor--;
		return true;
	}
	if (move > 0 && t->cursor + 1 < t->view.n_rows) {
		t->cursor++;
		return true;
	}
	if ((key == 's' || key == '\r' || key == '\n') && t->cursor < t->view.n_rows) {
		uint32_t pid = t->view.rows[t->cursor].pid;

		t->sites_pid = t->sites_pid == pid ? 0 : pid;
		refresh_pane(t);
		return true;
	}
	return false;
}

/* Each turn: the terminal resized or 'q' pressed, ended targets swept, stdout gone. */
static int top_turn(void *ctx, uint64_t now)
{
	struct top *t = ctx;
	int key;

	(void)now;
	if (term__resized) {
		term__resized = 0;
		draw(t);
	}
	while ((key = term__key()) >= 0) {
		if (key == 'q' || key == 'Q')
			return 1;
		if (on_key(t, key))
			draw(t);
	}
	sweep(t);
	return t->out_failed;
}

static void free_top(struct top *t)
{
	size_t i;

	for (i = 0; i < t->n_groups; i++)
		free(t->groups[i].cgroup);
	free(t->groups);
	topview__free(&t->view);
	session__destroy(&t->s);
}

int cmd_top(int argc, char **argv)
{
	struct loop_hooks loop = { .until_signal = true, .sampled = top_sampled, .turn = top_turn };
	struct top_opts o = { 0 };
	struct tracer_config cfg;
	struct top t = { 0 };
	int ret = 1, err;
	size_t i;

	err = parse_opts(argc, argv, &o);
	if (err) {
		free(o.t.pids);
		return err > 0 ? 0 : 2;
	}
	if (build_config(&o, &cfg)) {
		free(o.t.pids);
		return 1;
	}
	if (trail__init(&t.s.trail)) {
		log__error("out of memory");
		free(o.t.pids);
		return 1;
	}
	t.o = &o;
	/* with -n, tables to keep: plain ones, as for a pipe */
	t.screen = isatty(STDOUT_FILENO) && !o.iterations;
	topview__init(&t.view, o.by, o.sort);
	t.s.trail.interval_ms = o.interval_ms;
	t.s.trail.phase_history = TOP_PHASE_HISTORY;
	t.s.trail.phase_names = TOP_PHASE_NAMES;
	t.s.trail.kinds = kind__sourced();
	t.s.trail.command = strdup("top");
	/* the timeline the trend needs, and no more */
	t.s.keep_ms = (uint64_t)(TREND_INTERVALS + 1) * o.interval_ms;
	t.s.pods_dir = o.e.pods_dir;
	t.s.remove_ended = true;
	session__install_signals();
	t.s.t0_ns = clock__mono_ns();
	trail__set_started(&t.s.trail);
	if (tracer__open(&t.s.tracer, &cfg, session__on_event, &t.s))
		goto out;
	for (i = 0; i < cfg.n_pids; i++)
		if (!session__new_target(&t.s, cfg.pids[i], proc__ppid(cfg.pids[i]), NULL, 0, false))
			goto out;
	/* twice: the first pass adopts children of listed PIDs, the second theirs */
	if (tracer__scan(t.s.tracer) || (o.t.n_pids && tracer__scan(t.s.tracer)))
		goto out;
	tracer__poll(t.s.tracer, 0);
	if (session__open_devices(&t.s, o.e.no_devices))
		goto out;
	if (!o.no_sites) {
		if (session__open_sites(&t.s, NULL))
			goto out;
		sites__deep_cap(t.s.sites, tracer__stacks(&cfg));
	}
	/* --pid: the first one's sites below the table from the start */
	if (cfg.n_pids)
		t.sites_pid = cfg.pids[0];
	if (t.screen && (err = term__open())) {
		log__error("cannot use the terminal: %s", strerror(-err));
		goto out;
	}
	loop.interval_ms = o.interval_ms;
	loop.scan_ms = o.t.n_cgroups ? SCAN_PERIOD_MS : 0;
	ret = loop__run(&t.s, &loop, &t) < 0 ? 1 : t.out_error;
	/* the screen back first: detaching can take a moment */
	term__close();
	if (t.s.err)
		log__warn("out of memory while tracing: some processes were not shown");
out:
	free_top(&t);
	free(o.t.pids);
	return ret;
}
