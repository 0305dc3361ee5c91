#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""make fuzz: run the libFuzzer harness of 'memtrail report' for a while.

The seeds of tests/fuzz/corpus are copied into a working corpus beside the
fuzzer (build/fuzz/corpus, kept between runs; new inputs go there, never into
the tree). Any crash, leak, sanitizer report or slow input fails the run; its
input is in build/fuzz/findings/, named on the last line. --seconds 0 runs
the working corpus once and fuzzes nothing. One closing line: 'fuzz: ...'."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 30          # one input, most take milliseconds
RSS_LIMIT_MB = 2048


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=300, help="time to fuzz (0: the corpus once)")
    ap.add_argument("fuzzer", help="the harness, built by 'make fuzz-build'")
    args = ap.parse_args()
    if args.seconds < 0:
        ap.error("--seconds must be 0 or more")
    fuzzer = os.path.abspath(args.fuzzer)
    work = os.path.dirname(fuzzer)
    corpus = os.path.join(work, "corpus")
    findings = os.path.join(work, "findings")
    log = os.path.join(work, "fuzz.log")
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(findings, exist_ok=True)
    seeds = os.path.join(HERE, "corpus")
    for name in os.listdir(seeds):
        shutil.copyfile(os.path.join(seeds, name), os.path.join(corpus, name))

    cmd = [fuzzer, f"-timeout={TIMEOUT_S}", f"-rss_limit_mb={RSS_LIMIT_MB}",
           f"-dict={os.path.join(HERE, 'trail.dict')}", f"-artifact_prefix={findings}/",
           "-print_final_stats=1"]
    # FUZZ_SEED (CI: 1): the same mutations in every run, so a finding reproduces
    if os.environ.get("FUZZ_SEED") or os.environ.get("CI") == "true":
        cmd.append(f"-seed={os.environ.get('FUZZ_SEED', '1')}")
    cmd += [f"-max_total_time={args.seconds}"] if args.seconds else ["-runs=0"]
    cmd.append(corpus)
    # the renderers' files: in memory where there is room, in a directory removed
    # here, even when a crash left some there
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    tmp = tempfile.mkdtemp(prefix="memtrail-fuzz-", dir=shm)
    try:
        with open(log, "w") as out:
            p = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT,
                               env=dict(os.environ, TMPDIR=tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(log, errors="replace") as f:
        text = f.read()

    runs = re.search(r"stat::number_of_executed_units: (\d+)", text)
    cov = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", text)
    what = f"{runs.group(1) if runs else '?'} inputs"
    if cov:
        what += f", coverage {cov[-1][0]} edges, corpus {cov[-1][2]}"
    unit = re.findall(r"Test unit written to (\S+)", text)
    if p.returncode == 0 and not unit:
        how = f"{args.seconds} s of fuzzing" if args.seconds else "no fuzzing"
        print(f"fuzz: passed: {what} ({how}), no finding", flush=True)
        return 0
    # the sanitizer's or libFuzzer's report: from its first line to the end
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines)
                  if re.match(r"(==\d+==ERROR|.*runtime error:|fuzz_report: |ALARM|"
                              r"==\d+== ERROR: libFuzzer)", l)), max(0, len(lines) - 60))
    sys.stdout.write("\n".join(lines[start:start + 80]) + "\n")
    print(f"fuzz: the whole log: {os.path.relpath(log)}")
    if unit:
        path = os.path.relpath(unit[-1])
        print(f"fuzz: reproduce: {os.path.relpath(fuzzer)} {path}")
        print(f"fuzz: FAILED: {what}; input {path}", flush=True)
    else:
        print(f"fuzz: FAILED: {what}; the fuzzer exited with {p.returncode}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
