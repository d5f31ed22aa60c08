"""Traffic below L1, derived from a case's access descriptions (`below_l1`), from the pieces in
models.l1 (what the SMs ask of L1), models.written (sectors L2 holds in part) and models.dram.

L2 reads: the distinct sectors each block loads (L1 reuse inside a block within what L1 holds),
block-invariant addresses once per SM, less what co-resident blocks share in L1.
L2 requests: one per (warp request, line), stores of load-free kernels combined per block and line;
past one L2 partition's capacity, first writes are sector fills or read-modify-writes (`l2_requests`).
DRAM (models.dram): each array once while the footprint fits in L2, per-family reuse past that.
Sectors warps write in 4-byte pieces, where L2's write
requests bound the kernel: a measured share filled and written back twice (`piece_fills`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..coresidency import CoResidency, Placement
from ..devices import DeviceSpec
from ..memory import Access, Launch
from ..memory.coalescing import LINE_BYTES, SECTOR_BYTES
from ..memory.pattern import BLOCK_VARS, _Bound
from . import placed
from .combining import SEAMS, WARP_SEAMS, StoreCombining, store_combined
from .dram import DramEstimate, dram_traffic
from .l1 import L1Traffic, block_sent_sectors, block_unique_chunks, global_accesses, l1_windowed_sectors
from .placed import placed_hits, settled
from .written import WrittenSectors, block_bytes, partial_reach_blocks, written_sectors


@dataclass(frozen=True)
class L2Requests:
    """(warp request, 128-byte line) pairs reaching L2, by how L2 serves them."""

    read: float
    write_hit: float  # writes to sectors L2 holds (or that stay L2-resident)
    write_fill: float  # first writes to whole sectors L2 does not hold
    write_rmw: float  # first writes to sectors written only in part: DRAM read-modify-write
    merged: bool  # stores combined across the block's warps before L2
    kept: float = 1.0  # share of the (store, line) pairs L1 passes on (the rest combined: l1_combines)
    write_lost: float = 0.0  # a cyclic store stream's writes to lines L2 does not hold (first, or lost since)

    @property
    def writes(self) -> float:
        return self.write_hit + self.write_fill + self.write_rmw + self.write_lost


def block_merged(l1: L1Traffic) -> bool:
    """A load-free kernel's warps issue their stores together: L1 combines the block's per line."""
    return not l1.load_requests and l1.store_block_lines < l1.store_lines


def l1_combines(l1: L1Traffic, launch: Launch) -> bool:
    """Whether L1 combines part of the stores of a kernel whose warps load first: all the block's
    warps write the same lines at one store instruction, each store within 8 lines (probe.piece_store
    and piece_spread, dist 1: 55-67 % combined, lines adjacent or a row apart; not the naive
    transpose, whose warps write the same sectors in 32 lines a store; not shifted copies, whose
    neighbouring warps share one line: 3-7 %)."""
    return (l1.load_requests > 0 and 0 < l1.store_lines <= 8 * l1.store_requests
            and 2 * l1.store_lines >= l1.store_block_lines * launch.warps_per_block)


def l2_requests(l1: L1Traffic, l2_read_bytes: float, written_sectors: float, partial_share: float,
                footprint_bytes: float, l2_bytes: int, kept: float = 1.0, lost_share: float = 0.0) -> L2Requests:
    """Reads: the L2-bound sectors in the loads' own sectors-per-line. Writes: one per (store
    request, line) - or per distinct line of the block's warps at one store, for kernels without
    global loads, whose warps issue their stores together and L1 combines them (H200: 8 warps'
    4-byte stores into 8 full lines, probe.scatter_store). Past `l2_bytes` (one L2 partition where
    L2 has two) the first write to each sector misses; a miss costs a DRAM read first when the
    kernel writes sectors in part (the share of first writes that do). Measured on the naive
    transpose: its time steps up past 1024² and by 1984² (30.03 MiB), not at the whole L2 -
    1984²-2560² ran 5-13 % slower than the model without fills there, within 7 % with them
    (reports/h200: transpose). `kept`: the share L1 passes on where it combines part (l1_combines).
    `lost_share`: of a store stream that revisits its sectors (store_revisits), the share of its writes
    that find the line gone - those, first writes included, are its misses."""
    read = l2_read_bytes / SECTOR_BYTES * (l1.load_lines / l1.load_sectors) if l1.load_sectors else 0.0
    merged = block_merged(l1)
    writes = float(l1.store_block_lines if merged else l1.store_lines * kept)
    if lost_share > 0:
        return L2Requests(read, writes * (1 - lost_share), 0.0, 0.0, merged, 1.0 if merged else kept,
                          writes * lost_share)
    misses = min(writes, written_sectors) if footprint_bytes > l2_bytes else 0.0
    return L2Requests(read, writes - misses, misses * (1 - partial_share), misses * partial_share, merged,
                      1.0 if merged else kept)


@dataclass(frozen=True)
class StoreRevisits:
    """Whole-sector stores that come back to sectors the kernel wrote before: how many sectors, over
    how many bytes of lines they cycle, and the share of the revisits L2 has lost meanwhile."""

    sectors: float
    line_footprint_bytes: float
    lost: float

    def lost_share(self, store_sectors: float) -> float:
        """The share of all the stores that miss: the first writes and the revisits L2 lost."""
        return (store_sectors - self.sectors * (1 - self.lost)) / store_sectors


def store_revisits(l1: L1Traffic, written_sectors: float,
                   store_loss: Callable[[float], float | None] | None) -> StoreRevisits | None:
    """The revisits of a kernel whose stores write whole sectors, `written_sectors` of them distinct,
    over the lines those sectors lie in (the requests' lines per sector), with L2's measured loss
    (Ceilings.l2_store_loss: probe.store_lines cycling over 8-256 MiB of lines, H200; the same curve
    at 1.2x the footprint on an H100, whose L2 is 50 MiB to the H200's 60 - checks/store_footprints).
    None where no sector is written twice, the stores write sectors in part, or no loss is known."""
    revisits = l1.store_sectors - written_sectors
    if store_loss is None or revisits <= 0 or not l1.whole_sector_stores:
        return None
    footprint = written_sectors * l1.store_lines / l1.store_sectors * LINE_BYTES
    lost = store_loss(footprint)
    return None if lost is None else StoreRevisits(revisits, footprint, lost)


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
    coords = {"bx": lambda: blocks % gx, "by": lambda: blocks // gx % gy, "bz": lambda: blocks // (gx * gy)}
    if not indices:
        return np.zeros_like(blocks)
    key = coords[indices[0]]()  # only the coordinates asked for (the arrays run to millions of ids)
    for i, k in enumerate(indices[1:], 1):
        key += coords[k]() * 10**(6 * i)
    return key


def shared_loads(accesses: list[Access], launch: Launch) -> list[tuple[list[str], float]]:
    """(block indices its address uses, sectors a block loads) of each load that blocks share: its
    address leaves out some grid dimension (blocks of one grid row reading A's rows)."""
    spanned = [k for k, g in zip(("bx", "by", "bz"), launch.grid, strict=True) if g > 1]
    out = []
    for a in global_accesses(accesses, launch, store=False, invariant=False):
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
    started j/B of a block's time and j x SMs blocks earlier, the two spread together as the recorded
    placements spread them at slot j (`coresidency.law`: pairs, and the share still running); a line
    survives the SM's fills since then as in an L1 that replaces at random (exp(-fills / L1 beside the
    carveout)). The fills are B x the block's `block_bytes` per block time less the hits themselves,
    which fill nothing: the share is iterated to that fixed point (TILE 16's wide grids, where blocks
    share most: 1-3 points fewer sectors than charging every load a fill).
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
    slots = np.arange(1, blocks_per_sm)
    rows = [law.slot(j) for j in slots]
    back = np.rint(slots[:, None] * sms + law.index_offsets[rows]).astype(np.int64)  # per slot j, pair p
    sharing = []  # per shared load: its sectors, and per (j, p) which sampled blocks share it
    for keys, sectors in loads:
        own = block_key(keys, launch, idx)
        prev = idx[None, None, :] - back[:, :, None]
        ok = (back[:, :, None] > 0) & (prev >= 0)
        sharing.append((sectors, ok & (block_key(keys, launch, np.where(ok, prev, 0)) == own)))
    times = np.clip(slots[:, None] / blocks_per_sm + law.time_offsets[rows], 0, None)  # per (j, p)
    running = law.running[rows][:, None]  # per slot, the share of blocks whose j-th predecessor still runs
    loaded = block_bytes / SECTOR_BYTES * launch.blocks  # the sectors the blocks load from L1 without sharing
    later = (launch.blocks - first) / len(idx)  # blocks each sampled one stands for

    def hits(fill_bytes: float) -> float:
        alive = placed.kept(times * blocks_per_sm * fill_bytes, l1_bytes)[:, :, None]  # per (j, p)
        # per slot j the chance its block runs, shares the line and kept it, over the pairs; slots independent
        return early + later * sum(sectors * float(np.sum(1 - np.prod(1 - running * (alive * shared).mean(axis=1),
                                                                      axis=0)))
                                   for sectors, shared in sharing)

    return settled(hits, block_bytes, loaded)


def below_l1(dev: DeviceSpec, accesses: list[Access], launch: Launch, l1: L1Traffic,
             compulsory: tuple[int, int], resident_blocks: int, family: str, params: dict[str, int],
             pass_loss: Callable[..., float | None] = lambda footprint, passes=0: None,
             l1_share_bytes: float = math.inf, varying_sectors: float = 0.0,
             combining: StoreCombining | None = None, coresidency: CoResidency | None = None,
             partial_lost: Callable[[float], float] | None = None,
             partial_written_back: Callable[[float], float] | None = None,
             store_spread_blocks: np.ndarray | None = None, first_waves: tuple[np.ndarray, ...] = (),
             placements: tuple[Placement, ...] = (), b_loss: tuple[float, str] | None = None,
             replayed_hit_share: float | None = None, store_merge: tuple[float, float] = (1.0, 1.0),
             l1_excess: tuple[float, str] | None = None,
             store_loss: Callable[[float], float | None] | None = None) -> Traffic:
    """L2 reads: the distinct sectors each block loads (L1 reuse inside a block; `varying_sectors`:
    the exact L1 sectors of the loads that differ by block, which the sampled reuse scales), less what
    co-resident blocks share in L1 - the `replayed_hit_share` of them where the launch's round clocks
    were recorded (the barrier probes), else as its recorded `placements` met, else by the pooled
    `coresidency` law; times 1 + the `l1_excess` share (with its note) that a kernel's L1s were measured
    to request beyond that (the naive matmul at some k mod its unroll, perfmodel.naive_k).
    Writes: every store sector, less what L1 combines (`combining`: the measured
    share against the launch's waves, or of a warp's run of stores where they share lines -
    `store_merge`, models.l1.store_merge_shares), or per block and line for load-free kernels. DRAM:
    compulsory bytes (or, with no closed form, the distinct DRAM granules read), read-modify-writes
    for sectors written in part past L2's capacity (`partial_lost`: the device's measured share lost
    by the traffic between two writers, whose store order spreads by `store_spread_blocks` where
    given; `partial_written_back`: the share written back before the second writer, one DRAM write
    more each), the revisits of a cyclic store stream that L2 lost (`store_loss`: by the bytes of the
    lines cycled over, store_revisits), one DRAM write more each, and the matmul reuse model."""
    notes = []
    gran = dev.arch.dram_granule_bytes
    closed_form = compulsory != (0, 0)  # else: DRAM reads are the distinct granules the blocks read
    granules = (SECTOR_BYTES,) if closed_form else (SECTOR_BYTES, gran)
    per_block, *chunks = block_unique_chunks(accesses, launch, store=False, granules=granules, invariant=False)
    per_block = l1_windowed_sectors(accesses, launch, per_block, l1_share_bytes)
    if varying_sectors and not math.isnan(per_block) and (sent := block_sent_sectors(accesses, launch)) > 0:
        per_block *= varying_sectors / launch.blocks / sent  # the sampled reuse, on the exact count
    # addresses every block shares: each SM's L1 misses on them once, where they fit in L1
    shared, *shared_chunks = block_unique_chunks(accesses, launch, store=False, granules=granules, invariant=True)
    fits = shared * SECTOR_BYTES <= dev.l1_bytes_per_sm / 2
    l2_read = (int((per_block * launch.blocks + shared * (min(launch.blocks, dev.sm_count) if fits else launch.blocks))
                   * SECTOR_BYTES) if not math.isnan(per_block + shared) else l1.load_sectors * SECTOR_BYTES)
    if shared and fits:
        notes.append("block-invariant loads: each SM's L1 misses on them once")
    b = resident_blocks // dev.sm_count
    placements = tuple(pl for pl in placements if len(pl.sm) == launch.blocks)
    hits, met = 0.0, ""
    if not math.isnan(per_block) and b > 1 and math.isfinite(l1_share_bytes):
        if replayed_hit_share is not None:
            hits = replayed_hit_share * per_block * launch.blocks
            met = "as the recorded round clocks of this launch replay through each SM's L1 (perfmodel.round_replay)"
        elif placements:
            ids = np.arange(launch.blocks)
            loads = [(block_key(keys, launch, ids), sectors) for keys, sectors in shared_loads(accesses, launch)]
            hits = placed_hits(loads, placements, b, per_block * SECTOR_BYTES, l1_share_bytes * b, launch.blocks)
            met = f"as this launch's {len(placements)} recorded placements met on the SMs"
        elif coresidency is not None:
            hits = co_resident_hits(accesses, launch, coresidency, b, dev.sm_count, per_block * SECTOR_BYTES,
                                    l1_share_bytes * b, waves=first_waves)
            met = (f"block starts spread as in {coresidency.launches} recorded launches"
                   + ("; the first wave as the dispatcher places it" if first_waves else ""))
    if hits > 0 and hits >= 0.005 * l2_read / SECTOR_BYTES:
        notes.append(f"co-resident blocks share {100 * hits * SECTOR_BYTES / l2_read:.0f} % of the loaded sectors "
                     f"in L1 ({met})")
        l2_read -= int(hits * SECTOR_BYTES)
    if l1_excess is not None:
        l2_read = int(l2_read * (1 + l1_excess[0]))
        notes.append(l1_excess[1])
    l2_read = min(l2_read, l1.load_sectors * SECTOR_BYTES) + l1.uncached_load_sectors * SECTOR_BYTES
    (per_block_stores,) = block_unique_chunks(accesses, launch, store=True)
    pieces_written = per_block_stores * launch.blocks if not math.isnan(per_block_stores) else l1.store_sectors
    moved = l1.load_bytes + l1.store_bytes
    shape = written_sectors(accesses, launch, partial_reach_blocks(dev, launch, compulsory, moved),
                            block_bytes(launch, compulsory, moved), partial_lost, store_spread_blocks,
                            written_back=partial_written_back)
    partial = shape.partial
    written = pieces_written
    if closed_form:  # sectors other blocks complete are first written once, unless L2 lost them first
        once = min(written, compulsory[1] / SECTOR_BYTES)
        written = once + (written - once) * (shape.split_lost if partial else 0.0)
    if not closed_form:
        granules_read = chunks[0] * launch.blocks + shared_chunks[0]  # shared ones once: L2 holds them
        reads = int(granules_read * gran) if not math.isnan(granules_read) else l2_read
        compulsory = (reads, int(written * SECTOR_BYTES))  # sectors each block writes (shared ones twice)
    # the distinct sectors written: the closed form's where there is one (the sampled blocks' count
    # falls short of it in grid-stride kernels: probe.copy's 0.1 % would read as revisits)
    revisits = None if partial else store_revisits(l1, compulsory[1] / SECTOR_BYTES, store_loss)
    if revisits and revisits.lost:
        compulsory = (compulsory[0], compulsory[1] + int(revisits.sectors * revisits.lost * SECTOR_BYTES))
        notes.append(f"stores come back to {revisits.sectors:.3g} sectors over "
                     f"{revisits.line_footprint_bytes / 2**20:.0f} MiB of lines: L2 has written "
                     f"{100 * revisits.lost:.0f} % of them back since (measured: probe.store_lines cycling over "
                     "its lines) and takes them again")
    rmw = 0
    if partial and compulsory[1] > dev.l2_bytes:
        # sectors written only in part and evicted during the kernel reach DRAM as read-modify-write:
        # the L2 reads each before writing it back (scattered 4-byte stores on the H200), once for each
        # block that writes a piece, at most once per sector written (probe.piece_store: 8 pieces a
        # sector, 72 % of the sectors filled once); a footprint that fits in L2 stays there, dirty
        rmw = int(min(shape.partial_share * pieces_written, compulsory[1] / SECTOR_BYTES) * SECTOR_BYTES)
        # a lost sector other writers complete goes back to DRAM once more than a whole one
        rewritten = int(rmw * shape.completed_share * shape.rewrites_per_fill)
        compulsory = (compulsory[0] + rmw, compulsory[1] + rewritten)
        if shape.completed_share:
            notes.append(f"sectors other blocks complete, {shape.between_bytes / 2**20:.1f} MiB of traffic apart: L2 "
                         f"loses some first (measured, probe.split_store) and fills {rmw / 2**20:.1f} MiB of them "
                         "from DRAM to write them back")
        else:
            notes.append("partially written sectors: read-modify-write in DRAM")
    dram = dram_traffic(dev, compulsory, resident_blocks, launch, family, params, pass_loss, b_loss)
    notes.append(dram.note)
    near = dev.l2_partition_bytes  # what L2 holds before first writes cost fills
    waves = launch.blocks / max(resident_blocks, 1)
    same_lines = l1_combines(l1, launch)
    comb = (store_combined(combining, accesses, launch, l1.store_sectors, l1.store_lines, waves, same_lines,
                           store_merge) if l1.load_requests else None)
    req = l2_requests(l1, l2_read, written, shape.partial_share if partial else 0.0, sum(compulsory), near,
                      comb.request_share if comb else 1.0,
                      revisits.lost_share(l1.store_sectors) if revisits else 0.0)
    l2_write = int(l1.store_sectors * (comb.sector_share if comb else 1.0)) * SECTOR_BYTES
    if comb:
        what = ("neighbouring warps' stores meet in a sector" if comb.pattern == SEAMS else
                "a warp's consecutive stores meet in sectors" if comb.pattern.startswith(WARP_SEAMS) else
                "the block's warps write the same lines")
        against = ("the run of stores, whatever the waves" if comb.pattern.startswith(WARP_SEAMS)
                   else "the launch's waves")
        notes.append(f"{what}: L1 combines {100 * (1 - comb.sector_share):.1f} % of the store sectors at "
                     f"{waves:.2g} waves ({comb.pattern} law, measured against {against}: models.combining)")
    if req.merged:
        notes.append("stores of the block's warps combined per line in L1 (no global loads)")
        l2_write = l1.store_block_sectors * SECTOR_BYTES
    pieces = (not req.merged and not partial and l1.store_sectors
              and l1.store_bytes < l1.store_sectors * SECTOR_BYTES / 4)
    return Traffic(l2_read, l2_write, dram, req, tuple(notes), rmw, shape, bool(pieces))
