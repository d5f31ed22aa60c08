"""Stores L1 combines before they reach L2, where warps of one block write the same sectors.

Three patterns, each with the share L1 combines measured (StoreCombining, in the ceilings). Two against the
launch's length: a block's warps writing 4-byte pieces of the same lines after a load each (probe.piece_store, lines
adjacent; probe.piece_spread, lines apart), and neighbouring warps of a block sharing the sector at
the seam of their contiguous stores (mem.global_store shifted by 4 bytes). The shorter the launch,
the more in step a block's warps store, and the more L1 combines: under one wave (a block alone on
its SM) the most.

The third is one warp's: its consecutive store instructions meeting in a sector (matmul.coarsened's C
stores 128 bytes apart, at n off a multiple of 8). L1 combines a share of those seams that depends on the
run of stores - the kernel's code - not on the launch's length: 106 ragged shapes of 24 held-out sets,
measured before this law, combined 0.65-0.76 (median 0.73), 0.36-0.41 (0.38) and 0.28-0.30 (0.29) of the
seams at C = 2, 4 and 8 whatever m, n, k and the waves (0.7-23). Read off plan h200_warp_seams per run
length (WARP_SEAMS_RUNS: 0.747, 0.369, 0.294 on 2026-12-03), held flat. Why the run sets it is not known:
in the SASS the last store follows a predicated EXIT at every C; the others issue back to back or 1-2
instructions apart."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..memory import Access, Launch
from ..memory.coalescing import LINE_BYTES, SECTOR_BYTES
from ..memory.pattern import addresses

PIECES, PIECES_SPREAD, SEAMS, WARP_SEAMS = "pieces", "pieces_spread", "seams", "warp_seams"


def warp_seams(run: int) -> str:
    """The pattern of a warp's `run` consecutive store instructions whose seams share sectors."""
    return f"{WARP_SEAMS}_{run}"


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
        total += seams * trips(a, launch)
    return total * launch.blocks


def store_run(accesses: list[Access], launch: Launch) -> int:
    """How many store instructions a warp issues in a row: the trips of the global stores' loops (the
    longest, where several store)."""
    return max((trips(a, launch) for a in _stores(accesses)), default=0)


def trips(a: Access, launch: Launch) -> int:
    """How many times a warp issues access `a`: the product of its loops' trip counts."""
    return math.prod(launch.loops.get(v, 1) for v in a.loops)


def combined(pattern: str, share: float, store_sectors: int, store_lines: int, seams: float = 0.0,
             merge: tuple[float, float] = (1.0, 1.0)) -> Combined:
    """The shares L1 passes on where it combines `share` of what the pattern makes combinable: every
    piece (PIECES, PIECES_SPREAD), the seam sectors (SEAMS: one sector and one (store, line) pair
    of the two warps' each), or what a warp's own stores share (WARP_SEAMS: `merge`, the (lines,
    sectors) left were all combined, models.l1.store_merge_shares)."""
    if pattern == SEAMS:
        return Combined(pattern, 1 - share * seams / max(store_sectors, 1), 1 - share * seams / max(store_lines, 1))
    if pattern.startswith(WARP_SEAMS):
        lines, sectors = merge
        return Combined(pattern, 1 - share * (1 - sectors), 1 - share * (1 - lines))
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
                   store_lines: int, waves: float, pieces: bool,
                   merge: tuple[float, float] = (1.0, 1.0)) -> Combined | None:
    """What L1 passes on of a kernel's stores (None: all of it): the pieces law where a block's warps
    write pieces of the same lines (`pieces`: traffic.l1_combines), the seams law where neighbouring
    warps' contiguous stores meet in a sector, else the warp-seams law of the kernel's run of stores
    where a warp's own stores share lines (`merge` < 1: models.l1.store_merge_shares)."""
    if law is None or not store_sectors:
        return None
    seams = 0.0
    if pieces:
        pattern = PIECES if lines_adjacent(accesses, launch) else PIECES_SPREAD
    elif (seams := seam_sectors(accesses, launch)):
        pattern = SEAMS
    elif min(merge) < 1.0:
        pattern = warp_seams(store_run(accesses, launch))
    else:
        return None
    share = law.share(pattern, waves)
    return combined(pattern, share, store_sectors, store_lines, seams, merge) if share else None


# the piece probes' sizes, 1-128 Mi threads, and 5-7 Mi (plan h200_combine_step) where the share falls
# fastest: 0.30-0.33 L2 write sectors a thread up to 4 Mi, 0.37 from 7 Mi - where the footprint (8 bytes
# a thread) passes from one L2 partition (30 MiB) to the whole L2 (60 MiB)
PIECE_SIZES = (1 << 20, 1 << 21, 5 << 20, 6 << 20, 7 << 20, 1 << 23, 1 << 25, 1 << 27)
# and 2.25-4.5 Mi (plan h200_piece_dip, sizes the suite lacks): the share stays near 2 Mi's up to ~4 Mi
# (a footprint of one L2 partition) and rises after - under the log-linear line from 2 to 5 Mi by 2-7 %
PIECE_DIP_SIZES = tuple(quarters << 18 for quarters in (9, 10, 11, 13, 14, 15, 17, 18))  # in quarter Mi
SPREAD_DIP_SIZES = tuple(quarters << 18 for quarters in (10, 11, 13, 14))
# the calibration probes (plan experiments/plans/h200_combine.toml: sizes the suite's own runs of them
# lack, which test what is read off these): pattern, case, its parameters besides n, the n measured
CALIBRATION = (
    (PIECES, "probe.piece_store", {"dist": 1}, PIECE_SIZES + PIECE_DIP_SIZES),
    (PIECES_SPREAD, "probe.piece_spread", {"dist": 1, "spread": 256}, PIECE_SIZES + SPREAD_DIP_SIZES),
    (SEAMS, "mem.global_store", {"offset": 4, "stride": 1, "width": 4},
     (1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 23, 1 << 25, 1 << 27)),
)
# a warp's runs of 2, 4 and 8 stores (plan experiments/plans/h200_warp_seams.toml: COARSE 2, 4, 8 at m = k =
# 1920, n off a multiple of 8 by 1, 4, 6 and 5 - a family no earlier suite or held-out run had measured)
WARP_SEAMS_RUNS = (2, 4, 8)
CALIBRATION += tuple((warp_seams(c), "matmul.coarsened", {"m": 1920, "k": 1920, "tile": 32, "coarse": c},
                      (1921, 1924, 1926, 3845)) for c in WARP_SEAMS_RUNS)


def observed(ncu, pattern: str, case: str, params: dict[str, int]) -> tuple[float, float] | None:
    """(waves, share L1 combined) of one recorded launch of a pattern's probe (`ncu`: the ncu rows of
    measurements.load): the L2 write sectors from L1 against the sectors its warps store, over what
    the pattern makes combinable; None where ncu did not count it."""
    from ..suite.plan import case_id
    from ..suite.registry import get
    from .l1 import case_l1, store_merge_shares

    got = ncu[ncu.case_id.eq(case_id(case, params))].groupby("metric").value.median()
    if not {"lts__t_sectors_srcunit_tex_op_write.sum", "launch__waves_per_multiprocessor"} <= set(got.index):
        return None
    kc = get(case)
    l1 = case_l1(kc, params)
    accesses, launch = kc.accesses(params), kc.launch(params)
    stored = l1.store_sectors - got["lts__t_sectors_srcunit_tex_op_write.sum"]
    if pattern == SEAMS:
        combinable = seam_sectors(accesses, launch)
    elif pattern.startswith(WARP_SEAMS):
        combinable = l1.store_sectors * (1 - store_merge_shares(accesses, launch)[1])
    else:
        combinable = l1.store_sectors
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
            shares = [s for _, s in points]
            if pattern.startswith(WARP_SEAMS):  # the code's, not the launch's length: their median, flat
                shares = [float(np.median(shares))] * len(shares)
            curves.append((pattern, tuple(w for w, _ in points), tuple(shares)))
    if not curves:
        return None
    return StoreCombining(tuple(curves), f"measured: {len(cases)} launches of plans h200_combine and "
                                         f"h200_warp_seams ({', '.join(cases)})")
