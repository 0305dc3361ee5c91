# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""memtrail daemonset: the manifest it prints parses as YAML (python3-yaml):
a ServiceAccount, a ClusterRole that may create and patch Events and nothing
else, its binding, and a DaemonSet that runs watch with metrics and
--kube-events as that account, mounting exactly what the README's table
says, with the permissions it names; options substitute; bad values fail on
one line."""

import os
import re

from harness import MEMTRAIL, ROOT, check, check_eq, one_line_error, run

try:
    import yaml
except ImportError:  # a failure, not a skip: deps.sh installs python3-yaml
    yaml = None


def documents(*args):
    """The manifest's objects, by kind."""
    check(yaml is not None, "python3-yaml is installed")
    p = run([MEMTRAIL, "daemonset", *args])
    check_eq(p.returncode, 0, f"memtrail daemonset status ({p.stderr.strip()})")
    docs = list(yaml.safe_load_all(p.stdout))
    kinds = [d["kind"] for d in docs]
    check_eq(kinds, ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"],
             "the manifest's objects")
    return {d["kind"]: d for d in docs}


def manifest(*args):
    return documents(*args)["DaemonSet"]


def readme_table():
    """The README's rows of what the DaemonSet mounts: {host path: (pod path, read-only)}."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("### memtrail daemonset", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `(/[^`]+)` \(([^)]+)\) \| `([^`]+)` \|", line)
        if m:
            rows[m.group(1)] = (m.group(3), m.group(2).startswith("read-only"))
    return section, rows


def test_daemonset_matches_readme():
    d = manifest()
    check_eq((d["apiVersion"], d["kind"]), ("apps/v1", "DaemonSet"), "a DaemonSet")
    spec = d["spec"]["template"]["spec"]
    check_eq(d["spec"]["selector"]["matchLabels"], d["spec"]["template"]["metadata"]["labels"],
             "the selector matches the pods")
    check(spec["hostPID"] is True, "hostPID")
    c = spec["containers"][0]
    check(c["securityContext"]["privileged"] is True, "privileged")
    cmd = c["command"]
    check_eq(cmd[:2], ["memtrail", "watch"], "runs memtrail watch")
    port = c["ports"][0]["containerPort"]
    check_eq(cmd[cmd.index("--metrics") + 1], f"0.0.0.0:{port}", "metrics on the pod's port")
    ann = d["spec"]["template"]["metadata"]["annotations"]
    check_eq((ann["prometheus.io/scrape"], ann["prometheus.io/port"], ann["prometheus.io/path"]),
             ("true", str(port), "/metrics"), "scrape annotations")
    check_eq(port, 9464, "default port")
    check_eq(d["metadata"]["namespace"], "kube-system", "default namespace")
    check_eq(c["image"], "memtrail:0.1.0", "default image: what make image builds")
    with open(os.path.join(ROOT, "Makefile")) as f:
        check("IMAGE ?= memtrail:$(VERSION)" in f.read() and
              run([MEMTRAIL, "--version"]).stdout.strip() == "memtrail 0.1.0",
              "make image names the image so")
    # the mounts, exactly as the README's table has them
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    mounts = {volumes[m["name"]]: (m["mountPath"], bool(m.get("readOnly")))
              for m in c["volumeMounts"]}
    section, rows = readme_table()
    check(rows, "the README has the table of mounts")
    check_eq(mounts, rows, "the manifest mounts what the README says")
    snapshots = cmd[cmd.index("--output") + 1]
    check(snapshots in [p for p, _ in mounts.values()], "snapshots go to a hostPath mount")
    pods = cmd[cmd.index("--pods-dir") + 1]
    check(pods in [p for p, _ in mounts.values()], "the pods dir is mounted")
    for word in ("privileged: true", "hostPID: true"):
        check(f"`{word}`" in section, f"the README says what {word} is for")


def test_daemonset_may_write_events_and_nothing_else():
    """The account the DaemonSet runs as may create and patch Events (the
    verdicts, their series) and nothing else; watch runs with --kube-events
    and the node's name; the README's permission table says why."""
    docs = documents()
    sa, role, binding, ds = (docs[k] for k in ("ServiceAccount", "ClusterRole",
                                               "ClusterRoleBinding", "DaemonSet"))
    check_eq(role["rules"], [{"apiGroups": ["events.k8s.io"], "resources": ["events"],
                              "verbs": ["create", "patch"]}], "the ClusterRole's rules")
    check_eq(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}, "the binding's role")
    check_eq(binding["subjects"], [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}],
             "the binding's subject")
    spec = ds["spec"]["template"]["spec"]
    check_eq(spec["serviceAccountName"], sa["metadata"]["name"], "the pods' account")
    check_eq(sa["metadata"]["namespace"], ds["metadata"]["namespace"], "one namespace")
    c = spec["containers"][0]
    check("--kube-events" in c["command"], "verdicts as Events")
    check_eq(c["env"], [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {
        "fieldPath": "spec.nodeName"}}}], "the node's name from the downward API")
    section, _ = readme_table()
    for word in ("`create`", "`patch`", "events.k8s.io"):
        check(word in section, f"the README's table says what {word} is for")
    d = documents("--namespace", "monitoring")
    check_eq(d["ClusterRoleBinding"]["subjects"][0]["namespace"], "monitoring",
             "--namespace in the binding")
    check_eq(d["ServiceAccount"]["metadata"]["namespace"], "monitoring",
             "--namespace of the account")


def test_daemonset_options():
    d = manifest("--image", "registry.example:5000/ml/memtrail:0.1", "--namespace", "monitoring",
                 "--metrics-port", "9100")
    c = d["spec"]["template"]["spec"]["containers"][0]
    check_eq(c["image"], "registry.example:5000/ml/memtrail:0.1", "--image")
    check_eq(d["metadata"]["namespace"], "monitoring", "--namespace")
    check_eq(c["ports"][0]["containerPort"], 9100, "--metrics-port")
    check_eq(d["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"], "9100",
             "--metrics-port in the annotation")
    check_eq(c["command"][c["command"].index("--metrics") + 1], "0.0.0.0:9100",
             "--metrics-port in the command")
    d = manifest("--image", "memtrail@sha256:" + "ab" * 32)
    check(d["spec"]["template"]["spec"]["containers"][0]["image"].startswith("memtrail@sha256:"),
          "an image by digest")
    for args, needle in ((["--namespace", "Bad_NS"], "--namespace"),
                         (["--image", "x y"], "--image"),
                         (["--image", "a\nkind: Pod"], "--image"),
                         (["--metrics-port", "0"], "--metrics-port"),
                         (["--metrics-port", "65536"], "--metrics-port")):
        one_line_error(run([MEMTRAIL, "daemonset", *args]), needle)
