# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""report re-renders a trail: the same table, and JSON without the timeline."""

import json
import os

from harness import MEMTRAIL, check, check_eq, run, tmpdir, workload


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


def test_report_malformed_sites():
    # a site's kind that is not a string, a folded site with no phase: no crash
    d = tmpdir()
    out = os.path.join(d, "trail.json")
    rec = run([MEMTRAIL, "record", "-q", "-o", out, "--", workload("forker")])
    check_eq(rec.returncode, 0, f"record status ({rec.stderr!r})")
    with open(out) as f:
        trail = json.load(f)
    sites = next(t["sites"]["list"] for t in trail["targets"] if t.get("sites"))
    check(len(sites) >= 2, "the workload has two sites")
    for name, change in (("kind", lambda s: s.update(kind=5)),
                         ("phase", lambda s: (s.pop("phase"), s.update(folded=True,
                                                                       phase_seq=None)))):
        bad = json.loads(json.dumps(trail))
        change(next(t["sites"]["list"] for t in bad["targets"] if t.get("sites"))[0])
        path = os.path.join(d, f"{name}.json")
        with open(path, "w") as f:
            json.dump(bad, f)
        p = run([MEMTRAIL, "report", path])
        check(p.returncode >= 0, f"{name}: report killed by signal {-p.returncode}")
        check_eq(p.returncode, 0, f"{name}: report status ({p.stderr!r})")
        check("allocation sites of" in p.stdout, f"{name}: no sites table in {p.stdout!r}")
