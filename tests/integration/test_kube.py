# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""memtrail watch --kube-events: real OOM kills in cgroups shaped like the
kubelet's, each verdict an Event on its Pod, posted to a loopback HTTPS API
server (kubeapi.py) that enforces the events.k8s.io/v1 validation rules, a
bearer token and TLS with a CA made for the test. Expected values come from
the workloads' own ledgers, the cgroups and the fake kubelet log directory."""

import base64
import json
import os
import signal
import subprocess
import time

from harness import (MiB, Background, check, check_eq, in_cgroup, kubelet_memcg, new_pod_ids,
                     no_programs_left, remove_tree, run, MEMTRAIL, tmpdir, workload)
from kubeapi import (KubeAPI, describe_events, kubeconfig, kubectl_events, make_ca,
                     make_server_cert)
from test_watch import PY_OOM_SITES, load, lost_lines, pods_dir, wait_files

NODE = "node-a1"
NS, POD, CONTAINER = "serving", "llama-7b", "model-server"
TOKEN_A = "memtrail-test-token-a-" + base64.b32encode(os.urandom(10)).decode()
TOKEN_B = "memtrail-test-token-b-" + base64.b32encode(os.urandom(10)).decode()


class Cluster:
    """A CA, the API server's certificate (signed by it, or by ROGUE's CA),
    the token the server takes and the one memtrail reads, and a kubeconfig."""

    def __init__(self, rogue=False, ca_data=False):
        self.dir = tmpdir()
        self.ca = make_ca(self.dir)
        signer = make_ca(os.path.join(self.dir, "rogue"), "rogue-ca") if rogue else self.ca
        self.server_token = os.path.join(self.dir, "server-token")
        self.token = os.path.join(self.dir, "token")
        write(self.server_token, TOKEN_A)
        write(self.token, TOKEN_A)
        self.api = KubeAPI(make_server_cert(self.dir, signer), self.server_token)
        self.config = kubeconfig(os.path.join(self.dir, "kubeconfig"), self.api.url,
                                 self.ca[0], self.token)
        if ca_data:
            with open(self.ca[0], "rb") as f:
                data = base64.b64encode(f.read()).decode()
            with open(self.config) as f:
                text = f.read()
            write(self.config, text.replace(f"certificate-authority: {self.ca[0]}",
                                            f"certificate-authority-data: {data}"))

    def watch(self, uid, extra=()):
        d = os.path.join(tmpdir(), "snapshots")
        w = Background(["watch", "-o", d, "--pods-dir", pods_dir(uid), "--kube-events",
                        "--kubeconfig", self.config, "--node", NODE, *extra])
        w.dir = d
        return w

    def kills(self, uid, path, n, until, what):
        """N OOM kills in the cgroup at PATH under a watch of this cluster, until
        UNTIL() (the server's record) holds; the cgroup and the server gone
        after: (watch's status, stdout, stderr, the verdict files)."""
        w = self.watch(uid)
        try:
            kill_in(path, n)
            verdicts = wait_files(w.dir, "verdict-*.json", n)
            wait_for(until, 30, what)
        finally:
            rc, out, err = w.stop()
            remove_tree(path)
            self.api.stop()
        return rc, out, err, verdicts

    def service_account(self):
        """A folder as the kubelet mounts a pod's service account: token, ca.crt."""
        sa = os.path.join(self.dir, "sa")
        os.makedirs(sa)
        write(os.path.join(sa, "token"), TOKEN_A)
        write(os.path.join(sa, "ca.crt"), open(self.ca[0]).read())
        return sa

    def rotate(self, token):
        """The token replaced as the kubelet replaces a projected one: a new file renamed in."""
        write(self.server_token, token)
        write(self.token + ".new", token)
        os.rename(self.token + ".new", self.token)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def wait_for(cond, timeout, what):
    """Polls COND (the API server's own record) until true or TIMEOUT s."""
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def kill_in(path, n=1):
    """N real OOM kills: hog (4 MiB at a time) in the cgroup at PATH."""
    for _ in range(n):
        p = subprocess.run(in_cgroup(path, [workload("hog")]), capture_output=True, timeout=60)
        check_eq(p.returncode, -signal.SIGKILL, "the workload's end")


def oom_kills(path):
    for name, key in (("memory.oom_control", "oom_kill "), ("memory.events", "oom_kill ")):
        f = os.path.join(path, name)
        if os.path.exists(f):
            with open(f) as fh:
                return int(fh.read().split(key)[1].split()[0])
    raise AssertionError("no oom_kill count")


def check_event(ev, uid, reason="OOMKilledAtLimit"):
    """The Event on the Pod, as kubectl describe and kubectl events find it."""
    check_eq(ev["regarding"], {"apiVersion": "v1", "kind": "Pod", "namespace": NS, "name": POD,
                               "uid": uid, "fieldPath": f"spec.containers{{{CONTAINER}}}"},
             "regarding")
    check_eq(ev["metadata"]["namespace"], NS, "the Event's namespace")
    check_eq(ev["related"], {"apiVersion": "v1", "kind": "Node", "name": NODE}, "related")
    check_eq((ev["type"], ev["reason"], ev["action"]), ("Warning", reason, "Killed"),
             "type, reason, action")
    check_eq((ev["reportingController"], ev["reportingInstance"]), ("memtrail.io/watch", NODE),
             "reporting")
    check(len(ev["note"].encode()) <= 1024, f"note of {len(ev['note'])} bytes")


def no_token_shown(out, err):
    for t in (TOKEN_A, TOKEN_B):
        check(t not in out and t not in err, "the token is never printed")


def test_kube_event_on_the_pod_names_the_growing_line():
    """In a pod, as the DaemonSet runs it: the service account's token and CA
    (in a mount namespace of its own, /run/secrets/kubernetes.io/serviceaccount),
    KUBERNETES_SERVICE_HOST/PORT and NODE_NAME. A Python program grows past
    its container's limit: exactly one valid Event on its Pod, whose note
    names the limit and the growing line (from the program's own ledger)."""
    c = Cluster()
    ids = new_pod_ids()
    sa = c.service_account()
    d = os.path.join(tmpdir(), "snapshots")
    inner = ('mount -t tmpfs none /run && mkdir -p /run/secrets/kubernetes.io && '
             f'cp -r {sa} /run/secrets/kubernetes.io/serviceaccount && exec "$@"')
    env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
               KUBERNETES_SERVICE_PORT=str(c.api.port), NODE_NAME=NODE)
    env.pop("KUBECONFIG", None)
    path, rel, limit, uid, cid = kubelet_memcg(128 * MiB, ids)
    w = None
    try:
        # memtrail in a mount namespace of its own, as in its pod
        w = Background(["watch", "-o", d, "--pods-dir", pods_dir(ids[0]), "--kube-events"],
                       prefix=["unshare", "-m", "--propagation", "private", "sh", "-c", inner,
                               "sh"], env=env)
        ledger = os.path.join(tmpdir(), "ledger.json")
        p = subprocess.run(in_cgroup(path, ["/usr/bin/python3", PY_OOM_SITES, ledger]),
                           capture_output=True, timeout=120)
        check_eq(p.returncode, -signal.SIGKILL, f"the workload's end ({p.stderr[-300:]!r})")
        kills = oom_kills(path)
        verdicts = wait_files(d, "verdict-*.json", 1)
        wait_for(lambda: c.api.events, 30, "the Event")
    finally:
        rc, out, err = w.stop() if w else (None, "", "")
        remove_tree(path)
        c.api.stop()
    check_eq(rc, 0, f"watch's status ({err!r})")
    check(not lost_lines(err), f"nothing lost: {err!r}")
    check("posting verdicts as Events to https://127.0.0.1:" in err and
          ", from the pod's service account, as node " + NODE in err, f"where Events go: {err!r}")
    no_token_shown(out, err)
    check_eq(kills, 1, "the cgroup's oom_kill count")
    check_eq(len(verdicts), 1, "verdict files")
    v = load(verdicts[0])
    events = list(c.api.snapshot().values())
    check_eq(len(events), 1, "Events")
    ev = events[0]
    check_event(ev, uid)
    check("series" not in ev, "one kill: no series")
    with open(ledger) as f:
        book = json.load(f)
    check_eq(v["pid"], book["pid"], "the victim")
    check(ev["note"].startswith(f"{book['pid']} (python3) oom_cgroup: the kernel OOM killer, "
                                f"cgroup {rel}"), f"the note says the verdict: {ev['note']!r}")
    check("limit 128.0 MiB" in ev["note"], f"the note says the limit: {ev['note']!r}")
    if v["top_site"]:
        label = f"main (py_oom_sites.py:{book['lines']['grow']})"
        check(f"top site: {label}" in ev["note"], f"the note names the growing line: "
              f"{ev['note']!r}")
    check_eq(c.api.statuses(), [201], "the API server's answers")
    print(describe_events([ev]))
    no_programs_left()


def test_kube_twenty_kills_one_event_and_its_series():
    """Twenty OOM kills of one container: one Event, its series counted to
    twenty (strategic merge patches of the series alone, as client-go's)."""
    c = Cluster()
    ids = new_pod_ids()
    path, rel, limit, uid, cid = kubelet_memcg(32 * MiB, ids)
    w = c.watch(ids[0])
    try:
        kill_in(path, 20)
        kills = oom_kills(path)
        verdicts = wait_files(w.dir, "verdict-*.json", 20)
        wait_for(lambda: [e for e in c.api.snapshot().values()
                          if (e.get("series") or {}).get("count") == 20], 60,
                 "a series of twenty")
    finally:
        rc, out, err = w.stop()
        remove_tree(path)
        c.api.stop()
    check_eq(rc, 0, f"watch's status ({err!r})")
    check_eq(kills, 20, "the cgroup's oom_kill count")
    check_eq(len(verdicts), 20, "verdict files")
    events = list(c.api.snapshot().values())
    check_eq(len(events), 1, "Events")
    ev = events[0]
    check_event(ev, uid)
    check_eq(ev["series"]["count"], 20, "the series")
    print(describe_events([ev]))
    print(kubectl_events([ev]))
    check(ev["series"]["lastObservedTime"] >= ev["eventTime"], "last observed after the first")
    check_eq(c.api.statuses("POST"), [201], "one create")
    patches = c.api.statuses("PATCH")
    check(patches and all(s == 200 for s in patches), f"patches taken: {patches}")
    no_token_shown(out, err)
    no_programs_left()


def test_kube_server_busy_then_taken():
    """The API server answers 503, then 429: the Event is posted again and
    taken (the kubeconfig's CA given as certificate-authority-data)."""
    c = Cluster(ca_data=True)
    ids = new_pod_ids()
    path, rel, limit, uid, cid = kubelet_memcg(32 * MiB, ids)
    c.api.fail_first([503, 429])
    rc, out, err, verdicts = c.kills(ids[0], path, 1, lambda: c.api.events, "the Event")
    check_eq(rc, 0, f"watch's status ({err!r})")
    check_eq(c.api.statuses(), [503, 429, 201], "the API server's answers")
    events = list(c.api.snapshot().values())
    check_eq(len(events), 1, "Events")
    check_event(events[0], uid)


def test_kube_server_down_two_minutes_loses_nothing():
    """The API server down for two minutes while three kills happen in two
    pods: once it is back, every Event is there (one per pod, the second
    pod's with a series of two), and nothing is said dropped."""
    c = Cluster()
    a, b = new_pod_ids(), new_pod_ids()
    pa = kubelet_memcg(32 * MiB, a)
    pods = pods_dir(a[0])
    d = os.path.join(pods, f"{NS}_{POD}-b_{b[0]}", CONTAINER)
    os.makedirs(d)
    write(os.path.join(d, "0.log"), "")
    pb = None
    snaps = os.path.join(tmpdir(), "snapshots")
    c.api.stop()
    down = time.time()
    w = Background(["watch", "-o", snaps, "--pods-dir", pods, "--kube-events",
                    "--kubeconfig", c.config, "--node", NODE])
    try:
        pb = kubelet_memcg(32 * MiB, b)
        kill_in(pa[0])
        kill_in(pb[0], 2)
        check_eq(len(wait_files(snaps, "verdict-*.json", 3)), 3, "verdict files")
        time.sleep(max(0, down + 120 - time.time()))   # the outage the test is about
        check_eq(c.api.requests, [], "nothing reached a server that is down")
        c.api.start()
        wait_for(lambda: len(c.api.events) == 2 and
                 any((e.get("series") or {}).get("count") == 2 for e in c.api.snapshot().values()),
                 60, "both Events once the server is back")
    finally:
        rc, out, err = w.stop()
        remove_tree(pa[0])
        if pb:
            remove_tree(pb[0])
        c.api.stop()
    check_eq(rc, 0, f"watch's status ({err!r})")
    check(not [x for x in err.splitlines() if "kube events:" in x and
               ("dropped" in x or "gave up" in x or "not taken" in x)],
          f"no Event dropped, given up or left: {err!r}")
    events = {e["regarding"]["name"]: e for e in c.api.snapshot().values()}
    check_eq(sorted(events), [POD, POD + "-b"], "an Event on each pod")
    check("series" not in events[POD], "one kill in the first pod")
    check_eq(events[POD + "-b"]["series"]["count"], 2, "two in the second")
    check_eq(events[POD + "-b"]["regarding"]["uid"], b[0], "the second pod's uid")


def test_kube_untrusted_certificate_gets_nothing():
    """An API server whose certificate the kubeconfig's CA did not sign gets
    nothing; the failure is said once, plainly, and the verdict file is
    written as always."""
    c = Cluster(rogue=True)
    ids = new_pod_ids()
    path, rel, limit, uid, cid = kubelet_memcg(32 * MiB, ids)
    # the poster's first try: the server saw memtrail end the handshake
    rc, out, err, verdicts = c.kills(ids[0], path, 2, lambda: c.api.handshake_failures,
                                     "a handshake the client refused")
    check_eq(rc, 0, f"watch's status ({err!r})")
    check_eq(len(verdicts), 2, "the verdict files, written as always")
    check_eq(c.api.requests, [], "no request got through")
    check("unknown ca" in c.api.handshake_failures[0].lower(),
          f"refused for its CA: {c.api.handshake_failures[0]}")
    check_eq(c.api.events, {}, "no Event")
    check_eq(err.count("TLS with the API server"), 1, f"said once: {err!r}")
    check("1 Event not taken by the API server at exit" in err, f"what is left, said: {err!r}")


def test_kube_token_replaced_mid_run_is_used():
    """The token file replaced mid-run (the kubelet rotates projected tokens)
    and the server taking only the new token: the next kill's series patch
    carries the new one; the server never answered 401."""
    c = Cluster()
    ids = new_pod_ids()
    path, rel, limit, uid, cid = kubelet_memcg(32 * MiB, ids)
    w = c.watch(ids[0])
    try:
        kill_in(path)
        wait_for(lambda: c.api.events, 30, "the first Event")
        c.rotate(TOKEN_B)
        kill_in(path)
        wait_for(lambda: any((e.get("series") or {}).get("count") == 2
                             for e in c.api.snapshot().values()), 30, "the series of two")
    finally:
        rc, out, err = w.stop()
        remove_tree(path)
        c.api.stop()
    check_eq(rc, 0, f"watch's status ({err!r})")
    check_eq(c.api.statuses(), [201, 200], "create, then patch with the new token")
    no_token_shown(out, err)


def test_kube_config_errors():
    """A cluster memtrail cannot reach safely is said in one line before any
    BPF is loaded, exit 1: none found, a missing file, an exec plugin,
    insecure-skip-tls-verify, plain http."""
    d = tmpdir()
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",
                                                            "KUBERNETES_SERVICE_HOST")}

    def err_of(*args):
        p = run([MEMTRAIL, "watch", "-o", os.path.join(d, "out"), "--kube-events", *args],
                env=env)
        check_eq(p.returncode, 1, f"exit status of {args} ({p.stderr!r})")
        lines = p.stderr.strip().splitlines()
        check_eq(len(lines), 1, f"one line for {args}: {p.stderr!r}")
        return lines[0]

    check("no cluster to post Events to" in err_of(), "no cluster")
    check("kubeconfig /nonexistent: No such file" in err_of("--kubeconfig", "/nonexistent"),
          "a missing file")
    cfg = os.path.join(d, "kc")
    ca = os.path.join(d, "ca.crt")
    write(ca, "")
    base = open(kubeconfig(cfg, "https://127.0.0.1:6443", ca, "/nonexistent-token")).read()
    write(cfg, base.replace("    tokenFile: /nonexistent-token",
                            "    exec:\n      command: aws"))
    check("gets its credentials from an exec plugin" in err_of("--kubeconfig", cfg),
          "exec plugin refused")
    write(cfg, base.replace(f"    certificate-authority: {ca}",
                            "    insecure-skip-tls-verify: true"))
    check("always verifies" in err_of("--kubeconfig", cfg), "insecure refused")
    write(cfg, base.replace("https://", "http://"))
    check("over https:// only" in err_of("--kubeconfig", cfg), "http refused")
    write(cfg, base)
    check("tokenFile /nonexistent-token cannot be read" in err_of("--kubeconfig", cfg),
          "an unreadable token file")
    write(cfg, base.replace(ca, "/nonexistent-ca"))
    check("certificate-authority /nonexistent-ca cannot be read" in
          err_of("--kubeconfig", cfg), "an unreadable CA")
    write(cfg, "clusters: [")
    check("not YAML" in err_of("--kubeconfig", cfg), "not YAML")
    p = run([MEMTRAIL, "watch", "--node", "x"])
    check_eq(p.returncode, 2, "--node without --kube-events")
    check(not os.path.exists(os.path.join(d, "out")), "no directory made by a run that failed")


def test_kube_device_oom_and_signal_events():
    """A CUDA allocation out of device memory (the stand-in libcuda fails it
    on demand) and a SIGKILL sent by another process, in one container: an
    Event each, DeviceOutOfMemory naming the call and its line (the workload's
    own source), KilledBySignal naming the sender."""
    from test_devices import LIBCUDA, device_oom_snapshot, mapping, source_line
    from harness import ROOT
    c = Cluster()
    ids = new_pod_ids()
    path, rel, limit, uid, cid = kubelet_memcg(1024 * MiB, ids)
    # the model server has its runtime mapped before watch starts (probed at its start)
    proc = subprocess.Popen(in_cgroup(path, [workload("cuda_phases"), "--wait"]),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    mapping(proc.pid, LIBCUDA)
    w = c.watch(ids[0])
    victim = None
    try:
        data, files = device_oom_snapshot(w.dir, proc)
        check_eq(len(files), 1, "the device OOM snapshot")
        wait_for(lambda: c.api.events, 30, "the device OOM's Event")
        victim = subprocess.Popen(in_cgroup(path, ["sleep", "600"]))
        mapping(victim.pid, "/usr/bin/sleep")
        sender = subprocess.run(["sh", "-c", f"kill -9 {victim.pid}; echo $$"],
                                capture_output=True, text=True)
        victim.wait(timeout=10)
        wait_for(lambda: len(c.api.events) == 2, 30, "the SIGKILL's Event")
    finally:
        rc, out, err = w.stop()
        if victim and victim.poll() is None:
            victim.kill()
        remove_tree(path)
        c.api.stop()
    check_eq(rc, 0, f"watch's status ({err!r})")
    events = {e["reason"]: e for e in c.api.snapshot().values()}
    check_eq(sorted(events), ["DeviceOutOfMemory", "KilledBySignal"], "the Events' reasons")
    dev = events["DeviceOutOfMemory"]
    check_eq(dev["action"], "AllocationFailed", "the device OOM's action")
    check_eq(dev["regarding"]["uid"], uid, "on the pod")
    line = source_line(os.path.join(ROOT, "tests", "workloads", "cuda_phases.c"),
                       "cuMemAlloc_v2(&d2, 16 * MiB)")
    check(dev["note"].startswith(f"{data['pid']} (cuda_phases) cuMemAlloc_v2 of ") and
          "CUDA_ERROR_OUT_OF_MEMORY" in dev["note"] and "in phase 'execute'" in dev["note"] and
          f"top site: main (cuda_phases.c:{line}), 16.0 MiB cuda_device" in dev["note"],
          f"the device OOM's note: {dev['note']!r}")
    sig = events["KilledBySignal"]
    check_event(sig, uid, reason="KilledBySignal")
    check(sig["note"].startswith(f"{victim.pid} (sleep) signal: SIGKILL sent by "
                                 f"{sender.stdout.strip()} (sh, "), f"the sender: {sig['note']!r}")
    no_programs_left()
