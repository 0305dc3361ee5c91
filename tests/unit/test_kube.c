// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * kube.h: base64 against Python's own encoding of the same bytes, kubeconfig
 * files (relative paths from the file's directory, -data over files, the
 * current context), and an Event's document as events.go wants it.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "kube.h"

static char dir[64];

static void put(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/memtrail-unit-kube-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static void test_base64(void **state)
{
	char *out;
	size_t len;

	(void)state;
	/* base64.b64encode(b"hello\n\x00\xff") in Python: b'aGVsbG8KAP8=' */
	assert_int_equal(kube_config__base64("aGVsbG8KAP8=", &out, &len), 0);
	assert_int_equal(len, 8);
	assert_memory_equal(out, "hello\n\0\xff", 8);
	free(out);
	/* lines broken as kubectl writes long data */
	assert_int_equal(kube_config__base64("aGVs\nbG8=\n", &out, &len), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(out, "hello", 5);
	free(out);
	assert_int_equal(kube_config__base64("aGVs*G8=", &out, &len), -1);
	assert_int_equal(kube_config__base64("aGVsbG8=aGVs", &out, &len), -1);
	assert_int_equal(kube_config__base64("a", &out, &len), -1);
}

static void test_kubeconfig_context(void **state)
{
	struct kube_config c;
	char path[256], want[256], err[512];

	(void)state;
	put("ca.crt", "CA");
	put("token", "T");
	/* two clusters: the current context's is taken; paths from the file's directory */
	put("config",
	    "apiVersion: v1\n"
	    "kind: Config\n"
	    "clusters:\n"
	    "- name: other\n"
	    "  cluster: {server: 'https://10.0.0.9', certificate-authority-data: T3RoZXI=}\n"
	    "- name: prod\n"
	    "  cluster:\n"
	    "    server: https://api.example:6443/\n"
	    "    certificate-authority: ca.crt\n"
	    "users:\n"
	    "- name: u\n"
	    "  user:\n"
	    "    tokenFile: token\n"
	    "contexts:\n"
	    "- name: a\n"
	    "  context: {cluster: other, user: u}\n"
	    "- name: b\n"
	    "  context: {cluster: prod, user: u}\n"
	    "current-context: b\n");
	snprintf(path, sizeof(path), "%s/config", dir);
	assert_int_equal(kube_config__load(path, NULL, &c, err, sizeof(err)), 0);
	assert_string_equal(c.server, "https://api.example:6443");
	snprintf(want, sizeof(want), "%s/ca.crt", dir);
	assert_string_equal(c.ca_file, want);
	snprintf(want, sizeof(want), "%s/token", dir);
	assert_string_equal(c.token_file, want);
	assert_null(c.ca_data);
	assert_null(c.token);
	kube_config__free(&c);

	/* -data over the file; a literal token over tokenFile */
	put("config2",
	    "clusters:\n"
	    "- name: c\n"
	    "  cluster:\n"
	    "    server: https://127.0.0.1:6443\n"
	    "    certificate-authority: /nonexistent\n"
	    "    certificate-authority-data: aGVsbG8=\n"
	    "users:\n"
	    "- name: u\n"
	    "  user: {token: abc, tokenFile: /nonexistent}\n"
	    "contexts:\n"
	    "- name: x\n"
	    "  context: {cluster: c, user: u}\n"
	    "current-context: x\n");
	snprintf(path, sizeof(path), "%s/config2", dir);
	assert_int_equal(kube_config__load(path, NULL, &c, err, sizeof(err)), 0);
	assert_int_equal(c.ca_len, 5);
	assert_memory_equal(c.ca_data, "hello", 5);
	assert_null(c.ca_file);
	assert_string_equal(c.token, "abc");
	assert_null(c.token_file);
	kube_config__free(&c);

	/* a client certificate without its key */
	put("config3",
	    "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: aGVsbG8=}}]\n"
	    "users: [{name: u, user: {client-certificate-data: aGVsbG8=}}]\n"
	    "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
	    "current-context: x\n");
	snprintf(path, sizeof(path), "%s/config3", dir);
	assert_int_equal(kube_config__load(path, NULL, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "without its key"));
}

static void test_event_document(void **state)
{
	struct kube_event e = {
		.namespace = "serving", .pod = "llama-7b", .uid = "0b7f2c1e-1111-2222-3333-444455556666",
		.container = "model-server", .reason = "OOMKilledAtLimit", .action = "Killed",
		.note = "note", .time_ns = 1795900304123456789ULL,
	};
	const char *micro = "^2026-11-28T[0-9:]{8}\\.123456Z$";
	json_t *doc, *series;
	regex_t re;
	char *text;

	(void)state;
	assert_int_equal(regcomp(&re, micro, REG_EXTENDED | REG_NOSUB), 0);
	text = kube_events__document(&e, "llama-7b.1", "node-a", 1, e.time_ns);
	doc = json_loads(text, 0, NULL);
	assert_non_null(doc);
	assert_int_equal(regexec(&re, json_string_value(json_object_get(doc, "eventTime")), 0,
				 NULL, 0), 0);
	assert_null(json_object_get(doc, "series"));
	assert_string_equal(json_string_value(json_object_get(
		json_object_get(doc, "regarding"), "fieldPath")), "spec.containers{model-server}");
	assert_string_equal(json_string_value(json_object_get(
		json_object_get(doc, "regarding"), "apiVersion")), "v1");
	assert_string_equal(json_string_value(json_object_get(doc, "type")), "Warning");
	json_decref(doc);
	free(text);
	/* a series: count and lastObservedTime, both as the rules want them */
	e.container[0] = '\0';
	text = kube_events__document(&e, "llama-7b.1", "node-a", 20, e.time_ns);
	doc = json_loads(text, 0, NULL);
	series = json_object_get(doc, "series");
	assert_int_equal(json_integer_value(json_object_get(series, "count")), 20);
	assert_int_equal(regexec(&re, json_string_value(json_object_get(series,
							"lastObservedTime")), 0, NULL, 0), 0);
	/* no container known: no fieldPath */
	assert_null(json_object_get(json_object_get(doc, "regarding"), "fieldPath"));
	json_decref(doc);
	free(text);
	regfree(&re);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_kubeconfig_context),
		cmocka_unit_test(test_event_document),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
