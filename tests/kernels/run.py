#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""make test-kernels: the same ./memtrail, built once here, on each kernel
the fleet runs. Each kernel is a Debian package fetched from the archive this
machine's apt already uses (a private apt state, cached), booted under QEMU
with this machine's / as its root; inside, on a cgroup v2 node, the core of
the integration suite runs. Prints a kernel x check matrix.

    run.py [--ci] [--only CELL[,CELL...]] [--markdown FILE] [KERNEL ...]

KERNEL: a name from KERNELS (5.10, 6.1, ...); all of them by default, the CI
rows with --ci. --only: those of the matrix's cells (columns) alone. MEMTRAIL_KERNEL_CACHE: where packages are kept
(/var/cache/memtrail/kernels).
"""

import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.dirname(HERE))
from archive import BOTH_ARCHS, apt_opts, archive_uri  # noqa: E402

CACHE = os.environ.get("MEMTRAIL_KERNEL_CACHE", "/var/cache/memtrail/kernels")

# (name, suite, package prefix and suffix: the newest matching package is
# taken, architecture). arm64 rows boot under qemu-system-aarch64 with an
# arm64 userland made from Debian's packages (userland.py) and make arm64's
# memtrail and workloads; arm64-16k is a kernel with 16 KiB pages
KERNELS = [
    ("5.10", "bullseye", "linux-image-5.10.0-", "-amd64-unsigned", "x86"),
    ("6.1", "bookworm", "linux-image-6.1.0-", "-amd64-unsigned", "x86"),
    ("6.12", "trixie", "linux-image-6.12.", "+deb13-amd64-unsigned", "x86"),
    ("6.17", "trixie-backports", "linux-image-6.17.", "+deb13-amd64", "x86"),
    ("7.x", "trixie-backports", "linux-binary-7.", "+deb13-amd64", "x86"),
    ("arm64-6.1", "bookworm", "linux-image-6.1.0-", "-arm64-unsigned", "arm64"),
    ("arm64-6.12", "trixie", "linux-image-6.12.", "+deb13-arm64-unsigned", "arm64"),
    ("arm64-7.x", "trixie-backports", "linux-binary-7.", "+deb13-arm64", "arm64"),
    ("arm64-16k", "trixie-backports", "linux-binary-7.", "+deb13-arm64-16k", "arm64"),
]
DEB_ARCH = {"x86": "amd64", "arm64": "arm64"}
CI_KERNELS = ["5.10", "6.1", "arm64-6.1"]
# kernels booted with every vCPU on one host thread (boot.sh MEMTRAIL_TCG):
# under multi-threaded TCG they die now and then of an int3 oops as memtrail
# switches a tracepoint's static key (the kernel patching its own text)
TCG_SINGLE = {"6.12", "6.17", "7.x"}

# the matrix's columns: a check, the integration tests that make it, and the
# feature ('memtrail features') it needs: where the kernel lacks it, memtrail
# says so (test_kernel_support_claim checks the table against what record
# does) and the cell reads "no", its tests not run
CHECKS = [
    ("support claim", ["test_errors.test_kernel_support_claim"], None),
    ("mapped+rss", ["test_accounting.test_mapped_exact_rss_within_2pct",
                    "test_accounting.test_change_after_idle_samples_is_sampled"], None),
    ("threads", ["test_accounting.test_threads_peak_exact_20_runs",
                 "test_accounting.test_mapped_exact_without_sites_or_devices"], None),
    ("attach -p", ["test_accounting.test_attach_by_pid"], None),
    ("exit", ["test_lifecycle.test_children_followed_with_exit_status"], None),
    ("rules", ["test_phases.test_rules_exact_per_phase",
               "test_phases.test_scopes_nested_and_recursive_exact"], "phase_rules"),
    ("marker", ["test_phases.test_c_marker_exact_per_phase"], None),
    ("mark", ["test_phases.test_mark_running_process"], "mark"),
    ("map sites", ["test_sites.test_mapping_sites_by_default",
                   "test_sites.test_short_children_sites_named_without_devices",
                   "test_sites.test_short_children_named_while_the_loop_is_held",
                   "test_sites.test_blinking_children_named_under_load",
                   "test_phases.test_phases_exact_while_deep_samples_fill_the_ring",
                   "test_watch.test_small_process_sections_walk_no_stack",
                   "test_watch.test_sites_from_zero_walks_every_section",
                   "test_watch.test_sites_of_a_new_program_dead_before_memtrail_looks"],
     "map_sites"),
    ("heap sites", ["test_sites.test_heap_sites_exact", "test_sites.test_heap_allocator_probed_once",
                    "test_watch.test_heap_budget_names_the_growing_malloc"], "heap"),
    ("deep stacks", ["test_unwind.test_deep_chains_equal_backtrace",
                     "test_unwind.test_deep_chains_through_uretprobes",
                     "test_unwind.test_python_lines"], "heap"),
    ("python 3.13", ["test_unwind.test_python313_lines"], "heap"),
    ("python 3.14", ["test_unwind.test_python314_lines"], "heap"),
    ("python 3.10/3.12", ["test_unwind.test_python310_lines", "test_unwind.test_python312_lines",
                           "test_unwind.test_python_attached_each_version",
                           "test_unwind.test_python_child_of_another_version",
                           "test_unwind.test_python_pid_namespace_lines"], "heap"),
    ("oom v2", ["test_verdicts.test_oom_cgroup_c_workload",
                "test_verdicts.test_oom_cgroup_systemd_driver",
                "test_watch.test_oom_snapshot_names_the_growing_line"], None),
    ("device", ["test_devices.test_cuda_phases_exact"], "device"),
    ("first calls", ["test_devices.test_dlopen_then_call_at_once_200_runs",
                     "test_guest.test_first_calls_of_a_runtime_in_place_watch",
                     "test_devices.test_runtime_released_when_its_last_user_exits"], "device"),
    ("never stopped", ["test_guest.test_group_sigkill_leaves_nothing_stopped",
                       "test_guest.test_stopped_memtrail_blocks_no_one",
                       "test_guest.test_stopped_record_holds_its_command_at_most_a_second",
                       "test_guest.test_sigkill_of_record_lets_its_command_run_on",
                       "test_guest.test_runuser_and_su_see_nothing"], None),
    ("no leftovers", ["test_lifecycle.test_ctrl_c_stops_and_leaves_nothing"], None),
]
# not in make test's rows: they take about 10 minutes a kernel under TCG,
# and a guest has hung in the never-stopped cell's kills (a soft lockup of
# memtrail and an rm of a probed library, 5.10 and 6.1). make test-kernels
# runs them
CI_SKIP = {"first calls", "never stopped", "python 3.14", "python 3.10/3.12"}
# cells of interpreters only the x86 rows have (pyenv's builds: this
# machine's own /); the arm64 userland has Debian's interpreters only
X86_ONLY = {"python 3.10/3.12"}


def runs_on(col, name):
    return col not in X86_ONLY or arch_of(name) == "x86"


def apt_state():
    state = os.path.join(CACHE, "apt")
    os.makedirs(os.path.join(state, "lists", "partial"), exist_ok=True)
    os.makedirs(os.path.join(state, "cache", "archives", "partial"), exist_ok=True)
    uri = archive_uri()
    if not uri:
        raise SystemExit("test-kernels: no Debian archive found in this machine's apt sources")
    suites = sorted({k[1] for k in KERNELS})
    with open(os.path.join(state, "sources.list"), "w") as f:
        for s in suites:
            f.write(f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {uri} {s} main\n")
    return state


def newest(state, prefix, suffix, opts=()):
    """The newest package PREFIX*SUFFIX in STATE's lists (apt-cache OPTS beside), or None."""
    p = subprocess.run(["apt-cache", *apt_opts(state), *BOTH_ARCHS, *opts, "pkgnames", prefix],
                       capture_output=True, text=True)
    names = [n for n in p.stdout.split() if n.endswith(suffix)
             and not any(x in n for x in ("-dbg", "-cloud-", "-rt-"))]

    def key(n):
        return [int(x) for x in re.findall(r"\d+", n[len(prefix):])]
    return max(names, key=key) if names else None


def fetch(names):
    """The package file of each kernel, downloaded once into the cache."""
    os.makedirs(CACHE, exist_ok=True)
    state = apt_state()
    updated = os.path.join(state, "updated")
    if not os.path.exists(updated) or time.time() - os.path.getmtime(updated) > 7 * 86400:
        p = subprocess.run(["apt-get", *apt_opts(state), *BOTH_ARCHS, "update"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"test-kernels: apt-get update failed: {p.stderr.strip()[-300:]}")
        open(updated, "w").close()
    debs = {}
    for name, _, prefix, suffix, arch in KERNELS:
        if name not in names:
            continue
        pkg = newest(state, prefix, suffix)
        if not pkg:
            raise SystemExit(f"test-kernels: no package {prefix}*{suffix} in the archive")
        want = [pkg]
        if pkg.startswith("linux-binary-"):
            want.append("linux-modules-" + pkg[len("linux-binary-"):])
        for w in want:
            if not any(f.startswith(w + "_") for f in os.listdir(CACHE)):
                p = subprocess.run(["apt-get", *apt_opts(state), *BOTH_ARCHS, "download",
                                    f"{w}:{DEB_ARCH[arch]}"], cwd=CACHE,
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    raise SystemExit(f"test-kernels: cannot download {w}: {p.stderr.strip()[-300:]}")
        debs[name] = os.path.join(CACHE, next(f for f in sorted(os.listdir(CACHE))
                                              if f.startswith(pkg + "_")))
    return debs


def arch_of(name):
    return next(k[4] for k in KERNELS if k[0] == name)


def boot(name, deb, tests):
    """Boot DEB, run TESTS inside; (release, features lines, {test: ok}, log)."""
    env = dict(os.environ)
    if arch_of(name) == "arm64":
        from userland import build
        env.update(MEMTRAIL_ARCH="arm64", MEMTRAIL_USERLAND=build("arm64"), MEMTRAIL_CHECKOUT=ROOT)
    gdir = os.path.join(ROOT, "build", "kernels")
    os.makedirs(gdir, exist_ok=True)
    script = os.path.join(gdir, f"guest-{name}.sh")
    with open(script, "w") as f:
        words = " ".join(f"{feature or '-'}:{t}" for _, ts, feature in CHECKS for t in ts
                         if t in tests)
        f.write(f"export MEMTRAIL_ROOT='{ROOT}' MEMTRAIL_GUEST_TESTS='{words}'\n")
        f.write(f"export CI='{os.environ.get('CI', '')}'\n")
        f.write(f". '{os.path.join(HERE, 'guest.sh')}'\n")
    console = os.path.join(gdir, f"console-{name}.log")
    # a guest that panics while booting, before it runs anything (7.3 under
    # TCG, now and then: an int3 in sched_clock_cpu as the kernel patches its
    # own text), is booted once more; its console is kept beside the next
    for attempt in (1, 2):
        with open(console, "w") as f:
            # the console as it comes, for a person watching (tail -f)
            if name in TCG_SINGLE:
                env.setdefault("MEMTRAIL_TCG", "single")
            subprocess.run(["bash", os.path.join(HERE, "boot.sh"), deb, script, "2", "3072"],
                           stdout=f, stderr=subprocess.STDOUT, env=env)
        with open(console, errors="replace") as f:
            log = f.read()
        if "GUEST_KERNEL" in log or attempt == 2:
            break
        os.replace(console, console[:-len(".log")] + "-failed-boot.log")
        print(f"kernel {name}: the guest did not boot (its console: "
              f"build/kernels/console-{name}-failed-boot.log); booting it again", flush=True)
    # the firmware's escapes may precede a line's first characters
    release = (re.search(r"GUEST_KERNEL (\S+)", log) or [None, "?"])[1]
    feats = re.findall(r"GUEST_FEATURE (.*)$", log, re.M)
    results = {}
    for m in re.finditer(r"(?:^|\W)(ok  |FAIL) (test_\S+) \(", log, re.M):
        results[m.group(2)] = m.group(1) == "ok  "
    return release, feats, results, log


def main(argv):
    global CHECKS
    if "-h" in argv or "--help" in argv:
        print("usage: tests/kernels/run.py [--ci] [--only CELL[,CELL...]] [--markdown FILE] "
              "[KERNEL ...]\n"
              "Boot each KERNEL (default: all; with --ci, the CI rows) under QEMU and run the\n"
              f"matrix's checks in it. Kernels: {', '.join(k[0] for k in KERNELS)}. --ci leaves out\n"
              f"the cells {', '.join(sorted(CI_SKIP)) or 'none'}; --only runs those cells alone\n"
              f"(of: {', '.join(c[0] for c in CHECKS)}); --markdown writes the table to FILE.")
        return 0
    ci = "--ci" in argv
    if ci:
        CHECKS = [c for c in CHECKS if c[0] not in CI_SKIP]
    if "--only" in argv:
        i = argv.index("--only")
        only = argv[i + 1].split(",") if i + 1 < len(argv) else []
        unknown = [c for c in only if c not in [x[0] for x in CHECKS]]
        if not only or unknown:
            print(f"test-kernels: --only takes cells of: {', '.join(c[0] for c in CHECKS)}")
            return 2
        CHECKS = [c for c in CHECKS if c[0] in only]
        argv = argv[:i] + argv[i + 2:]
    md = None
    if "--markdown" in argv:
        md = argv[argv.index("--markdown") + 1]
        argv = [a for a in argv if a not in ("--markdown", md)]
    wanted = [a for a in argv if not a.startswith("--")] or (CI_KERNELS if ci else [k[0] for k in KERNELS])
    unknown = [w for w in wanted if w not in [k[0] for k in KERNELS]]
    if unknown:
        print(f"test-kernels: unknown kernel {unknown[0]!r}; known: {', '.join(k[0] for k in KERNELS)}")
        return 2
    arm64 = os.path.join(ROOT, "build-arm64", "memtrail")
    if any(arch_of(w) == "arm64" for w in wanted) and not os.path.exists(arm64):
        print(f"test-kernels: no {arm64} for the arm64 kernels (make arm64)")
        return 2
    debs = fetch(wanted)

    rows, passed, failed, why = [], 0, 0, []
    for name in wanted:
        t0 = time.time()
        tests = [t for col, ts, _ in CHECKS if runs_on(col, name) for t in ts]
        release, feats, results, log = boot(name, debs[name], tests)
        states = {}
        for line in feats:
            f = line.split()
            if len(f) >= 2 and f[0] not in ("kernel", "FEATURE"):
                states[f[0]] = f[1]
        cells, counted = [], []
        for col, ts, feature in CHECKS:
            if not runs_on(col, name):
                cells.append("x86 only")
                continue
            if feature and states.get(feature) == "no":
                cells.append("no")
                continue
            counted += ts
            got = [results.get(t) for t in ts]
            cells.append("pass" if all(g is True for g in got) else
                         "FAIL" if any(g is False for g in got) else "none")
        run_here = counted if results else tests  # a guest that ran nothing fails whole
        ok = sum(1 for t in run_here if results.get(t) is True)
        bad = len(run_here) - ok
        passed += ok
        failed += bad
        print(f"kernel {name} ({release}): {ok} passed, {bad} failed or not run "
              f"({time.time() - t0:.0f}s; console in build/kernels/console-{name}.log)", flush=True)
        # a guest whose kernel oopsed (or panicked) says so, with its first such line
        oops = re.search(r"^\[[ 0-9.]+\] ((?:Oops|BUG|Kernel panic)[^\n]*)", log, re.M)
        if oops:
            where = re.search(r"^\[[ 0-9.]+\] (?:RIP: 0010:|pc : )(\S+)", log, re.M)
            print(f"  {name}: the guest kernel reported: {oops.group(1)}"
                  + (f" at {where.group(1)}" if where else ""), flush=True)
        for t in run_here:
            if results.get(t) is not True:
                m = re.search(r"^FAIL " + re.escape(t) + r" .*$", log, re.M)
                why.append(f"  {name} {t}: {m.group(0)[:400] if m else 'did not run'}"
                           + (" (after the guest kernel's oops above)" if oops and not m else ""))
                print(why[-1])
        for line in feats:
            f = line.split()
            if len(f) >= 2 and states.get(f[0], "yes") != "yes":
                print(f"  feature {line}")
        rows.append((name, release, cells))
    head = ["kernel", "arch", "release"] + [c for c, _, _ in CHECKS]
    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, release, cells in rows:
        table.append("| " + " | ".join([name, arch_of(name), release] + cells) + " |")
    print("\n".join(table))
    if md:
        with open(md, "w") as f:
            f.write("\n".join(table) + "\n")
    # again last: CI keeps only the output's tail
    print(f"kernels: {passed} passed, {failed} failed" + "".join("\n" + w for w in why))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
