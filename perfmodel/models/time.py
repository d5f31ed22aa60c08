"""Time terms: each pipe a kernel keeps busy at the rate the suite measured, latency (Little's law
at the loaded DRAM latency), barrier phases, and the launch. `predict` takes the slowest pipe."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..ceilings import Ceilings
from ..devices import DeviceSpec
from ..memory.coalescing import SECTOR_BYTES
from ..occupancy import Occupancy
from .base import Term
from .dram import DramEstimate
from .issue import Instructions
from .l1 import L1Traffic
from .phase_law import IssuePhaseLaw
from .traffic import L2Requests, Traffic, l2_input_units

IN_SM = ("fp32", "fp64", "l1", "l1_tag", "issue")  # pipes inside the SM: bound per wave of resident blocks
READ_ONLY_WRITE_SHARE = 0.01  # write requests per read request below which a kernel counts as only reading
# bounds that stream through the memory system
OUTSIDE_SM = ("dram", "latency", "l2", "l2_requests", "l2_write_sectors", "l2_input", "fabric", "blocks")


def hidden_behind_others(blocks_per_sm: int) -> float:
    """The share of one block's wait (or shorter phase) left exposed when B blocks share an SM:
    blocks that start together run in step, so with B <= 2 nothing hides; otherwise the wait hides
    behind the other B - 1 blocks (form chosen among 1/B, 1/(B - 1), 2/B on the recorded
    transposes and temporal blocking: a calibrated rule, applied unchanged to matmul's barriers; an
    issue-bound work phase that outlasts its loads takes models.phase_law instead)."""
    return 1.0 if blocks_per_sm <= 2 else 1 / (blocks_per_sm - 1)


def overlapped_s(load_s: float, work_s: float, exposed: float) -> float:
    """A barrier kernel's load and work phases: the longer, and the `exposed` share of the shorter."""
    return max(load_s, work_s) + min(load_s, work_s) * exposed


def work_phase(blocks_per_sm: int, load_s: float, work_s: float, issue_s: float,
               law: Callable[[], IssuePhaseLaw | None] | None = None
               ) -> tuple[float, float, IssuePhaseLaw | None]:
    """(work phase seconds, share of the shorter phase exposed, the phase law where it set them): the
    law (fitted at its first use) where issue bounds the work phase and it outlasts the loads at the
    law's share of the peak, else the work pipe's time and hidden_behind_others."""
    fitted = law() if law and issue_s >= work_s else None
    by_law = fitted.phases(blocks_per_sm, load_s, issue_s) if fitted else None
    return (*by_law, fitted) if by_law else (work_s, hidden_behind_others(blocks_per_sm), None)


def late_fills(ceil: Ceilings, below: Traffic) -> tuple[float, str]:
    """(seconds, note) the memory system spends on the fills of sectors other writers complete that L2
    lost before the last wrote (ceilings.partial_law's cost a fill at the bytes between them): added to the
    memory system's terms - DRAM, L2's requests, Little's law - so that a kernel bound inside the SM
    hides them as it hides its loads (held out 22: unpadded transposes, work-bound, +8..+14 % with them
    added to the total, +3..+5 % so; probe.split_store, latency-bound, and the padded row transposes,
    bound by L2's requests, as with them added to the total)."""
    late = below.rmw_read_bytes / SECTOR_BYTES * below.written.completed_share
    if not late or not ceil.partial_law or not ceil.partial_loss_probe:
        return 0.0, ""
    between = below.written.between_bytes
    per_fill = ceil.partial_law.per_fill_s(between)
    return late * per_fill, (f"; + {late * per_fill * 1e6:.1f} us: {late:.3g} fills of sectors L2 lost before their "
                             f"last writer x {per_fill * 1e12:.0f} ps at {between / 2**20:.1f} MiB between "
                             f"({ceil.partial_loss_probe.source})")


def pipe_terms(dev: DeviceSpec, ceil: Ceilings, l1: L1Traffic, l2_read_bytes: float, l2_write_bytes: float,
               dram: DramEstimate, req: L2Requests, flops: float, blocks: int, issued: Instructions | None,
               precision: str = "fp32", fills: tuple[float, str] = (0.0, "")) -> list[Term]:
    """Each pipe's time at its measured rate (the FLOPs on the FP32 or the FP64 pipe). L1's tag stage
    handles one wavefront per SM per cycle: a request's tag passes, and each sector it misses to L2
    (H200, ncu: t-stage output wavefronts plus L2-bound sectors run at 0.97-1.0 per cycle in the
    naive matmul at 1024-1056 and in the L2-resident read stream, h200_stage). Loads that bypass L1
    (ld.global.cg) are left to the L2 term: the L2 ceiling was measured with them, their passes included."""
    l2_bytes = l2_read_bytes + l2_write_bytes
    missed = l2_read_bytes / 32 - l1.uncached_load_sectors
    clock = dev.sm_clock_hz
    dram_s = (ceil.dram_time_s(dram.read_bytes, dram.write_bytes) or 1e-30) + fills[0]
    moved = dram.read_bytes + dram.write_bytes
    data_wf = l1.global_load_wavefronts + l1.global_store_wavefronts
    tags = l1.load_tag_wavefronts + l1.store_tag_wavefronts
    smem_wf = l1.smem_load_wavefronts + l1.smem_store_wavefronts
    wf_rate = ceil.smem_bytes_per_s.value / 128
    fp = ceil.fp64_flops_per_s if precision == "fp64" else ceil.fp32_flops_per_s
    terms = [
        Term("dram", dram_s, moved, moved / dram_s,
             ceil.dram_bytes_per_s.source + (f"; reads alone {ceil.dram_read_bytes_per_s.source}"
                                                  if ceil.dram_read_bytes_per_s else "") + fills[1]),
        Term("l2", l2_bytes / ceil.l2_bytes_per_s.value, l2_bytes, ceil.l2_bytes_per_s.value,
             ceil.l2_bytes_per_s.source),
        Term("l1", (data_wf + smem_wf) / wf_rate, data_wf + smem_wf, wf_rate,
             f"L1 data stage: {data_wf:.3g} global + {smem_wf:.3g} shared wavefronts (one per bank conflict way), "
             f"at the measured shared-memory rate"),
        Term("l1_tag", (tags + missed) / (dev.sm_count * clock), tags + missed, dev.sm_count * clock,
             f"L1 tag stage: {tags:.3g} passes (one line per tag bank, 4 hashed) + {missed:.3g} sectors missed "
             "to L2, one per SM per cycle"),
        Term(precision, flops / fp.value, flops, fp.value, fp.source),
    ]
    hit, fill, rmw = ceil.l2_write_requests_per_s, ceil.l2_write_fill_requests_per_s, ceil.l2_write_rmw_requests_per_s
    # reads queue at the write requests' rate where the kernel writes (transpose.rows: reads and sector
    # fills); a kernel that only reads is not held there - probe.l2_read_split's 64-byte reads ran at
    # >= 140 G/s, twice that rate (h200_split_lines) - and the crossbar term (l2_input) charges its reads
    read = req.read if req.writes > READ_ONLY_WRITE_SHARE * req.read else 0.0
    n = read + req.writes
    whole = ceil.l2_write_sector_hits_per_s
    sectors = l2_write_bytes / SECTOR_BYTES if whole and l1.whole_sector_stores else 0.0
    if hit and fill and rmw and n:
        misses = req.write_fill / fill.value + req.write_rmw / rmw.value + fills[0]
        # a cyclic store stream's misses overlap its hits: the slower of its sectors at the whole-sector rate
        # (l2_write_sectors) and the lines it misses at the fill rate (checks/store_footprints, H200 and
        # H100: within 9 %; their sum, as for first writes, 27-34 % long where part of the revisits miss)
        if req.write_lost and sectors:
            t = read / hit.value + req.write_lost / fill.value + misses
        else:
            t = max((read + req.write_hit + req.write_lost) / hit.value, req.write_lost / fill.value) + misses
        lost = (f"{req.write_lost:.3g} to lines L2 had written back or not yet taken at {fill.value / 1e9:.0f} G/s "
                "(a cyclic stream: its hits overlapped); " if req.write_lost else "")
        terms.append(Term("l2_requests", t, n, n / t,
                          f"{read:.3g} reads + {req.write_hit:.3g} writes at {hit.value / 1e9:.0f} G/s, {lost}"
                          f"{req.write_fill:.3g} sector fills at {fill.value / 1e9:.0f} G/s, {req.write_rmw:.3g} "
                          f"read-modify-writes at {rmw.value / 1e9:.0f} G/s (probe.store_lines){fills[1]}"))
    if sectors:
        terms.append(Term("l2_write_sectors", sectors / whole.value, sectors, whole.value,
                          f"whole sectors stored, each in turn through L2's write path ({whole.source}; "
                          "the suite's L2-resident store cycles take as long a sector at 1-4 lines a request)"))
    if ceil.l2_input_per_s and (units := l2_input_units(l1, req.read, req.merged, req.kept)):
        r = ceil.l2_input_per_s.value
        terms.append(Term("l2_input", units / r, units, r,
                          f"crossbar into L2: {units:.3g} transfers (written sectors, byte-masked lines, read "
                          f"requests) at {r / 1e9:.0f} G/s ({ceil.l2_input_per_s.source})"))
    if ceil.blocks_per_s:
        r = ceil.blocks_per_s.value
        terms.append(Term("blocks", blocks / r, blocks, r, f"block launch: {ceil.blocks_per_s.source}"))
    if issued:
        rate = dev.arch.warp_schedulers * dev.sm_count * clock
        terms.append(Term("issue", issued.warp_instructions / rate, issued.warp_instructions, rate,
                          f"{dev.arch.warp_schedulers} warp instructions per SM per cycle; {issued.note}"))
    return terms


def _load_and_work(terms: list[Term]) -> tuple[float, float]:
    """A barrier kernel's phases: loading (its DRAM time) and working (its slowest in-SM pipe)."""
    by = {t.name: t.time_s for t in terms}
    return by["dram"], max(by["l1"], by["l1_tag"], by.get("issue", 0.0))


def dispatch_interval_s(ceil: Ceilings, sms: int) -> float:
    """How often the block dispatcher hands an SM a block: SMs / its measured rate (probe.blocks:
    79 ns on the H200); 0 where the rate is not recorded."""
    return sms / ceil.blocks_per_s.value if ceil.blocks_per_s else 0.0


def dispatch_wait_s(ceil: Ceilings, blocks: int, busy_s: float, sms: int) -> tuple[float, float]:
    """(mean wait, utilisation) of a freed block slot queueing for its next block beyond the dispatch
    itself (dispatch_interval_s, S): with the kernel's blocks over `busy_s` keeping the dispatcher busy
    a share u of the time, slots wait as at an M/D/1 server, S u / (2 (1 - u))."""
    if not ceil.blocks_per_s or not blocks or busy_s <= 0:
        return 0.0, 0.0
    u = min(blocks / (busy_s * ceil.blocks_per_s.value), 0.95)
    return dispatch_interval_s(ceil, sms) * u / (2 * (1 - u)), u


def phase_term(ceil: Ceilings, terms: list[Term], occ: Occupancy, waves: float, blocks: int, sms: int,
               law: Callable[[], IssuePhaseLaw | None] | None = None) -> Term | None:
    """load -> barrier -> work in shared memory. The resident blocks of a wave start together and
    one DRAM latency per wave is exposed; a block's shorter phase hides behind the other blocks'
    longer phases (hidden_behind_others), and where the work phase is the longer, so does its wait at
    the barrier (row transposes with 32-way conflicts, work-bound: +5..+10 % in the suite and every
    held-out set -> -6..+4 %). A work phase bound by issue that outlasts the load phase follows the
    `law` instead (temporal blocking: the suite's 26 launches at 1024-8192 squared, -13..+11 % with the
    rule above, -8..+4 % with the law). Each refill past the first wave also queues for the block
    dispatcher where many small blocks keep it busy (dispatch_wait_s; the rule was calibrated where it
    idles): TILE 16 shared-memory transposes, 8 blocks per SM and the dispatcher 60-70 % busy, were 5-18 %
    faster in the model, suite and held out alike (plans h200, h200_holdout*)."""
    lat = ceil.latency_dram_s
    if not lat:
        return None
    load_s, work_s = _load_and_work(terms)
    b = occ.blocks_per_sm
    rounds = math.ceil(waves)
    wait_share = hidden_behind_others(b) if work_s > load_s else 1.0
    issue_s = next((t.time_s for t in terms if t.name == "issue"), 0.0)
    work_s, exposed, used = work_phase(b, load_s, work_s, issue_s, law)
    how = f"; work issuing at {issue_s / work_s:.2f} of the peak between barriers ({used.source})" if used else ""
    phased = overlapped_s(load_s, work_s, exposed) + rounds * lat.value * wait_share
    wait_s, busy = dispatch_wait_s(ceil, blocks, phased, sms) if rounds > 1 else (0.0, 0.0)
    phased += (rounds - 1) * wait_s
    queue = f" + {rounds - 1} refills x {wait_s * 1e9:.0f} ns for the dispatcher ({busy:.0%} busy)" if wait_s else ""
    return Term("barrier", phased, rounds, 1 / lat.value,
                f"max(load {load_s * 1e6:.1f} us, work {work_s * 1e6:.1f} us) + {exposed:.2f} x the shorter "
                f"({b} blocks per SM) + {rounds} waves x {lat.value * 1e9:.0f} ns latency at the barrier"
                f"{f' x {wait_share:.2f}' if wait_share < 1 else ''}{queue}{how}")


# How far a barrier kernel's loads in flight must exceed the bandwidth-delay product to stream: the
# corner is soft, and the rule picks a side. transpose.rows capped at 3 and 4 blocks per SM by unused
# shared memory (h200_capped: 1.10x and 1.29x) ran at the phase rule's time (+2, +9 %), uncapped at 8
# (1.44-1.47x, suite and held out) at DRAM speed; every other barrier kernel lies below 0.84x.
STREAM_MARGIN = 1.35


def streams_past_barriers(ceil: Ceilings, terms: list[Term], in_flight_bytes: float, read_bytes: float) -> bool:
    """Whether a kernel that waits at a barrier for its loads streams like one that does not: its
    resident blocks' loads, in flight for the load phase's share of the time, cover DRAM's
    bandwidth-delay product at the loaded latency (Little's law), so no wave's latency is exposed
    (transpose.rows pad 1, four loads a thread: measured at DRAM speed, +11..+16 % under the phase
    rule; the one-load shared-memory transposes stay below it), by STREAM_MARGIN."""
    load_s, work_s = _load_and_work(terms)
    if not (ceil.latency_dram_s and load_s and read_bytes):
        return False
    share = load_s / (load_s + work_s)
    return in_flight_bytes * share >= STREAM_MARGIN * ceil.dram_latency_s(in_flight_bytes) * read_bytes / load_s


def latency_term(ceil: Ceilings, l1: L1Traffic, dram: DramEstimate, load_bytes: float,
                 in_flight_bytes: float, refills: float = 0.0, block_interval_s: float = 0.0,
                 fills: tuple[float, str] = (0.0, "")) -> Term | None:
    """Little's law: the DRAM bytes warps load (`load_bytes`) at bytes in flight / DRAM latency, the
    latency that of the loaded chase under a stream with as many bytes in flight and the kernel's
    share of writes (probe.chase_loaded; the idle chase where that is missing). Past one wave, each
    block slot is refilled `refills` times and waits for the SM's next block each time: the block
    dispatcher hands an SM a block every `block_interval_s`, SMs / its measured rate (probe.blocks; H200: 79 ns;
    probe.split_store and the 4-byte copy over 62-248 waves ran 12-14 % slower than the loads alone)."""
    if not ceil.latency_dram_s or not l1.load_requests or not in_flight_bytes:
        return None
    moved = dram.read_bytes + dram.write_bytes
    # what the warps do not wait for (writes, read-modify-write reads) loads DRAM as a copy's writes do
    write_share = max(moved - load_bytes, 0.0) / moved if moved else 0.0
    latency_s = ceil.dram_latency_s(in_flight_bytes, write_share, l1.load_bytes / l1.load_requests)
    rate = in_flight_bytes / latency_s
    waits = refills * block_interval_s
    refill = f" + {refills:.0f} block refills x {block_interval_s * 1e9:.0f} ns" if waits else ""
    total_s = load_bytes / rate + waits + fills[0]
    return Term("latency", total_s, load_bytes, load_bytes / total_s if total_s else rate,
                f"Little's law: {in_flight_bytes / 2**20:.2f} MiB in flight / {latency_s * 1e9:.0f} ns "
                f"(DRAM latency under this load: {ceil.loaded_latency_source or 'idle chase'}){refill}{fills[1]}")


def barrier_rounds_term(ceil: Ceilings, rounds: int, blocks_per_sm: int, exposed_s: float | None,
                        how: str | None = None) -> Term | None:
    """At every barrier a block waits for its next tiles. With one or two blocks per SM the SM
    idles for what probe.barrier_rounds / probe.barrier_waves measured a round to cost beyond its
    work (`exposed_s`, `how` it was found where not so); otherwise one L2 round trip, hidden behind
    the other B - 1 resident blocks' work. Added to the slowest in-SM pipe."""
    if exposed_s is not None:
        who = "alone on an SM" if blocks_per_sm == 1 else f"{blocks_per_sm} blocks per SM"
        return Term("barrier", rounds * exposed_s, rounds, 1 / exposed_s,
                    f"{rounds} load-barrier rounds x {exposed_s * 1e9:.0f} ns, the round's cost beyond its work "
                    f"({who}, {how or 'probe.barrier_rounds / barrier_waves'}), added")
    l2_lat = ceil.latency_l2_s
    if not l2_lat:
        return None
    share = hidden_behind_others(blocks_per_sm)
    return Term("barrier", rounds * l2_lat.value * share, rounds, 1 / l2_lat.value,
                f"{rounds} load-barrier rounds x {l2_lat.value * 1e9:.0f} ns L2 latency x {share:.2f} "
                f"({blocks_per_sm} blocks per SM), added")


def first_pass_term(terms: list[Term], passes: int, first_read_bytes: float, dram_read_bytes: float,
                    first_crossing_share: float = 0.0) -> Term | None:
    """Passes over one buffer: the first reads it all from DRAM, the others what L2 lost of it, so
    the slowest resource is taken per phase, not over the kernel (the DRAM-side terms, dram and
    latency, split by their DRAM bytes, the fabric by its crossings - `first_crossing_share` of them in
    the first pass - the others evenly by pass); the time this adds beyond the slowest total
    (probe.l2_read at 4 passes, 16-48 MiB: -8..-15 % without it)."""
    if passes < 2 or not dram_read_bytes or not terms:
        return None
    first = {"dram": min(first_read_bytes / dram_read_bytes, 1.0), "fabric": first_crossing_share}
    first["latency"] = first["dram"]

    def phase(in_first: bool) -> tuple[float, str]:
        def share(name: str) -> float:
            s = first.get(name, 1 / passes)
            return s if in_first else 1 - s
        return max((t.time_s * share(t.name), t.name) for t in terms)

    (first_s, first_by), (rest_s, rest_by) = phase(True), phase(False)
    added = first_s + rest_s - max(t.time_s for t in terms)
    if added <= 0:
        return None
    return Term("first_pass", added, 1, 1 / added, f"the first pass bound by {first_by} ({first_s * 1e6:.1f} us), "
                f"the {passes - 1} others by {rest_by} ({rest_s * 1e6:.1f} us)")
