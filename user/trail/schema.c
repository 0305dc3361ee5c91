// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sanitize.h"
#include "schema.h"

void schema__init(struct schema *s, char *err, size_t errlen)
{
	s->err = err;
	s->errlen = errlen;
	s->path[0] = '\0';
	s->len = 0;
	if (errlen)
		err[0] = '\0';
}

/* Append what N bytes of snprintf wrote at the path's end (cut where it is full). */
static size_t grown(struct schema *s, size_t at, int n)
{
	if (n > 0)
		s->len = at + n < sizeof(s->path) ? at + n : sizeof(s->path) - 1;
	return at;
}

size_t schema__key(struct schema *s, const char *key)
{
	size_t at = s->len;

	return grown(s, at, snprintf(s->path + at, sizeof(s->path) - at, "%s%s", at ? "." : "",
				     key));
}

size_t schema__index(struct schema *s, size_t i)
{
	size_t at = s->len;

	return grown(s, at, snprintf(s->path + at, sizeof(s->path) - at, "[%zu]", i));
}

void schema__up(struct schema *s, size_t at)
{
	if (at < s->len) {
		s->len = at;
		s->path[at] = '\0';
	}
}

int schema__fail(struct schema *s, const char *fmt, ...)
{
	char raw[512];
	va_list ap;
	int n;

	if (!s->errlen || s->err[0])
		return -1;
	/* paths and values come from the trail: shown with their control bytes escaped */
	n = snprintf(raw, sizeof(raw), "%s: ", s->len ? s->path : "the trail");
	if (n >= 0 && (size_t)n < sizeof(raw)) {
		va_start(ap, fmt);
		vsnprintf(raw + n, sizeof(raw) - n, fmt, ap);
		va_end(ap);
	}
	sanitize__str(s->err, s->errlen, raw);
	return -1;
}

/* O's member KEY as the getters find it: 1 and *V, 0 absent (may be), -1 failed. */
static int member(struct schema *s, json_t *o, const char *key, int flags, json_t **v,
		  size_t *at)
{
	*at = s->len;
	*v = json_object_get(o, key);
	if (!*v) {
		if (!(flags & SCHEMA_NEED))
			return 0;
		*at = schema__key(s, key);
		return schema__fail(s, "missing");
	}
	if (json_is_null(*v) && (flags & SCHEMA_NULL))
		return 0;
	*at = schema__key(s, key);
	return 1;
}

/* Done with a member: back up, passing RET on (a failure keeps its path in err). */
static int done(struct schema *s, size_t at, int ret)
{
	schema__up(s, at);
	return ret;
}

int schema__is_int(struct schema *s, json_t *v, int64_t min, int64_t max, int64_t *out)
{
	json_int_t i;

	if (!json_is_integer(v))
		return schema__fail(s, "not an integer");
	i = json_integer_value(v);
	if (i < min || i > max)
		return schema__fail(s, "out of range (%lld)", (long long)i);
	if (out)
		*out = i;
	return 1;
}

int schema__is_object(struct schema *s, json_t *v)
{
	return json_is_object(v) ? 1 : schema__fail(s, "not an object");
}

int schema__int(struct schema *s, json_t *o, const char *key, int flags, int64_t min,
		int64_t max, int64_t *v)
{
	size_t at;
	json_t *m;
	int ret = member(s, o, key, flags, &m, &at);

	if (ret <= 0)
		return ret ? done(s, at, ret) : 0;
	return done(s, at, schema__is_int(s, m, min, max, v));
}

int schema__size(struct schema *s, json_t *o, const char *key, int flags, uint64_t *v)
{
	int64_t n;
	int ret = schema__int(s, o, key, flags, 0, INT64_MAX, &n);

	if (ret > 0 && v)
		*v = (uint64_t)n;
	return ret;
}

int schema__num(struct schema *s, json_t *o, const char *key, int flags, double min,
		double max, double *v)
{
	size_t at;
	json_t *m;
	int ret = member(s, o, key, flags, &m, &at);
	double d;

	if (ret <= 0)
		return ret ? done(s, at, ret) : 0;
	if (!json_is_number(m))
		return done(s, at, schema__fail(s, "not a number"));
	d = json_number_value(m);
	if (!(d >= min && d <= max))
		return done(s, at, schema__fail(s, "out of range (%g)", d));
	if (v)
		*v = d;
	return done(s, at, 1);
}

int schema__str(struct schema *s, json_t *o, const char *key, int flags, size_t max_len,
		const char **v)
{
	size_t at;
	json_t *m;
	int ret = member(s, o, key, flags, &m, &at);

	if (ret <= 0)
		return ret ? done(s, at, ret) : 0;
	if (!json_is_string(m))
		return done(s, at, schema__fail(s, "not a string"));
	if (json_string_length(m) > max_len)
		return done(s, at, schema__fail(s, "longer than %zu bytes", max_len));
	/* a NUL inside ("\u0000"): C would read a string shorter than the file's */
	if (strlen(json_string_value(m)) != json_string_length(m))
		return done(s, at, schema__fail(s, "a NUL inside"));
	if (v)
		*v = json_string_value(m);
	return done(s, at, 1);
}

int schema__str_dup(struct schema *s, json_t *o, const char *key, int flags, size_t max_len,
		    char **v)
{
	const char *str = NULL;
	int ret = schema__str(s, o, key, flags, max_len, &str);

	if (ret <= 0)
		return ret;
	if (!(*v = strdup(str)))
		return schema__fail(s, "out of memory");
	return 1;
}

int schema__bool(struct schema *s, json_t *o, const char *key, int flags, bool *v)
{
	size_t at;
	json_t *m;
	int ret = member(s, o, key, flags, &m, &at);

	if (ret <= 0)
		return ret ? done(s, at, ret) : 0;
	if (!json_is_boolean(m))
		return done(s, at, schema__fail(s, "not true or false"));
	if (v)
		*v = json_is_true(m);
	return done(s, at, 1);
}

static int container(struct schema *s, json_t *o, const char *key, int flags, json_t **v,
		     bool array)
{
	size_t at;
	json_t *m;
	int ret = member(s, o, key, flags, &m, &at);

	if (v)
		*v = NULL;
	if (ret <= 0)
		return ret ? done(s, at, ret) : 0;
	if (array ? !json_is_array(m) : !json_is_object(m))
		return done(s, at, schema__fail(s, array ? "not an array" : "not an object"));
	if (v)
		*v = m;
	return done(s, at, 1);
}

int schema__object(struct schema *s, json_t *o, const char *key, int flags, json_t **v)
{
	return container(s, o, key, flags, v, false);
}

int schema__array(struct schema *s, json_t *o, const char *key, int flags, json_t **v)
{
	return container(s, o, key, flags, v, true);
}
