// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail daemonset: print the Kubernetes DaemonSet that runs 'memtrail
 * watch' on every node (user/daemonset.yaml, built into the binary), with
 * the image, namespace and metrics port filled in.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "format.h"
#include "log.h"
#include "opts.h"

#ifndef MEMTRAIL_VERSION
#define MEMTRAIL_VERSION "0.1.0"
#endif
/* what 'make image' builds */
#define DEFAULT_IMAGE "memtrail:" MEMTRAIL_VERSION
#define DEFAULT_NAMESPACE "kube-system"
#define DEFAULT_PORT 9464

/* the manifest, as the source tree has it, NUL-terminated */
__asm__(".pushsection .rodata\n"
	".global memtrail_daemonset_yaml\n"
	"memtrail_daemonset_yaml:\n"
	".incbin \"user/cmd/daemonset.yaml\"\n"
	".byte 0\n"
	".popsection\n");
extern const char memtrail_daemonset_yaml[];

/* A Kubernetes namespace name: a DNS label (RFC 1123), 63 characters at most. */
static bool dns_label(const char *s)
{
	size_t i, n = strlen(s);

	if (!n || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
			return false;
	return true;
}

/* An image reference (registry/name:tag, name@sha256:...): YAML takes it as it is. */
static bool image_ref(const char *s)
{
	size_t i, n = strlen(s);

	if (!n || n > 512 || !isalnum((unsigned char)s[0]))
		return false;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("./:_-@", s[i]))
			return false;
	return true;
}

/* S for an error line: cut at 80 characters, control characters as '?'. */
static const char *shown(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len && i < 80; i++)
		buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
	buf[i] = '\0';
	return buf;
}

struct daemonset_opts {
	const char *image, *ns;
	uint32_t port;
};

static int opt_image(void *base, const char *arg)
{
	struct daemonset_opts *o = base;
	char buf[96];

	if (!image_ref(arg)) {
		log__error("invalid --image '%s': give an image reference (registry/name:tag or "
			   "name@sha256:digest)", shown(arg, buf, sizeof(buf)));
		return -EINVAL;
	}
	o->image = arg;
	return 0;
}

static int opt_namespace(void *base, const char *arg)
{
	struct daemonset_opts *o = base;
	char buf[96];

	if (!dns_label(arg)) {
		log__error("invalid --namespace '%s': give a DNS label (a-z, 0-9 and '-', at "
			   "most 63)", shown(arg, buf, sizeof(buf)));
		return -EINVAL;
	}
	o->ns = arg;
	return 0;
}

static const struct opt daemonset_rows[] = {
	OPT_ROW_FN("image", 'i', "IMAGE", opt_image,
		   "a container image with memtrail on its PATH (default " DEFAULT_IMAGE ")"),
	OPT_ROW_FN("namespace", 'n', "NS", opt_namespace,
		   "the namespace (default " DEFAULT_NAMESPACE ")"),
	OPT_ROW_U32("metrics-port", 'p', "PORT", struct daemonset_opts, port, 1, 65535,
		    "the metrics port", 0),
	OPT_ROW_HELP,
	OPT_ROW_END,
};

static void usage(FILE *f, const struct opts_cmd *c)
{
	fprintf(f,
"usage: memtrail daemonset [--image IMAGE] [--namespace NS]\n"
"                          [--metrics-port PORT]\n"
"\n"
"Print a Kubernetes DaemonSet that runs 'memtrail watch --kube-events' on every\n"
"node, with its ServiceAccount and the one permission it uses (create and patch\n"
"Events): snapshots and verdicts to /var/lib/memtrail/snapshots on the node,\n"
"each verdict an Event on its Pod, Prometheus metrics on the pod's PORT (with\n"
"the prometheus.io scrape annotations). 'make image' builds the image it names.\n"
"  memtrail daemonset --image registry.example/memtrail:0.1.0 \\\n"
"    | kubectl apply -f -\n"
"\n");
	opts__help(f, c);
}

int cmd_daemonset(int argc, char **argv)
{
	struct daemonset_opts o = { DEFAULT_IMAGE, DEFAULT_NAMESPACE, DEFAULT_PORT };
	const struct opt_group groups[] = { { "options", daemonset_rows, &o } };
	const struct opts_cmd cmd = { .name = "daemonset", .groups = groups, .n_groups = 1,
				      .usage = usage, .no_args = true };
	const char *p;
	int first, err;

	err = opts__parse(&cmd, argc, argv, &first);
	if (err)
		return err > 0 ? 0 : 2;
	/* the template's placeholders, in place */
	for (p = memtrail_daemonset_yaml; *p; p++) {
		if (!strncmp(p, "{{IMAGE}}", 9)) {
			fputs(o.image, stdout);
			p += 8;
		} else if (!strncmp(p, "{{NAMESPACE}}", 13)) {
			fputs(o.ns, stdout);
			p += 12;
		} else if (!strncmp(p, "{{PORT}}", 8)) {
			printf("%u", (unsigned)o.port);
			p += 7;
		} else {
			putchar(*p);
		}
	}
	if (fflush(stdout) || ferror(stdout)) {
		log__error("cannot write the manifest: %s", strerror(errno));
		return 1;
	}
	return 0;
}
