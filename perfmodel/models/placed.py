"""L1 sharing between co-resident blocks, over a launch's recorded placement (each block's SM, start and
end: experiments/placement.py). Where one is recorded it replaces the pooled start-spread law
(`traffic.co_resident_hits`): which blocks met on an SM, and how far apart they started, is the
dispatcher's choice for that launch, and the pooled law spreads it over every recorded launch."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..coresidency import Placement
from ..memory.coalescing import SECTOR_BYTES

LOOKBACK = 3  # earlier blocks on an SM checked for overlap, per resident slot


def kept(fill_bytes: np.ndarray, l1_bytes: float) -> np.ndarray:
    """The share of a line still in L1 after `fill_bytes` of other lines came in: an L1 that replaces at
    random keeps it with exp(-fills / L1). The H200's L1 does not replace at random - a pointer chase keeps
    nothing of a cycle 1.5x what it holds whole (`cyclic_hits_at_random`, FINDINGS.md "The L1 keeps by
    recency") - but over the spread of a block's fills this law fits the suite's placed rows best of those
    tried; steeper ones fit the held-out rows better and lose suite rows (experiments/study_l1_survival.py)."""
    return np.exp(-fill_bytes / l1_bytes)


def cyclic_hits_at_random(cycle_bytes: float, l1_bytes: float) -> float:
    """The share of loads that hit in steady state when one walk cycles through `cycle_bytes` of lines
    and L1 (`l1_bytes`) replaces at random: a line survives the misses of one cycle, h = exp(-x (1 - h))
    with x = cycle / L1 - all (1) where the cycle fits, else the fixed point below 1."""
    x = cycle_bytes / l1_bytes
    if x <= 1:
        return 1.0
    h = 0.0
    for _ in range(200):  # a contraction below 1 where x > 1
        h = math.exp(-x * (1 - h))
    return h


@dataclass(frozen=True)
class Sharers:
    """Per block of one launch, how long (ns) before it each live sharer on its SM started (inf where
    none), for one load's block indices; and the launch's median block time."""

    since_ns: np.ndarray  # (blocks, candidates)
    block_ns: float


def sharers(pl: Placement, key: np.ndarray, blocks_per_sm: int) -> Sharers:
    """Every earlier block on a block's SM still running at its start that shares its `key` (the
    load's block indices): all of them, not only the latest."""
    order = np.lexsort((pl.start_ns, pl.sm))
    sm, start, end, k = pl.sm[order], pl.start_ns[order], pl.end_ns[order], key[order]
    depth = LOOKBACK * blocks_per_sm
    since = np.full((len(order), depth), np.inf)
    for j in range(1, depth + 1):
        cur = np.arange(j, len(order))
        prev = cur - j
        ok = (sm[prev] == sm[cur]) & (end[prev] > start[cur]) & (k[prev] == k[cur])
        since[cur[ok], j - 1] = (start[cur] - start[prev])[ok]
    out = np.empty_like(since)
    out[order] = since
    return Sharers(out, float(np.median(pl.end_ns - pl.start_ns)))


def placed_hits(loads: list[tuple[np.ndarray, float]], placements: tuple[Placement, ...], blocks_per_sm: int,
                block_bytes: float, l1_bytes: float, blocks: int) -> float:
    """Sectors per launch a block's loads find in L1, brought in by the live co-resident blocks that
    share the load's block indices (`loads`: per shared load, its key per block and its sectors per
    block), mean over the recorded launches: a line survives the SM's fills since the sharer started
    as in an L1 that replaces at random, exp(-fills / L1 beside the carveout); the fills are B x the
    block's `block_bytes` per median block time less the hits themselves (iterated to that fixed
    point, as the pooled law is)."""
    share = [[(sharers(pl, key, blocks_per_sm), sectors) for key, sectors in loads] for pl in placements]
    loaded = block_bytes / SECTOR_BYTES * blocks

    def hits(fill_bytes: float) -> float:
        per_launch = []
        for launch in share:
            total = 0.0
            for s, sectors in launch:
                alive = kept(s.since_ns * (blocks_per_sm * fill_bytes / s.block_ns), l1_bytes)
                total += sectors * float(np.sum(1 - np.prod(1 - alive, axis=1)))
            per_launch.append(total)
        return float(np.mean(per_launch))

    return settled(hits, block_bytes, loaded)


def settled(hits: Callable[[float], float], block_bytes: float, loaded: float) -> float:
    """L1 hits fill nothing: the sectors `hits(fill bytes per block)` finds, at the fills of a block's
    `block_bytes` less the hits' share of the `loaded` sectors - iterated to that fixed point (a few
    steps: the share is well under one)."""
    got = hits(block_bytes)
    for _ in range(8):
        again = hits(block_bytes * max(0.0, 1 - got / loaded)) if loaded else got
        if abs(again - got) <= 1e-3 * max(got, 1.0):
            return again
        got = again
    return got

