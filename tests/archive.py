# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Debian's archive through a private apt state: the machine's own apt
sources name the archive; lists and downloads stay in the caller's folder.
Used by tests/kernels/run.py (kernel packages) and tests/vendor.py (NVIDIA's
libraries)."""

import re

# apt options that list both architectures' packages, whatever this machine's dpkg has
BOTH_ARCHS = ["-o", "APT::Architectures::=amd64", "-o", "APT::Architectures::=arm64"]


def apt_opts(state):
    """apt-get/apt-cache options that keep every list and download under STATE."""
    return ["-o", f"Dir::Etc::sourcelist={state}/sources.list", "-o", "Dir::Etc::sourceparts=-",
            "-o", f"Dir::State::Lists={state}/lists", "-o", f"Dir::Cache={state}/cache",
            "-o", "APT::Sandbox::User=root"]


def archive_uri():
    """The Debian archive this machine's own apt sources name, or None."""
    for path in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        m = re.search(r"^URIs:\s*(\S+)", text, re.M) or \
            re.search(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+\s+main", text, re.M)
        if m:
            return m.group(1)
    return None
