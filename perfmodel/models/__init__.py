"""predict(case, device, **params) -> Prediction: traffic per level, occupancy, bound and time.

Traffic below L1 comes from models.traffic, the time terms from models.time: time is the slowest
of the pipes a kernel keeps busy (DRAM, L2 bytes and requests, L1 data and tag stages, FP32,
instruction issue, block launch), each at the device's measured ceiling, or Little's law / the
barrier phases, quantised to whole waves where the kernel is bound inside the SM, plus the launch.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import TYPE_CHECKING

import numpy as np

from ..allocation import caution as allocation_caution
from ..cache import on_disk
from ..ceilings import ROUND_CHAIN_FMAS, Ceiling, ceilings, round_slopes_by_waves
from ..coresidency import first_wave, in_step, placements_of
from ..coresidency import law as coresidency_law
from ..devices import DeviceSpec
from ..devices import device as lookup
from ..errors import LimitError, PerfModelError
from ..l2replay import predicted_read_bytes
from ..measurements import DATA_DIR, load, median_times
from ..memory import analyse
from ..memory.coalescing import LINE_BYTES
from ..naive_k import excess as naive_k_excess
from ..occupancy import occupancy
from ..round_replay import replayed_hit_share
from ..sass import functions
from ..store_order import store_spread
from .base import Prediction, Term
from .dram import dirty_at_end, own_loss, sweep_miss_share, with_split_lines
from .fabric import crossing_read_bytes, fabric_term
from .issue import warp_instructions
from .l1 import block_invariant, l1_traffic, store_merge_shares
from .phase_law import issue_phase_law
from .time import (
    IN_SM,
    OUTSIDE_SM,
    barrier_rounds_term,
    dispatch_interval_s,
    first_pass_term,
    late_fills,
    latency_term,
    phase_term,
    pipe_terms,
    streams_past_barriers,
)
from .traffic import below_l1, block_merged, piece_fills

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Prediction", "Term", "naive_roofline_time", "predict"]

DEFAULT_REGISTERS = 32


@on_disk
def _compiled(device_key: str) -> dict[str, tuple[int, int]]:
    """Kernel entry -> (registers per thread, static shared memory) as compiled on the device."""
    from ..suite.registry import get

    data = load(device_key)
    out: dict[str, tuple[int, int]] = {}
    if not len(data):
        return out
    comp = data[data.source == "compiler"].pivot_table(index=["case", "params"], columns="metric",
                                                        values="value", aggfunc="first").reset_index()
    for _, r in comp.iterrows():
        entry = get(r.case).entry(json.loads(r.params))
        out[entry] = (int(r.num_regs), int(r.shared_size_bytes))
    return out


def resources(dev: DeviceSpec, case, params: dict[str, int]) -> tuple[int, int, bool]:
    """(registers, static smem, known) of the case's kernel: recorded from the compiler, or a guess."""
    got = _compiled(dev.key).get(case.entry(params))
    if got:
        return got[0], got[1], True
    return DEFAULT_REGISTERS, case.static_smem(params), False


def case_occupancy(dev: DeviceSpec, case, p: dict[str, int], launch=None):
    """(occupancy, whether the registers are the compiler's) of a registry case at bound parameters `p`;
    a launch past a device limit (threads, shared memory, registers) raises LimitError naming it."""
    regs, static_smem, known = resources(dev, case, p)
    launch = launch or _launch(case, p)
    return occupancy(dev, launch.threads_per_block, regs, static_smem, case.dynamic_smem(p),
                     opt_in=case.dynamic_smem(p) > 48 * 1024), known


def naive_roofline_time(case_name: str, device: str | DeviceSpec = "h200", **params: int) -> float:
    """The baseline: datasheet FLOP rate and DRAM bandwidth, compulsory bytes only."""
    from ..suite.registry import get

    dev = lookup(device)
    case = get(case_name)
    p = case.bind(**params)
    r, w = case.compulsory_bytes(p)
    peak = dev.fp64_flops_per_s if case.precision == "fp64" else dev.fp32_flops_per_s
    return max(case.flops(p) / peak, (r + w) / dev.dram_bandwidth_bytes_per_s)


def _launch(case, p: dict[str, int], dev: DeviceSpec | None = None):
    """The case's launch, or a PerfModelError naming the parameters that leave it empty; on `dev`, a
    LimitError where it could not launch there (`launch_limits`)."""
    zeros = sorted(k for k, v in p.items() if v == 0)
    try:
        launch = case.launch(p)
    except ZeroDivisionError:
        raise PerfModelError(f"{case.name}: no launch with {', '.join(f'{k} = 0' for k in zeros)}") from None
    if min(*launch.grid, *launch.block) < 1:
        raise PerfModelError(f"{case.name}: grid {launch.grid} x block {launch.block} has an empty dimension "
                             f"(parameters {', '.join(f'{k} = 0' for k in zeros) or p})")
    if idle := {lp: n for lp, n in launch.loops.items() if n < 1}:
        raise PerfModelError(f"{case.name}: loop {', '.join(f'{lp} runs {n} times' for lp, n in idle.items())} "
                             f"(parameters {', '.join(f'{k} = {v}' for k, v in sorted(p.items()))}): the kernel "
                             "does no work")
    if dev is not None:
        launch_limits(dev, case, p, launch)
    return launch


def launch_limits(dev: DeviceSpec, case, p: dict[str, int], launch) -> None:
    """LimitError where the launch could not run on `dev`: a grid or block dimension past cudaDeviceProp's
    maxGridSize / maxThreadsDim, or arrays larger than its global memory (the larger of the compulsory
    reads and writes: what the arrays hold at the least, however they alias)."""
    checks = [("grid", launch.grid, dev.arch.max_grid)]
    if launch.threads_per_block <= dev.max_threads_per_block:  # past it, occupancy names the threads per block
        checks.append(("block", launch.block, dev.arch.max_block))
    for what, dims, limits in checks:
        for i, (n, most) in enumerate(zip(dims, limits, strict=True)):
            if n > most:
                raise LimitError(f"{case.name}: {what}.{'xyz'[i]}", n, f"at most {most} on {dev.name} "
                                 f"({'maxGridSize' if what == 'grid' else 'maxThreadsDim'}[{i}])")
    held = max(case.compulsory_bytes(p))
    if dev.dram_bytes and held > dev.dram_bytes:
        raise LimitError(f"{case.name}: bytes of its arrays", held, f"at most {dev.dram_bytes} "
                         f"({dev.dram_bytes / 2**30:.1f} GiB) of global memory on {dev.name} (totalGlobalMem)")


def predict(case_name: str, device: str | DeviceSpec = "h200", **params: int) -> Prediction:
    """Predict one registry case (memoised: a prediction depends only on its inputs)."""
    from ..suite.registry import get

    dev = lookup(device)
    p = get(case_name).bind(**params)
    return _predict(case_name, dev, tuple(sorted(p.items())))


def beyond_work_s(dev: DeviceSpec, measured: Ceiling) -> float:
    """What a measured barrier round (probe.barrier_rounds or probe.barrier_waves, its slope between two
    round counts) costs beyond the work the model counts on `dev`: less the model's slowest pipe inside
    the SM per round, as the same slope."""
    from ..suite.registry import get

    case = measured.cases[0].split("[")[0]
    params = [{k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", cid)} for cid in measured.cases]

    def work(p: dict[str, int]) -> float:
        items = tuple(sorted(get(case).bind(**p).items()))
        return max(t.time_s for t in _predict(case, dev, items, barriers=False).breakdown if t.name in IN_SM)

    few, many = params
    per_round = (work(many) - work(few)) / (many["rounds"] - few["rounds"]) / few.get("waves", 1)
    return measured.value - per_round


def recorded_pair_rounds(dev: DeviceSpec, data: pd.DataFrame) -> dict[tuple[int, int], float]:
    """(tiles a round, waves) -> probe.barrier_waves' two-block round in recorded `data` (any card's
    run) beyond the work the model counts on `dev` (`beyond_work_s`)."""
    times = median_times(data)
    return {(tiles, w): beyond_work_s(dev, c) for tiles in (1, 2)
            for w, c in round_slopes_by_waves(data, times, tiles, "recorded")}


def checked_pair_rounds(dev: DeviceSpec, check: str, card: str = "h100") -> dict[tuple[int, int], float] | None:
    """`recorded_pair_rounds` of a check run kept under reports/data/`card`/checks/`check` (another card's
    probe.barrier_waves; not read by the model); None where it is not recorded."""
    data = load(check, DATA_DIR / card / "checks")
    return recorded_pair_rounds(dev, data) if len(data) else None


@on_disk
def _round_exposed_s(dev: DeviceSpec, key: str, waves: int | None = None) -> float | None:
    """`beyond_work_s` of the device's recorded round, the Ceilings field `key` (with `waves`: its round
    at that wave count, `key`_by_waves); None where not recorded."""
    ceil = ceilings(dev)
    measured = getattr(ceil, key) if waves is None else dict(getattr(ceil, f"{key}_by_waves")).get(waves)
    return beyond_work_s(dev, measured) if measured else None


# the two measured rounds each regime interpolates between: one block per SM (no chain, a
# ROUND_CHAIN_FMAS chain), two blocks per SM over many waves (one tile a round, two)
ROUND_PAIRS = {1: ("barrier_round_idle_s", "barrier_round_s"), 2: ("barrier_pair_s", "barrier_pair_two_tiles_s")}


def pair_round_waves(dev: DeviceSpec) -> tuple[int, ...]:
    """The wave counts at which probe.barrier_waves measured both two-block rounds (one tile, two)."""
    ceil = ceilings(dev)
    one, two = ({w for w, _ in getattr(ceil, f"{key}_by_waves")} for key in ROUND_PAIRS[2])
    return tuple(sorted(one & two))


def _pair_round_s(dev: DeviceSpec, key: str, waves: float | None) -> float | None:
    """Two blocks per SM: the round over a launch of `waves` waves, linear in log(waves) between the wave
    counts probe.barrier_waves recorded and held at the ends (blocks that start together expose more of
    it, blocks later waves start apart less); the 8-wave round where fewer than two counts are recorded."""
    counts = pair_round_waves(dev)
    rounds = [_round_exposed_s(dev, key, w) for w in counts]
    if waves is None or len(counts) < 2 or None in rounds:
        return _round_exposed_s(dev, key)
    return float(np.interp(math.log2(waves), [math.log2(w) for w in counts], rounds))


def round_exposed_s(dev: DeviceSpec, blocks_per_sm: int, chain_fmas: float, tiles: float,
                    waves: float | None = None) -> float | None:
    """A load -> barrier -> compute round's cost beyond its work on an SM, as probe.barrier_rounds and
    probe.barrier_waves measured it. One block per SM: the tiles' L2 round trip and the dependent
    multiply-add chain (`chain_fmas` per thread) the last warp still runs when the others are done,
    linear in the chain between the two measured rounds. Two blocks per SM: per round of both, linear in
    the `tiles` a block loads a round between one and two, at the launch's `waves` (`_pair_round_s`; None:
    the 8-wave rounds the report's matmul page quotes). None otherwise."""
    if blocks_per_sm not in ROUND_PAIRS:
        return None
    if blocks_per_sm == 1:
        low, high = (_round_exposed_s(dev, key) for key in ROUND_PAIRS[1])
    else:
        low, high = (_pair_round_s(dev, key, waves) for key in ROUND_PAIRS[2])
    if low is None or high is None:
        return None
    share = chain_fmas / ROUND_CHAIN_FMAS if blocks_per_sm == 1 else tiles - 1
    return low + (high - low) * share


def _pair_round_source(dev: DeviceSpec, waves: float | None) -> str:
    """At what wave count a two-block round was taken, for the barrier term's note."""
    counts = pair_round_waves(dev)
    if waves is None or len(counts) < 2:
        return "over 8 waves"
    return f"at {waves:.1f} waves (its rounds at {', '.join(map(str, counts))} waves, log scale, held past the ends)"


def dram_latency_excess_s(dev: DeviceSpec) -> float | None:
    """How much longer a load DRAM serves waits than one L2 serves (probe.chase_cg); None where either
    latency is not recorded."""
    ceil = ceilings(dev)
    if not ceil.latency_dram_s or not ceil.latency_l2_s:
        return None
    return ceil.latency_dram_s.value - ceil.latency_l2_s.value


def hoisted_round_s(dev: DeviceSpec, dram_share: float) -> tuple[float, str] | None:
    """A round alone on an SM whose next tile's load the compiler issued inside this round's work (SASS):
    the chain runs while the load is in flight, so the round costs the idle round (probe.barrier_rounds
    without a chain), and a round whose tiles DRAM serves (`dram_share` of them) waits the DRAM latency's
    excess over L2's more (`sweep_miss_share`: over the waves). Held out, COARSE 8's 56 launches: MAPE 6.6
    -> 2.7 % (3.2 % with the launch's average share)."""
    idle = _round_exposed_s(dev, "barrier_round_idle_s")
    excess = dram_latency_excess_s(dev)
    if idle is None or excess is None:
        return None
    return idle + dram_share * excess, (
        f"next tile loaded inside the work (SASS): the idle round {idle * 1e9:.0f} ns (probe.barrier_rounds, no "
        f"chain) + {dram_share:.2f} of the sweeps from DRAM (a wave's mean) x {excess * 1e9:.0f} ns "
        f"(probe.chase_cg: DRAM - L2)")


def hoisted_pair_round_s(dev: DeviceSpec, chain_fmas: float, tiles: float, hoisted: float,
                         waves: float | None = None) -> tuple[float, str] | None:
    """Two blocks an SM, `hoisted` of the rounds with their load issued inside the round before's work (SASS):
    those expose nothing, their round trip under this block's and the other's work; the rest pay the measured
    round for the tiles they load after the barrier (COARSE c: one round in c, loading A's tile and B's).
    Held out, COARSE 2 and 4's 50 and 74 launches: MAPE 2.4 and 3.5 -> 1.1 and 1.2 %."""
    left = 1.0 - hoisted
    after = max((tiles - hoisted) / left, 1.0)  # tiles a round loading after its barrier loads
    round_s = round_exposed_s(dev, 2, chain_fmas, after, waves)
    if round_s is None:
        return None
    return left * round_s, (f"{hoisted:.2f} of the rounds load inside the work before them (SASS) and expose "
                            f"nothing; the others pay probe.barrier_waves' round for {after:.2f} tiles "
                            f"{_pair_round_source(dev, waves)}, {round_s * 1e9:.0f} ns")


def round_cost_s(dev: DeviceSpec, blocks_per_sm: int, chain_fmas: float, tiles: float, hoisted: float = 0.0,
                 dram_share: float = 0.0, waves: float | None = None) -> tuple[float, str | None] | None:
    """What a load -> barrier -> compute round costs beyond its work on an SM, with how it was found (None:
    the measured round, `round_exposed_s`). `hoisted`: the share of rounds whose load the compiler issued
    inside the work of the round before (SASS), charged `hoisted_round_s` alone on an SM (with
    `dram_share`, the share of tile sweeps DRAM serves) - every round, whatever the share: charging COARSE 8's
    one round in eight that loads after its barrier the chain's round fit worse (FINDINGS) - and
    `hoisted_pair_round_s` (by the share) at two blocks an SM; two blocks' rounds at the launch's `waves`.
    None beyond two blocks an SM: there the others' work hides the round (`barrier_rounds_term`)."""
    if blocks_per_sm not in ROUND_PAIRS:
        return None
    if hoisted:
        law = (hoisted_round_s(dev, dram_share) if blocks_per_sm == 1
               else hoisted_pair_round_s(dev, chain_fmas, tiles, hoisted, waves))
        if law:
            return law
    plain = round_exposed_s(dev, blocks_per_sm, chain_fmas, tiles, waves)
    if plain is None:
        return None
    return plain, (None if blocks_per_sm == 1 else f"probe.barrier_waves' round {_pair_round_source(dev, waves)}")


@functools.lru_cache(maxsize=4096)
def _predict(case_name: str, dev: DeviceSpec, items: tuple[tuple[str, int], ...], barriers: bool = True,
             placed: bool = True, issue_law: bool = True) -> Prediction:
    from ..suite.registry import get

    case = get(case_name)
    p = dict(items)
    launch = _launch(case, p, dev)
    accesses = case.accesses(p)
    occ, known = case_occupancy(dev, case, p, launch)
    regs = occ.registers_per_thread
    notes = [] if known else [f"registers unknown (no recorded compile on {dev.name}): assumed {regs}"]
    blocks_per_sm = occ.blocks_per_sm
    resident = max(blocks_per_sm * dev.sm_count, 1)
    waves = launch.blocks / resident

    counts = [analyse(a, launch) for a in accesses]
    l1 = l1_traffic(accesses, counts)
    fn = functions(dev.key).get(case.entry(p))
    issued = warp_instructions(fn, accesses, counts, launch) if fn else None
    ceil = ceilings(dev)
    l1_share = (dev.l1_bytes_per_sm - occ.carveout_bytes) / max(blocks_per_sm, 1)  # L1 cache per resident block
    varying = sum(c.sectors for a, c in zip(accesses, counts, strict=True) if a.space == "global" and not a.store
                  and a.l1_cached and not block_invariant(a, launch))
    compulsory = case.compulsory_bytes(p)
    # blocks that store after a barrier write at the end of their lives, whose lengths spread
    order = store_spread(dev.key) if case.sync_after_loads else None
    pass_loss = functools.partial(ceil.l2_loss, readers=case.rereaders(p))
    b_loss = own_loss(dev, case_name, launch, p, pass_loss) if case.model == "matmul" else None
    # a warp's store instructions sharing lines: what L2 would see were all combined (a bound, and the
    # warp-seams law's reach); none where L1 merges the block's stores per line (load-free kernels)
    merge = (store_merge_shares(accesses, launch) if l1.store_requests and not block_merged(l1)
             else (1.0, 1.0))
    below = below_l1(dev, accesses, launch, l1, compulsory, resident, case.model, p, pass_loss,
                     l1_share, varying, ceil.store_combining, coresidency_law(dev.key, in_step(case)),
                     ceil.partial_law.lost if ceil.partial_law else None,
                     ceil.partial_law.written_back if ceil.partial_law else None,
                     order.blocks(blocks_per_sm, dev.sm_count) if order else None,
                     # the first wave's blocks share L1 as the dispatcher placed them, where no barrier
                     # holds them in step (with barriers they miss on the same lines together: COARSE 4
                     # held out -11..-30 % with the map, TILE 16 and 32 at 1024 -2..-3 %)
                     () if in_step(case) else first_wave(dev.key, blocks_per_sm),
                     # where this launch's placement was recorded, the blocks share L1 as they met there
                     placements_of(dev.key, case_name, p) if placed else (), b_loss,
                     # two blocks an SM reading one tile pool in rounds: which tiles meet in L1 is
                     # their drift apart, as their recorded round clocks give it
                     replayed_hit_share(dev.key, case_name, p, l1_share * blocks_per_sm), merge,
                     # the naive kernel's L1s miss more at some k mod its unroll (its measured lines)
                     naive_k_excess(dev, case_name, p), ceil.l2_store_loss)
    dram, req = below.dram, below.requests
    if b_loss is None and (replayed := predicted_read_bytes(case_name, p, launch.grid, resident, dev.key)) is not None:
        # B between the L2 partitions: the recorded schedule replayed, not the linear share; where B's
        # pitch splits its lines between two blocks, L2 loses more of them (the split probe's ratio)
        dram = with_split_lines(replayed[0], dram.write_bytes, replayed[1], dev, launch, case_name, p, ceil.l2_loss)
        notes.extend(n for n in below.notes if n != below.dram.note)
        notes.append(dram.note)
    else:
        notes.extend(below.notes)
    if (pages := allocation_caution(dev, case_name, p)) is not None:
        notes.append(pages)

    flops = case.flops(p)
    fills = late_fills(ceil, below)
    terms = pipe_terms(dev, ceil, l1, below.l2_read_bytes, below.l2_write_bytes, dram, req, flops, launch.blocks,
                       issued, case.precision, fills)
    background = below.rmw_read_bytes  # DRAM reads L2 makes on its own: no warp waits for them
    if below.pieces and max(terms, key=lambda t: t.time_s).name == "l2_requests":
        filled = piece_fills(dram, ceil.piece_fill_share(sum(compulsory)), compulsory[1])
        background += filled.read_bytes - dram.read_bytes
        if filled is not dram:
            notes.append(filled.note)
        dram = filled
        terms = pipe_terms(dev, ceil, l1, below.l2_read_bytes, below.l2_write_bytes, dram, req, flops,
                           launch.blocks, issued, case.precision, fills)
    crossing = (0.0, 0.0)  # bytes crossing between the L2 partitions, the first pass's
    if case.model == "l2":  # passes over one buffer, its re-readers known
        # L2 read requests of half a line or less cross the fabric slower a byte (probe.l2_read_split)
        halves = req.read and below.l2_read_bytes / req.read <= LINE_BYTES / 2
        fabric = ceil.fabric_half_line_bytes_per_s if halves else ceil.fabric_bytes_per_s
        if fabric:
            crossing = crossing_read_bytes(compulsory[0], dram.read_bytes, p.get("passes", 1), case.rereaders(p),
                                           dev.arch.l2_partitions)
        if crossing[0]:
            terms.append(fabric_term(crossing[0], fabric.value, fabric.source))
    warp_loads = max(dram.read_bytes - background, 0)  # DRAM bytes the warps wait for
    if case.sync_after_loads:
        in_flight = blocks_per_sm * dev.sm_count * warp_loads / max(launch.blocks, 1)  # every resident block's
        streams = streams_past_barriers(ceil, terms, in_flight, warp_loads)
        law = (lambda: issue_phase_law(dev)) if issue_law else None  # fitted where a kernel first needs it
        extra = None if streams else phase_term(ceil, terms, occ, waves, launch.blocks, dev.sm_count, law)
        if streams:
            notes.append(f"{in_flight / 2**20:.1f} MiB of loads in flight cover DRAM's bandwidth-delay product: "
                         "it streams past its barriers")
    else:
        if launch.loops:  # a loop: its independent loads per iteration are in flight
            per_warp = case.loads_in_flight(p) * (l1.load_bytes / l1.load_requests if l1.load_requests else 0.0)
        else:  # straight-line code: a warp issues all its loads before it waits
            per_warp = warp_loads / max(launch.blocks * launch.warps_per_block, 1)
        extra = latency_term(ceil, l1, dram, warp_loads, occ.warps_per_sm * dev.sm_count * per_warp,
                             max(waves - 1, 0.0), dispatch_interval_s(ceil, dev.sm_count), fills)
    if extra:
        terms.append(extra)
    slowest = max(terms, key=lambda t: t.time_s)
    time_s = slowest.time_s
    if case.model == "l2" and (first := first_pass_term(terms, p.get("passes", 1), compulsory[0], dram.read_bytes,
                                                        crossing[1] / crossing[0] if crossing[0] else 0.0)):
        terms.append(first)
        time_s += first.time_s
    # writes still dirty in L2 at the end. Not taken out of the DRAM time: the barrier-phase rule was
    # chosen with every write charged (without them: MAPE 6.9 -> 7.7 % on those kernels, any rule).
    held = ceil.l2_dirty_at_end_bytes.value if ceil.l2_dirty_at_end_bytes else 0.0
    # sectors of one writer left in part go back as read-modify-writes; those a second writer
    # completes are whole again and stay dirty like a stream's (split_store, padded row transposes)
    pieces_left = below.rmw_read_bytes > 0 and not below.written.completed_share
    dirty = dirty_at_end(dram.read_bytes, dram.write_bytes, held, pieces_left, slowest.name in IN_SM,
                         below.written.per_line)
    if dirty:
        notes.append(f"{dirty / 2**20:.1f} MiB of the writes still dirty in L2 at the end (not in ncu's count)")
    if slowest.name in IN_SM:
        # the busiest SM runs ceil(blocks / SMs) blocks, the pipe shared by those resident at once: a
        # partial last wave costs its blocks, not a whole wave (h200_stage: COARSE 4 at 1.09 waves
        # +38 % -> +7 %; fewer blocks than SMs: held out COARSE 8 with 96 blocks -34 % -> -10 %)
        per_sm = launch.blocks / dev.sm_count
        time_s *= math.ceil(per_sm) / per_sm
    elif (slowest.name in (*OUTSIDE_SM, "barrier") and dram.read_bytes + dram.write_bytes
          and (ceil.stream_startup_s or ceil.latency_dram_s)):
        # ramp-up (the first loads' round trip, blocks reaching every SM) and drain, once: measured as
        # the read stream's intercept, else one DRAM round trip. The barrier phases count the first
        # wave's round trip already (held out: 5-10 us barrier kernels were 16-30 % short without it)
        startup = ceil.stream_startup_s or ceil.latency_dram_s
        counted = ceil.latency_dram_s.value if slowest.name == "barrier" and ceil.latency_dram_s else 0.0
        ramp = max(startup.value - counted, 0.0)
        time_s += ramp
        terms.append(Term("startup", ramp, 1, 1 / startup.value, startup.source))
    if case.barrier_phases and slowest.name in IN_SM and barriers:
        per_block = case.barrier_phases(p)
        rounds = max(launch.blocks * per_block, 1)
        chain = flops / (2 * launch.threads_per_block * rounds)  # dependent FMAs per thread per round
        tiles = l1.load_requests / (launch.warps_per_block * rounds)  # tiles a block loads per round
        # loads the compiler issued inside the work before their round (SASS); the sweep share is matmul's
        hoisted = fn.hoisted_share if fn and case.model == "matmul" else 0.0
        alone = hoisted and blocks_per_sm == 1  # only a block alone on its SM waits on the sweeps' share
        share = sweep_miss_share(dev, launch, p, dram.read_bytes) if alone else 0.0
        exposed, how = round_cost_s(dev, blocks_per_sm, chain, tiles, hoisted, share, waves) or (None, None)
        added = barrier_rounds_term(ceil, math.ceil(waves) * per_block, blocks_per_sm, exposed, how)
        if added:
            terms.append(added)
            time_s += added.time_s
    bounds = {}
    if not req.merged and req.kept == 1.0:  # no law says how many L1 combines: the two bounds
        lines, sectors = merge
        if lines < 1.0:
            bounds = {"l2_write_requests_combined": req.writes * lines,
                      "l2_write_sectors_combined": below.l2_write_bytes / 32 * sectors}
            notes.append(f"a warp's consecutive stores share lines: where L1 combines them, L2 sees down to "
                         f"{100 * lines:.0f} % of the write requests and {100 * sectors:.0f} % of the sectors")
    if ceil.launch_s is not None:
        terms.append(Term("launch", ceil.launch_s.value, 1, 1 / ceil.launch_s.value, ceil.launch_s.source))
        time_s += ceil.launch_s.value  # events around one launch include its start-up
    return Prediction(
        case=case_name, device=dev.name, params=p, flops=flops, precision=case.precision,
        global_load_bytes=l1.load_bytes, global_store_bytes=l1.store_bytes,
        global_load_requests=l1.load_requests, global_load_sectors=l1.load_sectors,
        global_store_requests=l1.store_requests, global_store_sectors=l1.store_sectors,
        l2_read_bytes=below.l2_read_bytes, l2_write_bytes=below.l2_write_bytes, dram_read_bytes=dram.read_bytes,
        dram_write_bytes=dram.write_bytes, smem_load_wavefronts=l1.smem_load_wavefronts,
        smem_store_wavefronts=l1.smem_store_wavefronts, occupancy=occ, resident_blocks=resident,
        blocks=launch.blocks, waves=waves, bound=slowest.name, time_s=time_s,
        warp_instructions=issued.warp_instructions if issued else 0.0,
        global_load_wavefronts=l1.global_load_wavefronts, global_store_wavefronts=l1.global_store_wavefronts,
        global_load_tag_wavefronts=l1.load_tag_wavefronts, global_store_tag_wavefronts=l1.store_tag_wavefronts,
        l2_read_requests=req.read,
        l2_write_requests=req.writes, dram_write_bytes_in_kernel=int(dram.write_bytes - dirty), breakdown=tuple(terms),
        notes=tuple(notes), extra=bounds)
