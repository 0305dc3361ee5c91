# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""memtrail top on a real terminal (tmux panes, keys sent, screens captured):
a workload's row, phase and levels against /proc and its cgroup's files; the
pod view of kubelet-shaped cgroups; q, Ctrl-C and SIGTERM restoring the
terminal; 80x24 and a resize; plain tables into a pipe; bad arguments. And
record's and watch's status line: on a terminal only."""

import json
import os
import re
import shutil
import signal
import subprocess
import time

from test_devices import source_line
from harness import (MEMTRAIL, ROOT, NODE_PROCS, MiB, check, check_eq, in_cgroup,
                     kubelet_memcg, memcg_v1, new_pod_ids, no_programs_left, one_line_error, remove_tree, run,
                     tmpdir, workload)

PROMPT = "prompt$ "
TITLE = re.compile(r"^memtrail top \d\d:\d\d:\d\d, ")
UNITS = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class Pane:
    """An interactive bash in a tmux pane of COLS x ROWS, on a server of its own."""

    def __init__(self, cols=80, rows=24):
        check(shutil.which("tmux"), "tmux is installed (tests/deps.sh lists it)")
        self.socket = os.path.join(tmpdir(), "tmux")
        self.tmux("new-session", "-d", "-s", "t", "-x", str(cols), "-y", str(rows),
                  "env", f"PS1={PROMPT}", "TERM=screen", "bash", "--norc", "--noprofile")
        self.wait(lambda s: s.rstrip().endswith(PROMPT.strip()), "the shell's prompt")

    def tmux(self, *args):
        p = run(["tmux", "-S", self.socket, *args], timeout=30)
        check_eq(p.returncode, 0, f"tmux {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout

    def type(self, line):
        self.tmux("send-keys", "-t", "t", "-l", line)
        self.tmux("send-keys", "-t", "t", "Enter")

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "t", *keys)

    def screen(self, joined=False):
        """The visible pane; JOINED puts wrapped lines back together."""
        return self.tmux("capture-pane", "-p", "-t", "t", *(["-J"] if joined else []))

    def flag(self, name):
        return self.tmux("display-message", "-p", "-t", "t", "#{" + name + "}").strip()

    def wait(self, ready, what, timeout=20):
        deadline = time.time() + timeout
        while True:
            s = self.screen()
            if ready(s):
                return s
            if time.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{s}")
            time.sleep(0.1)

    def child(self):
        """The PID of the command the shell runs."""
        shell = int(self.flag("pane_pid"))
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == shell:
                            return int(d)
                except (OSError, IndexError):
                    pass
        raise AssertionError("the shell runs no command")

    def close(self):
        run(["tmux", "-S", self.socket, "kill-server"])
        if os.path.exists(self.socket):
            os.unlink(self.socket)


def size(text):
    """A size as top prints it ("48.1M", "4.00K", "0") in bytes."""
    if text == "0":
        return 0
    return float(text[:-1]) * UNITS[text[-1]]


def close_to(got, want, what, pct=2, slack=256 * 1024):
    check(abs(got - want) <= max(abs(want) * pct / 100, slack),
          f"{what}: got {got}, want {want} within {pct}%")


def table(lines):
    """The rows of the table whose title is lines[0]: dicts by column name.
    COMM and PHASE of the tests' workloads hold no spaces."""
    check(TITLE.match(lines[0]), f"a title line first: {lines[0]!r}")
    head = lines[1].split()
    rows = []
    for line in lines[2:]:
        if not line.strip():
            break
        rows.append(dict(zip(head, line.split())))
    return head, rows


def row_of(rows, key, value):
    for r in rows:
        if r.get(key) == value:
            return r
    return None


def status_bytes(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def memcg_rss(path):
    """Anonymous memory charged to a v1 memory cgroup and below, from memory.stat."""
    with open(os.path.join(path, "memory.stat")) as f:
        return int(dict(line.split() for line in f)["total_rss"])


class Holder:
    """tests/workloads/holder: MIB MiB held in phase PHASE once released."""

    def __init__(self, phase, mib, cgroup=None):
        cmd = [workload("holder"), phase, str(mib)]
        self.proc = subprocess.Popen(in_cgroup(cgroup, cmd) if cgroup else cmd,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=0)
        self.pid = self.proc.pid
        self.ledger = None

    def release(self):
        self.proc.stdin.write("g")
        self.ledger = ledger(self.proc.stdout.readline())

    def end(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)


def ledger(line):
    check(line.startswith("{"), f"the workload's ledger: {line!r}")
    return json.loads(line)


def start_top(pane, args):
    """memtrail top ARGS in PANE, up once its first screen is drawn."""
    pane.type(" ".join([MEMTRAIL, "top", *args]))
    pane.wait(lambda s: TITLE.match(s) and pane.flag("alternate_on") == "1",
              "top's first screen")


def screen_table(pane):
    return table(pane.screen().splitlines())


def check_restored(pane, how):
    """top ended by HOW: the shell's screen back, exit status 0, cursor shown,
    echo and line mode on again."""
    s = pane.wait(lambda s: s.rstrip().endswith(PROMPT.strip()) and
                  pane.flag("alternate_on") == "0", f"the prompt after {how}")
    check(not any(TITLE.match(l) for l in s.splitlines()), f"{how}: top's title on the "
          f"shell's screen:\n{s}")
    check("RSS_ANON" not in s, f"{how}: top's table on the shell's screen:\n{s}")
    check_eq(pane.flag("cursor_flag"), "1", f"{how}: cursor shown")
    pane.type("clear; echo status=$?; stty -a | tr ' ;' '\\n\\n' | "
              "grep -x -e echo -e icanon -e -echo -e -icanon | sort | tr '\\n' ' '; echo")
    s = pane.wait(lambda s: "status=" in s and s.rstrip().endswith(PROMPT.strip()),
                  "stty's output")
    lines = [l.strip() for l in s.splitlines()]
    check("status=0" in lines, f"{how}: top's exit status:\n{s}")
    check("echo icanon" in lines, f"{how}: stty -a after top shows echo and icanon on:\n{s}")


def test_top_row_phase_and_levels():
    """The workload's row: its PID, comm, phase, resident and mapped bytes
    against /proc; the trend while it grows and once it is flat; q quits."""
    h = Holder("serve", 48)
    pane = Pane()
    try:
        start_top(pane, ["--pid", str(h.pid)])
        h.release()
        rss, data = status_bytes(h.pid, "RssAnon"), status_bytes(h.pid, "VmData")

        def grown(s):
            r = row_of(table(s.splitlines())[1], "PID", str(h.pid))
            return r and r["PHASE"] == "serve" and abs(size(r["RSS_ANON"]) - rss) < 2 * MiB
        pane.wait(grown, "the row with 48 MiB in phase 'serve'")
        head, rows = screen_table(pane)
        check_eq(head, ["PID", "COMM", "PHASE", "RSS_ANON", "RSS_FILE", "MAPPED", "PEAK",
                        "TREND"], "columns at 80x24")
        r = row_of(rows, "PID", str(h.pid))
        check_eq(len(rows), 1, "rows with --pid")
        check_eq((r["COMM"], r["PHASE"]), ("holder", "serve"), "comm and phase")
        close_to(size(r["RSS_ANON"]), rss, "RSS_ANON vs RssAnon")
        close_to(size(r["RSS_ANON"]), h.ledger["rss_anon"], "RSS_ANON vs the holder's ledger")
        close_to(size(r["MAPPED"]), data, "MAPPED vs VmData")
        close_to(size(r["PEAK"]), rss, "PEAK (never freed) vs RssAnon")
        check(r["TREND"].startswith("+"), f"trend right after 48 MiB: {r['TREND']}")
        pane.wait(lambda s: row_of(table(s.splitlines())[1], "PID", str(h.pid))["TREND"]
                  == "0/s", "a flat trend after 5 idle intervals", timeout=15)
        pane.keys("q")
        check_restored(pane, "q")
    finally:
        pane.close()
        h.end()
    no_programs_left()


def check_stops(how):
    h = Holder("idle", 4)
    pane = Pane()
    try:
        start_top(pane, ["--pid", str(h.pid)])
        if how == "Ctrl-C":
            pane.keys("C-c")
        else:
            os.kill(pane.child(), signal.SIGTERM)
        check_restored(pane, how)
    finally:
        pane.close()
        h.end()
    no_programs_left()


def test_top_ctrl_c_restores_terminal():
    check_stops("Ctrl-C")


def test_top_sigterm_restores_terminal():
    check_stops("SIGTERM")


def test_top_ctrl_z_gives_the_terminal_back_until_fg():
    h = Holder("idle", 4)
    pane = Pane()
    try:
        start_top(pane, ["--pid", str(h.pid)])
        pane.keys("C-z")
        s = pane.wait(lambda s: s.rstrip().endswith(PROMPT.strip()) and
                      pane.flag("alternate_on") == "0", "the shell's screen after Ctrl-Z")
        check("Stopped" in s, f"top stopped as a job:\n{s}")
        check_eq(pane.flag("cursor_flag"), "1", "cursor shown while stopped")
        pane.type("fg")
        pane.wait(lambda s: TITLE.match(s) and pane.flag("alternate_on") == "1",
                  "top's screen again after fg")
        check_eq(pane.flag("cursor_flag"), "0", "cursor hidden again")
        pane.keys("q")
        check_restored(pane, "q after fg")
    finally:
        pane.close()
        h.end()
    no_programs_left()


def test_top_fits_80x24_and_resize():
    """Node-wide with more processes than rows: every line within 80 columns,
    24 lines with the title on top; after a resize to 60x15, the same at the
    new size, with the kind columns that do not fit left out."""
    sleepers = [subprocess.Popen(["sleep", "60"]) for _ in range(30)]
    pane = Pane()
    try:
        start_top(pane, ["-i", "200"])
        for cols, rows in ((80, 24), (60, 15)):
            if cols != 80:
                pane.tmux("resize-window", "-t", "t", "-x", str(cols), "-y", str(rows))
                pane.wait(lambda s: len(s.splitlines()[1].split()) == 6,
                          "the table redrawn for 60 columns")
            time.sleep(0.5)  # a few refreshes at this size: nothing scrolled
            lines = pane.screen(joined=True).splitlines()
            check_eq(len(lines), rows, f"lines on a {cols}x{rows} screen")
            long = [l for l in lines if len(l) > cols]
            check(not long, f"lines wider than {cols} columns: {long}")
            check(TITLE.match(lines[0]), f"{cols}x{rows}: title on top: {lines[0]!r}")
            check(lines[-1].strip(), f"{cols}x{rows}: rows down to the last line")
            head, _ = table(lines)
            want = (["PID", "COMM", "PHASE", "RSS_ANON", "RSS_FILE", "MAPPED", "PEAK", "TREND"]
                    if cols == 80 else ["PID", "COMM", "PHASE", "RSS_ANON", "PEAK", "TREND"])
            check_eq(head, want, f"columns at {cols}x{rows}")
        pane.keys("q")
        check_restored(pane, "q")
    finally:
        pane.close()
        for p in sleepers:
            p.kill()
            p.wait()
    no_programs_left()


def pods_dir(uid, namespace, pod, containers):
    """The kubelet's log layout: <namespace>_<pod>_<uid>/<container>/0.log, and
    containers/<pod>_<namespace>_<container>-<id>.log beside it."""
    root = tmpdir()
    for name in containers:
        d = os.path.join(root, "pods", f"{namespace}_{pod}_{uid}", name)
        os.makedirs(d)
        open(os.path.join(d, "0.log"), "w").close()
    return os.path.join(root, "pods")


def test_top_pod_view():
    """Two containers of a kubelet-shaped pod and a Docker container outside
    any pod: one row each, named, with the pod's processes counted and its
    bytes against the cgroups' own memory.stat; node-wide, the rest under '-'."""
    uid, cid = new_pod_ids()
    _, cid2 = new_pod_ids()
    _, cid3 = new_pod_ids()
    pods = pods_dir(uid, "serving", "llama-7b", ["model-server", "sidecar"])
    path, rel, _, _, _ = kubelet_memcg(1 << 30, (uid, cid))
    pod_dir = os.path.dirname(path)
    sidecar = memcg_v1(os.path.relpath(os.path.join(pod_dir, f"cri-containerd-{cid2}"),
                                       "/sys/fs/cgroup/memory"))
    top_dir = memcg_v1(rel.split("/")[1])
    docker = memcg_v1(f"{rel.split('/')[1]}/docker/{cid3}")
    holders = [Holder("load", 32, path), Holder("sidecar", 8, sidecar), Holder("solo", 16, docker)]
    pane = Pane()
    try:
        start_top(pane, ["--by", "pod", "--cgroup", top_dir, "--pods-dir", pods])
        for h in holders:
            h.release()
        pod_rss = memcg_rss(pod_dir)
        docker_rss = memcg_rss(docker)
        label = f"ctr:{cid3[:12]}"

        def shown(s):
            rows = table(s.splitlines())[1]
            p, d = row_of(rows, "POD", "serving/llama-7b"), row_of(rows, "POD", label)
            return p and d and p["PROCS"] == "2" and \
                abs(size(p["RSS_ANON"]) - pod_rss) < 2 * MiB
        pane.wait(shown, "the pod's row with both containers' memory")
        s = pane.screen()
        head, rows = table(s.splitlines())
        check_eq(head[:3], ["POD", "PROCS", "PHASE"], "pod view columns")
        check(s.splitlines()[0].startswith(TITLE.match(s).group(0) + "1 pod, 3 processes"),
              f"the title counts pods and processes: {s.splitlines()[0]!r}")
        p, d = row_of(rows, "POD", "serving/llama-7b"), row_of(rows, "POD", label)
        check_eq(len(rows), 2, f"rows: {rows}")
        check_eq(p["PHASE"], "load", "the phase of the pod's largest process")
        close_to(size(p["RSS_ANON"]), pod_rss, "pod RSS_ANON vs the pod cgroup's total_rss")
        close_to(size(p["RSS_ANON"]), sum(status_bytes(h.pid, "RssAnon") for h in holders[:2]),
                 "pod RSS_ANON vs its processes' RssAnon")
        close_to(size(p["PEAK"]), pod_rss, "pod PEAK (nothing freed) vs total_rss")
        check_eq((d["PROCS"], d["PHASE"]), ("1", "solo"), "the Docker container's row")
        close_to(size(d["RSS_ANON"]), docker_rss, "container RSS_ANON vs its total_rss")
        pane.keys("q")
        check_restored(pane, "q")

        # node-wide, plain: the same pod, and everything else under "-"
        out = run([MEMTRAIL, "top", "--by", "pod", "-n", "1", "--pods-dir", pods])
        check_eq(out.returncode, 0, f"top -n 1 --by pod: {out.stderr!r}")
        _, rows = table(out.stdout.splitlines())
        p, rest = row_of(rows, "POD", "serving/llama-7b"), row_of(rows, "POD", "-")
        check(p and p["PROCS"] == "2", f"the pod node-wide: {rows}")
        check(rest and int(rest["PROCS"]) >= 1, f"processes outside pods under '-': {rows}")
    finally:
        pane.close()
        for h in holders:
            h.end()
        remove_tree(path)
    no_programs_left()


def test_top_plain_tables_into_a_pipe():
    """stdout a pipe: -n 2 prints two plain tables, no escape byte, each with
    the workload's row and --pid's sites pane; -n 1 one table."""
    h = Holder("batch", 24)
    try:
        h.proc.stdin.write("g")	# released first: top adopts it as it is
        h.ledger = ledger(h.proc.stdout.readline())
        for n in (2, 1):
            p = run([MEMTRAIL, "top", "-n", str(n), "-i", "300", "--pid", str(h.pid)])
            check_eq(p.returncode, 0, f"top -n {n}: {p.stderr!r}")
            check("\x1b" not in p.stdout + p.stderr, f"escape bytes in {p.stdout!r}")
            check_eq(p.stderr, "", "stderr")
            blocks = [t for t in p.stdout.split("\n\n") if t.strip()]
            tables = [t for t in blocks if TITLE.match(t)]
            check_eq(len(tables), n, f"tables in {p.stdout!r}")
            # --pid's sites below each: what it mapped before top started is no site's
            panes = [t for t in blocks if t.startswith(f"sites of {h.pid} (holder)")]
            check_eq(len(panes), n, f"a sites pane below each table in {p.stdout!r}")
            check(all(t.endswith("(none of what it allocated since top started is held)")
                      for t in panes), f"an empty pane says why: {panes}")
            rss = status_bytes(h.pid, "RssAnon")
            for t in tables:
                _, rows = table(t.splitlines())
                r = row_of(rows, "PID", str(h.pid))
                check(r, f"the workload's row in {t!r}")
                # adopted mid-life: its phase is the one it is in from then on
                check_eq((r["COMM"], r["PHASE"]), ("holder", "start"), "comm and phase")
                close_to(size(r["RSS_ANON"]), rss, "RSS_ANON vs RssAnon")
                close_to(size(r["MAPPED"]), status_bytes(h.pid, "VmData"), "MAPPED vs VmData")
    finally:
        h.end()
    # node-wide: memtrail itself is not a row
    for _ in range(5):
        p = run(["sh", "-c", f'"{MEMTRAIL}" top -n 1 | cat'])
        check_eq(p.returncode, 0, f"top -n 1: {p.stderr!r}")
        _, rows = table([x for x in p.stdout.splitlines() if x.strip()])
        # (a node-wide memtrail beside the suite, a DaemonSet's, is a row like any other)
        check(all(not r["COMM"].startswith("memtrail") or int(r["PID"]) in NODE_PROCS
                  for r in rows), f"top lists itself: {p.stdout!r}")
    no_programs_left()


def pane_sites(screen, pid):
    """The sites pane of PID on SCREEN: [(kind, size text, label)], or None."""
    lines = screen.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"sites of {pid} (holder), by bytes held now:"):
            return [tuple(re.match(r"  (\S+) +(\S+ \S+)  (.*)$", x).groups())
                    for x in lines[i + 1:] if re.match(r"  \S+ +[\d.]+ \S+  ", x)]
    return None


def test_top_sites_pane():
    """Two processes that map memory after top started: --pid's first is
    shown from the start; Enter shows the selected row's sites below the
    table instead (the holder's own mapping, its bytes exact, at its mmap
    line), down and s the next row's, s again hides them."""
    small, big = Holder("small", 24), Holder("big", 40)
    pane = Pane()
    line = source_line(os.path.join(ROOT, "tests", "workloads", "common.h"),
                       "char *p = mmap(NULL, size")
    site = f"main (common.h:{line}) < __libc_start_call_main"
    try:
        start_top(pane, ["--pid", str(small.pid), "--pid", str(big.pid)])
        pane.wait(lambda s: pane_sites(s, small.pid) == [], "--pid's pane, empty")
        check("(none of what it allocated since top started is held)" in pane.screen(),
              f"the empty pane says why:\n{pane.screen()}")
        small.release()
        big.release()
        pane.wait(lambda s: pane_sites(s, small.pid) == [("mapped", "24.0 MiB", site)],
                  "the first pid's mapping in its pane")
        # rows by RSS_ANON: the big one first, selected
        pane.wait(lambda s: [r["PID"] for r in table(s.splitlines())[1]] ==
                  [str(big.pid), str(small.pid)], "the big holder's row first")
        pane.keys("Enter")
        pane.wait(lambda s: pane_sites(s, big.pid) == [("mapped", "40.0 MiB", site)],
                  "the selected row's sites after Enter")
        pane.keys("Down", "s")
        pane.wait(lambda s: pane_sites(s, small.pid) == [("mapped", "24.0 MiB", site)],
                  "the next row's sites after Down and s")
        pane.keys("s")
        pane.wait(lambda s: "sites of" not in s, "the pane hidden by s again")
        check_eq((small.ledger["held"], big.ledger["held"]), (24 * MiB, 40 * MiB),
                 "the holders' own accounts")
        pane.keys("q")
        check_restored(pane, "q")
    finally:
        pane.close()
        small.end()
        big.end()
    no_programs_left()


def test_top_bad_arguments():
    for args, needle in (
            (["--sort", "bogus"], "invalid --sort 'bogus'"),
            (["--sort", "heap"], "invalid --sort 'heap'"),
            (["--by", "node"], "invalid --by 'node'"),
            (["-i", "5"], "invalid --interval '5'"),
            (["-n", "0"], "invalid --iterations '0'"),
            (["--pid", "12x"], "invalid --pid '12x'"),
            (["--pid", "1", "--cgroup", "/"], "too many targets"),
            (["--bogus"], "unknown option '--bogus'"),
            (["-s"], "option '-s' needs a value"),
            (["extra"], "unexpected argument 'extra'"),
    ):
        p = run([MEMTRAIL, "top", *args], timeout=30)
        check_eq(p.returncode, 2, f"status of memtrail top {' '.join(args)}")
        one_line_error(p, needle)
        check_eq(p.stdout, "", "output despite the error")
    no_programs_left()


STATUS = re.compile(r"^memtrail: \d+:\d\d:(\d\d) elapsed, 1 target, \d+ events?, 0 lost\s*$")


def status_lines(screen):
    return [l for l in screen.splitlines() if STATUS.match(l)]


def test_status_line_on_a_terminal_only():
    """record and watch under tmux: one status line, rewritten in place, gone
    at the end with the last log line at the start of its own; with stderr
    captured, no trace of it."""
    cg = memcg_v1(f"memtrail-test-{os.getpid()}/status")
    h = Holder("idle", 4, cg)
    d = tmpdir()
    pane = Pane(100, 30)
    try:
        for cmd, last in ((["record", "-o", os.path.join(d, "t.json"), "--pid", str(h.pid)],
                           "trail written to"),
                          (["watch", "-o", os.path.join(d, "snaps"), "--cgroup", cg],
                           "stopped:")):
            pane.type(f"clear; {MEMTRAIL} {' '.join(cmd)}")
            first = pane.wait(lambda s: status_lines(s), f"{cmd[0]}'s status line")
            sec = STATUS.match(status_lines(first)[0]).group(1)
            later = pane.wait(lambda s: status_lines(s) and
                              STATUS.match(status_lines(s)[0]).group(1) != sec,
                              f"{cmd[0]}'s status line a second later")
            check_eq(len(status_lines(later)), 1, f"{cmd[0]}: one status line, in place")
            pane.keys("C-c")
            s = pane.wait(lambda s: s.rstrip().endswith(PROMPT.strip()), f"{cmd[0]} stopped")
            check("elapsed" not in s, f"{cmd[0]}: the status line left behind:\n{s}")
            check(any(l.startswith("memtrail: ") and last in l for l in s.splitlines()),
                  f"{cmd[0]}: its last log line at the start of a line:\n{s}")

        # stderr captured: nothing of it
        p = subprocess.Popen([MEMTRAIL, "record", "-o", os.path.join(d, "t2.json"),
                              "--pid", str(h.pid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        check_eq(p.returncode, 0, f"record's status: {err!r}")
        check("elapsed" not in err and "\r" not in err and "\x1b" not in err,
              f"status text on a captured stderr: {err!r}")
        check_eq([l.split(":")[1].split()[0] for l in err.splitlines()],
                 ["tracing", "writing", "trail"], f"stderr holds the log lines only: {err!r}")
    finally:
        pane.close()
        h.end()
        remove_tree(cg)
    no_programs_left()
