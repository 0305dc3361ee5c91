/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Checking JSON read from a file (a trail is anyone's file): each getter
 * checks one member's type and range and says what is wrong with it by its
 * path in the document, "targets[3].pid: out of range (4294967297)".
 */
#ifndef MEMTRAIL_SCHEMA_H
#define MEMTRAIL_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#define SCHEMA_PATH_LEN 256

/* Flags of a member: absent is an error; null is as good as absent (but present). */
#define SCHEMA_NEED 1
#define SCHEMA_NULL 2

struct schema {
	char *err;			/* the first error, one line */
	size_t errlen;
	char path[SCHEMA_PATH_LEN];	/* where the check is: "targets[3].phases[0]" */
	size_t len;
};

void schema__init(struct schema *s, char *err, size_t errlen);
/* Go down into member KEY, or element I; returns where schema__up goes back to. */
size_t schema__key(struct schema *s, const char *key);
size_t schema__index(struct schema *s, size_t i);
void schema__up(struct schema *s, size_t at);
/* "PATH: WHY" as the error (the first one stays); -1. */
int schema__fail(struct schema *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * O's member KEY (O an object), checked: 1 when it is there and right (*V
 * set), 0 when it is absent (or null, with SCHEMA_NULL) and may be, -1 with
 * the error set otherwise. *V is left as it was when 0, but for an object or
 * an array (NULL).
 */
int schema__int(struct schema *s, json_t *o, const char *key, int flags, int64_t min,
		int64_t max, int64_t *v);
/* A size or a count: an integer in [0, INT64_MAX]. */
int schema__size(struct schema *s, json_t *o, const char *key, int flags, uint64_t *v);
/* An integer or a real in [MIN, MAX]. */
int schema__num(struct schema *s, json_t *o, const char *key, int flags, double min,
		double max, double *v);
/* A string of at most MAX_LEN bytes. */
int schema__str(struct schema *s, json_t *o, const char *key, int flags, size_t max_len,
		const char **v);
/* The same, copied (malloc'd) into *V. */
int schema__str_dup(struct schema *s, json_t *o, const char *key, int flags, size_t max_len,
		    char **v);
int schema__bool(struct schema *s, json_t *o, const char *key, int flags, bool *v);
int schema__object(struct schema *s, json_t *o, const char *key, int flags, json_t **v);
int schema__array(struct schema *s, json_t *o, const char *key, int flags, json_t **v);
/* V itself (an array's element, a member already got), as the above check their member. */
int schema__is_int(struct schema *s, json_t *v, int64_t min, int64_t max, int64_t *out);
int schema__is_object(struct schema *s, json_t *v);

#endif
