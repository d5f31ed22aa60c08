"""Sizes as people write them ("16KiB", "48K", "1024") to bytes, and back."""

from __future__ import annotations

import re

from .errors import PerfModelError

_SUFFIX = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2,
           "mib": 1024**2, "g": 1024**3, "gb": 1024**3, "gib": 1024**3}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes from '16KiB', '48K', '1.5MiB' or 1024 (binary multiples: K = KiB)."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m or m.group(2).lower() not in _SUFFIX:
        raise PerfModelError(f"cannot read size {text!r}: expected a number with an optional "
                             "suffix B, K/KiB, M/MiB or G/GiB (e.g. 16KiB)")
    value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if value != int(value):
        raise PerfModelError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB', 1010 MiB -> '1010 MiB'; exact multiples print without decimals, never an exponent."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v == int(v) or abs(v) >= 1000 else f"{v:.3g} {unit}"
    return f"{n:.0f} B"


def format_si(value: float, unit: str) -> str:
    """4.8e12, 'B/s' -> '4.80 TB/s'."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    if abs(value) >= 1 or value == 0:
        return f"{value:.3g} {unit}"
    for prefix, scale in (("m", 1e-3), ("µ", 1e-6), ("n", 1e-9)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
