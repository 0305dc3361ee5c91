# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Bad input: one line, a non-zero status, no BPF objects left behind."""

import json
import os
import re
import subprocess
import time

from harness import (MEMTRAIL, Background, check, check_eq, free_pid, one_line_error, run, tmpdir,
                     no_programs_left)


def test_not_root():
    d = tmpdir()
    os.chmod(d, 0o777)
    p = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             MEMTRAIL, "record", "-o", os.path.join(d, "t.json"), "--", "true"])
    one_line_error(p, "cannot load the BPF programs", "root")
    check(not os.path.exists(os.path.join(d, "t.json")), "a trail was written")
    no_programs_left()


def test_no_btf():
    d = tmpdir()
    empty = os.path.join(d, "empty")
    open(empty, "w").close()
    p = run(["unshare", "-m", "sh", "-c",
             f'mount --bind "{empty}" /sys/kernel/btf/vmlinux && exec "$@"', "sh",
             MEMTRAIL, "record", "-o", os.path.join(d, "t.json"), "--", "true"])
    one_line_error(p, "kernel BTF", "CONFIG_DEBUG_INFO_BTF")
    no_programs_left()


def test_unknown_pid():
    pid = free_pid()
    p = run([MEMTRAIL, "record", "-o", os.path.join(tmpdir(), "t.json"), "--pid", str(pid)])
    one_line_error(p, f"no process with PID {pid}")
    no_programs_left()


def test_pid_exits_while_attaching():
    """A target that exits after memtrail checked it but before its probes were
    attached: memtrail must say so rather than wait forever or report nothing."""
    hits = 0
    for delay in (0.05, 0.1, 0.02, 0.15, 0.2, 0.01, 0.3, 0.03):
        victim = subprocess.Popen(["sleep", str(delay)])
        out = os.path.join(tmpdir(), "t.json")
        t0 = time.time()
        p = run([MEMTRAIL, "record", "-q", "-o", out, "--pid", str(victim.pid)], timeout=60)
        victim.wait()
        check(time.time() - t0 < 30, "memtrail hung")
        if "exited while memtrail was attaching" in p.stderr:
            one_line_error(p, str(victim.pid))
            check(not os.path.exists(out), "a trail was written")
            hits += 1
        elif "no process with PID" in p.stderr:
            one_line_error(p, str(victim.pid))
        else:
            # attached in time: then the exit itself must be in the trail
            check_eq(p.returncode, 0, f"status ({p.stderr!r})")
            with open(out) as f:
                t = json.load(f)["targets"][0]
            check(t["exit"] is not None or t["end_ms"] > 0, "target never ended")
    check(hits > 0, "no run hit the window between the PID check and the attach")
    no_programs_left()


def test_unwritable_output():
    p = run([MEMTRAIL, "record", "-o", "/nonexistent-dir/t.json", "--", "true"])
    one_line_error(p, "cannot write trail '/nonexistent-dir/t.json'", "No such file")
    d = tmpdir()
    p = run([MEMTRAIL, "record", "-o", d, "--", "true"])
    one_line_error(p, "Is a directory")
    no_programs_left()


def test_usage_errors():
    for args, needle in (
            (["record"], "no target"),
            (["record", "--all", "--pid", "1"], "too many targets"),
            (["record", "--interval", "5", "--all"], "invalid --interval '5'"),
            (["record", "--pid", "12x"], "invalid --pid '12x'"),
            (["record", "--comm", "x" * 16], "invalid --comm"),
            (["frobnicate"], "unknown command 'frobnicate'"),
            (["report"], "no trail file given"),
            (["record", "--bogus"], "unknown option '--bogus'"),
            (["record", "--all", "-o"], "option '-o' needs a value"),
            (["report", "-x", "f"], "unknown option '-x'"),
    ):
        p = run([MEMTRAIL, *args])
        check_eq(p.returncode, 2, f"status of memtrail {' '.join(args)}")
        check(needle in p.stderr, f"{needle!r} not in {p.stderr!r}")
        check(p.stderr.splitlines()[0].startswith("memtrail: error: "), "error line first")
    no_programs_left()


def help_rows(text):
    """The option rows of a --help: (short or None, long, value name or None, its text)."""
    rows, row = [], None
    for line in text.splitlines():
        m = re.match(r"^  (?:-(\w), |    )--([a-z][a-z-]*)(?: (\S+))?(?:\s+(.*))?$", line)
        if m:
            row = [m.group(1), m.group(2), m.group(3), m.group(4) or ""]
            rows.append(row)
        elif row and line.startswith(" " * 24):
            row[3] += " " + line.strip()
        else:
            row = None
    return rows


def test_help_says_what_the_parser_takes():
    """Each command's --help, against its parser: every option it lists is
    taken (a value where it names one), every range it states is the one
    checked, and no line is wider than 79 columns."""
    bogus = "--no-such-option"
    for cmd in ("record", "watch", "top", "report", "daemonset", "features"):
        p = run([MEMTRAIL, cmd, "--help"])
        check_eq((p.returncode, p.stderr), (0, ""), f"memtrail {cmd} --help")
        check(p.stdout.startswith(f"usage: memtrail {cmd}"), f"{cmd} --help: {p.stdout[:80]!r}")
        wide = [l for l in p.stdout.splitlines() if len(l) > 79]
        check_eq(wide, [], f"lines of memtrail {cmd} --help over 79 columns")
        rows = help_rows(p.stdout)
        check(len(rows) >= 2, f"{cmd} --help lists {rows!r}")
        for short, name, value, text in rows:
            if name == "help":
                continue
            spellings = [f"--{name}"] + ([f"-{short}"] if short else [])
            for opt in spellings:
                if value:
                    one_line_error(run([MEMTRAIL, cmd, opt]), f"option '{opt}' needs a value")
                else:
                    one_line_error(run([MEMTRAIL, cmd, opt, bogus]), f"unknown option '{bogus}'")
            m = re.search(r"(\d+)\.\.(\d+)(?![\d^])(?: \(default (\d+))?", text)
            if not value or not m:
                continue
            lo, hi = int(m.group(1)), int(m.group(2))
            # the bounds are taken, one past them is not, and so is the default said
            for v in [lo, hi] + ([int(m.group(3))] if m.group(3) else []):
                one_line_error(run([MEMTRAIL, cmd, f"--{name}", str(v), bogus]),
                               f"unknown option '{bogus}'")
            for v in [hi + 1] + ([lo - 1] if lo > 0 else []):
                one_line_error(run([MEMTRAIL, cmd, f"--{name}", str(v)]),
                               f"invalid --{name} '{v}'")
        # an unknown option points at this help
        one_line_error(run([MEMTRAIL, cmd, bogus]), f"unknown option '{bogus}'",
                       f"(see 'memtrail {cmd} --help')")
    no_programs_left()


def test_command_not_found():
    p = run([MEMTRAIL, "record", "-o", os.path.join(tmpdir(), "t.json"), "--",
             "/nonexistent/program"])
    check_eq(p.returncode, 127, "status when the command does not exist")
    check("cannot run '/nonexistent/program': No such file or directory" in p.stderr,
          p.stderr)
    no_programs_left()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def test_malformed_trails():
    d = tmpdir()
    good = os.path.join(d, "good.json")
    p = run([MEMTRAIL, "record", "-q", "-o", good, "--", "true"])
    check_eq(p.returncode, 0, "recording a trail")
    text = open(good).read()
    cases = {
        "truncated": (text[: len(text) // 2], "malformed JSON"),
        "empty": ("", "malformed JSON"),
        "not-json": ("hello\n", "malformed JSON"),
        "version": (text.replace('"memtrail":1', '"memtrail":99'), "unsupported trail version 99"),
        "no-version": ('{"targets": []}', "no \"memtrail\" version field"),
        "targets": ('{"memtrail": 1, "targets": 3}', "targets: not an array"),
        "kind": ('{"memtrail": 1, "targets": [{"pid": 1, "exit": null, '
                 '"kinds": {"bogus": {"current": 1, "peak": 1}}}]}',
                 "targets[0].kinds: unknown kind 'bogus'"),
        "array": ("[1, 2]", "the top level is not an object"),
    }
    for name, (body, needle) in cases.items():
        path = os.path.join(d, name + ".json")
        write(path, body)
        for extra in ([], ["--json"]):
            p = run([MEMTRAIL, "report", *extra, path])
            one_line_error(p, f"cannot read trail '{path}'", needle)
            check_eq(p.stdout, "", f"{name}: output despite the error")
    p = run([MEMTRAIL, "report", os.path.join(d, "missing.json")])
    one_line_error(p, "No such file or directory")


def test_kernel_support_claim():
    # 'memtrail features' names this kernel, a recording says which kernel it
    # ran on and how, and what the table says a feature lacks here is what
    # memtrail does: the option fails, or warns, with that reason on one line
    p = run([MEMTRAIL, "features", "--json"])
    check_eq(p.returncode, 0, f"features status (stderr {p.stderr!r})")
    kf = json.loads(p.stdout)
    fs = kf["features"]
    check_eq(kf["release"], os.uname().release, "the kernel release")
    check_eq(kf["machine"], os.uname().machine, "the machine")
    check_eq(kf["page_size"], os.sysconf("SC_PAGESIZE"), "the page size")
    head = run([MEMTRAIL, "features"]).stdout.splitlines()[0]
    check(head.startswith(f"kernel {os.uname().release} ({os.uname().machine}, "
                          f"{os.sysconf('SC_PAGESIZE') // 1024} KiB pages), BTF "),
          f"the table's head names the kernel, machine and page size: {head!r}")
    out = os.path.join(tmpdir(), "t.json")
    r = run([MEMTRAIL, "record", "-q", "-o", out, "--", "true"])
    check_eq(r.returncode, 0, f"record status (stderr {r.stderr!r})")
    check("warning" not in r.stderr and "error" not in r.stderr,
          f"a recording with no option asked says nothing of the kernel: {r.stderr!r}")
    with open(out) as f:
        trail = json.load(f)
    check_eq(trail["kernel"], kf, "the trail's kernel vs memtrail features")
    if fs["heap"]["state"] == "no":
        r = run([MEMTRAIL, "record", "-q", "--heap", "-o", out + "2", "--", "true"])
        one_line_error(r, "cannot trace the heap here", fs["heap"]["note"])
    if fs["phase_rules"]["state"] == "no":
        r = run([MEMTRAIL, "record", "-q", "--phase", "x=/bin/true:main", "-o", out + "3",
                 "--", "true"])
        check_eq(r.returncode, 0, f"record with a rule it cannot set (stderr {r.stderr!r})")
        check(fs["phase_rules"]["note"] in r.stderr, f"the reason in {r.stderr!r}")
    if fs["mark"]["state"] == "no":
        w = subprocess.Popen(["sleep", "30"])
        bg = Background(["record", "-o", out + "4", "--pid", str(w.pid)])
        try:
            r = run([MEMTRAIL, "mark", str(w.pid), "x"])
            one_line_error(r, "cannot mark phases on this kernel", fs["mark"]["note"])
        finally:
            w.kill()
            w.wait()
            bg.stop(sig=None)
    no_programs_left()


def test_nonsense_in_trails():
    """A trail is anyone's file: a value of the wrong type or out of range is
    rejected by its path, on one line, whatever report was asked to write."""
    d = tmpdir()
    good = os.path.join(d, "good.json")
    p = run([MEMTRAIL, "record", "-q", "-o", good, "--", "true"])
    check_eq(p.returncode, 0, "recording a trail")
    with open(good) as f:
        trail = json.load(f)

    def first_event(t, **kw):
        t["events"][0].update(kw)

    cases = {
        # PID_MAX_LIMIT is 4194304: 2^32 + 1 is not pid 1
        "pid": (lambda t: t["targets"][0].update(pid=4294967297),
                "targets[0].pid: out of range (4294967297)"),
        "negative": (lambda t: t["targets"][0]["kinds"]["mapped"].update(peak=-2 ** 62),
                     "targets[0].kinds.mapped.peak: out of range (-4611686018427387904)"),
        "signal": (lambda t: t["targets"][0].update(exit={"code": 0, "signal": -7}),
                   "targets[0].exit.signal: out of range (-7)"),
        # ms whose ns do not fit in 64 bits (Perfetto multiplied them, signed)
        "t_ms": (lambda t: t["targets"][0]["timeline"][0].update(t_ms=2 ** 62),
                 f"targets[0].timeline[0].t_ms: out of range ({2 ** 62})"),
        "event": (lambda t: first_event(t, t_ms=2 ** 53), f"events[0].t_ms: out of range ({2 ** 53})"),
        "type": (lambda t: t["targets"][0]["sites"]["list"][0].update(kind=["heap"]),
                 "targets[0].sites.list[0].kind: not a string"),
        "string": (lambda t: t["targets"][0].update(end_ms="7"), "targets[0].end_ms: not an integer"),
    }
    for opts in ([], ["--json"], ["--perfetto", os.path.join(d, "out")],
                 ["--html", os.path.join(d, "out")]):
        p = run([MEMTRAIL, "report", *opts, good])
        check_eq(p.returncode, 0, f"report {opts} of a real trail ({p.stderr!r})")
        os.path.exists(os.path.join(d, "out")) and os.unlink(os.path.join(d, "out"))
        for name, (change, needle) in cases.items():
            bad = json.loads(json.dumps(trail))
            change(bad)
            path = os.path.join(d, name + ".json")
            with open(path, "w") as f:
                json.dump(bad, f)
            p = run([MEMTRAIL, "report", *opts, path])
            one_line_error(p, f"memtrail: error: cannot read trail '{path}': {needle}")
            check_eq(p.stdout, "", f"{name}: output despite the error")
            check(not os.path.exists(os.path.join(d, "out")), f"{name}: {opts} written")
