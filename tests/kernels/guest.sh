# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Sourced inside a test kernel by the script tests/kernels/run.py writes
# (through boot.sh), with MEMTRAIL_ROOT and MEMTRAIL_GUEST_TESTS set: a node
# as kubelet makes it on cgroup v2 (every controller on the unified
# hierarchy), the feature table, then those of the integration tests whose
# feature the kernel has.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
# memtrail killed at random moments 5 times a kernel, not 20: programs are slow under TCG
export MEMTRAIL_KILL_TRIES=5
cd "$MEMTRAIL_ROOT" || exit 97
mount -t cgroup2 cgroup2 /sys/fs/cgroup || exit 96
echo "GUEST_KERNEL $(uname -r)"
./memtrail features | sed 's/^/GUEST_FEATURE /'
# MEMTRAIL_GUEST_TESTS: FEATURE:TEST words ("-" for none); a test whose
# feature this kernel lacks ('no') is not run: the support claim covers it
tests=$(./memtrail features --json | python3 -c '
import json, sys
states = {k: v["state"] for k, v in json.load(sys.stdin)["features"].items()}
for w in sys.argv[1:]:
    feature, test = w.split(":", 1)
    if states.get(feature) != "no":
        print(test)
' $MEMTRAIL_GUEST_TESTS)
# shellcheck disable=SC2086
python3 tests/integration/run.py $tests
