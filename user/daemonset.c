// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * memtrail daemonset: print the Kubernetes DaemonSet that runs 'memtrail
 * watch' on every node (user/daemonset.yaml, built into the binary), with
 * the image, namespace and metrics port filled in.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "format.h"
#include "log.h"

#define DEFAULT_IMAGE "memtrail:latest"
#define DEFAULT_NAMESPACE "kube-system"
#define DEFAULT_PORT 9464

/* the manifest, as the source tree has it, NUL-terminated */
__asm__(".pushsection .rodata\n"
	".global memtrail_daemonset_yaml\n"
	"memtrail_daemonset_yaml:\n"
	".incbin \"user/daemonset.yaml\"\n"
	".byte 0\n"
	".popsection\n");
extern const char memtrail_daemonset_yaml[];

static void usage(FILE *f)
{
	fprintf(f,
"usage: memtrail daemonset [--image IMAGE] [--namespace NS] [--metrics-port PORT]\n"
"\n"
"Print a Kubernetes DaemonSet that runs 'memtrail watch' on every node:\n"
"snapshots and verdicts to /var/lib/memtrail/snapshots on the node, Prometheus\n"
"metrics on the pod's PORT (with the prometheus.io scrape annotations).\n"
"  memtrail daemonset --image registry.example/memtrail:0.1 | kubectl apply -f -\n"
"\n"
"  -i, --image IMAGE       a container image with memtrail on its PATH\n"
"                          (default %s)\n"
"  -n, --namespace NS      the namespace (default %s)\n"
"  -p, --metrics-port PORT the metrics port, 1..65535 (default %d)\n"
"  -h, --help              this help\n",
		DEFAULT_IMAGE, DEFAULT_NAMESPACE, DEFAULT_PORT);
}

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

int cmd_daemonset(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "image", required_argument, NULL, 'i' },
		{ "namespace", required_argument, NULL, 'n' },
		{ "metrics-port", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *image = DEFAULT_IMAGE, *ns = DEFAULT_NAMESPACE, *p;
	uint64_t port = DEFAULT_PORT;
	char buf[96];
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":i:n:p:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			image = optarg;
			if (!image_ref(image)) {
				log__error("invalid --image '%s': give an image reference "
					   "(registry/name:tag or name@sha256:digest)",
					   shown(optarg, buf, sizeof(buf)));
				return 2;
			}
			break;
		case 'n':
			ns = optarg;
			if (!dns_label(ns)) {
				log__error("invalid --namespace '%s': give a DNS label "
					   "(a-z, 0-9 and '-', at most 63)", shown(optarg, buf, sizeof(buf)));
				return 2;
			}
			break;
		case 'p':
			if (format__parse_u64(optarg, 1, 65535, &port)) {
				log__error("invalid --metrics-port '%s': give 1 to 65535",
					   shown(optarg, buf, sizeof(buf)));
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			log__error("option '%s' needs a value", argv[optind - 1]);
			fprintf(stderr, "Try 'memtrail daemonset --help'.\n");
			return 2;
		default:
			log__error("unknown option '%s'", argv[optind - 1]);
			fprintf(stderr, "Try 'memtrail daemonset --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		log__error("unexpected argument '%s'", argv[optind]);
		fprintf(stderr, "Try 'memtrail daemonset --help'.\n");
		return 2;
	}
	/* the template's placeholders, in place */
	for (p = memtrail_daemonset_yaml; *p; p++) {
		if (!strncmp(p, "{{IMAGE}}", 9)) {
			fputs(image, stdout);
			p += 8;
		} else if (!strncmp(p, "{{NAMESPACE}}", 13)) {
			fputs(ns, stdout);
			p += 12;
		} else if (!strncmp(p, "{{PORT}}", 8)) {
			printf("%u", (unsigned)port);
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
