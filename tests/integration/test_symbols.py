# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Names for stripped binaries: a stripped copy of the sites workload
(tests/workloads/sites.c; its .symtab and DWARF gone, its build ID kept)
is named from a separate debug file wherever a user would keep one (beside
it through .gnu_debuglink, by build ID under a container's own
/usr/lib/debug, from a debuginfod server), and where none is found, its
frames say file and offset. Expected names and bytes are the workload's
own (it prints its functions' arithmetic)."""

import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

from harness import MEMTRAIL, check, check_eq, no_programs_left, run, tmpdir, workload
from test_sites import check_exact, recorded

NAMES = ["load_weights", "serve_requests", "grow_buffer", "aligned_blocks"]


def build_id(path):
    out = run(["readelf", "-n", path]).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    check(m, f"{path} has a build ID")
    return m.group(1)


def debug_file(d):
    """The sites workload's debug file (objcopy --only-keep-debug), in D."""
    out = os.path.join(d, "sites.debug")
    p = run(["objcopy", "--only-keep-debug", workload("sites"), out])
    check_eq(p.returncode, 0, f"objcopy ({p.stderr.strip()})")
    return out


def load_site(trail):
    t = trail["targets"][0]
    rows = [s for s in t["sites"]["list"] if s["kind"] == "heap" and s["phase"] == "load"
            and s["alloc_bytes"] == 4000000]
    check_eq(len(rows), 1, "the load_weights site")
    return t, rows[0]["frames"][0]


def test_stripped_unnamed_says_file_and_offset():
    """No debug file anywhere: the frame is '[unknown]' in the trail with its
    file, offset and build ID, and reports name it FILE+0xOFFSET, never a
    bare [unknown]."""
    binary = workload("sites_stripped")
    p, trail, data, out = recorded(["--heap", "--unwind", "fp"], cmd=[binary])
    _, f0 = load_site(trail)
    check_eq(f0["function"], "[unknown]", "a stripped function, no debug file: unnamed")
    check_eq(f0.get("build_id"), build_id(binary), "its build ID")
    label = f"sites_stripped+{f0['offset']}"
    r = run([MEMTRAIL, "report", "--top", "10", out])
    check(re.search(r"heap\s+3\.81 MiB\s+3\.81 MiB\s+" + re.escape(label), r.stdout),
          f"report names it {label}: {r.stdout[-1500:]}")
    prof = os.path.join(tmpdir(), "s.pb.gz")
    r = run([MEMTRAIL, "report", "--pprof", prof, out])
    check_eq(r.returncode, 0, f"report --pprof ({r.stderr.strip()})")
    top = run(["go", "tool", "pprof", "-top", "-sample_index=heap_alloc_space", prof],
              env=dict(os.environ, HOME=tmpdir(), GOCACHE=tmpdir()), timeout=300)
    check(label in top.stdout, f"pprof names it {label}: {top.stdout[-1500:]}")
    no_programs_left()


def test_stripped_named_by_debuglink():
    """A stripped copy with a .gnu_debuglink to a debug file beside it (what
    'objcopy --add-gnu-debuglink' and Debian's dh_strip do): named, exact."""
    d = tmpdir()
    dbg = debug_file(d)
    binary = os.path.join(d, "sites_dl")
    check_eq(run(["strip", "--strip-all", "-o", binary, workload("sites")]).returncode, 0,
             "strip")
    check_eq(run(["objcopy", "--add-gnu-debuglink=" + dbg, binary]).returncode, 0,
             "objcopy --add-gnu-debuglink")
    p, trail, data, _ = recorded(["--heap", "--unwind", "fp"], cmd=[binary])
    t, f0 = load_site(trail)
    check_eq(f0["function"], "load_weights", "named from the debug link's file")
    check_exact(t, data, NAMES)
    no_programs_left()


def test_stripped_named_in_container_root():
    """A process in a root of its own (unshare, chroot; the host's /usr
    read-only), whose debug file is under that root's /usr/lib/debug by
    build ID, on a tmpfs only its mount namespace has: named from it. The
    host has no such file: the same binary run there stays unnamed."""
    root = tmpdir()
    for d in ("usr", "app", "proc", "tmp"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for link in ("lib", "lib64", "bin", "sbin"):
        if os.path.islink("/" + link):
            os.symlink(os.readlink("/" + link), os.path.join(root, link))
    shutil.copy(workload("sites_stripped"), os.path.join(root, "app", "sites_stripped"))
    bid = build_id(workload("sites_stripped"))
    dbg = debug_file(tmpdir())
    check(os.path.isdir("/usr/lib/debug"), "the host has /usr/lib/debug (python3-dbg)")
    where = f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
    check(not os.path.exists(where), f"the host has no {where}")
    script = (f'mount --bind -o ro /usr "{root}/usr" && '
              f'mount -t tmpfs none "{root}/usr/lib/debug" && '
              f'mkdir -p "{root}{os.path.dirname(where)}" && cp "{dbg}" "{root}{where}" && '
              f'exec chroot "{root}" /app/sites_stripped')
    p, trail, data, _ = recorded(["--heap", "--unwind", "fp"],
                                 cmd=["unshare", "-m", "--propagation", "private", "sh", "-c",
                                      script])
    t, f0 = load_site(trail)
    check_eq(f0["function"], "load_weights", "named from the container's own debug file")
    check_exact(t, data, NAMES)
    check(not os.path.exists(where), "the debug file was in the namespace only")
    no_programs_left()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_stripped_named_by_debuginfod():
    """DEBUGINFOD_URLS set (a debuginfod server on this machine serving the
    workload's unstripped build): the stripped copy is named through
    elfutils' debuginfod client, exact."""
    server = shutil.which("debuginfod")
    check(server, "debuginfod is installed ('make deps')")
    d, cache = tmpdir(), tmpdir()
    served = os.path.join(d, "files")
    os.makedirs(served)
    shutil.copy(workload("sites"), served)
    bid = build_id(workload("sites_stripped"))
    port = free_port()
    srv = subprocess.Popen([server, "-F", served, "-p", str(port), "-d",
                            os.path.join(d, "db.sqlite")], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        # the server indexes its folder at start: ready once it serves the file
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/buildid/{bid}/debuginfo", timeout=10) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            check(time.monotonic() < deadline and srv.poll() is None,
                  "debuginfod serves the workload's debug file within 120 s")
            time.sleep(0.2)
        env = dict(os.environ, DEBUGINFOD_URLS=url, DEBUGINFOD_CACHE_PATH=cache)
        p, trail, data, _ = recorded(["--heap", "--unwind", "fp"],
                                     cmd=[workload("sites_stripped")], env=env)
        t, f0 = load_site(trail)
        check_eq(f0["function"], "load_weights", "named from debuginfod's file")
        check_exact(t, data, NAMES)
    finally:
        srv.terminate()
        srv.wait(timeout=30)
    no_programs_left()


def test_unnamed_share_said_with_package():
    """A Debian program without its debug symbols (coreutils' sort, its
    buffer sized by -S): record says the share of heap bytes at sites no
    symbol names, the file, and the package that owns it (dpkg's own
    answer), with the debug package that would name them."""
    sort = shutil.which("sort")
    real = os.path.realpath(sort)
    owner = run(["dpkg-query", "-S", real]).stdout or run(["dpkg-query", "-S", sort]).stdout
    owner = owner.split(":")[0]
    check(owner, f"dpkg owns {real}")
    d = tmpdir()
    nums = os.path.join(d, "nums")
    with open(nums, "w") as f:
        f.write("\n".join(str((i * 7919) % 200003) for i in range(200000)))
    out = os.path.join(d, "sort.json")
    p = run([MEMTRAIL, "record", "-q", "--heap", "--unwind", "fp", "-o", out, "--", sort,
             "-S", "32M", nums, "-o", os.path.join(d, "sorted")])
    check_eq(p.returncode, 0, f"record ({p.stderr.strip()})")
    said = [line for line in p.stderr.splitlines() if " at sites no symbol names" in line]
    check_eq(len(said), 1, f"the unnamed heap bytes said once: {p.stderr!r}")
    m = re.match(r"memtrail: heap: ([\d.]+) MiB of [\d.]+ \w+ allocated \(([\d.]+)%\) at sites "
                 r"no symbol names: [\d.]+ MiB in (\S+); (.*)", said[0])
    check(m and float(m.group(1)) >= 32 and float(m.group(2)) >= 90 and m.group(3) == real,
          f"sort's 32 MiB buffer, most of the heap, in {real}: {said[0]}")
    check(f"package {owner}" in m.group(4), f"the package that owns it, {owner}: {said[0]}")
    no_programs_left()
