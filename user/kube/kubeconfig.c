// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Where the API server is, found as client-go finds it: in a pod, the
 * service account's token and CA with KUBERNETES_SERVICE_HOST/PORT
 * (rest.InClusterConfig); outside, a kubeconfig file's current context
 * (clusters, users, contexts; relative paths from the file's directory).
 * Only what memtrail can verify is taken: TLS with a CA, a token or a
 * client certificate. Exec plugins, auth providers and
 * insecure-skip-tls-verify are refused with their name.
 */
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "kube.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static int fail(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

void kube_config__free(struct kube_config *c)
{
	free(c->server);
	free(c->ca_file);
	free(c->ca_data);
	free(c->token);
	free(c->token_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->cert_data);
	free(c->key_data);
	free(c->origin);
	memset(c, 0, sizeof(*c));
}

int kube_config__base64(const char *in, char **out, size_t *len)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(in), o = 0, pad = 0;
	uint32_t acc = 0;
	int bits = 0;
	char *buf = malloc(n / 4 * 3 + 4);

	if (!buf)
		return -1;
	for (; *in; in++) {
		const char *p;

		if (*in == ' ' || *in == '\n' || *in == '\r' || *in == '\t')
			continue;
		if (*in == '=') {
			pad++;
			continue;
		}
		p = strchr(abc, *in);
		if (!p || pad)		/* no data after padding */
			goto bad;
		acc = acc << 6 | (uint32_t)(p - abc);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (char)(acc >> bits & 0xff);
		}
	}
	if (pad > 2 || bits >= 6)
		goto bad;
	buf[o] = '\0';
	*out = buf;
	*len = o;
	return 0;
bad:
	free(buf);
	return -1;
}

/* ---- in a pod ---- */

static int in_cluster(const char *sa_dir, struct kube_config *c, char *err, size_t len)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	char path[4096];

	if (!sa_dir)
		sa_dir = SA_DIR;
	if (!port || !*port)
		port = "443";
	/* an IPv6 address goes in brackets (client-go: net.JoinHostPort) */
	if (asprintf(&c->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s",
		     host, port) < 0)
		return fail(err, len, "out of memory");
	snprintf(path, sizeof(path), "%s/token", sa_dir);
	if (access(path, R_OK))
		return fail(err, len, "in a pod (KUBERNETES_SERVICE_HOST is set) but %s cannot "
			    "be read: %s (is automountServiceAccountToken off?)", path,
			    strerror(errno));
	c->token_file = strdup(path);
	snprintf(path, sizeof(path), "%s/ca.crt", sa_dir);
	if (access(path, R_OK))
		return fail(err, len, "in a pod but %s cannot be read: %s", path,
			    strerror(errno));
	c->ca_file = strdup(path);
	c->origin = strdup("the pod's service account");
	if (!c->token_file || !c->ca_file || !c->origin)
		return fail(err, len, "out of memory");
	return 0;
}

/* ---- a kubeconfig file ---- */

struct kcfg {
	yaml_document_t doc;
	const char *file;
	char dir[4096];
};

static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* MAP's value for KEY, NULL when none (or MAP not a mapping). */
static yaml_node_t *get(struct kcfg *k, yaml_node_t *map, const char *key)
{
	yaml_node_pair_t *p;

	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		const char *s = scalar(yaml_document_get_node(&k->doc, p->key));

		if (s && !strcmp(s, key))
			return yaml_document_get_node(&k->doc, p->value);
	}
	return NULL;
}

/* The entry named NAME of the list LIST ("clusters"), its field FIELD ("cluster"). */
static yaml_node_t *named(struct kcfg *k, const char *list, const char *field, const char *name)
{
	yaml_node_t *l = get(k, yaml_document_get_root_node(&k->doc), list);
	yaml_node_item_t *i;

	if (!l || l->type != YAML_SEQUENCE_NODE)
		return NULL;
	for (i = l->data.sequence.items.start; i < l->data.sequence.items.top; i++) {
		yaml_node_t *e = yaml_document_get_node(&k->doc, *i);
		const char *s = scalar(get(k, e, "name"));

		if (s && !strcmp(s, name))
			return get(k, e, field);
	}
	return NULL;
}

/* A path of the file: relative ones from the kubeconfig's directory (client-go's ResolvePaths). */
static char *path_of(struct kcfg *k, const char *p)
{
	char *out;

	if (p[0] == '/')
		return strdup(p);
	if (asprintf(&out, "%s/%s", k->dir, p) < 0)
		return NULL;
	return out;
}

/* FILE_KEY (a path) or DATA_KEY (base64) of NODE into *FILE or *DATA: 0, -1 said. */
static int file_or_data(struct kcfg *k, yaml_node_t *node, const char *file_key,
			const char *data_key, char **file, char **data, size_t *dlen, char *err,
			size_t len)
{
	const char *f = scalar(get(k, node, file_key));
	const char *d = scalar(get(k, node, data_key));

	if (d && *d) {
		if (kube_config__base64(d, data, dlen))
			return fail(err, len, "%s: %s is not base64", k->file, data_key);
		return 0;
	}
	if (f && *f) {
		*file = path_of(k, f);
		if (!*file)
			return fail(err, len, "out of memory");
		if (access(*file, R_OK))
			return fail(err, len, "%s: %s %s cannot be read: %s", k->file, file_key,
				    *file, strerror(errno));
	}
	return 0;
}

static int load_doc(struct kcfg *k, char *err, size_t len)
{
	yaml_parser_t parser;
	FILE *f = fopen(k->file, "r");
	int ok;

	if (!f)
		return fail(err, len, "kubeconfig %s: %s", k->file, strerror(errno));
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	ok = yaml_parser_load(&parser, &k->doc);
	if (!ok) {
		fail(err, len, "kubeconfig %s: not YAML: %s at line %zu", k->file,
		     parser.problem ? parser.problem : "?", parser.problem_mark.line + 1);
		yaml_parser_delete(&parser);
		fclose(f);
		return -1;
	}
	yaml_parser_delete(&parser);
	fclose(f);
	if (!yaml_document_get_root_node(&k->doc)) {
		yaml_document_delete(&k->doc);
		return fail(err, len, "kubeconfig %s: empty", k->file);
	}
	return 0;
}

static int from_kubeconfig(const char *file, struct kube_config *c, char *err, size_t len)
{
	struct kcfg k = { .file = file };
	yaml_node_t *ctx, *cluster, *user;
	const char *cur, *cname, *uname, *server, *s;
	char tmp[4096];
	int r = -1;

	snprintf(tmp, sizeof(tmp), "%s", file);
	snprintf(k.dir, sizeof(k.dir), "%s", dirname(tmp));
	if (load_doc(&k, err, len))
		return -1;
	cur = scalar(get(&k, yaml_document_get_root_node(&k.doc), "current-context"));
	if (!cur || !*cur) {
		fail(err, len, "kubeconfig %s: no current-context", file);
		goto out;
	}
	ctx = named(&k, "contexts", "context", cur);
	if (!ctx) {
		fail(err, len, "kubeconfig %s: context '%s' not found", file, cur);
		goto out;
	}
	cname = scalar(get(&k, ctx, "cluster"));
	uname = scalar(get(&k, ctx, "user"));
	cluster = cname ? named(&k, "clusters", "cluster", cname) : NULL;
	if (!cluster) {
		fail(err, len, "kubeconfig %s: context '%s' names no cluster that is there", file,
		     cur);
		goto out;
	}
	server = scalar(get(&k, cluster, "server"));
	if (!server || strncmp(server, "https://", 8)) {
		fail(err, len, "kubeconfig %s: cluster '%s': server %s: memtrail speaks to an API "
		     "server over https:// only", file, cname, server ? server : "(none)");
		goto out;
	}
	s = scalar(get(&k, cluster, "insecure-skip-tls-verify"));
	if (s && !strcmp(s, "true")) {
		fail(err, len, "kubeconfig %s: cluster '%s' has insecure-skip-tls-verify: memtrail "
		     "always verifies the API server's certificate (give certificate-authority)",
		     file, cname);
		goto out;
	}
	c->server = strdup(server);
	if (!c->server)
		goto oom;
	while (strlen(c->server) > 8 && c->server[strlen(c->server) - 1] == '/')
		c->server[strlen(c->server) - 1] = '\0';
	if (file_or_data(&k, cluster, "certificate-authority", "certificate-authority-data",
			 &c->ca_file, &c->ca_data, &c->ca_len, err, len))
		goto out;
	user = uname ? named(&k, "users", "user", uname) : NULL;
	if (uname && !user) {
		fail(err, len, "kubeconfig %s: user '%s' not found", file, uname);
		goto out;
	}
	if (get(&k, user, "exec") || get(&k, user, "auth-provider")) {
		fail(err, len, "kubeconfig %s: user '%s' gets its credentials from %s, which "
		     "memtrail does not run: give token, tokenFile or client certificates", file,
		     uname, get(&k, user, "exec") ? "an exec plugin" : "an auth provider");
		goto out;
	}
	s = scalar(get(&k, user, "token"));
	if (s && *s && !(c->token = strdup(s)))
		goto oom;
	s = scalar(get(&k, user, "tokenFile"));
	if (!c->token && s && *s) {
		c->token_file = path_of(&k, s);
		if (!c->token_file)
			goto oom;
		if (access(c->token_file, R_OK)) {
			fail(err, len, "kubeconfig %s: tokenFile %s cannot be read: %s", file,
			     c->token_file, strerror(errno));
			goto out;
		}
	}
	if (file_or_data(&k, user, "client-certificate", "client-certificate-data",
			 &c->cert_file, &c->cert_data, &c->cert_len, err, len) ||
	    file_or_data(&k, user, "client-key", "client-key-data", &c->key_file, &c->key_data,
			 &c->key_len, err, len))
		goto out;
	if (!c->token && !c->token_file && !c->cert_file && !c->cert_data) {
		fail(err, len, "kubeconfig %s: user '%s' has no token, tokenFile or client "
		     "certificate", file, uname ? uname : "(none)");
		goto out;
	}
	if ((c->cert_file || c->cert_data) != (c->key_file || c->key_data)) {
		fail(err, len, "kubeconfig %s: user '%s' has a client certificate without its key "
		     "or a key without its certificate", file, uname);
		goto out;
	}
	if (asprintf(&c->origin, "kubeconfig %s (context %s)", file, cur) < 0) {
		c->origin = NULL;
		goto oom;
	}
	r = 0;
	goto out;
oom:
	fail(err, len, "out of memory");
out:
	yaml_document_delete(&k.doc);
	return r;
}

int kube_config__load(const char *kubeconfig, const char *sa_dir, struct kube_config *c,
		      char *err, size_t errlen)
{
	const char *env = getenv("KUBECONFIG");
	char first[4096];
	int r;

	memset(c, 0, sizeof(*c));
	if (kubeconfig)
		r = from_kubeconfig(kubeconfig, c, err, errlen);
	else if (getenv("KUBERNETES_SERVICE_HOST") && *getenv("KUBERNETES_SERVICE_HOST"))
		r = in_cluster(sa_dir, c, err, errlen);
	else if (env && *env) {
		/* a list, as kubectl takes it: the first file is used */
		snprintf(first, sizeof(first), "%.*s", (int)strcspn(env, ":"), env);
		r = from_kubeconfig(first, c, err, errlen);
	} else
		r = fail(err, errlen, "no cluster to post Events to: not in a pod "
			 "(KUBERNETES_SERVICE_HOST is unset) and no --kubeconfig or KUBECONFIG");
	if (r)
		kube_config__free(c);
	return r;
}
