"""What the SMs ask of L1 and what leaves it: exact request, sector and wavefront counts from
perfmodel.memory, and the distinct sectors (or other granules) each block touches - L1 reuse inside a
block, within what L1 holds."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..memory import Access, Launch, analyse
from ..memory.coalescing import SECTOR_BYTES
from ..memory.lanes import WARP, distinct_sorted, sorted_keys
from ..memory.pattern import BLOCK_VARS, AccessCount, _Bound


@dataclass(frozen=True)
class L1Traffic:
    uncached_load_sectors: int = 0  # loads that bypass L1 (ld.global.cg)
    load_requests: int = 0
    load_sectors: int = 0
    load_bytes: int = 0
    store_requests: int = 0
    store_sectors: int = 0
    store_bytes: int = 0
    smem_load_wavefronts: int = 0
    smem_store_wavefronts: int = 0
    smem_load_instructions: int = 0
    smem_store_instructions: int = 0
    load_lines: int = 0  # (request, 128-byte line) pairs
    store_lines: int = 0
    store_block_lines: int = 0  # distinct lines of a block's warps at one store instruction
    store_block_sectors: int = 0
    store_masked_lines: int = 0  # (request, line) pairs writing some sector in part (a byte mask)
    store_block_masked_lines: int = 0  # ... with a block's warps at one store instruction combined
    global_load_wavefronts: int = 0  # L1 data stage (bank model)
    global_store_wavefronts: int = 0
    load_tag_wavefronts: int = 0  # L1 tag stage
    store_tag_wavefronts: int = 0

    @property
    def whole_sector_stores(self) -> bool:
        """Every sector a store request touches, it writes whole (none in part)."""
        return bool(self.store_sectors) and self.store_bytes == self.store_sectors * SECTOR_BYTES


def l1_traffic(accesses: list[Access], counts: list[AccessCount]) -> L1Traffic:
    """Totals of the accesses' counts (perfmodel.memory.analyse of each, in order)."""
    t = dict.fromkeys(L1Traffic.__dataclass_fields__, 0)
    for a, c in zip(accesses, counts, strict=True):
        if a.space == "global":
            k = "store" if a.store else "load"
            t[f"{k}_requests"] += c.requests
            t[f"{k}_sectors"] += c.sectors
            t[f"{k}_bytes"] += c.bytes_requested
            t[f"{k}_lines"] += c.lines
            t[f"global_{k}_wavefronts"] += c.wavefronts
            t[f"{k}_tag_wavefronts"] += c.tag_wavefronts
            t["store_block_lines"] += c.block_lines
            t["store_block_sectors"] += c.block_sectors
            t["store_masked_lines"] += c.masked_lines
            t["store_block_masked_lines"] += c.block_masked_lines
            if not a.l1_cached and not a.store:
                t["uncached_load_sectors"] += c.sectors
        else:
            k = "smem_store" if a.store else "smem_load"
            t[f"{k}_wavefronts"] += c.wavefronts
            t[f"{k}_instructions"] += c.requests
    return L1Traffic(**t)


def case_l1(case, params: dict[str, int]) -> L1Traffic:
    """A registry case's L1 totals at `params`: its accesses analysed over its launch."""
    launch, accesses = case.launch(params), case.accesses(params)
    return l1_traffic(accesses, [analyse(a, launch) for a in accesses])


def block_invariant(access: Access, launch: Launch) -> bool:
    """Every block computes the same addresses (no block index in the index or predicate)."""
    return not _Bound(access, launch).names & set(BLOCK_VARS)


def edge_classes(grid: tuple[int, int, int]) -> list[tuple[tuple[int, int, int], int]]:
    """One block for each kind of grid position and how many blocks it stands for: the first and the
    last block of each dimension (halos cut off, ragged tiles) and a middle one for the rest."""
    per_dim = [[(0, 1)] if g == 1 else [(0, 1), (g - 1, 1)] + ([(g // 2, g - 2)] if g > 2 else []) for g in grid]
    return [((x, y, z), nx * ny * nz) for x, nx in per_dim[0] for y, ny in per_dim[1] for z, nz in per_dim[2]]


def global_accesses(accesses: list[Access], launch: Launch, store: bool, invariant: bool | None = None) -> list[Access]:
    return [a for a in accesses if a.space == "global" and a.store == store and a.l1_cached
            and (invariant is None or block_invariant(a, launch) == invariant)]


def _loop_values(a: Access, launch: Launch) -> tuple[dict[str, np.ndarray], int]:
    """Every combination of the access's loop indices (the first loop outermost) and how many."""
    loops = [(lp, launch.loops[lp]) for lp in a.loops]
    n = math.prod(c for _, c in loops)
    flat, values = np.arange(n), {}
    for name, count in reversed(loops):
        values[name] = flat % count
        flat = flat // count
    return values, n


def block_addresser(glob: list[Access], launch: Launch, row_budget: int):
    """A function of one block (x, y, z), or of a (K, 3) array of them, giving (array id, byte
    addresses, element width) of each access in them; None where an access has more rows than the
    budget. The expressions are bound once."""
    array_id = {name: i for i, name in enumerate(dict.fromkeys(a.array or a.name for a in glob))}
    prepared = []
    for a in glob:
        values, n = _loop_values(a, launch)
        if n * launch.warps_per_block > row_budget:
            return None
        prepared.append((array_id[a.array or a.name], _Bound(a, launch), values, n, a.width))

    def addresses(blocks) -> list[tuple[int, np.ndarray, int]]:
        blocks = np.atleast_2d(np.asarray(blocks))
        touched = []
        for aid, bound, values, n, width in prepared:
            at = {name: np.tile(v, len(blocks)) for name, v in values.items()}
            at.update({v: np.repeat(blocks[:, i], n) for i, v in enumerate(BLOCK_VARS)})
            addr = bound.addresses(at).ravel()
            touched.append((aid, addr[addr >= 0], width))
        return touched

    return addresses


def chunk_keys(touched: list[tuple[int, np.ndarray, int]], granule: int) -> np.ndarray:
    """One key per (array, granule-sized chunk) each element touches (repeats kept)."""
    keys = []
    for aid, addr, width in touched:
        if width > granule:  # every granule a wide element covers
            addr = (addr[:, None] + np.arange(0, width, granule)).ravel()
        keys.append(aid * (1 << 50) + addr // granule)
    return np.concatenate(keys) if keys else np.zeros(0, np.int64)


def block_unique_chunks(accesses: list[Access], launch: Launch, store: bool,
                        granules: tuple[int, ...] = (SECTOR_BYTES,), row_budget: int = 1_000_000,
                        invariant: bool | None = None) -> tuple[float, ...]:
    """Mean distinct chunks of each size in `granules` (bytes) one block touches (loads or stores),
    over the grid's edge classes weighted by their blocks, of the accesses that are block-invariant
    or not (`invariant`; None: all); NaN each where a block's rows exceed the budget."""
    glob = global_accesses(accesses, launch, store, invariant)
    if not glob:
        return tuple(0.0 for _ in granules)
    addresses = block_addresser(glob, launch, row_budget)
    if addresses is None:
        return tuple(float("nan") for _ in granules)
    classes = edge_classes(launch.grid)
    totals = []
    for block, _ in classes:
        touched = addresses(block)
        totals.append([len(np.unique(chunk_keys(touched, g))) for g in granules])
    weights = [w for _, w in classes]
    return tuple(float(v) for v in np.average(totals, axis=0, weights=weights))


def _class_addresses(a: Access, launch: Launch, row_budget: int) -> list[tuple[int, np.ndarray]] | None:
    """(blocks it stands for, (instructions, warps, 32) byte addresses) of the access in each of the
    grid's edge-class blocks; None where its rows exceed the budget."""
    values, n = _loop_values(a, launch)
    if n * launch.warps_per_block > row_budget:
        return None
    bound = _Bound(a, launch)
    return [(weight, bound.addresses(dict(values, **{v: np.full(n, b) for v, b in zip(BLOCK_VARS, block,
                                                                                            strict=True)})))
            for block, weight in edge_classes(launch.grid)]


def block_sent_sectors(accesses: list[Access], launch: Launch, row_budget: int = 1_000_000) -> float:
    """Mean sectors one block's load requests ask L1 for (each request's distinct sectors), over the
    same edge classes as `block_unique_chunks`, of the L1-cached loads that differ by block: the
    sampled blocks' reuse (distinct over sent) scales the exact L1 count, so grids whose interior
    blocks sit at varying alignments (rows not a multiple of 32 bytes) keep the exact sector count."""
    total = 0.0
    for a in global_accesses(accesses, launch, store=False, invariant=False):
        classes = _class_addresses(a, launch, row_budget)
        if classes is None:
            return float("nan")
        for weight, addr in classes:
            rows = addr.reshape(-1, WARP)
            total += weight * distinct_sorted(sorted_keys(rows >> 5, rows >= 0)).sum()
    return total / launch.blocks


def l1_windowed_sectors(accesses: list[Access], launch: Launch, per_block: float, l1_share_bytes: float) -> float:
    """A block's load sectors L2 serves when L1 keeps `l1_share_bytes` of them: reuse across
    iterations of the loads' longest loop counts only within a window of as many iterations as L1
    holds one iteration's sectors (a tile pool cycled through with more than L1 holds misses every
    time: probe.barrier_rounds). `per_block` (all reuse) where the block's distinct sectors fit."""
    if math.isnan(per_block) or per_block * SECTOR_BYTES <= l1_share_bytes:
        return per_block
    loads = global_accesses(accesses, launch, store=False, invariant=False)
    looped = [lp for a in loads for lp in a.loops]
    if not looped:
        return per_block
    name = max(looped, key=lambda lp: launch.loops[lp])
    n = launch.loops[name]
    inside = [a for a in loads if name in a.loops]

    def distinct(count: int) -> float:  # the looped loads' sectors over the loop's first `count` iterations
        short = Launch(launch.block, launch.grid, {**launch.loops, name: count}, launch.params, launch.defs)
        return block_unique_chunks(inside, short, store=False, invariant=False)[0]

    window = max(1, int(l1_share_bytes / (max(distinct(1), 1.0) * SECTOR_BYTES)))  # iterations L1 holds
    if 2 * window > n:
        return per_block
    first, both = distinct(window), distinct(2 * window)
    (outside,) = block_unique_chunks([a for a in loads if name not in a.loops], launch, store=False, invariant=False)
    # each further window adds what the second added (no double count where a sector straddles two)
    return max(per_block, first + (n / window - 1) * (both - first) + outside)


def store_merge_shares(accesses: list[Access], launch: Launch, row_budget: int = 1_000_000) -> tuple[float, float]:
    """(lines, sectors) the stores reach L2 with where L1 combines all of a warp's store instructions
    of one loop into each line, over those sent one instruction at a time: the lower bound of L2's
    write requests and sectors (H200, coarsened matmul's C stores at ragged n: L2 counts 2-7 % fewer
    sectors and 9-22 % fewer requests than L1 sends; how much of the way to this bound L1 goes is the
    warp-seams law's share, models.combining)."""
    sent, combined = np.zeros(2), np.zeros(2)
    for a in global_accesses(accesses, launch, store=True):
        classes = _class_addresses(a, launch, row_budget) if _loop_values(a, launch)[1] >= 2 else None
        for weight, addr in classes or []:
            per_warp = addr.transpose(1, 0, 2).reshape(launch.warps_per_block, -1)  # all its instructions
            for i, shift in enumerate((7, 5)):  # lines, sectors
                for rows, total in ((addr.reshape(-1, WARP), sent), (per_warp, combined)):
                    total[i] += weight * distinct_sorted(sorted_keys(rows >> shift, rows >= 0)).sum()
    return tuple(float(c / s) if s else 1.0 for c, s in zip(combined, sent, strict=True))


