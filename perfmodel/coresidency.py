"""The block scheduler's co-residency law, read off the recorded placements (experiments/placement.py):
how many blocks, and how long, before a block its SM's latest co-resident block started. With B blocks
per SM on S SMs, the j-th latest started j/B of a block's time earlier and j x S blocks earlier - the
law is the spread around that, pooled over every recorded launch (matmul.naive, TILE 16 and 32, COARSE 2
and 8)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .cache import on_disk
from .measurements import DATA_DIR

QUANTILES = 24


@dataclass(frozen=True)
class Placement:
    """One launch: per block (row-major over the grid) its SM and its start and end (ns)."""

    sm: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    grid: tuple[int, int, int]


def _launches(path: Path) -> list[Placement]:
    z = np.load(path)
    grid = tuple(int(g) for g in z["grid"])
    return [Placement(z["sm"][i], z["start_ns"][i], z["end_ns"][i], grid) for i in range(len(z["sm"]))]


def _folder(device_key: str) -> Path:
    return DATA_DIR / device_key / "checks" / "placement"


def recorded_launches(device_key: str) -> list[tuple[str, list[Placement]]]:
    """(file stem, its launches) of every placement experiments/placement.py recorded on a device."""
    return [(f.stem, _launches(f)) for f in sorted(_folder(device_key).glob("placement-*.npz"))]


# experiments/placement.py's file kinds: the case and the parameters besides m, n, k
KINDS = {"naive": ("matmul.naive", {}), "tiled": ("matmul.tiled", {"tile": 16}),
         "tiled32": ("matmul.tiled", {"tile": 32}), "coarsened2": ("matmul.coarsened", {"tile": 32, "coarse": 2}),
         "coarsened1": ("matmul.coarsened", {"tile": 32, "coarse": 1}),
         "coarsened4": ("matmul.coarsened", {"tile": 32, "coarse": 4}),
         "coarsened8": ("matmul.coarsened", {"tile": 32, "coarse": 8})}


@dataclass(frozen=True)
class Recorded:
    """The launches recorded of one case at one shape."""

    case: str
    params: dict[str, int]
    launches: list[Placement]


@lru_cache(maxsize=4)
def recorded(device_key: str) -> tuple[Recorded, ...]:
    """Every placement experiments/placement.py recorded on a device (three launches of each case and shape)."""
    out = []
    for stem, launches in recorded_launches(device_key):
        kind, m, n, k = re.fullmatch(r"placement-(\w+)-m(\d+)-n(\d+)-k(\d+)", stem).groups()
        case, extra = KINDS[kind]
        out.append(Recorded(case, {"m": int(m), "n": int(n), "k": int(k)} | extra, launches))
    return tuple(out)


def placements_of(device_key: str, case: str, params: dict[str, int]) -> tuple[Placement, ...]:
    """The recorded launches of exactly this case and shape on a device; none where none is recorded."""
    shape = {d: params.get(d) for d in "mnk"}
    for kind, (name, extra) in KINDS.items():
        if name == case and params == shape | extra:
            path = _folder(device_key) / f"placement-{kind}-m{shape['m']}-n{shape['n']}-k{shape['k']}.npz"
            return tuple(_launches(path)) if path.is_file() else ()
    return ()


@dataclass(frozen=True)
class CoResidency:
    index_offsets: np.ndarray  # quantiles of (blocks between the two) - S
    time_offsets: np.ndarray  # quantiles of (start offset / median block time) - 1 / B
    launches: int


def _nearest(pl: Placement) -> tuple[np.ndarray, np.ndarray]:
    """(index distance - S, time offset / T - 1/B) from each block, past the first wave, to the block
    that started last before it on its SM, where that one is still running."""
    sm, start, end = pl.sm, pl.start_ns, pl.end_ns
    sms = len(np.unique(sm))
    first = np.where(sm == sm[0])[0]
    b = int(np.sum(start[first] < end[first].min()))  # blocks per SM: the first wave on one SM
    t = float(np.median(end - start))
    order = np.lexsort((start, sm))  # by SM, then by start
    cur, prev = order[1:], order[:-1]
    keep = (sm[cur] == sm[prev]) & (end[prev] > start[cur]) & (cur >= b * sms)
    cur, prev = cur[keep], prev[keep]
    return cur - prev - sms, (start[cur] - start[prev]) / t - 1 / b


@on_disk
def law(device_key: str) -> CoResidency | None:
    """The pooled law of a device's recorded placements; None where none is recorded."""
    pairs = [_nearest(pl) for _, launches in recorded_launches(device_key) for pl in launches]
    if not pairs:
        return None
    q = (np.arange(QUANTILES) + 0.5) / QUANTILES
    return CoResidency(np.quantile(np.concatenate([d for d, _ in pairs]), q),
                       np.quantile(np.concatenate([o for _, o in pairs]), q), len(pairs))


@on_disk
def first_wave(device_key: str, blocks_per_sm: int) -> tuple[np.ndarray, ...]:
    """The SM of each first-wave block (ids 0 .. B x SMs - 1), one map per recorded launch with B
    blocks per SM whose first wave started together (before any of its blocks ended); none where none
    is recorded. Each SM's blocks lie ~SMs apart (132 +- 8 on the H200), but which ones varies from
    launch to launch: the model averages over the maps."""
    maps = []
    for _, launches in recorded_launches(device_key):
        for pl in launches:
            sm, start, end = pl.sm, pl.start_ns, pl.end_ns
            n0 = blocks_per_sm * len(np.unique(sm))
            if len(sm) <= n0 or not (np.bincount(sm[:n0]) == blocks_per_sm).all():
                continue
            if start[:n0].max() < end[:n0].min() and start[:n0].max() <= start[n0:].min():
                maps.append(sm[:n0].copy())
    return tuple(maps)
