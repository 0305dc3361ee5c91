// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attribution.h"

/* O's string KEY (absent or null: "") into BUF of LEN bytes: 0, or -1 when longer. */
static int take(struct schema *s, json_t *o, const char *key, char *buf, size_t len)
{
	const char *v = NULL;

	if (schema__str(s, o, key, SCHEMA_NULL, len - 1, &v) < 0)
		return -1;
	snprintf(buf, len, "%s", v ? v : "");
	return 0;
}

int attribution__from_json(struct schema *s, json_t *o, struct container_attr **out)
{
	struct container_attr *a;
	json_t *ctr, *pod;
	size_t at;

	*out = NULL;
	if (schema__object(s, o, "container", SCHEMA_NULL, &ctr) < 0 ||
	    schema__object(s, o, "pod", SCHEMA_NULL, &pod) < 0)
		return -1;
	if (!ctr && !pod)
		return 0;
	a = calloc(1, sizeof(*a));
	if (!a)
		return schema__fail(s, "out of memory");
	if (ctr) {
		at = schema__key(s, "container");
		a->container = true;
		if (take(s, ctr, "id", a->ref.id, sizeof(a->ref.id)) < 0 ||
		    take(s, ctr, "runtime", a->ref.runtime, sizeof(a->ref.runtime)) < 0 ||
		    take(s, ctr, "name", a->names.container, sizeof(a->names.container)) < 0 ||
		    schema__bool(s, ctr, "conmon", 0, &a->ref.conmon) < 0)
			goto fail;
		schema__up(s, at);
	}
	if (pod) {
		at = schema__key(s, "pod");
		a->pod = true;
		if (take(s, pod, "uid", a->ref.pod_uid, sizeof(a->ref.pod_uid)) < 0 ||
		    take(s, pod, "qos", a->ref.qos, sizeof(a->ref.qos)) < 0 ||
		    take(s, pod, "namespace", a->names.namespace, sizeof(a->names.namespace)) < 0 ||
		    take(s, pod, "name", a->names.pod, sizeof(a->names.pod)) < 0 ||
		    take(s, pod, "cgroup_driver", a->ref.driver, sizeof(a->ref.driver)) < 0)
			goto fail;
		schema__up(s, at);
	}
	*out = a;
	return 0;
fail:
	free(a);
	return -1;
}

struct container_attr *attribution__dup(const struct container_attr *a)
{
	struct container_attr *c = a ? malloc(sizeof(*c)) : NULL;

	if (c)
		memcpy(c, a, sizeof(*c));
	return c;
}
