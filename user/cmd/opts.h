/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Command-line options from tables that carry their own help: each command
 * lists its options in groups (its own, and the groups the tracing commands
 * share, cmdopts.h); one parser reads them with getopt_long and one writer
 * prints --help from the same rows, so an option, its range and its default
 * are said where they are checked.
 *
 * Usage errors are one line that ends in "(see 'memtrail CMD --help')".
 */
#ifndef MEMTRAIL_OPTS_H
#define MEMTRAIL_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_type {
	OPT_END = 0,
	OPT_FLAG,	/* sets a bool */
	OPT_STR,	/* sets a const char * to the value */
	OPT_U32,	/* sets a uint32_t, MIN..MAX */
	OPT_U64,	/* sets a uint64_t, MIN..MAX */
	OPT_FN,		/* calls fn(base, value): 0, or -errno once said */
	OPT_HELP,	/* -h, --help: prints the command's usage, exits 0 */
	OPT_DOC,	/* a row of help only (a positional argument): NAME is shown as it is */
};

/* Flags of a row. */
#define OPT_RANGE_SAID	(1U << 0)	/* its help says its range and default: none appended */
#define OPT_NO_DEFAULT	(1U << 1)	/* a range appended, no default (it has none) */

struct opt {
	enum opt_type type;
	const char *name;	/* the long name, without "--" */
	char key;		/* the short letter, or 0 */
	const char *arg;	/* the value's name in --help; NULL: the option takes none */
	size_t off;		/* the field set, an offset into the group's BASE */
	uint64_t min, max;	/* OPT_U32, OPT_U64 */
	int (*fn)(void *base, const char *arg);
	/*
	 * Wrapped to the screen by opts__help; "\n" starts a new line. A number's
	 * row gets ", MIN..MAX (default N)" after it, N read from BASE when help
	 * is printed (the defaults are set before parsing).
	 */
	const char *help;
	unsigned flags;
};

struct opt_group {
	const char *title;	/* "options", "targets (choose one)"; NULL: no heading */
	const struct opt *opts;	/* ended by an OPT_END row */
	void *base;		/* the struct OPT rows set fields of */
};

struct opts_cmd {
	const char *name;	/* "record": for errors, "memtrail record --help" */
	const struct opt_group *groups;
	size_t n_groups;
	/* the usage: a head and tail around opts__help (called on -h) */
	void (*usage)(FILE *f, const struct opts_cmd *c);
	/* the first argument that is not an option ends them all (record's -- CMD) */
	bool stop_at_arg;
	/* it takes no argument but options: one is an error */
	bool no_args;
};

/* A number macro as a string, for help texts: OPT_XSTR(MEMTRAIL_RULES_MAX). */
#define OPT_STR_(x) #x
#define OPT_XSTR(x) OPT_STR_(x)

/* Rows, for the tables. */
#define OPT_ROW_FLAG(NAME, KEY, TYPE, FIELD, HELP) \
	{ .type = OPT_FLAG, .name = NAME, .key = KEY, .off = offsetof(TYPE, FIELD), .help = HELP }
#define OPT_ROW_STR(NAME, KEY, ARG, TYPE, FIELD, HELP) \
	{ .type = OPT_STR, .name = NAME, .key = KEY, .arg = ARG, .off = offsetof(TYPE, FIELD), \
	  .help = HELP }
#define OPT_ROW_U32(NAME, KEY, ARG, TYPE, FIELD, MIN, MAX, HELP, FLAGS) \
	{ .type = OPT_U32, .name = NAME, .key = KEY, .arg = ARG, .off = offsetof(TYPE, FIELD), \
	  .min = MIN, .max = MAX, .help = HELP, .flags = FLAGS }
#define OPT_ROW_FN(NAME, KEY, ARG, FN, HELP) \
	{ .type = OPT_FN, .name = NAME, .key = KEY, .arg = ARG, .fn = FN, .help = HELP }
#define OPT_ROW_DOC(NAME, HELP) { .type = OPT_DOC, .name = NAME, .help = HELP }
#define OPT_ROW_HELP { .type = OPT_HELP, .name = "help", .key = 'h', .help = "this help" }
#define OPT_ROW_END { .type = OPT_END }

/*
 * Parse ARGV (ARGV[0] the command's name); 0 with *FIRST the index of the
 * first argument that is not an option; 1 when --help was printed (the
 * command exits 0); -EINVAL (or another -errno) once the error is said.
 */
int opts__parse(const struct opts_cmd *c, int argc, char **argv, int *first);

/* The options' rows, grouped under their titles, wrapped to 79 columns. */
void opts__help(FILE *f, const struct opts_cmd *c);

/* A usage error of command CMD, one line with the pointer to its --help. */
void opts__usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Text wrapped from column COL to 79 (the first line already at COL). */
void opts__wrap(FILE *f, const char *text, int col);

#endif
