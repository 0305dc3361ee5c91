# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""report re-renders a trail: the same table, and JSON without the timeline."""

import json
import os
import sys

from harness import MEMTRAIL, check, check_eq, one_line_error, run, tmpdir, workload


def test_report_table_and_json():
    out = os.path.join(tmpdir(), "trail.json")
    rec = run([MEMTRAIL, "record", "-o", out, "--", workload("forker")])
    check_eq(rec.returncode, 0, f"record status ({rec.stderr!r})")
    with open(out) as f:
        trail = json.load(f)
    check_eq(trail["memtrail"], 1, "trail version")

    p = run([MEMTRAIL, "report", out])
    check_eq(p.returncode, 0, f"report status ({p.stderr!r})")
    # the recorded table's rows come back identical
    rows = [l for l in rec.stdout.splitlines() if l.startswith(" ")]
    check(rows, "record printed no table")
    for row in rows:
        check(row in p.stdout.splitlines(), f"row {row!r} missing from the report")

    p = run([MEMTRAIL, "report", "--json", out])
    check_eq(p.returncode, 0, f"report --json status ({p.stderr!r})")
    doc = json.loads(p.stdout)
    want = [{k: v for k, v in t.items() if k != "timeline"} for t in trail["targets"]]
    check_eq(doc["targets"], want, "report --json targets")
    check_eq(doc["lost"], trail["lost"], "lost counters")
    check("events" not in doc, "report --json carries the events")


def forker_trail(d):
    """A real trail to edit: record of the forker workload into D, read back."""
    out = os.path.join(d, "trail.json")
    rec = run([MEMTRAIL, "record", "-q", "-o", out, "--", workload("forker")])
    check_eq(rec.returncode, 0, f"record status ({rec.stderr!r})")
    with open(out) as f:
        return json.load(f)


def test_report_malformed_sites():
    # a site's kind that is not a string: rejected, by its path; a folded site
    # with no phase (the writer leaves out a name that is not UTF-8): shown as '?'
    d = tmpdir()
    trail = forker_trail(d)
    i = next(i for i, t in enumerate(trail["targets"]) if t.get("sites"))
    check(len(trail["targets"][i]["sites"]["list"]) >= 2, "the workload has two sites")
    for name, change in (("kind", lambda s: s.update(kind=5)),
                         ("phase", lambda s: (s.pop("phase"), s.update(folded=True,
                                                                       phase_seq=None)))):
        bad = json.loads(json.dumps(trail))
        change(bad["targets"][i]["sites"]["list"][0])
        path = os.path.join(d, f"{name}.json")
        with open(path, "w") as f:
            json.dump(bad, f)
        p = run([MEMTRAIL, "report", path])
        check(p.returncode >= 0, f"{name}: report killed by signal {-p.returncode}")
        if name == "kind":
            one_line_error(p, f"cannot read trail '{path}': "
                           f"targets[{i}].sites.list[0].kind: not a string")
        else:
            check_eq(p.returncode, 0, f"{name}: report status ({p.stderr!r})")
            check("  ? (folded: phases beyond the listed ones)" in p.stdout.splitlines(),
                  f"{name}: no '?' group in {p.stdout!r}")


def test_report_many_folded_sites():
    """5,000 sites of folded phases over 2,500 names (each twice, far apart) and
    200 of ten listed phases: report groups them in time, in a few seconds (the
    grouping was cubic: 92 s for 1,200), each group's rows (heaviest first) and
    totals as the trail has them."""
    d = tmpdir()
    trail = forker_trail(d)
    names = 2500
    listed = [{"kind": "mapped", "phase": f"p{(i * 7) % 10}", "phase_seq": (i * 7) % 10,
               "alloc_bytes": (i * 37) % 1000, "inuse_bytes": (i * 11) % 1000,
               "frames": [{"function": f"l{i}"}]} for i in range(200)]
    folded = [{"kind": "heap", "phase": f"f{(i * 13) % names}", "phase_seq": None, "folded": True,
               "alloc_bytes": (i * 31) % 1000, "inuse_bytes": (i * 17) % 1000,
               "frames": [{"function": f"s{i}"}]} for i in range(2 * names)]
    sites = listed[:100] + folded + listed[100:]
    t = trail["targets"][0]
    t["sites"] = {"list": sites}
    path = os.path.join(d, "many.json")
    with open(path, "w") as f:
        json.dump(trail, f)

    # the groups as report must print them: listed phases by sequence, then
    # folded names by first appearance; in each, heaviest first (ties by name)
    want = {}
    for s in sorted((s for s in sites if not s.get("folded")), key=lambda s: s["phase_seq"]):
        want.setdefault(s["phase"], [])
    for s in sites:
        want.setdefault(s["phase"] + (" (folded: phases beyond the listed ones)"
                                      if s.get("folded") else ""), []).append(s)
    p = run([MEMTRAIL, "report", "--top", "1000", path], timeout=20)
    check_eq(p.returncode, 0, f"report status ({p.stderr!r})")
    lines = p.stdout.splitlines()
    start = lines.index(f"allocation sites of {t['pid']} ({t['comm']})")
    got, group = {}, None
    for line in lines[start + 1:]:
        if line.startswith("allocation sites of") or not line:
            break
        if not line.startswith("    "):
            group = got.setdefault(line[2:], [])
        elif not line.startswith("    KIND"):
            kind, alloc, _, inuse, _, fn = line.split()
            group.append((kind, int(alloc), int(inuse), fn))
    check_eq(list(got), list(want), "groups in order")
    for name, rows in want.items():
        rows = sorted(rows, key=lambda s: (-s["alloc_bytes"], s["frames"][0]["function"]))
        check_eq(got[name], [(s["kind"], s["alloc_bytes"], s["inuse_bytes"],
                              s["frames"][0]["function"]) for s in rows], f"rows of {name}")
    for field, i in (("alloc_bytes", 1), ("inuse_bytes", 2)):
        check_eq(sum(r[i] for rows in got.values() for r in rows), sum(s[field] for s in sites),
                 f"total {field}")


def test_report_one_line_per_label():
    """Sites are whole chains; report lists a phase's sites by what people
    read (the first Python frame, or the first frame outside the allocator,
    and its caller): chains that read the same, of one kind, are one line,
    their bytes summed and their number said; another kind stays apart."""
    d = tmpdir()
    trail = forker_trail(d)
    py = [{"function": "Linear.__init__", "source": "torch/nn/modules/linear.py:96"},
          {"function": "<listcomp>", "source": "/srv/model.py:36"}]

    def site(kind, alloc, inuse, native):
        return {"kind": kind, "phase": "init", "phase_seq": 0, "alloc_bytes": alloc,
                "inuse_bytes": inuse,
                "frames": [{"function": "malloc", "address": "0x10"},
                           {"function": native, "address": "0x20"}, *(dict(f) for f in py)]}
    t = trail["targets"][0]
    t["sites"] = {"list": [site("heap", 300, 100, "c10::alloc_cpu(unsigned long)"),
                           site("heap", 50, 50, "operator new(unsigned long)"),
                           site("mapped", 70, 0, "c10::alloc_cpu(unsigned long)"),
                           site("heap", 4, 0, "PyMem_Malloc")]}
    t["sites"]["list"][3]["frames"][3]["source"] = "/srv/model.py:37"
    path = os.path.join(d, "labels.json")
    with open(path, "w") as f:
        json.dump(trail, f)
    p = run([MEMTRAIL, "report", path])
    check_eq(p.returncode, 0, f"report status ({p.stderr!r})")
    rows = [l.split() for l in p.stdout.splitlines()
            if "Linear.__init__ (linear.py:96) < <listcomp>" in l]
    check_eq([(r[0], r[1], r[3], " ".join(r[5:])) for r in rows],
             [("heap", "350", "150", "Linear.__init__ (linear.py:96) < <listcomp> "
               "(model.py:36) [2 chains]"),
              ("mapped", "70", "0", "Linear.__init__ (linear.py:96) < <listcomp> (model.py:36)"),
              ("heap", "4", "0", "Linear.__init__ (linear.py:96) < <listcomp> (model.py:37)")],
             f"one line per kind and label: {p.stdout[-1500:]}")


# memtrail report ARGS in a python3 of its own, whose only child it is: its
# status, stderr and peak resident memory in MiB (ru_maxrss of the children)
PEAK = """
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=20)
print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
sys.stderr.write(p.stderr)
"""


def report_peak(*args):
    p = run([sys.executable, "-c", PEAK, MEMTRAIL, "report", *args], timeout=60)
    rc, mib = p.stdout.split()
    return int(rc), int(mib), p.stderr


def test_report_memory_follows_useful_content():
    """30 MB of ten million empty events fails at the first, in little memory
    (it took 2.3 GB and 28 s as a tree); ten million values under a key no
    trail has are skipped, the report is that of the trail without them."""
    d = tmpdir()
    out = os.path.join(d, "trail.json")
    rec = run([MEMTRAIL, "record", "-q", "-o", out, "--", workload("forker")])
    check_eq(rec.returncode, 0, f"record status ({rec.stderr!r})")
    with open(out) as f:
        text = f.read()
    clean = run([MEMTRAIL, "report", out])
    check_eq(clean.returncode, 0, f"report status ({clean.stderr!r})")
    check(text.endswith("}\n") and '"events":[' in text, "a compact trail, events in it")

    empty = os.path.join(d, "empty-events.json")
    with open(empty, "w") as f:
        f.write(text.replace('"events":[', '"events":[' + "{}," * 10_000_000, 1))
    rc, mib, err = report_peak(empty)
    check_eq(rc, 1, f"status ({err!r})")
    check_eq(err.strip(), f"memtrail: error: cannot read trail '{empty}': events[0].t_ms: missing",
             "the error")
    check(mib < 100, f"report of 10M empty events peaked at {mib} MiB")

    junk = os.path.join(d, "junk.json")
    with open(junk, "w") as f:
        f.write(text[:-2] + ',"junk":[' + "{}," * 10_000_000 + '{}]}\n')
    rc, mib, err = report_peak(junk)
    check_eq(rc, 0, f"status ({err!r})")
    check(mib < 100, f"report of 10M values under an unknown key peaked at {mib} MiB")
    p = run([MEMTRAIL, "report", junk])
    check_eq(p.stdout.replace(junk, out), clean.stdout, "the report without the junk")


GROW = """import os
keep = [bytearray(32 << 20)]
if os.environ.get("GROW") == "1":
    keep.append(bytearray(64 << 20))  # the line NEW adds
keep.append(bytearray(8 << 20))
"""


def test_report_diff_names_the_line_that_grew():
    """Two runs of one program, the second allocating 64 MiB more at one
    known line: report --diff names that line first with its 64 MiB (and
    the mapping's page), and no other site changed by more than 1 MiB; the
    table says the same; go tool pprof -diff_base on the two runs' --pprof
    files gives that line the same bytes, and report --diff --pprof's one
    profile gives every line pprof's own diff gives, flat and cumulative."""
    d = tmpdir()
    script = os.path.join(d, "grow.py")
    with open(script, "w") as f:
        f.write(GROW)
    line = GROW.splitlines().index("    keep.append(bytearray(64 << 20))  # the line NEW adds") + 1
    py = os.path.realpath(sys.executable)
    trails = []
    for grow in ("0", "1"):
        out = os.path.join(d, f"grow{grow}.json")
        p = run([MEMTRAIL, "record", "-q", "-o", out, "--", py, script],
                env=dict(os.environ, GROW=grow))
        check_eq(p.returncode, 0, f"record ({p.stderr!r})")
        trails.append(out)
    p = run([MEMTRAIL, "report", "--diff", "--json", "--top", "0", *trails])
    check_eq(p.returncode, 0, f"report --diff --json ({p.stderr!r})")
    doc = json.loads(p.stdout)
    check_eq((doc["type"], doc["base"], doc["new"]), ("diff", trails[0], trails[1]), "the diff")
    t = [x for x in doc["targets"] if script in x["target"]]
    check_eq(len(t), 1, "the program, matched by its command line")
    t = t[0]
    check(t["in_base"] and t["in_new"], "in both runs")
    top = t["sites"][0]
    grew = top["alloc_bytes"]["delta"]
    check(64 << 20 <= grew <= (64 << 20) + 2 * 4096 and top["kind"] == "mapped",
          f"the first site grew by 64 MiB (a mapping's page more at most): {top}")
    check(f"grow.py:{line})" in top["site"], f"it names line {line}: {top['site']}")
    others = [s for s in t["sites"][1:] if abs(s["alloc_bytes"]["delta"]) > 1 << 20 or
              abs(s["inuse_bytes"]["delta"]) > 1 << 20]
    check_eq(others, [], "no other site changed by more than 1 MiB")
    peak = [k for k in t["peaks"] if k["kind"] == "mapped"][0]
    check(abs(peak["delta"] - grew) <= 1 << 20, f"the mapped peak grew as much: {peak}")
    # the table
    p = run([MEMTRAIL, "report", "--diff", *trails])
    check_eq(p.returncode, 0, f"report --diff ({p.stderr!r})")
    rows = [x for x in p.stdout.splitlines() if x.startswith("    mapped ") and "+64.0 MiB" in x]
    check(any(f"grow.py:{line})" in x for x in rows), f"the table names it: {p.stdout!r}")
    # pprof's own diff of the two profiles
    profiles = []
    for tr in trails:
        prof = tr.replace(".json", ".pb.gz")
        p = run([MEMTRAIL, "report", "--pprof", prof, tr])
        check_eq(p.returncode, 0, f"report --pprof ({p.stderr!r})")
        profiles.append(prof)
    p = run(["go", "tool", "pprof", "-sample_index=mapped_alloc_space", "-unit=B", "-top",
             "-lines", "-nodefraction=0", "-diff_base", profiles[0], profiles[1]], timeout=300)
    check_eq(p.returncode, 0, f"go tool pprof -diff_base ({p.stderr[-500:]!r})")
    cum = [x.split()[3] for x in p.stdout.splitlines() if x.rstrip().endswith(f"grow.py:{line}")]
    check_eq(cum, [f"{grew}B"], f"pprof -diff_base's bytes under line {line}")
    # the difference as one profile: pprof's rows (flat, cumulative, where) are -diff_base's
    diff_prof = os.path.join(d, "diff.pb.gz")
    p = run([MEMTRAIL, "report", "--diff", "--pprof", diff_prof, *trails])
    check_eq(p.returncode, 0, f"report --diff --pprof ({p.stderr!r})")
    for index in ("mapped_alloc_space", "mapped_inuse_space"):
        rows = []
        for args in (["-diff_base", profiles[0], profiles[1]], [diff_prof]):
            q = run(["go", "tool", "pprof", f"-sample_index={index}", "-unit=B", "-top", "-lines",
                     "-nodefraction=0", *args], timeout=300)
            check_eq(q.returncode, 0, f"go tool pprof {args} ({q.stderr[-500:]!r})")
            table = q.stdout.split(" flat%", 1)[-1].splitlines()[1:]
            rows.append(sorted((x.split()[0], x.split()[3], " ".join(x.split()[5:]))
                               for x in table if x.strip()))
        check(rows[0], f"pprof -diff_base lists rows of {index}")
        check_eq(rows[1], rows[0], f"{index}: report --diff --pprof against pprof -diff_base")
    for args in (["--diff", trails[0]], ["--diff", trails[0], trails[1], "--perfetto", "x.json"]):
        one_line_error(run([MEMTRAIL, "report", *args]), "--diff")
    # the page: the line's row first, its frame red by the 64 MiB it grew, in headless Chromium
    page = os.path.join(d, "diff.html")
    p = run([MEMTRAIL, "report", "--diff", "--html", page, *trails])
    check_eq(p.returncode, 0, f"report --diff --html ({p.stderr!r})")
    from test_viz import read_page
    got, = read_page(page, "viz-diff-grow.png", """(() => {
        const sec = Array.from(document.querySelectorAll('section.target'))
            .find(s => s.querySelector('h2').textContent.includes('grow.py'));
        const g = sec.querySelector('.flame');
        const sel = g.previousElementSibling.querySelectorAll('select');
        const cells = tr => Array.from(tr.children).map(c => c.textContent);
        return {
            peaks: Array.from(sec.querySelectorAll('table.peaks tr')).slice(1).map(cells),
            sites: Array.from(sec.querySelectorAll('tr.site')).map(cells),
            shown: [sel[0].value, sel[1].value],  // a: allocated
            frames: Array.from(g.querySelectorAll('.fr')).map(e => [e.textContent,
                e.classList.contains('grew'), +e.dataset.base, +e.dataset.new, +e.dataset.depth]),
        };
    })()""")
    check_eq(got["shown"], ["mapped", "a"], "the flame graph opens on what changed most")
    check(any(r[0] == "mapped" and r[3] == "+64.0 MiB" for r in got["peaks"]),
          f"the page's peaks: the mapped peak grew 64 MiB: {got['peaks']}")
    first = got["sites"][0]
    check(first[0] == "mapped" and first[1] == "+64.0 MiB" and f"grow.py:{line})" in first[3],
          f"the first site row is the line that grew: {got['sites']}")
    frame = [f for f in got["frames"] if f[0].endswith(f"(grow.py:{line})")]
    check(len(frame) == 1 and frame[0][1] and frame[0][3] - frame[0][2] == grew,
          f"the line's frame grew by the diff's {grew} bytes: {frame}")
    root = got["frames"][0]
    check_eq(root[4], 0, "the first frame drawn is the root")
    want = sum(s["alloc_bytes"]["delta"] for s in t["sites"] if s["kind"] == "mapped")
    check_eq(root[3] - root[2], want, "the root's change: every mapped site's, added up")
    with open(trails[1], "rb") as f:
        kept = f.read()
    one_line_error(run([MEMTRAIL, "report", "--diff", "--pprof", trails[1], *trails]),
                   "is the trail being read")
    with open(trails[1], "rb") as f:
        check(f.read() == kept, "NEW's trail left as it was")
