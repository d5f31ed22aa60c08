"""Traffic at each level, derived from a case's access descriptions.

L1 (requests, sectors, data-stage wavefronts, tag passes): exact counts from perfmodel.memory.
L2 reads: the distinct sectors each block loads (L1 reuse inside a block within what L1 holds),
block-invariant addresses once per SM, less what co-resident blocks share in L1.
L2 requests: one per (warp request, line), stores of load-free kernels combined per block and line;
past one L2 partition's capacity, first writes are sector fills or read-modify-writes (`l2_requests`).
DRAM: each array once while the kernel's footprint fits in L2; past that, per-family reuse
models (matmul: the operand shared across block rows is streamed again for every wave of
resident blocks, in each L2 partition). Sectors warps write in 4-byte pieces, where L2's write
requests bound the kernel: a measured share filled and written back twice (`piece_fills`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..coresidency import CoResidency, Placement
from ..devices import DeviceSpec
from ..memory import Access, Launch, analyse
from ..memory.lanes import WARP, distinct_sorted, sorted_keys
from ..memory.pattern import BLOCK_VARS, AccessCount, _Bound
from .combining import SEAMS, StoreCombining, store_combined
from .placed import placed_hits, settled

SECTOR = 32


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


def _global(accesses: list[Access], launch: Launch, store: bool, invariant: bool | None = None) -> list[Access]:
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


def _block_addresser(glob: list[Access], launch: Launch, row_budget: int):
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


def _chunk_keys(touched: list[tuple[int, np.ndarray, int]], granule: int) -> np.ndarray:
    """One key per (array, granule-sized chunk) each element touches (repeats kept)."""
    keys = []
    for aid, addr, width in touched:
        if width > granule:  # every granule a wide element covers
            addr = (addr[:, None] + np.arange(0, width, granule)).ravel()
        keys.append(aid * (1 << 50) + addr // granule)
    return np.concatenate(keys) if keys else np.zeros(0, np.int64)


def block_unique_chunks(accesses: list[Access], launch: Launch, store: bool, granules: tuple[int, ...] = (SECTOR,),
                        row_budget: int = 1_000_000, invariant: bool | None = None) -> tuple[float, ...]:
    """Mean distinct chunks of each size in `granules` (bytes) one block touches (loads or stores),
    over the grid's edge classes weighted by their blocks, of the accesses that are block-invariant
    or not (`invariant`; None: all); NaN each where a block's rows exceed the budget."""
    glob = _global(accesses, launch, store, invariant)
    if not glob:
        return tuple(0.0 for _ in granules)
    addresses = _block_addresser(glob, launch, row_budget)
    if addresses is None:
        return tuple(float("nan") for _ in granules)
    classes = edge_classes(launch.grid)
    totals = []
    for block, _ in classes:
        touched = addresses(block)
        totals.append([len(np.unique(_chunk_keys(touched, g))) for g in granules])
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
    for a in _global(accesses, launch, store=False, invariant=False):
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
    if math.isnan(per_block) or per_block * SECTOR <= l1_share_bytes:
        return per_block
    loads = _global(accesses, launch, store=False, invariant=False)
    looped = [lp for a in loads for lp in a.loops]
    if not looped:
        return per_block
    name = max(looped, key=lambda lp: launch.loops[lp])
    n = launch.loops[name]
    inside = [a for a in loads if name in a.loops]

    def distinct(count: int) -> float:  # the looped loads' sectors over the loop's first `count` iterations
        short = Launch(launch.block, launch.grid, {**launch.loops, name: count}, launch.params, launch.defs)
        return block_unique_chunks(inside, short, store=False, invariant=False)[0]

    window = max(1, int(l1_share_bytes / (max(distinct(1), 1.0) * SECTOR)))  # iterations L1 holds
    if 2 * window > n:
        return per_block
    first, both = distinct(window), distinct(2 * window)
    (outside,) = block_unique_chunks([a for a in loads if name not in a.loops], launch, store=False, invariant=False)
    # each further window adds what the second added (no double count where a sector straddles two)
    return max(per_block, first + (n / window - 1) * (both - first) + outside)


def store_merge_shares(accesses: list[Access], launch: Launch, row_budget: int = 1_000_000) -> tuple[float, float]:
    """(lines, sectors) the stores reach L2 with where L1 combines all of a warp's store instructions
    of one loop into each line, over those sent one instruction at a time: the lower bound of L2's
    write requests and sectors (H200, coarsened matmul's C stores at ragged n: L2 counts 5-7 % fewer
    sectors and 9-22 % fewer requests than L1 sends, between the two bounds - timing decides)."""
    sent, combined = np.zeros(2), np.zeros(2)
    for a in _global(accesses, launch, store=True):
        classes = _class_addresses(a, launch, row_budget) if _loop_values(a, launch)[1] >= 2 else None
        for weight, addr in classes or []:
            per_warp = addr.transpose(1, 0, 2).reshape(launch.warps_per_block, -1)  # all its instructions
            for i, shift in enumerate((7, 5)):  # lines, sectors
                for rows, total in ((addr.reshape(-1, WARP), sent), (per_warp, combined)):
                    total[i] += weight * distinct_sorted(sorted_keys(rows >> shift, rows >= 0)).sum()
    return tuple(float(c / s) if s else 1.0 for c, s in zip(combined, sent, strict=True))


@dataclass(frozen=True)
class WrittenSectors:
    """How the kernel's stores fill what they touch, judged around the middle block."""

    partial_share: float = 0.0  # of a block's written sectors, those L2 holds in part when it loses them
    per_line: float = 4.0  # sectors written of each 128-byte line written (L2 holds whole lines)
    split_share: float = 0.0  # of a block's written sectors, those other writers complete (or none)
    completed_share: float = 0.0  # of those lost, those other blocks complete later (the measured curve's)
    between_bytes: float = 0.0  # the traffic between such a sector's writers, mean over those lost
    rewrites_per_fill: float = 0.5  # of those lost, DRAM writes beyond the one a whole sector costs

    @property
    def partial(self) -> bool:  # L2 loses a sector in part (DRAM read-modify-write past L2)
        return self.partial_share >= MIN_LOST_SHARE

    @property
    def split_lost(self) -> float:  # of the sectors other writers complete, those L2 loses first
        return self.partial_share / self.split_share if self.split_share else 0.0


# Below this share of a block's written sectors, L2's losses of sectors written in part are left out
# (their fills are under 1 % of the writes: a row transpose's few off-sector row starts)
MIN_LOST_SHARE = 0.01


def block_bytes(launch: Launch, compulsory: tuple[int, int], l1_bytes: float) -> float:
    """The kernel's mean traffic per block: its compulsory bytes, or what its warps load and store
    where it has no closed form."""
    return (sum(compulsory) or l1_bytes) / max(launch.blocks, 1)


def partial_reach_blocks(dev: DeviceSpec, launch: Launch, compulsory: tuple[int, int], l1_bytes: float) -> int:
    """How many blocks later a write still completes a sector L2 holds in part, where the device has
    no measured loss curve: while less than half an L2 partition's traffic follows."""
    return max(1, int(dev.l2_partition_bytes / 2 / max(block_bytes(launch, compulsory, l1_bytes), 1.0)))


def lost_at(lost: Callable[[float], float], blocks_later: float, per_block_bytes: float,
            spread_blocks: np.ndarray | None = None) -> tuple[float, float]:
    """(share L2 loses, mean bytes between the writers of those it loses) of sectors completed
    `blocks_later` blocks later in launch order; where the writers' store order spreads, over the
    recorded spread (store_order.StoreSpread: quantiles, in blocks)."""
    offsets = np.zeros(1) if spread_blocks is None else spread_blocks
    between = np.abs(blocks_later + offsets) * per_block_bytes
    shares = np.array([lost(b) for b in between])
    share = float(shares.mean())
    return share, float((shares * between).sum() / shares.sum()) if share else 0.0


def written_sectors(accesses: list[Access], launch: Launch, reach_blocks: int, per_block_bytes: float = 0.0,
                    lost: Callable[[float], float] | None = None, spread_blocks: np.ndarray | None = None,
                    word_budget: int = 24_000_000, row_budget: int = 2_000_000) -> WrittenSectors:
    """The middle block's written sectors, and for each the distance to the block that writes its last
    word (blocks outward from it, in rings a 64th of the distance wide). A sector completed `d`
    blocks later is lost first with the device's measured share at d x `per_block_bytes` of traffic
    between (`lost`; probe.split_store: 1 % at 2 MiB, 35 % at 16 MiB, all past 64 MiB - by that
    distance alone, at 128-512 MiB a buffer), over the spread of the writers' store order where
    given (`spread_blocks`, lost_at); a sector of more than two writers with that share at the
    distance from its first writer to its last (probe.piece_store), once for all its pieces; without
    a curve, every sector not completed within `reach_blocks`. Sectors never completed are lost. Also
    the sectors it fills per line where no
    block within `reach_blocks` writes further sectors of its lines (lines that others share are
    taken as completed, as the naive transpose's are by blocks up to 32 rows away)."""
    glob = _global(accesses, launch, store=True)
    if not glob:
        return WrittenSectors()
    gx, gy, gz = launch.grid
    total = gx * gy * gz
    middle = (gx // 2, gy // 2, gz // 2)
    addresses = _block_addresser(glob, launch, row_budget)
    if addresses is None:
        return WrittenSectors()
    own = _chunk_keys(addresses(middle), 4)
    if not len(own):
        return WrittenSectors()
    lines = np.unique(own // 32)  # 32 words a line (the array id's bits are far above)
    sectors = np.unique(own // 8)
    words = (sectors[:, None] * 8 + np.arange(8)).ravel()
    signed = np.where(np.isin(words, own), 0.0, np.nan)  # each word's writer, blocks from the middle one
    m = middle[0] + gx * (middle[1] + gy * middle[2])
    shared_reach = max(1, min(reach_blocks, row_budget // len(own) // 2))
    far = lost is not None and per_block_bytes > 0
    dense = max(shared_reach, min(total, word_budget // (2 * len(own)))) if far else shared_reach
    shared = False

    def seen(offsets: np.ndarray) -> np.ndarray:  # the words of own lines the blocks m + offsets write
        lin = m + offsets
        lin = lin[(lin >= 0) & (lin < total)]
        if not len(lin):
            return np.zeros(0, np.int64)
        w = _chunk_keys(addresses(np.stack([lin % gx, lin // gx % gy, lin // (gx * gy)], axis=1)), 4)
        return w[np.isin(w // 32, lines)]

    def mark(k: int, ks: np.ndarray) -> np.ndarray:  # words first found k blocks away (either side)
        found = []
        for sign in (-1, 1):
            w = seen(sign * ks)
            hit = np.isnan(signed) & np.isin(words, w)
            signed[hit] = sign * k
            found.append(w)
        return np.concatenate(found)

    r = 0  # rings a 64th of the distance wide, densely up to `dense` blocks
    while r < dense and ((r < shared_reach and not shared) or (far and np.isnan(signed).any())):
        end = min(dense, r + max(1, r // 64), r + max(1, row_budget // (2 * len(own))))
        if r < shared_reach:  # the shared-line check ends at the reach
            end = min(end, shared_reach)
        ks = np.arange(r + 1, end + 1)
        r = int(ks[-1])
        w = mark(r, ks)
        shared = shared or (r <= shared_reach and not np.isin(w // 8, sectors).all())
    # beyond: single blocks at quarter octaves (a writer 2^j blocks away is found exactly; one at other
    # far distances is missed, and its sectors count as never completed)
    quarters = np.arange(math.ceil(4 * math.log2(max(r, 1))), math.floor(4 * math.log2(total)) + 1)
    far_ks = np.unique(np.round(2.0 ** (quarters / 4)))
    for k in far_ks[far_ks > r].astype(np.int64) if far else ():
        if not np.isnan(signed).any():
            break
        mark(int(k), np.array([k]))
    offsets = signed.reshape(-1, 8)
    # blocks away that the sector's last word is written (inf: never found)
    done = np.where(np.isnan(offsets).any(axis=1), np.inf, np.abs(np.nan_to_num(offsets)).max(axis=1))
    part = done > 0
    per_line = 4.0 if shared else len(sectors) / len(lines)
    if not part.any():
        return WrittenSectors(0.0, per_line)
    later = part & np.isfinite(done)
    writers = np.array([len(set(row)) for row in offsets.tolist()])
    span = np.nanmax(offsets, axis=1) - np.nanmin(offsets, axis=1)  # blocks from first writer to last
    # two writers (the block and one other): the measured curve at the distance between them, a fill
    # for each piece (ceilings.partial_law); more: one fill for the sector, lost with the curve's share
    # at its first-to-last span (probe.piece_store, 8 pieces: 72 % filled at 14336 blocks, the curve
    # 67 %; 0.35 % at 1792, the curve 4 %) - without a curve, all past the reach
    two = later & (writers == 2) if far else np.zeros_like(later)
    many = later & (writers > 2) if far else np.zeros_like(later)
    share = np.where(np.isfinite(done), (done > reach_blocks).astype(float), 1.0)
    between = np.zeros(len(done))
    for sel, distance in ((two, done), (many, span)):
        if sel.any():
            share[sel], between[sel] = zip(*(lost_at(lost, d, per_block_bytes, spread_blocks)
                                             for d in distance[sel]), strict=True)
    share[many] /= writers[many]  # each of the sector's writers counts its pieces: one fill in all
    completed = two | many
    curve = share[completed].sum()
    mean_between = float((share[completed] * between[completed]).sum() / curve) if curve else 0.0
    # a lost sector of two writers is filled for each piece and written back once more; of more
    # writers filled once and written back twice (probe.piece_store, as the naive transpose's fills)
    rewrites = float((0.5 * share[two].sum() + share[many].sum()) / curve) if curve else 0.0
    return WrittenSectors(float(share.mean()), per_line, float(part.mean()),
                          float(curve / share.sum()) if share.sum() else 0.0, mean_between, rewrites)


@dataclass(frozen=True)
class DramEstimate:
    read_bytes: int
    write_bytes: int
    note: str


def matmul_b_streams(dev: DeviceSpec, launch: Launch, params: dict[str, int]) -> tuple[int, float]:
    """B's bytes (k x n floats) and how many times the blocks stream it: B is shared by every block
    row; blocks launched together, one per SM, share each B slice in L2, later residency slots run
    staggered and do not (seen on the H200: tiled/coarsened matmul at 4096, TILE 16 and 32, COARSE
    1-8) - so once per group of max(SMs, blocks per row) consecutive blocks."""
    return 4 * params["k"] * params["n"], max(1.0, launch.blocks / max(dev.sm_count, launch.grid[0]))


def reread_miss(dev: DeviceSpec, footprint_bytes: float) -> float:
    """The share of a working set that L2 has lost by the time it is read again: none while it fits
    one L2 partition, all of it past the whole L2, linear in between (a line that SMs on both sides
    read may be held in both halves, so only one half is sure to hold such data). Measured in the band
    (plans/h200_reuse.toml): a cyclic read stream loses 4/24/83 % at 40/48/56 MiB, matmul's B
    9/25/50/75 % (TILE 32) to 10/44/93 % (TILE 16) at 32/40/48/56 MiB - the line is a middle road."""
    near = dev.l2_partition_bytes
    if footprint_bytes <= near:
        return 0.0
    if footprint_bytes >= dev.l2_bytes:
        return 1.0
    return (footprint_bytes - near) / (dev.l2_bytes - near)


def dram_traffic(dev: DeviceSpec, compulsory: tuple[int, int], resident_blocks: int, launch: Launch,
                 family: str, params: dict[str, int],
                 pass_loss: Callable[[float], float | None] = lambda footprint: None) -> DramEstimate:
    """`pass_loss(footprint)`: the measured share of a buffer L2 loses between passes (Ceilings.l2_loss)."""
    read, write = compulsory
    once = "each array read once and written once (compulsory traffic)"
    if family == "l2" and params.get("passes", 1) > 1:  # passes over one buffer: L2 keeps what fits
        measured = pass_loss(read)
        miss = reread_miss(dev, read) if measured is None else measured
        if miss == 0.0:
            return DramEstimate(read, write, once)
        times = 1 + (params["passes"] - 1) * miss
        return DramEstimate(int(read * times), write, f"{read / 2**20:.0f} MiB read {times:.1f} times: "
                            f"L2 loses {100 * miss:.0f} % of it between passes")
    if family != "matmul":
        return DramEstimate(read, write, once)
    # matmul: each group of blocks streams B again, where L2 has lost it
    b_bytes, streams = matmul_b_streams(dev, launch, params)
    a_bytes = read - b_bytes
    miss = reread_miss(dev, b_bytes)
    if streams == 1.0 or miss == 0.0:
        return DramEstimate(read, write, once)
    times = 1 + (streams - 1) * miss
    return DramEstimate(int(a_bytes + times * b_bytes), write,
                        f"B ({b_bytes / 2**20:.0f} MiB) read {times:.1f} times: {streams:.1f} groups of "
                        f"{max(dev.sm_count, launch.grid[0])} consecutive blocks, each missing {100 * miss:.0f} % "
                        "of it in L2")


def dirty_at_end(read_bytes: float, write_bytes: float, held_bytes: float, partial: bool,
                 in_sm: bool = False, sectors_per_line: float = 4.0) -> float:
    """DRAM writes still dirty in L2 when the kernel ends, of the lines L2 holds at a stream's end
    (measured: Ceilings.l2_dirty_at_end_bytes, whole lines): a stream's write share of them, in
    lines - a store filling one sector of each line keeps a quarter of the bytes dirty (probe.
    store_lines: ~5 MB left, not 40). A kernel bound inside the SM leaves DRAM idle, and L2 writes
    its lines back - except where its reads fit beside them: then L2 evicts nothing and the room
    its reads leave stays dirty (matmul at 2048: 6.8-8.7 MB measured, 6.4 MB this way). Sectors
    left in part (`partial`) go to DRAM as read-modify-writes during the kernel: none counted here."""
    if partial or not read_bytes + write_bytes:
        return 0.0
    line = 128.0
    written_lines = write_bytes / (SECTOR * sectors_per_line)
    if in_sm:
        room = max(0.0, held_bytes - read_bytes) / line
        return min(write_bytes, room * SECTOR * sectors_per_line)
    share = written_lines / (read_bytes / line + written_lines)
    return min(write_bytes, held_bytes / line * share * SECTOR * sectors_per_line)


@dataclass(frozen=True)
class L2Requests:
    """(warp request, 128-byte line) pairs reaching L2, by how L2 serves them."""

    read: float
    write_hit: float  # writes to sectors L2 holds (or that stay L2-resident)
    write_fill: float  # first writes to whole sectors L2 does not hold
    write_rmw: float  # first writes to sectors written only in part: DRAM read-modify-write
    merged: bool  # stores combined across the block's warps before L2
    kept: float = 1.0  # share of the (store, line) pairs L1 passes on (the rest combined: l1_combines)

    @property
    def writes(self) -> float:
        return self.write_hit + self.write_fill + self.write_rmw


def block_merged(l1: L1Traffic, has_loads: bool) -> bool:
    """A load-free kernel's warps issue their stores together: L1 combines the block's per line."""
    return not has_loads and l1.store_block_lines < l1.store_lines


def l1_combines(l1: L1Traffic, launch: Launch) -> bool:
    """Whether L1 combines part of the stores of a kernel whose warps load first: all the block's
    warps write the same lines at one store instruction, each store within 8 lines (probe.piece_store
    and piece_spread, dist 1: 55-67 % combined, lines adjacent or a row apart; not the naive
    transpose, whose warps write the same sectors in 32 lines a store; not shifted copies, whose
    neighbouring warps share one line: 3-7 %)."""
    return (l1.load_requests > 0 and 0 < l1.store_lines <= 8 * l1.store_requests
            and 2 * l1.store_lines >= l1.store_block_lines * launch.warps_per_block)


def l2_requests(l1: L1Traffic, l2_read_bytes: float, written_sectors: float, partial_share: float,
                footprint_bytes: float, l2_bytes: int, has_loads: bool, kept: float = 1.0) -> L2Requests:
    """Reads: the L2-bound sectors in the loads' own sectors-per-line. Writes: one per (store
    request, line) - or per distinct line of the block's warps at one store, for kernels without
    global loads, whose warps issue their stores together and L1 combines them (H200: 8 warps'
    4-byte stores into 8 full lines, probe.scatter_store). Past `l2_bytes` (one L2 partition where
    L2 has two) the first write to each sector misses; a miss costs a DRAM read first when the
    kernel writes sectors in part (the share of first writes that do). Measured on the naive
    transpose: its time steps up past 1024² and by 1984² (30.03 MiB), not at the whole L2 -
    1984²-2560² ran 5-13 % slower than the model without fills there, within 7 % with them
    (reports/h200: transpose). `kept`: the share L1 passes on where it combines part (l1_combines)."""
    read = l2_read_bytes / SECTOR * (l1.load_lines / l1.load_sectors) if l1.load_sectors else 0.0
    merged = block_merged(l1, has_loads)
    writes = float(l1.store_block_lines if merged else l1.store_lines * kept)
    misses = min(writes, written_sectors) if footprint_bytes > l2_bytes else 0.0
    return L2Requests(read, writes - misses, misses * (1 - partial_share), misses * partial_share, merged,
                      1.0 if merged else kept)


def l2_input_units(l1: L1Traffic, read_requests: float, merged: bool, kept: float = 1.0) -> float:
    """What the crossbar carries into the L2 slices, in transfers: one per written sector, one more
    per (request, line) that writes a sector in part (its byte mask), one per read request. ncu's
    lts__xbar2lts_cycles_active on the H200 (plan h200_l2_units) follows it within 2 % over
    L2-resident 4-byte and 32-byte stores, whole lines, shifted copies, the naive and tiled
    transposes and probe.piece_store, whose 4-sector masked lines fill the port (94 %) while the
    tag stage idles at 38 %. `merged`: L1 combined the block's stores (L2Requests.merged); `kept`: the
    share of the pairs L1 passes on where it combines some (L2Requests.kept)."""
    if merged:
        return l1.store_block_sectors + l1.store_block_masked_lines + read_requests
    return (l1.store_sectors + l1.store_masked_lines) * kept + read_requests


@dataclass(frozen=True)
class Traffic:
    """Bytes and requests at each level below L1 for one launch."""

    l2_read_bytes: int
    l2_write_bytes: int
    dram: DramEstimate
    requests: L2Requests
    notes: tuple[str, ...]
    rmw_read_bytes: int = 0  # DRAM reads L2 makes for sectors written in part (no warp waits for them)
    written: WrittenSectors = WrittenSectors()  # how the stores fill their sectors and lines
    pieces: bool = False  # warps write their sectors in pieces (under a quarter) that other warps complete


def piece_fills(dram: DramEstimate, share: float, written_bytes: float) -> DramEstimate:
    """Sectors warps complete in 4-byte pieces while L2's write requests bound the kernel: L2 fills a
    share of them from DRAM and writes them back twice (Ceilings.piece_fill_share: measured on the
    naive transpose at 32 x 8 threads - 0.1 % of its bytes at 4 MiB an array, 8-10 % past L2; the
    blocks-bound 32 x 1 one and the probes whose stores the crossbar bounds fill none)."""
    fills = int(share * written_bytes)
    if not fills:
        return dram
    return DramEstimate(dram.read_bytes + fills, dram.write_bytes + fills,
                        f"L2's write requests saturated: {100 * share:.1f} % of the sectors warps complete in 4-byte "
                        "pieces filled from DRAM and written back twice (measured on the naive transpose, by the "
                        "bytes it moves)")


def address_block_indices(a: Access, launch: Launch) -> list[str]:
    """The block indices an access's addresses depend on (its guard only masks), sorted."""
    return sorted(_Bound(a, launch).index.names & set(BLOCK_VARS))


def block_key(indices: list[str], launch: Launch, blocks: np.ndarray) -> np.ndarray:
    """Per linear block id (row-major over the grid), one integer from its `indices`: equal for blocks
    that agree on them (all equal where there are none)."""
    gx, gy = launch.grid[0], launch.grid[1]
    coords = {"bx": blocks % gx, "by": blocks // gx % gy, "bz": blocks // (gx * gy)}
    return sum((coords[k] * 10**(6 * i) for i, k in enumerate(indices)), np.zeros_like(blocks))


def shared_loads(accesses: list[Access], launch: Launch) -> list[tuple[list[str], float]]:
    """(block indices its address uses, sectors a block loads) of each load that blocks share: its
    address leaves out some grid dimension (blocks of one grid row reading A's rows)."""
    spanned = [k for k, g in zip(("bx", "by", "bz"), launch.grid, strict=True) if g > 1]
    out = []
    for a in _global(accesses, launch, store=False, invariant=False):
        keys = address_block_indices(a, launch)
        if keys and not set(spanned) <= set(keys):
            out.append((keys, block_unique_chunks([a], launch, store=False)[0]))
    return out


def first_wave_hits(loads: list[tuple[list[str], float]], launch: Launch, waves: tuple[np.ndarray, ...]) -> float:
    """Sectors the first wave's blocks find in L1 of the `loads` (shared_loads): its blocks start
    together, each SM's as a recorded map has them (coresidency.first_wave; the mean over the maps),
    and of the blocks on one SM that share an array's block indices one misses and the others hit."""
    ids = np.arange(min(launch.blocks, len(waves[0])))
    total = 0.0
    for keys, sectors in loads:
        key = block_key(keys, launch, ids)
        distinct = np.mean([np.unique(np.stack([wave[ids], key]), axis=1).shape[1] for wave in waves])
        total += sectors * (len(ids) - distinct)
    return total


def co_resident_hits(accesses: list[Access], launch: Launch, law: CoResidency | None, blocks_per_sm: int,
                     sms: int, block_bytes: float, l1_bytes: float, sample: int = 4096,
                     waves: tuple[np.ndarray, ...] = ()) -> float:
    """Sectors per launch a block's loads find in L1, brought in by a co-resident block that shares the
    array's block indices (blocks of one grid row reading A's rows). The first wave's blocks as the
    recorded maps have them (`waves`, first_wave_hits); the later ones: the j-th latest block on an SM
    started j/B of a block's time and j x SMs blocks earlier, spread as the recorded placements spread
    (`coresidency.law`); a line survives the SM's fills since then as in an L1 that replaces at random
    (exp(-fills / L1 beside the carveout)). The fills are B x the block's `block_bytes` per block time
    less the hits themselves, which fill nothing: the share is iterated to that fixed point (TILE 16's
    wide grids, where blocks share most: 1-3 points fewer sectors than charging every load a fill).
    Blocks sampled evenly over the grid."""
    if law is None or blocks_per_sm < 2 or launch.blocks < 2:
        return 0.0
    loads = shared_loads(accesses, launch)
    if not loads:
        return 0.0
    first = min(launch.blocks, len(waves[0])) if waves else 0
    early = first_wave_hits(loads, launch, waves) if first else 0.0
    if launch.blocks <= first:
        return early
    idx = np.unique(np.linspace(first, launch.blocks - 1, min(sample, launch.blocks - first)).astype(np.int64))
    sharing = []  # per shared load: its sectors, and per slot j the share of sampled blocks sharing it
    for keys, sectors in loads:
        own = block_key(keys, launch, idx)
        shared = np.zeros((blocks_per_sm - 1, len(idx)))
        for j in range(1, blocks_per_sm):
            for d in np.rint(j * sms + law.index_offsets).astype(np.int64):
                prev = idx - d
                ok = (d > 0) & (prev >= 0)
                shared[j - 1, ok] += block_key(keys, launch, prev[ok]) == own[ok]
        sharing.append((sectors, shared / len(law.index_offsets)))
    times = np.clip(np.arange(1, blocks_per_sm)[:, None] / blocks_per_sm + law.time_offsets[None, :], 0, None)
    loaded = block_bytes / SECTOR * launch.blocks  # the sectors the blocks load from L1 without sharing
    later = (launch.blocks - first) / len(idx)  # blocks each sampled one stands for

    def hits(fill_bytes: float) -> float:
        kept = np.exp(-times * blocks_per_sm * fill_bytes / l1_bytes).mean(axis=1)  # per slot j
        return early + later * sum(sectors * float(np.sum(1 - np.prod(1 - kept[:, None] * shared, axis=0)))
                                   for sectors, shared in sharing)

    return settled(hits, block_bytes, loaded)


def below_l1(dev: DeviceSpec, accesses: list[Access], launch: Launch, l1: L1Traffic,
             compulsory: tuple[int, int], resident_blocks: int, family: str, params: dict[str, int],
             pass_loss: Callable[[float], float | None] = lambda footprint: None,
             l1_share_bytes: float = math.inf, varying_sectors: float = 0.0,
             combining: StoreCombining | None = None, coresidency: CoResidency | None = None,
             partial_lost: Callable[[float], float] | None = None,
             store_spread_blocks: np.ndarray | None = None, first_waves: tuple[np.ndarray, ...] = (),
             placements: tuple[Placement, ...] = ()) -> Traffic:
    """L2 reads: the distinct sectors each block loads (L1 reuse inside a block; `varying_sectors`:
    the exact L1 sectors of the loads that differ by block, which the sampled reuse scales), less what
    co-resident blocks share in L1 - as the launch's recorded `placements` met where given, else by the
    pooled `coresidency` law. Writes: every store sector, less what L1 combines (`combining`: the
    measured share against the launch's waves), or per block and line for load-free kernels. DRAM:
    compulsory bytes (or, with no closed form, the distinct DRAM granules read), read-modify-writes
    for sectors written in part past L2's capacity (`partial_lost`: the device's measured share lost
    by the traffic between two writers, whose store order spreads by `store_spread_blocks` where
    given), and the matmul reuse model."""
    notes = []
    gran = dev.arch.dram_granule_bytes
    closed_form = compulsory != (0, 0)  # else: DRAM reads are the distinct granules the blocks read
    granules = (SECTOR,) if closed_form else (SECTOR, gran)
    per_block, *chunks = block_unique_chunks(accesses, launch, store=False, granules=granules, invariant=False)
    per_block = l1_windowed_sectors(accesses, launch, per_block, l1_share_bytes)
    if varying_sectors and not math.isnan(per_block) and (sent := block_sent_sectors(accesses, launch)) > 0:
        per_block *= varying_sectors / launch.blocks / sent  # the sampled reuse, on the exact count
    # addresses every block shares: each SM's L1 misses on them once, where they fit in L1
    shared, *shared_chunks = block_unique_chunks(accesses, launch, store=False, granules=granules, invariant=True)
    fits = shared * SECTOR <= dev.l1_bytes_per_sm / 2
    l2_read = (int((per_block * launch.blocks + shared * (min(launch.blocks, dev.sm_count) if fits else launch.blocks))
                   * SECTOR) if not math.isnan(per_block + shared) else l1.load_sectors * SECTOR)
    if shared and fits:
        notes.append("block-invariant loads: each SM's L1 misses on them once")
    b = resident_blocks // dev.sm_count
    placements = tuple(pl for pl in placements if len(pl.sm) == launch.blocks)
    hits, met = 0.0, ""
    if not math.isnan(per_block) and b > 1 and math.isfinite(l1_share_bytes):
        if placements:
            ids = np.arange(launch.blocks)
            loads = [(block_key(keys, launch, ids), sectors) for keys, sectors in shared_loads(accesses, launch)]
            hits = placed_hits(loads, placements, b, per_block * SECTOR, l1_share_bytes * b, launch.blocks)
            met = f"as this launch's {len(placements)} recorded placements met on the SMs"
        elif coresidency is not None:
            hits = co_resident_hits(accesses, launch, coresidency, b, dev.sm_count, per_block * SECTOR,
                                    l1_share_bytes * b, waves=first_waves)
            met = (f"block starts spread as in {coresidency.launches} recorded launches"
                   + ("; the first wave as the dispatcher places it" if first_waves else ""))
    if hits > 0 and hits >= 0.005 * l2_read / SECTOR:
        notes.append(f"co-resident blocks share {100 * hits * SECTOR / l2_read:.0f} % of the loaded sectors "
                     f"in L1 ({met})")
        l2_read -= int(hits * SECTOR)
    l2_read = min(l2_read, l1.load_sectors * SECTOR) + l1.uncached_load_sectors * SECTOR
    (per_block_stores,) = block_unique_chunks(accesses, launch, store=True)
    pieces_written = per_block_stores * launch.blocks if not math.isnan(per_block_stores) else l1.store_sectors
    moved = l1.load_bytes + l1.store_bytes
    shape = written_sectors(accesses, launch, partial_reach_blocks(dev, launch, compulsory, moved),
                            block_bytes(launch, compulsory, moved), partial_lost, store_spread_blocks)
    partial = shape.partial
    written = pieces_written
    if closed_form:  # sectors other blocks complete are first written once, unless L2 lost them first
        once = min(written, compulsory[1] / SECTOR)
        written = once + (written - once) * (shape.split_lost if partial else 0.0)
    if not closed_form:
        granules_read = chunks[0] * launch.blocks + shared_chunks[0]  # shared ones once: L2 holds them
        reads = int(granules_read * gran) if not math.isnan(granules_read) else l2_read
        compulsory = (reads, int(written * SECTOR))  # sectors each block writes (shared ones twice)
    rmw = 0
    if partial and compulsory[1] > dev.l2_bytes:
        # sectors written only in part and evicted during the kernel reach DRAM as read-modify-write:
        # the L2 reads each before writing it back (scattered 4-byte stores on the H200), once for each
        # block that writes a piece, at most once per sector written (probe.piece_store: 8 pieces a
        # sector, 72 % of the sectors filled once); a footprint that fits in L2 stays there, dirty
        rmw = int(min(shape.partial_share * pieces_written, compulsory[1] / SECTOR) * SECTOR)
        # a lost sector other writers complete goes back to DRAM once more than a whole one
        rewritten = int(rmw * shape.completed_share * shape.rewrites_per_fill)
        compulsory = (compulsory[0] + rmw, compulsory[1] + rewritten)
        if shape.completed_share:
            notes.append(f"sectors other blocks complete, {shape.between_bytes / 2**20:.1f} MiB of traffic apart: L2 "
                         f"loses some first (measured, probe.split_store) and fills {rmw / 2**20:.1f} MiB of them "
                         "from DRAM to write them back")
        else:
            notes.append("partially written sectors: read-modify-write in DRAM")
    dram = dram_traffic(dev, compulsory, resident_blocks, launch, family, params, pass_loss)
    notes.append(dram.note)
    near = dev.l2_partition_bytes  # what L2 holds before first writes cost fills
    waves = launch.blocks / max(resident_blocks, 1)
    same_lines = l1_combines(l1, launch)
    comb = (store_combined(combining, accesses, launch, l1.store_sectors, l1.store_lines, waves, same_lines)
            if l1.load_requests else None)
    req = l2_requests(l1, l2_read, written, shape.partial_share if partial else 0.0, sum(compulsory), near,
                      l1.load_requests > 0, comb.request_share if comb else 1.0)
    l2_write = int(l1.store_sectors * (comb.sector_share if comb else 1.0)) * SECTOR
    if comb:
        what = ("the block's warps write the same lines" if comb.pattern != SEAMS else
                "neighbouring warps' stores meet in a sector")
        notes.append(f"{what}: L1 combines {100 * (1 - comb.sector_share):.1f} % of the store sectors at "
                     f"{waves:.2g} waves ({comb.pattern} law, measured against "
                     "the launch's waves: models.combining)")
    if req.merged:
        notes.append("stores of the block's warps combined per line in L1 (no global loads)")
        l2_write = l1.store_block_sectors * SECTOR
    pieces = not req.merged and not partial and l1.store_sectors and l1.store_bytes < l1.store_sectors * SECTOR / 4
    return Traffic(l2_read, l2_write, dram, req, tuple(notes), rmw, shape, bool(pieces))
