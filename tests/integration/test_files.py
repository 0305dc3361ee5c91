# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""The files memtrail writes and reads, as root next to untrusted users
(issue 19): every output mode 0600, never written through a link planted at
its name or its temporary name, never over the trail being read, not left
half-written when memtrail dies; default trail names of records started
together never the same; only regular files read as trails, and a trail cut
short while read is an error, not a crash; watch as non-root creates
nothing."""

import gzip
import json
import os
import re
import resource
import stat
import subprocess
import time

from harness import MEMTRAIL, check, check_eq, one_line_error, run, tmpdir, workload

VICTIM = b"root's file: nobody may change it\n"


def recorded_trail(d):
    """A real trail, of the forker workload, in D."""
    out = os.path.join(d, "t.json")
    p = run([MEMTRAIL, "record", "-q", "-o", out, "--", workload("forker")])
    check_eq(p.returncode, 0, f"record status ({p.stderr!r})")
    return out


def victim(d, name):
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.write(VICTIM)
    os.chmod(path, 0o644)
    return path


def check_untouched(path):
    with open(path, "rb") as f:
        data = f.read()
    check(data == VICTIM, f"'{path}' was written: it begins {data[:40]!r}")


def exec_with_links(links, argv, log):
    """Fork; the child plants each (NAME, TARGET) of LINKS, NAME formatted
    with its own pid, then execs memtrail ARGV as that pid (stdout and
    stderr to LOG). Its exit status."""
    pid = os.fork()
    if pid == 0:
        try:
            for name, target in links:
                os.symlink(target, name.format(pid=os.getpid()))
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.execv(MEMTRAIL, [MEMTRAIL, *argv])
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def check_output(path, what):
    """PATH is a regular file of WHAT's format, mode 0600."""
    st = os.lstat(path)
    check(stat.S_ISREG(st.st_mode), f"{what} '{path}' is not a regular file: {oct(st.st_mode)}")
    check_eq(stat.S_IMODE(st.st_mode), 0o600, f"the mode of {what} '{path}'")
    with open(path, "rb") as f:
        data = f.read()
    if what == "pprof":
        check(gzip.decompress(data), "an empty pprof profile")
    elif what == "html":
        check(data.lstrip().lower().startswith(b"<!doctype html"), f"html starts {data[:40]!r}")
    elif what == "perfetto":
        check("traceEvents" in json.loads(data), "no traceEvents in the perfetto file")
    else:
        check_eq(json.loads(data)["memtrail"], 1, "the trail's version")


def outputs(d, trail):
    """(what, output path, memtrail arguments) of every kind of output file."""
    cases = []
    for what, opt in (("html", "--html"), ("pprof", "--pprof"), ("perfetto", "--perfetto")):
        out = os.path.join(d, f"out.{what}")
        cases.append((what, out, ["report", opt, out, trail]))
    out = os.path.join(d, "out.json")
    cases.append(("trail", out, ["record", "-q", "-o", out, "--", "true"]))
    return cases


def test_planted_links_are_not_followed():
    """A link at the output's name and at every temporary name the old code
    used (<out>.tmp.<pid>, the pid known before exec): the victims keep their
    content, the output is a new regular file."""
    d = tmpdir()
    trail = recorded_trail(d)
    for what, out, argv in outputs(d, trail):
        v_tmp = victim(d, f"victim-tmp-{what}")
        v_out = victim(d, f"victim-out-{what}")
        log = os.path.join(d, f"{what}.log")
        rc = exec_with_links([(out + ".tmp.{pid}", v_tmp), (out, v_out)], argv, log)
        with open(log) as f:
            check_eq(rc, 0, f"{what}: status ({f.read()!r})")
        check_untouched(v_tmp)
        check_untouched(v_out)
        check_output(out, what)


def test_outputs_are_0600_whatever_the_umask():
    """Trails (named or by default), HTML, pprof and Perfetto files: 0600
    under umask 0, also when replacing a file that was 0644."""
    d = tmpdir()
    trail = recorded_trail(d)
    for mask in (0, 0o022):
        for what, out, argv in outputs(d, trail):
            if os.path.exists(out):
                os.chmod(out, 0o644)
            p = run([MEMTRAIL, *argv], preexec_fn=lambda: os.umask(mask))
            check_eq(p.returncode, 0, f"{what}: status ({p.stderr!r})")
            check_output(out, what)
    d2 = tmpdir()
    p = run([MEMTRAIL, "record", "-q", "--", "true"], cwd=d2,
            preexec_fn=lambda: os.umask(0))
    check_eq(p.returncode, 0, f"record with the default name ({p.stderr!r})")
    names = os.listdir(d2)
    check_eq(len(names), 1, f"files written: {names}")
    check_output(os.path.join(d2, names[0]), "trail")


def test_default_names_never_collide():
    """Three records started together in one directory, by default names:
    at least two start in the same second, yet there are three trails, each
    named after its record's pid and holding its own command."""
    d = tmpdir()
    procs = [subprocess.Popen([MEMTRAIL, "record", "-q", "--", "true", tag], cwd=d,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tag in ("one", "two", "three")]
    for p, tag in zip(procs, ("one", "two", "three")):
        _, err = p.communicate(timeout=120)
        check_eq(p.returncode, 0, f"record {tag} ({err!r})")
    names = sorted(os.listdir(d))
    check_eq(len(names), 3, f"trails written: {names}")
    for p, tag in zip(procs, ("one", "two", "three")):
        want = re.compile(rf"memtrail-\d{{8}}-\d{{6}}-{p.pid}\.json")
        mine = [n for n in names if want.fullmatch(n)]
        check_eq(len(mine), 1, f"the trail of record {tag} (pid {p.pid}) among {names}")
        with open(os.path.join(d, mine[0])) as f:
            check_eq(json.load(f)["command"], f"command true {tag}", f"{mine[0]}'s command")


def test_output_over_the_input_is_refused():
    """Any output that is the trail being read, by the same name, another
    name or a hard link, or two outputs that are one file: a one-line error,
    a non-zero status, and the trail as it was."""
    d = tmpdir()
    trail = recorded_trail(d)
    with open(trail, "rb") as f:
        before = f.read()
    link = os.path.join(d, "hard.json")
    os.link(trail, link)
    for opt in ("--html", "--pprof", "--perfetto"):
        for out in (trail, "./t.json", link):
            p = run([MEMTRAIL, "report", opt, out, trail], cwd=d)
            one_line_error(p, opt, "is the trail being read")
            check_eq(p.stdout, "", f"{opt} {out}: output despite the error")
    other = os.path.join(d, "x.out")
    p = run([MEMTRAIL, "report", "--html", other, "--perfetto", other, trail])
    one_line_error(p, "--html", "--perfetto", "same file")
    check(not os.path.exists(other), "an output was written")
    with open(trail, "rb") as f:
        check(f.read() == before, "the trail changed")
    check_eq(os.listdir(d).count("t.json"), 1, "the trail is still there")


def test_only_regular_files_are_read():
    """A FIFO (no writer: open would block), a directory, a character
    device: refused at once on one line."""
    d = tmpdir()
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    for path in (fifo, d, "/dev/null"):
        for extra in ([], ["--json"]):
            try:
                p = run([MEMTRAIL, "report", *extra, path], timeout=10)
            except subprocess.TimeoutExpired:
                check(False, f"report {path} blocked")
            one_line_error(p, f"cannot read trail '{path}'", "not a regular file")


def wait_reading(pid, path, timeout=30):
    """Until process PID reads PATH: has it mapped, or has read from it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(f"/proc/{pid}/maps") as f:
                if path in f.read():
                    return
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == path:
                    with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                        if int(f.readline().split()[1]) > 0:
                            return
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.001)
    check(False, f"process {pid} never read '{path}'")


def big_trail(path, samples=80000):
    """A valid trail of about 1 KiB per sample, most of it skipped by the
    reader (a nested array): a second or so to read."""
    pad = "[" + ",".join(["1"] * 500) + "]"
    with open(path, "w") as f:
        f.write('{"memtrail":1,"interval_ms":100,"kinds":["rss_anon"],"targets":[{"pid":7,'
                '"ppid":1,"comm":"big","exit":null,'
                '"kinds":{"rss_anon":{"current":1,"peak":1}},"timeline":[')
        f.write(",".join('{"t_ms":%d,"rss_anon":%d,"pad":%s}' % (i * 100, i, pad)
                         for i in range(samples)))
        f.write(']}],"events":[],"lost":{}}\n')


def test_trail_cut_short_while_read():
    """The trail truncated while report reads it: one line, status 1, no
    SIGBUS; read whole, the same file gives the right last sample."""
    d = tmpdir()
    path = os.path.join(d, "big.json")
    try:
        big_trail(path)
        p = run([MEMTRAIL, "report", "--json", path])
        check_eq(p.returncode, 0, f"the whole trail ({p.stderr!r})")
        check_eq(json.loads(p.stdout)["targets"][0]["pid"], 7, "its target")
        p = subprocess.Popen([MEMTRAIL, "report", path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        wait_reading(p.pid, path)
        # at a page boundary: a mapping of the file faults (SIGBUS) past it
        os.truncate(path, os.path.getsize(path) // 2 // 4096 * 4096)
        out, err = p.communicate(timeout=60)
        check(p.returncode > 0, f"status {p.returncode} (a negative one is a signal)")
        check_eq(len(err.splitlines()), 1, f"one line: {err!r}")
        check(f"cannot read trail '{path}': trail file changed while reading" in err, err)
    finally:
        os.unlink(path)


def limit_file_size():
    """Files of at most 8 KiB: a write beyond kills memtrail (SIGXFSZ), as a
    SIGKILL would, with no clean-up of its own."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def test_killed_while_writing_leaves_nothing():
    """memtrail killed in the middle of its final write: the output is as it
    was and no temporary file is left; where the filesystem has no O_TMPFILE
    (forced), the temporary file left is removed by the next write."""
    d = tmpdir()
    trail = recorded_trail(d)
    for forced in (False, True):
        env = dict(os.environ, **({"MEMTRAIL_NO_O_TMPFILE": "1"} if forced else {}))
        out = os.path.join(d, "out.perfetto")
        with open(out, "w") as f:
            f.write("before\n")
        p = run([MEMTRAIL, "report", "--perfetto", out, trail], env=env,
                preexec_fn=limit_file_size)
        check_eq(p.returncode, -25, f"the kill by SIGXFSZ ({p.stderr!r})")
        with open(out) as f:
            check_eq(f.read(), "before\n", "the output after the kill")
        left = sorted(set(os.listdir(d)) - {"t.json", "out.perfetto"})
        if not forced:
            check_eq(left, [], "files left by the killed write")
            continue
        check_eq(len(left), 1, f"the named temporary file left: {left}")
        check(left[0].startswith("out.perfetto.tmp."), f"the temporary file's name {left[0]!r}")
        p = run([MEMTRAIL, "report", "--perfetto", out, trail], env=env)
        check_eq(p.returncode, 0, f"the next write ({p.stderr!r})")
        check_output(out, "perfetto")
        check_eq(sorted(set(os.listdir(d)) - {"t.json", "out.perfetto"}), [],
                 "files left after the next write")


def test_watch_not_root_creates_nothing():
    """Not root: watch says so on one line before it creates its directory."""
    d = tmpdir()
    os.chmod(d, 0o777)
    snaps = os.path.join(d, "snapshots")
    p = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             MEMTRAIL, "watch", "-o", snaps], timeout=30)
    one_line_error(p, "root")
    check(not os.path.exists(snaps), f"'{snaps}' was created")
    check_eq(os.listdir(d), [], "files created")


def test_watch_does_not_follow_a_planted_link():
    """-o DIR as a symbolic link someone else made (a folder shared with a
    container): refused on one line, nothing written where it points."""
    d = tmpdir()
    os.chmod(d, 0o777)
    target = os.path.join(tmpdir(), "elsewhere")
    os.mkdir(target)
    snaps = os.path.join(d, "snapshots")
    os.symlink(target, snaps)
    os.lchown(snaps, 65534, 65534)
    p = run([MEMTRAIL, "watch", "-o", snaps], timeout=30)
    one_line_error(p, f"snapshot directory '{snaps}' is a symbolic link of user 65534, "
                   "not followed")
    check_eq(os.listdir(target), [], "files written through the link")


def test_demo_writes_a_private_folder_when_cwd_is_read_only():
    """memtrail demo from a folder it cannot write: its trail goes to a new
    0700 folder /tmp/memtrail-demo.XXXXXX, not to a name another user could
    hold; the trail has the workload's own steps (192 MiB of weights, four
    64 MiB requests)."""
    ro = tmpdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "memtrail-test", ro], check=True)
    try:
        p = run([MEMTRAIL, "demo"], cwd=ro, timeout=120)
    finally:
        subprocess.run(["umount", ro], check=True)
    check_eq(p.returncode, 0, f"demo's status ({p.stderr!r})")
    m = re.search(r"trail written to '(/tmp/memtrail-demo\.[A-Za-z0-9]{6})/memtrail-demo\.json'",
                  p.stderr)
    check(m, f"the trail's name in {p.stderr!r}")
    folder = m.group(1)
    try:
        st = os.lstat(folder)
        check(stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and
              st.st_uid == os.geteuid(), f"{folder}: mode {st.st_mode:o}, uid {st.st_uid}")
        with open(os.path.join(folder, "memtrail-demo.json")) as f:
            trail = json.load(f)
        phases = trail["targets"][0]["phases"]
        by = {}
        for ph in phases:
            by.setdefault(ph["name"], []).append(ph["kinds"]["mapped"]["allocations"])
        check_eq(by.get("load_weights"), [192 << 20], f"load_weights in {by}")
        check_eq(by.get("request"), [64 << 20] * 4, f"requests in {by}")
    finally:
        subprocess.run(["rm", "-rf", folder], check=True)
