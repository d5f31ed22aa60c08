"""The block scheduler's co-residency law, read off the recorded placements (experiments/placement.py):
how many blocks, and how long, before a block its SM's latest co-resident block started. With B blocks
per SM on S SMs, the j-th latest started j/B of a block's time earlier and j x S blocks earlier - the
law is the spread around that, pooled over every recorded launch (matmul.naive, TILE 16 and TILE 32)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .measurements import DATA_DIR

QUANTILES = 24


@dataclass(frozen=True)
class CoResidency:
    index_offsets: np.ndarray  # quantiles of (blocks between the two) - S
    time_offsets: np.ndarray  # quantiles of (start offset / median block time) - 1 / B
    launches: int


def _nearest(sm: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index distance - S, time offset / T - 1/B) from each block, past the first wave, to the block
    that started last before it on its SM, where that one is still running."""
    sms = len(np.unique(sm))
    first = np.where(sm == sm[0])[0]
    b = int(np.sum(start[first] < end[first].min()))  # blocks per SM: the first wave on one SM
    t = float(np.median(end - start))
    order = np.lexsort((start, sm))  # by SM, then by start
    cur, prev = order[1:], order[:-1]
    keep = (sm[cur] == sm[prev]) & (end[prev] > start[cur]) & (cur >= b * sms)
    cur, prev = cur[keep], prev[keep]
    return cur - prev - sms, (start[cur] - start[prev]) / t - 1 / b


@lru_cache(maxsize=4)
def law(device_key: str) -> CoResidency | None:
    """The pooled law of a device's recorded placements; None where none is recorded."""
    files = sorted((DATA_DIR / device_key / "checks" / "placement").glob("placement-*.npz"))
    if not files:
        return None
    pairs = []
    for f in files:
        z = np.load(f)
        pairs += [_nearest(z["sm"][i], z["start_ns"][i], z["end_ns"][i]) for i in range(len(z["sm"]))]
    q = (np.arange(QUANTILES) + 0.5) / QUANTILES
    return CoResidency(np.quantile(np.concatenate([d for d, _ in pairs]), q),
                       np.quantile(np.concatenate([o for _, o in pairs]), q), len(pairs))
