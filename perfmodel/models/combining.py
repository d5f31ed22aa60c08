"""Stores L1 combines before they reach L2, where warps of one block write the same sectors.

Two patterns, each with a share measured against the launch's length (StoreCombining, in the ceilings): a
block's warps writing 4-byte pieces of the same lines after a load each (probe.piece_store, lines
adjacent; probe.piece_spread, lines apart), and neighbouring warps of a block sharing the sector at
the seam of their contiguous stores (mem.global_store shifted by 4 bytes). The shorter the launch,
the more in step a block's warps store, and the more L1 combines: under one wave (a block alone on
its SM) the most."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..memory import Access, Launch
from ..memory.coalescing import LINE_BYTES, SECTOR_BYTES
from ..memory.pattern import addresses

PIECES, PIECES_SPREAD, SEAMS = "pieces", "pieces_spread", "seams"


@dataclass(frozen=True)
class Combined:
    """What L1 passes on to L2 of a kernel's stores: shares of its sectors and (store, line) pairs."""

    pattern: str
    sector_share: float
    request_share: float


def _stores(accesses: list[Access]) -> list[Access]:
    return [a for a in accesses if a.space == "global" and a.store]


def lines_adjacent(accesses: list[Access], launch: Launch) -> bool:
    """Whether the first warp's first global store touches consecutive lines (probe.piece_store), not
    lines apart (probe.piece_spread: a row apart, as a transpose's column stores)."""
    addr = addresses(_stores(accesses)[0], launch)[0]
    lines = np.unique(addr[addr >= 0] // LINE_BYTES)
    return len(lines) > 0 and int(lines[-1] - lines[0]) + 1 == len(lines)


def seam_sectors(accesses: list[Access], launch: Launch) -> float:
    """Sectors per launch where a warp's contiguous store ends in the sector the next warp of its block
    begins in (block 0's warps at loop indices 0, for every block and loop trip): the seam of a
    shifted contiguous store. Warps whose stores scatter (a transpose's columns) have none."""
    total = 0.0
    for a in _stores(accesses):
        spans = []
        for w in addresses(a, launch):
            s = np.unique(w[w >= 0] // SECTOR_BYTES)
            spans.append((int(s[0]), int(s[-1])) if len(s) and s[-1] - s[0] + 1 == len(s) else None)
        seams = sum(1 for lo, hi in zip(spans, spans[1:], strict=False)
                    if lo is not None and hi is not None and lo[1] == hi[0] and lo[0] < hi[0])
        total += seams * math.prod(launch.loops.get(v, 1) for v in a.loops)
    return total * launch.blocks


def combined(pattern: str, share: float, store_sectors: int, store_lines: int, seams: float = 0.0) -> Combined:
    """The shares L1 passes on where it combines `share` of what the pattern makes combinable: every
    piece (PIECES, PIECES_SPREAD), or the seam sectors (SEAMS: one sector and one (store, line) pair
    of the two warps' each)."""
    if pattern == SEAMS:
        return Combined(pattern, 1 - share * seams / max(store_sectors, 1), 1 - share * seams / max(store_lines, 1))
    return Combined(pattern, 1 - share, 1 - share)


@dataclass(frozen=True)
class StoreCombining:
    """Per pattern, the share of what it makes combinable that L1 combined, against the launch's waves
    (blocks over resident blocks), read off the calibration probes (ceilings); interpolated in
    log(waves), held at the ends."""

    curves: tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...]  # (pattern, waves, shares)
    source: str

    def share(self, pattern: str, waves: float) -> float | None:
        for name, at, shares in self.curves:
            if name == pattern:
                return float(np.interp(math.log(max(waves, 1e-6)), np.log(at), shares))
        return None


def store_combined(law: StoreCombining | None, accesses: list[Access], launch: Launch, store_sectors: int,
                   store_lines: int, waves: float, pieces: bool) -> Combined | None:
    """What L1 passes on of a kernel's stores (None: all of it): the pieces law where a block's warps
    write pieces of the same lines (`pieces`: traffic.l1_combines), the seams law where neighbouring
    warps' contiguous stores meet in a sector."""
    if law is None or not store_sectors:
        return None
    seams = 0.0
    if pieces:
        pattern = PIECES if lines_adjacent(accesses, launch) else PIECES_SPREAD
    else:
        seams, pattern = seam_sectors(accesses, launch), SEAMS
        if not seams:
            return None
    share = law.share(pattern, waves)
    return combined(pattern, share, store_sectors, store_lines, seams) if share else None


# the piece probes' sizes, 1-128 Mi threads, and 5-7 Mi (plan h200_combine_step) where the share falls
# fastest: 0.30-0.33 L2 write sectors a thread up to 4 Mi, 0.37 from 7 Mi - where the footprint (8 bytes
# a thread) passes from one L2 partition (30 MiB) to the whole L2 (60 MiB)
PIECE_SIZES = (1 << 20, 1 << 21, 5 << 20, 6 << 20, 7 << 20, 1 << 23, 1 << 25, 1 << 27)
# the calibration probes (plan experiments/plans/h200_combine.toml: sizes the suite's own runs of them
# lack, which test what is read off these): pattern, case, its parameters besides n, the n measured
CALIBRATION = (
    (PIECES, "probe.piece_store", {"dist": 1}, PIECE_SIZES),
    (PIECES_SPREAD, "probe.piece_spread", {"dist": 1, "spread": 256}, PIECE_SIZES),
    (SEAMS, "mem.global_store", {"offset": 4, "stride": 1, "width": 4},
     (1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 23, 1 << 25, 1 << 27)),
)


def observed(ncu, pattern: str, case: str, params: dict[str, int]) -> tuple[float, float] | None:
    """(waves, share L1 combined) of one recorded launch of a pattern's probe (`ncu`: the ncu rows of
    measurements.load): the L2 write sectors from L1 against the sectors its warps store, over what
    the pattern makes combinable; None where ncu did not count it."""
    from ..suite.plan import case_id
    from ..suite.registry import get
    from .l1 import case_l1

    got = ncu[ncu.case_id.eq(case_id(case, params))].groupby("metric").value.median()
    if not {"lts__t_sectors_srcunit_tex_op_write.sum", "launch__waves_per_multiprocessor"} <= set(got.index):
        return None
    kc = get(case)
    l1 = case_l1(kc, params)
    stored = l1.store_sectors - got["lts__t_sectors_srcunit_tex_op_write.sum"]
    combinable = seam_sectors(kc.accesses(params), kc.launch(params)) if pattern == SEAMS else l1.store_sectors
    return float(got["launch__waves_per_multiprocessor"]), float(max(0.0, stored / combinable))


def calibrate(data) -> StoreCombining | None:
    """The laws from the recorded calibration probes; None where none is recorded."""
    from ..suite.plan import case_id
    from ..suite.registry import get

    ncu = data[data.source.eq("ncu")]
    curves, cases = [], []
    for pattern, case, fixed, sizes in CALIBRATION:
        points = []
        for n in sizes:
            p = get(case).bind(**fixed, n=n)
            if (point := observed(ncu, pattern, case, p)) is not None:
                points.append(point)
                cases.append(case_id(case, p))
        if len(points) >= 2:
            points.sort()
            curves.append((pattern, tuple(w for w, _ in points), tuple(s for _, s in points)))
    if not curves:
        return None
    return StoreCombining(tuple(curves), f"measured: {len(cases)} launches of plan h200_combine ({', '.join(cases)})")
