# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""memtrail's phase marker for Python, standard library only.

    import memtrail_marker
    memtrail_marker.phase("model_load")

starts phase "model_load" in this process when memtrail traces it. When
nothing traces it, it is one prctl() with an option the kernel does not
know: it fails with EINVAL and does nothing else. Names: printable ASCII,
1 to 63 bytes (ValueError otherwise).
"""

import ctypes

PRCTL_PHASE = 0x4D545048  # 'MTPH', as in memtrail_marker.h

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_ulong,
                   ctypes.c_ulong]


def phase(name):
    """Start phase NAME in this process (a no-op when memtrail is not tracing)."""
    raw = name.encode("ascii") if isinstance(name, str) else bytes(name)
    if not 1 <= len(raw) <= 63 or any(b < 0x20 or b > 0x7E for b in raw):
        raise ValueError(f"invalid memtrail phase name {name!r}: "
                         "printable ASCII, 1 to 63 bytes")
    _prctl(PRCTL_PHASE, raw, 0, 0, 0)
