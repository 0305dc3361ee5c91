# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Sourced inside a test kernel by the script tests/kernels/run.py writes
# (through boot.sh), with MEMTRAIL_ROOT and MEMTRAIL_GUEST_TESTS set: a node
# as kubelet makes it on cgroup v2 (every controller on the unified
# hierarchy), the feature table, then those integration tests.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
cd "$MEMTRAIL_ROOT" || exit 97
mount -t cgroup2 cgroup2 /sys/fs/cgroup || exit 96
echo "GUEST_KERNEL $(uname -r)"
./memtrail features | sed 's/^/GUEST_FEATURE /'
# a kernel memtrail says it cannot run on: only that claim is checked
if ./memtrail features --json | python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["features"]["atomics"]["state"] != "no")'; then
	echo "GUEST_UNSUPPORTED no BPF atomic fetch operations (Linux 5.12)"
	MEMTRAIL_GUEST_TESTS=test_errors.test_kernel_support_claim
fi
# shellcheck disable=SC2086
python3 tests/integration/run.py $MEMTRAIL_GUEST_TESTS
