"""Checks shared by the global and shared analyses: (..., 32) byte addresses per warp row."""

from __future__ import annotations

import numpy as np

from ..errors import AccessError

WARP = 32
WIDTHS = (1, 2, 4, 8, 16)


def as_rows(addresses: object, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, 32) int64 addresses and their active mask, after shape and alignment checks."""
    if width not in WIDTHS:
        raise AccessError(f"access width = {width} bytes is not one of {WIDTHS}")
    a = np.asarray(addresses)
    if a.ndim == 0 or a.shape[-1] != WARP:
        raise AccessError(f"addresses must have shape (..., 32): one row per warp instruction, "
                          f"one column per lane; got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise AccessError(f"addresses must be integers (bytes); got dtype {a.dtype}")
    a = a.reshape(-1, WARP).astype(np.int64, copy=False)
    active = a >= 0
    misaligned = active & ((a & (width - 1)) != 0)
    if misaligned.any():
        row, lane = (int(v[0]) for v in np.nonzero(misaligned))
        raise AccessError(f"lane {lane} of row {row} accesses address {int(a[row, lane])}, not aligned "
                          f"to the access width of {width} bytes (the hardware would fault)")
    return a, active


INACTIVE = np.iinfo(np.int64).max


def sorted_keys(keys: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Each row sorted, inactive entries pushed to the end as INACTIVE."""
    s = np.where(active, keys, INACTIVE)
    s.sort(axis=1)
    return s


def distinct_sorted(s: np.ndarray) -> np.ndarray:
    """Distinct non-INACTIVE values per row of a row-sorted array."""
    new = s[:, 1:] != s[:, :-1]
    new &= s[:, 1:] != INACTIVE
    return np.count_nonzero(new, axis=1) + (s[:, 0] != INACTIVE)


def line_keys(sector_keys: np.ndarray) -> np.ndarray:
    """Sorted 32-byte sector keys -> their 128-byte line keys, still sorted (INACTIVE kept)."""
    return np.where(sector_keys == INACTIVE, INACTIVE, sector_keys >> 2)
