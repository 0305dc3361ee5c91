// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Command-line options from tables that carry their own help (opts.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "log.h"
#include "opts.h"

#define HELP_COL 24	/* where an option's text starts */
#define HELP_WIDTH 79	/* the last column written */

/* The rows of every group in one list: row i of the list is val OPT_VAL + i. */
#define OPT_VAL 256

struct row {
	const struct opt *o;
	void *base;
};

/*
 * While a parse runs, each row's number as it was before (its default):
 * what --help says, whatever came before -h on the line.
 */
static const uint64_t *parse_defaults;

static size_t count_rows(const struct opts_cmd *c)
{
	size_t g, n = 0;
	const struct opt *o;

	for (g = 0; g < c->n_groups; g++)
		for (o = c->groups[g].opts; o->type != OPT_END; o++)
			n++;
	return n;
}

void opts__usage_error(const char *cmd, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log__error("%s (see 'memtrail %s --help')", msg, cmd);
}

static int set_number(const struct row *r, const char *arg)
{
	const struct opt *o = r->o;
	void *field = (char *)r->base + o->off;
	char name[64];

	snprintf(name, sizeof(name), "--%s", o->name);
	if (o->type == OPT_U32)
		return format__option_u32(name, arg, o->min, o->max, field);
	return format__option_u64(name, arg, o->min, o->max, field);
}

static int apply(const struct opts_cmd *c, const struct row *r, const char *arg)
{
	const struct opt *o = r->o;

	switch (o->type) {
	case OPT_FLAG:
		*(bool *)((char *)r->base + o->off) = true;
		return 0;
	case OPT_STR:
		*(const char **)((char *)r->base + o->off) = arg;
		return 0;
	case OPT_U32:
	case OPT_U64:
		return set_number(r, arg);
	case OPT_FN:
		return o->fn(r->base, arg);
	case OPT_HELP:
		c->usage(stdout, c);
		return 1;
	default:
		return -EINVAL;
	}
}

int opts__parse(const struct opts_cmd *c, int argc, char **argv, int *first)
{
	size_t n = count_rows(c), i = 0, g, k = 0, n_long = 0;
	struct option *longopts = calloc(n + 1, sizeof(*longopts));
	struct row *rows = calloc(n + 1, sizeof(*rows));
	char *shorts = calloc(3 * n + 3, 1);
	uint64_t *defaults = calloc(n + 1, sizeof(*defaults));
	const struct opt *o;
	int ch, err = 0;

	if (!longopts || !rows || !shorts || !defaults) {
		log__error("out of memory");
		err = -ENOMEM;
		goto out;
	}
	shorts[k++] = c->stop_at_arg ? '+' : ':';
	if (c->stop_at_arg)
		shorts[k++] = ':';
	for (g = 0; g < c->n_groups; g++) {
		for (o = c->groups[g].opts; o->type != OPT_END; o++, i++) {
			rows[i] = (struct row){ o, c->groups[g].base };
			if (o->type == OPT_DOC)
				continue;	/* help only: no name to type */
			longopts[n_long++] = (struct option){ o->name,
							      o->arg ? required_argument : no_argument,
							      NULL, OPT_VAL + (int)i };
			if (o->key) {
				shorts[k++] = o->key;
				if (o->arg)
					shorts[k++] = ':';
			}
		}
	}
	for (i = 0; i < n; i++) {
		const struct opt *r = rows[i].o;

		if (r->type == OPT_U32)
			defaults[i] = *(uint32_t *)((char *)rows[i].base + r->off);
		else if (r->type == OPT_U64)
			defaults[i] = *(uint64_t *)((char *)rows[i].base + r->off);
	}
	parse_defaults = defaults;
	/* 0, not 1: glibc reads the optstring's '+' again only on a fresh start */
	optind = 0;
	opterr = 0;
	optopt = 0;
	while (!err && (ch = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
		const struct row *r = NULL;

		if (ch >= OPT_VAL && ch < OPT_VAL + (int)n) {
			r = &rows[ch - OPT_VAL];
		} else if (ch != ':' && ch != '?') {
			for (i = 0; i < n && !r; i++)
				if (rows[i].o->key && rows[i].o->key == ch)
					r = &rows[i];
		}
		if (r) {
			err = apply(c, r, optarg);
		} else if (ch == ':') {
			opts__usage_error(c->name, "option '%s' needs a value", argv[optind - 1]);
			err = -EINVAL;
		} else {
			if (optopt && optopt < OPT_VAL)
				opts__usage_error(c->name, "unknown option '-%c'", optopt);
			else
				opts__usage_error(c->name, "unknown option '%s'", argv[optind - 1]);
			err = -EINVAL;
		}
	}
	if (!err && c->no_args && optind < argc) {
		opts__usage_error(c->name, "unexpected argument '%s'", argv[optind]);
		err = -EINVAL;
	}
	*first = optind;
out:
	parse_defaults = NULL;
	free(defaults);
	free(longopts);
	free(rows);
	free(shorts);
	return err;
}

void opts__wrap(FILE *f, const char *text, int col)
{
	int at = col;
	const char *p = text;

	while (*p) {
		size_t w;

		if (*p == '\n') {
			fprintf(f, "\n%*s", col, "");
			at = col;
			p++;
			continue;
		}
		if (*p == ' ') {
			p++;
			continue;
		}
		w = strcspn(p, " \n");
		if (at > col && at + 1 + (int)w > HELP_WIDTH) {
			fprintf(f, "\n%*s", col, "");
			at = col;
		}
		if (at > col) {
			fputc(' ', f);
			at++;
		}
		fwrite(p, 1, w, f);
		at += w;
		p += w;
	}
	fputc('\n', f);
}

/* "MIN..MAX (default N)" of a number's row, row I of the command's. */
static void range_of(const struct row *r, size_t i, char *buf, size_t len)
{
	const struct opt *o = r->o;
	uint64_t v = parse_defaults ? parse_defaults[i] :
		     o->type == OPT_U32 ? *(uint32_t *)((char *)r->base + o->off) :
					  *(uint64_t *)((char *)r->base + o->off);
	int n = snprintf(buf, len, "%llu..%llu", (unsigned long long)o->min,
			 (unsigned long long)o->max);

	if (!(o->flags & OPT_NO_DEFAULT) && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - n, " (default %llu)", (unsigned long long)v);
}

/* A row's help, with its range in place of "{range}" or after it. */
static void row_text(const struct row *r, size_t i, char *buf, size_t len)
{
	const struct opt *o = r->o;
	const char *help = o->help ? o->help : "", *at;
	char range[96];

	if ((o->type != OPT_U32 && o->type != OPT_U64) || (o->flags & OPT_RANGE_SAID)) {
		snprintf(buf, len, "%s", help);
		return;
	}
	range_of(r, i, range, sizeof(range));
	at = strstr(help, "{range}");
	if (at)
		snprintf(buf, len, "%.*s%s%s", (int)(at - help), help, range, at + strlen("{range}"));
	else
		snprintf(buf, len, "%s, %s", help, range);
}

void opts__help(FILE *f, const struct opts_cmd *c)
{
	char head[128], text[2048];
	size_t g, i = 0;
	const struct opt *o;

	for (g = 0; g < c->n_groups; g++) {
		if (c->groups[g].title)
			fprintf(f, "%s%s:\n", g ? "\n" : "", c->groups[g].title);
		for (o = c->groups[g].opts; o->type != OPT_END; o++, i++) {
			struct row r = { o, c->groups[g].base };
			int n;

			if (o->type == OPT_DOC)
				n = snprintf(head, sizeof(head), "  %s", o->name);
			else if (o->key)
				n = snprintf(head, sizeof(head), "  -%c, --%s%s%s", o->key, o->name,
					     o->arg ? " " : "", o->arg ? o->arg : "");
			else
				n = snprintf(head, sizeof(head), "      --%s%s%s", o->name,
					     o->arg ? " " : "", o->arg ? o->arg : "");
			row_text(&r, i, text, sizeof(text));
			if (n < HELP_COL)
				fprintf(f, "%-*s", HELP_COL, head);
			else
				fprintf(f, "%s\n%*s", head, HELP_COL, "");
			opts__wrap(f, text, HELP_COL);
		}
	}
}
