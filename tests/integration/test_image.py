# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""make image: the DaemonSet's image, built from this checkout and Debian's
packages, run by podman as the manifest of `memtrail daemonset` runs it (its
command, environment, mounts, hostPID and privileged), in a pod's shoes: the
service account's files mounted where the kubelet mounts them, a loopback
API server (kubeapi.py) as the cluster. A real OOM kill in a kubelet-shaped
cgroup gives the verdict file on the node's disk and the Event on the Pod."""

import os
import signal
import subprocess

from harness import (MiB, ROOT, check, check_eq, in_cgroup, kubelet_memcg, new_pod_ids,
                     no_programs_left, remove_tree, run, MEMTRAIL, tmpdir, workload)
from test_daemonset import documents
from test_kube import NODE, Cluster, check_event, wait_for
from test_watch import load, pods_dir, wait_files

IMAGE = "memtrail:0.1.0"


def podman_run(*args):
    """podman run as root on this machine: runc (crun refuses a host whose
    cgroups are v1 and v2 at once) and the host's own file limits (root here
    cannot raise them to podman's defaults)."""
    hard = subprocess.run(["sh", "-c", "ulimit -Hn"], capture_output=True, text=True).stdout.strip()
    return ["podman", "--runtime", "runc", "run", "--rm", "--network=host",
            "--ulimit", f"nofile={hard}:{hard}", "--ulimit", "nproc=32768:32768", *args]


def test_image_runs_as_the_manifest_does():
    p = run(["make", "-C", ROOT, "image"], timeout=900)
    check_eq(p.returncode, 0, f"make image ({p.stdout[-500:]} {p.stderr[-1500:]})")
    check(f"memtrail: image {IMAGE}: " in p.stdout, f"its size said: {p.stdout[-300:]!r}")
    check_eq(run(["podman", "image", "exists", IMAGE]).returncode, 0, "the image is there")
    docs = documents()
    ds = docs["DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    c = spec["containers"][0]
    check_eq(c["image"], IMAGE, "memtrail daemonset names the image make image builds")

    # the programs load in the image on this kernel, as on the host
    inside = run(podman_run("--privileged", "--pid=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup",
                            IMAGE, "memtrail", "features"))
    check_eq(inside.returncode, 0, f"memtrail features in the image ({inside.stderr!r})")
    host = run([MEMTRAIL, "features"])
    check_eq(inside.stdout.splitlines()[1:], host.stdout.splitlines()[1:],
             "the features the image finds are the host's")

    # the manifest's pod, by podman
    cl = Cluster()
    ids = new_pod_ids()
    sa = cl.service_account()
    snaps = os.path.join(tmpdir(), "snapshots")
    # the host's paths of this test for the node's (the pods' logs, the snapshots' disk)
    host_of = {"/var/log/pods": pods_dir(ids[0]), "/var/lib/memtrail/snapshots": snaps}
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    args = []
    for m in c["volumeMounts"]:
        src = host_of.get(volumes[m["name"]], volumes[m["name"]])
        os.makedirs(src, exist_ok=True)
        args += ["-v", f"{src}:{m['mountPath']}" + (":ro" if m.get("readOnly") else "")]
    args += ["-v", f"{sa}:/var/run/secrets/kubernetes.io/serviceaccount:ro"]
    check(spec["hostPID"] and c["securityContext"]["privileged"], "hostPID and privileged")
    args += ["--pid=host", "--privileged"]
    check_eq([e["name"] for e in c["env"]], ["NODE_NAME"], "the manifest's environment")
    args += ["-e", f"NODE_NAME={NODE}", "-e", "KUBERNETES_SERVICE_HOST=127.0.0.1",
             "-e", f"KUBERNETES_SERVICE_PORT={cl.api.port}"]
    pod = subprocess.Popen(podman_run(*args, IMAGE, *c["command"]), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    path = None
    try:
        lines = []
        while not any("tracing" in x for x in lines):
            line = pod.stderr.readline()
            check(line, f"the pod's watch started: {''.join(lines)!r}")
            lines.append(line)
        path, rel, limit, uid, cid = kubelet_memcg(32 * MiB, ids)
        k = subprocess.run(in_cgroup(path, [workload("hog")]), capture_output=True, timeout=60)
        check_eq(k.returncode, -signal.SIGKILL, "the workload's end")
        verdicts = wait_files(snaps, "verdict-*.json", 1)
        wait_for(lambda: cl.api.events, 30, "the Event")
    finally:
        pod.send_signal(signal.SIGTERM)
        out, err = pod.communicate(timeout=60)
        if path:
            remove_tree(path)
        cl.api.stop()
    check_eq(pod.returncode, 0, f"the pod's end ({''.join(lines) + err!r})")
    check_eq(len(verdicts), 1, "the verdict file on the node's disk")
    v = load(verdicts[0])
    check_eq((v["verdict"]["cause"], v["pod"]["uid"]), ("oom_cgroup", uid), "the verdict")
    events = list(cl.api.snapshot().values())
    check_eq(len(events), 1, "Events")
    check_event(events[0], uid)
    check(events[0]["note"].startswith(f"{v['pid']} (hog) oom_cgroup"), "the note")
    no_programs_left()
