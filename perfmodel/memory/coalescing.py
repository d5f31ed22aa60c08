"""Global-memory coalescing: requests, 32-byte sectors and 128-byte lines per warp instruction."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .lanes import INACTIVE, as_rows, distinct_sorted, line_keys, sorted_keys

SECTOR_BYTES = 32
LINE_BYTES = 128
TAG_BANKS = 4  # L1's tag stage looks up 4 lines per cycle, one per tag bank (4 sets x 4 sectors)
# A request whose words span two neighbouring lines takes a second tag pass 1 time in 14 (ncu on the
# H200: 15 passes per 14 such requests, loads and stores alike - mem.global_load/store 4-64 bytes off
# a line, probe.split_store's shifted copies; the row transposes' 7 of 8 misaligned rows 1.062-1.069x)
SPLIT_PAIR_PASSES = 15 / 14


def _expected_max_load(n: int, bins: int = TAG_BANKS) -> float:
    """E[most balls in one bin] for n balls thrown uniformly into `bins` bins (exact)."""
    if n == 0:
        return 0.0
    inv_fact = np.array([1.0 / math.factorial(k) for k in range(n + 1)])
    total = 0.0
    for m in range(n):  # E[max] = sum of P(max > m); P(max <= m) = n! [x^n] (sum_k<=m x^k/k!)^bins / bins^n
        acc = np.ones(1)
        for _ in range(bins):
            acc = np.convolve(acc, inv_fact[: m + 1])[: n + 1]
        total += 1.0 - (acc[n] if len(acc) > n else 0.0) * math.factorial(n) / bins ** n
    return total


EXPECTED_PASSES = np.array([_expected_max_load(n) for n in range(65)])


def tag_passes(sector_keys: np.ndarray) -> np.ndarray:
    """Expected L1 tag-stage passes per request, from each row's sorted sector keys (INACTIVE last).

    A pass resolves one line in each of 4 tag banks. The bank is an XOR hash of the line address
    (probe.pair_lines on the H200: lines a power of two apart never share a bank; other distances
    do about 1 time in 4, as random banks would). So lines in a power-of-two-stride progression
    fill the banks evenly, ceil(n / 4) passes (two neighbouring lines: SPLIT_PAIR_PASSES); any other
    set of n lines takes the expected fullest bank of n random throws."""
    lines = line_keys(sector_keys)
    first = np.ones(lines.shape, dtype=bool)
    first[:, 1:] = lines[:, 1:] != lines[:, :-1]
    first &= lines != INACTIVE
    n = first.sum(axis=1)
    distinct = np.sort(np.where(first, lines, INACTIVE), axis=1)
    width = max(int(n.max(initial=0)), 2)
    d = distinct[:, 1:width] - distinct[:, : width - 1]
    live = np.arange(1, width)[None, :] < n[:, None]
    step = d[:, :1]
    even = np.where(live, d == step, True).all(axis=1) & (step[:, 0] > 0) & ((step[:, 0] & (step[:, 0] - 1)) == 0)
    passes = np.where(even | (n <= 1), -(-n // TAG_BANKS), EXPECTED_PASSES[np.minimum(n, 64)])
    return np.where((n == 2) & (step[:, 0] == 1), SPLIT_PAIR_PASSES, passes)


@dataclass(frozen=True)
class GlobalAccess:
    """What L1TEX counts for a set of warp-level global loads or stores."""

    width_bytes: int
    store: bool
    requests: int
    sectors: int
    lines: int
    bytes_requested: int
    sectors_per_row: np.ndarray
    lines_per_row: np.ndarray | None = None
    active_per_row: np.ndarray | None = None
    tag_passes_per_row: np.ndarray | None = None
    masked_lines_per_row: np.ndarray | None = None  # stores: lines with a sector written in part

    @property
    def bytes_moved(self) -> int:
        return self.sectors * SECTOR_BYTES

    @property
    def efficiency(self) -> float:
        """Bytes the threads asked for over bytes the sectors carried (1.0 = fully coalesced)."""
        return self.bytes_requested / self.bytes_moved if self.sectors else 1.0

    @property
    def line_efficiency(self) -> float:
        """The same against whole 128-byte lines: the textbook's transaction-level figure."""
        return self.bytes_requested / (self.lines * LINE_BYTES) if self.lines else 1.0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    def describe(self) -> str:
        return (f"{self.sectors_per_request:.3g} sectors per request, "
                f"{self.efficiency:.1%} efficient ({self.bytes_requested} B requested, "
                f"{self.bytes_moved} B moved)")


def masked_lines(addresses: np.ndarray, active: np.ndarray, width: int) -> np.ndarray:
    """Per row, the 128-byte lines in which the row writes some 32-byte sector only in part: L2
    takes such a write with its byte mask, one more transfer on the crossbar's way into the slice
    (ncu on the H200, plan h200_l2_units). Repeated addresses count once."""
    s = sorted_keys(addresses, active)
    live = s != INACTIVE
    new = live.copy()
    new[:, 1:] &= s[:, 1:] != s[:, :-1]
    sector = np.where(live, s >> 5, INACTIVE)
    last = live.copy()  # the last address of each sector in the row
    last[:, :-1] &= sector[:, :-1] != sector[:, 1:]
    filled = np.cumsum(new * width, axis=1)
    before = np.maximum.accumulate(np.concatenate([np.zeros((len(s), 1), np.int64),
                                                   np.where(last, filled, 0)[:, :-1]], axis=1), axis=1)
    part = last & (filled - before < SECTOR_BYTES)
    return distinct_sorted(np.sort(np.where(part, sector >> 2, INACTIVE), axis=1))


def global_access(addresses: object, width: int, store: bool = False) -> GlobalAccess:
    """Count requests (one per warp instruction with an active lane), sectors and lines."""
    a, active = as_rows(addresses, width)
    # an aligned access of <= 16 bytes never straddles a sector
    by_sector = sorted_keys(a >> 5, active)
    sectors = distinct_sorted(by_sector)
    lines = distinct_sorted(line_keys(by_sector))
    n_active = np.count_nonzero(active, axis=1)
    return GlobalAccess(width_bytes=width, store=store, requests=int(np.count_nonzero(n_active)),
                        sectors=int(sectors.sum()), lines=int(lines.sum()),
                        bytes_requested=int(n_active.sum()) * width, sectors_per_row=sectors,
                        lines_per_row=lines, active_per_row=n_active, tag_passes_per_row=tag_passes(by_sector),
                        masked_lines_per_row=masked_lines(a, active, width) if store else None)


def straddle_share(tile: int, n: int) -> float:
    """The share of the row segments of `tile` floats that blocks side by side read from a row-major matrix
    n floats wide (matmul's B) that cross a 128-byte line, over the rows and the block columns: a row starts
    4n bytes on from the last, the block columns 4 x tile bytes apart."""
    seg = 4 * tile
    step = math.gcd(4 * n, LINE_BYTES)
    starts = [(r + c * seg) % LINE_BYTES for r in range(0, LINE_BYTES, step)
              for c in range(LINE_BYTES // math.gcd(seg, LINE_BYTES))]
    return sum(s + seg > LINE_BYTES for s in starts) / len(starts)
