// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * libFuzzer harness for 'memtrail report': the input is a trail file (a
 * trail, a watch snapshot or a watch verdict file, as anyone may hand one
 * over), read as report reads it and, when read, drawn by every renderer
 * report has: the text table, JSON, HTML, Perfetto and pprof.
 *
 * Besides the sanitizers' findings it stops at a broken promise:
 *   - a trail refused without a one-line reason (a control byte of the
 *     file quoted in it could end the line or drive the terminal);
 *   - a renderer failing on a trail that was read (report would then say
 *     "Cannot allocate memory" about a file that is merely odd), but for a
 *     value its format cannot hold (ERANGE);
 *   - a descriptor or a file left behind by an input.
 * The input lives in a memfd, read through /proc/self/fd/N: the reader's own
 * path (open, regular-file check, read in pieces), nothing on disk. Files
 * go to a directory made once per process and removed at exit.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "html.h"
#include "perfetto.h"
#include "pprof.h"
#include "table.h"
#include "trail.h"
#include "trailstream.h"

#define TOP 5		/* report's default --top */

static int input_fd = -1;
static char input_path[32];
static char out_dir[PATH_MAX];
static char out_html[PATH_MAX + 16], out_perfetto[PATH_MAX + 16], out_pprof[PATH_MAX + 16];
static FILE *devnull;

/* A broken promise: said, then a crash for libFuzzer to keep the input of. */
__attribute__((format(printf, 1, 2), noreturn))
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "fuzz_report: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

static int lowest_free_fd(void)
{
	int fd = fcntl(input_fd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		die("cannot dup: %s", strerror(errno));
	close(fd);
	return fd;
}

static void remove_out_dir(void)
{
	unlink(out_html);
	unlink(out_perfetto);
	unlink(out_pprof);
	rmdir(out_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");

	(void)argc;
	(void)argv;
	input_fd = memfd_create("trail", MFD_CLOEXEC);
	if (input_fd < 0)
		die("cannot create a memfd: %s", strerror(errno));
	snprintf(input_path, sizeof(input_path), "/proc/self/fd/%d", input_fd);
	snprintf(out_dir, sizeof(out_dir), "%s/memtrail-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(out_dir))
		die("cannot create a directory for the outputs: %s", strerror(errno));
	snprintf(out_html, sizeof(out_html), "%s/report.html", out_dir);
	snprintf(out_perfetto, sizeof(out_perfetto), "%s/trace.json", out_dir);
	snprintf(out_pprof, sizeof(out_pprof), "%s/sites.pb.gz", out_dir);
	atexit(remove_out_dir);
	devnull = fopen("/dev/null", "we");
	if (!devnull)
		die("cannot open /dev/null: %s", strerror(errno));
	return 0;
}

/* The input as the content of the memfd. */
static void put_input(const uint8_t *data, size_t size)
{
	size_t off = 0;

	if (ftruncate(input_fd, 0))
		die("cannot truncate the memfd: %s", strerror(errno));
	while (off < size) {
		ssize_t n = pwrite(input_fd, data + off, size - off, off);

		if (n <= 0)
			die("cannot write the memfd: %s", n ? strerror(errno) : "short write");
		off += n;
	}
}

/* What report prints without --json: the header line and every table. */
static void render_table(const struct trail *t)
{
	fprintf(devnull, "trail %s: %s, started %s\n", input_path,
		t->command ? t->command : "?", t->started);
	table__print_summary(devnull, t);
	table__print_phases(devnull, t);
	table__print_verdicts(devnull, t);
	table__print_device_failures(devnull, t);
	table__print_sites(devnull, t, TOP);
	if (fflush(devnull))
		die("cannot write the table: %s", strerror(errno));
}

/* report --json */
static void render_json(const struct trail *t)
{
	json_t *root = trail__to_json(t, false);

	if (!root)
		die("report --json: no JSON document of a trail that was read");
	if (json_dumpf(root, devnull, JSON_INDENT(2)) || fflush(devnull))
		die("report --json: cannot write the JSON document");
	json_decref(root);
}

/*
 * Renderer WHAT wrote PATH (ERR 0), removed here; or refused a value its
 * format cannot hold (-ERANGE: report says so in a line).
 */
static void check_written(const char *what, int err, const char *path)
{
	if (err == -ERANGE)
		return;
	if (err)
		die("report --%s failed on a trail that was read: %s", what, strerror(-err));
	if (unlink(path))
		die("report --%s wrote no '%s': %s", what, path, strerror(errno));
}

/*
 * Nothing left of the input: no file in the outputs' directory, no
 * descriptor open that was free before it (FREE_FD; taken per input, as
 * libFuzzer's symbolizer may hold new pipes between inputs).
 */
static void check_clean(int free_fd)
{
	DIR *d = opendir(out_dir);
	struct dirent *e;

	if (!d)
		die("cannot read the outputs' directory: %s", strerror(errno));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			die("a file is left in the outputs' directory: %s", e->d_name);
	closedir(d);
	if (lowest_free_fd() != free_fd)
		die("a descriptor is left open after an input");
}

/* A reason, on one line and with no terminal control. */
static bool one_line(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* X and Y as JSON (TIMELINE: their samples too) are the same, else die saying WHAT differs. */
static void same_trails(const struct trail *x, const struct trail *y, bool timeline,
			const char *what)
{
	json_t *a = trail__to_json(x, timeline), *b = trail__to_json(y, timeline);
	char *sa = a ? json_dumps(a, JSON_COMPACT) : NULL;
	char *sb = b ? json_dumps(b, JSON_COMPACT) : NULL;

	if (!sa || !sb || strcmp(sa, sb))
		die("%s", what);
	free(sa);
	free(sb);
	json_decref(a);
	json_decref(b);
}

/*
 * report without a timeline to draw reads the trail without its samples
 * (trail__read_levels): the same verdict, the same reason, and the same
 * --json document as the trail read whole.
 */
static void check_levels(const struct trail *t, int ret, const char *err)
{
	char lerr[512] = "";
	struct trail l;

	if (trail__read_levels(&l, input_path, lerr, sizeof(lerr)) != ret)
		die("trail__read_levels: %s where trail__read: %s", ret ? "read" : lerr,
		    ret ? err : "read");
	if (ret) {
		if (strcmp(lerr, err))
			die("trail__read_levels refused with '%s', trail__read with '%s'", lerr, err);
		return;
	}
	render_table(&l);
	same_trails(t, &l, false, "report --json differs when the samples are not kept");
	trail__free(&l);
}

/*
 * The timelines' fast path (trailstream.c) against yajl alone: the same
 * verdict, the same reason, the same trail with every sample.
 */
static void check_fast(const struct trail *t, int ret, const char *err)
{
	char serr[512] = "";
	struct trail s;
	int sret;

	trailstream__set_fast(false);
	sret = trail__read(&s, input_path, serr, sizeof(serr));
	trailstream__set_fast(true);
	if (sret != ret || (ret && strcmp(serr, err)))
		die("the fast path: %s; yajl alone: %s", ret ? err : "read", sret ? serr : "read");
	if (ret)
		return;
	same_trails(t, &s, true, "the trail read by the fast path differs from yajl's alone");
	trail__free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int free_fd = lowest_free_fd();
	struct trail t;
	char err[512];
	size_t n;
	bool decimated;
	int ret;

	put_input(data, size);
	ret = trail__read(&t, input_path, err, sizeof(err));
	check_fast(&t, ret, err);
	check_levels(&t, ret, err);
	if (ret) {
		if (!one_line(err))
			die("a trail refused without a one-line reason: '%s'", err);
		check_clean(free_fd);
		return 0;
	}
	render_table(&t);
	render_json(&t);
	check_written("html", html__write(&t, out_html, &decimated), out_html);
	check_written("perfetto", perfetto__write(&t, out_perfetto, &n), out_perfetto);
	check_written("pprof", pprof__write(&t, out_pprof, &n), out_pprof);
	trail__free(&t);
	check_clean(free_fd);
	return 0;
}
