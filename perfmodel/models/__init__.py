"""predict(case, device, **params) -> Prediction: traffic per level, occupancy, bound and time.

Time is the slowest of the pipes a kernel keeps busy (DRAM, L2, shared memory, the load/store
unit, FP32), each at the device's measured ceiling, and Little's law for memory latency, then
quantised to whole waves of resident blocks where the kernel is bound inside the SM.
"""

from __future__ import annotations

import functools
import json
import math

from ..ceilings import ceilings
from ..devices import DeviceSpec
from ..devices import device as lookup
from ..errors import PerfModelError
from ..measurements import load
from ..memory import analyse
from ..occupancy import Occupancy, occupancy
from ..sass import functions
from .base import Prediction, Term
from .issue import warp_instructions
from .traffic import block_unique_sectors, dram_traffic, l1_traffic, l2_requests

__all__ = ["Prediction", "Term", "naive_roofline_time", "predict"]

DEFAULT_REGISTERS = 32
IN_SM = ("fp32", "l1", "l1_tag", "issue")  # pipes inside the SM: bound per wave of resident blocks


@functools.cache
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


def hidden_behind_others(blocks_per_sm: int) -> float:
    """The share of one block's wait (or shorter phase) left exposed when B blocks share an SM:
    blocks that start together run in step, so with B <= 2 nothing hides; otherwise the wait hides
    behind the other B - 1 blocks (form chosen among 1/B, 1/(B - 1), 2/B on the recorded
    transposes and temporal blocking: a calibrated rule, applied unchanged to matmul's barriers)."""
    return 1.0 if blocks_per_sm <= 2 else 1 / (blocks_per_sm - 1)


def resources(dev: DeviceSpec, case, params: dict[str, int]) -> tuple[int, int, bool]:
    """(registers, static smem, known) of the case's kernel: recorded from the compiler, or a guess."""
    got = _compiled(dev.key).get(case.entry(params))
    if got:
        return got[0], got[1], True
    return DEFAULT_REGISTERS, 0, False


def naive_roofline_time(case_name: str, device: str | DeviceSpec = "h200", **params: int) -> float:
    """The baseline: datasheet FLOP rate and DRAM bandwidth, compulsory bytes only."""
    from ..suite.registry import get

    dev = lookup(device)
    case = get(case_name)
    p = case.bind(**params)
    r, w = case.compulsory_bytes(p)
    return max(case.flops(p) / dev.fp32_flops_per_s, (r + w) / dev.dram_bandwidth_bytes_per_s)


def predict(case_name: str, device: str | DeviceSpec = "h200", **params: int) -> Prediction:
    """Predict one registry case (memoised: a prediction depends only on its inputs)."""
    from ..suite.registry import get

    dev = lookup(device)
    p = get(case_name).bind(**params)
    return _predict(case_name, dev, tuple(sorted(p.items())))


@functools.lru_cache(maxsize=4096)
def _predict(case_name: str, dev: DeviceSpec, items: tuple[tuple[str, int], ...]) -> Prediction:
    from ..suite.registry import get

    case = get(case_name)
    p = dict(items)
    launch = case.launch(p)
    accesses = case.accesses(p)
    regs, static_smem, known = resources(dev, case, p)
    notes = [] if known else [f"registers unknown (no recorded compile on {dev.name}): assumed {regs}"]
    try:
        occ: Occupancy | None = occupancy(dev, launch.threads_per_block, regs, static_smem,
                                          case.dynamic_smem(p), opt_in=case.dynamic_smem(p) > 48 * 1024)
    except PerfModelError as exc:
        occ = None
        notes.append(f"occupancy not computed: {exc}")
    blocks_per_sm = occ.blocks_per_sm if occ else 1
    resident = max(blocks_per_sm * dev.sm_count, 1)
    waves = launch.blocks / resident

    counts = [analyse(a, launch) for a in accesses]
    l1 = l1_traffic(accesses, counts)
    fn = functions(dev.key).get(case.entry(p))
    issued = warp_instructions(fn, accesses, counts, launch) if fn else None
    per_block = block_unique_sectors(accesses, launch, store=False)
    l2_read = int(per_block * launch.blocks * 32) if not math.isnan(per_block) else l1.load_sectors * 32
    l2_read = min(l2_read, l1.load_sectors * 32) + l1.uncached_load_sectors * 32
    l2_write = l1.store_sectors * 32
    per_block_stores = block_unique_sectors(accesses, launch, store=True)
    written = per_block_stores * launch.blocks if not math.isnan(per_block_stores) else l1.store_sectors
    # sectors the kernel writes only in part: fewer distinct 4-byte words than 8 per sector (same sampled blocks)
    partial = block_unique_sectors(accesses, launch, store=True, granule=4) < 8 * per_block_stores
    compulsory = case.compulsory_bytes(p)
    if compulsory == (0, 0):  # no closed form: the distinct DRAM granules read, sectors written
        gran = dev.arch.dram_granule_bytes
        chunks = block_unique_sectors(accesses, launch, store=False, granule=gran)
        reads = int(chunks * launch.blocks * gran) if not math.isnan(chunks) else l2_read
        compulsory = (reads, l1.store_sectors * 32)
    if partial and compulsory[1] > dev.l2_bytes:
        # sectors written only in part and evicted during the kernel reach DRAM as read-modify-write:
        # the L2 reads each before writing it back (scattered 4-byte stores on the H200); a footprint
        # that fits in L2 stays there, dirty, past the kernel's end
        compulsory = (compulsory[0] + compulsory[1], compulsory[1])
        notes.append("partially written sectors: read-modify-write in DRAM")
    dram = dram_traffic(dev, compulsory, resident, launch, case.model, p)
    notes.append(dram.note)

    ceil = ceilings(dev)
    clock = dev.sm_clock_hz
    flops = case.flops(p)
    dram_s = ceil.dram_time_s(dram.read_bytes, dram.write_bytes) or 1e-30
    req = l2_requests(l1, l2_read, written, partial, sum(compulsory), dev.l2_bytes, l1.load_requests > 0)
    if req.merged:
        notes.append("stores of the block's warps combined per line in L1 (no global loads)")
        l2_write = l1.store_block_sectors * 32
    data_wf = l1.global_load_wavefronts + l1.global_store_wavefronts
    tags = l1.load_tag_wavefronts + l1.store_tag_wavefronts
    smem_wf = l1.smem_load_wavefronts + l1.smem_store_wavefronts
    wf_rate = ceil.smem_bytes_per_s.value / 128
    terms = [
        Term("dram", dram_s, dram.read_bytes + dram.write_bytes, (dram.read_bytes + dram.write_bytes) / dram_s,
             ceil.dram_bytes_per_s.source + (f"; reads alone {ceil.dram_read_bytes_per_s.source}"
                                                  if ceil.dram_read_bytes_per_s else "")),
        Term("l2", (l2_read + l2_write) / ceil.l2_bytes_per_s.value, l2_read + l2_write,
             ceil.l2_bytes_per_s.value, ceil.l2_bytes_per_s.source),
        Term("l1", (data_wf + smem_wf) / wf_rate, data_wf + smem_wf, wf_rate,
             f"L1 data stage: {data_wf:.3g} global + {smem_wf:.3g} shared wavefronts (one per bank conflict way), "
             f"at the measured shared-memory rate"),
        Term("l1_tag", tags / (dev.sm_count * clock), tags, dev.sm_count * clock,
             "L1 tag stage: one line per tag bank (4, hashed) per SM per cycle"),
        Term("fp32", flops / ceil.fp32_flops_per_s.value, flops, ceil.fp32_flops_per_s.value,
             ceil.fp32_flops_per_s.source),
    ]
    hit, fill, rmw = ceil.l2_write_requests_per_s, ceil.l2_write_fill_requests_per_s, ceil.l2_write_rmw_requests_per_s
    if hit and fill and rmw:
        n = req.read + req.write_hit + req.write_fill + req.write_rmw
        t = (req.read + req.write_hit) / hit.value + req.write_fill / fill.value + req.write_rmw / rmw.value
        if n:
            terms.append(Term("l2_requests", t, n, n / t,
                              f"{req.read:.3g} reads + {req.write_hit:.3g} writes at {hit.value / 1e9:.0f} G/s, "
                              f"{req.write_fill:.3g} sector fills at {fill.value / 1e9:.0f} G/s, {req.write_rmw:.3g} "
                              f"read-modify-writes at {rmw.value / 1e9:.0f} G/s (probe.store_lines)"))
    if ceil.blocks_per_s:
        r = ceil.blocks_per_s.value
        terms.append(Term("blocks", launch.blocks / r, launch.blocks, r, f"block launch: {ceil.blocks_per_s.source}"))
    if issued:
        rate = dev.arch.warp_schedulers * dev.sm_count * clock
        terms.append(Term("issue", issued.warp_instructions / rate, issued.warp_instructions, rate,
                          f"{dev.arch.warp_schedulers} warp instructions per SM per cycle; {issued.note}"))
    lat = ceil.latency_dram_s
    if occ and lat and case.sync_after_loads:
        # load -> barrier -> work in shared memory. The resident blocks of a wave start together and
        # one DRAM latency per wave is exposed; a block's shorter phase hides only behind the other
        # B - 1 blocks' longer phases, and with B = 2 the other block is in the same phase, so
        # nothing hides (form chosen among 1/B, 1/(B - 1), 2/B on the recorded transposes and
        # temporal blocking: a calibrated rule)
        by = {t.name: t.time_s for t in terms}
        load_s = by["dram"]
        work_s = max(by["l1"], by["l1_tag"], by.get("issue", 0.0))
        b = occ.blocks_per_sm
        exposed = hidden_behind_others(b)
        rounds = math.ceil(waves)
        phased = max(load_s, work_s) + min(load_s, work_s) * exposed + rounds * lat.value
        terms.append(Term("barrier", phased, rounds, 1 / lat.value,
                          f"max(load {load_s * 1e6:.1f} us, work {work_s * 1e6:.1f} us) + {exposed:.2f} x the shorter "
                          f"({b} blocks per SM) + {rounds} waves x {lat.value * 1e9:.0f} ns latency at the barrier"))
    elif occ and lat and l1.load_requests:
        bytes_per_request = l1.load_bytes / l1.load_requests
        in_flight = occ.warps_per_sm * dev.sm_count * case.loads_in_flight(p) * bytes_per_request
        latency_s = lat.value
        for _ in range(4):  # the latency at the DRAM throughput it allows (measured under load)
            rate = in_flight / latency_s
            moved_per_s = rate * (dram.read_bytes + dram.write_bytes) / max(dram.read_bytes, 1)
            latency_s = ceil.dram_latency_s(min(moved_per_s, ceil.dram_bytes_per_s.value))
        rate = in_flight / latency_s
        terms.append(Term("latency", dram.read_bytes / rate, dram.read_bytes, rate,
                          f"Little's law: {in_flight / 2**20:.2f} MiB in flight / {latency_s * 1e9:.0f} ns "
                          f"(DRAM latency under this load: {ceil.loaded_latency_source or 'idle chase'})"))
    slowest = max(terms, key=lambda t: t.time_s)
    time_s = slowest.time_s
    if slowest.name in IN_SM and waves > 1:
        time_s *= math.ceil(waves) / waves  # the last, partial wave leaves SMs idle
    l2_lat = ceil.latency_l2_s
    if case.barrier_phases and l2_lat and slowest.name in IN_SM:
        # at every barrier a block waits for its next tiles, one L2 round trip; as in the phase
        # model above, the wait hides behind the other B - 1 resident blocks' work (not at B <= 2)
        rounds = math.ceil(waves) * case.barrier_phases(p)
        share = hidden_behind_others(blocks_per_sm)
        exposed = rounds * l2_lat.value * share
        terms.append(Term("barrier", exposed, rounds, 1 / l2_lat.value,
                          f"{rounds} load-barrier rounds x {l2_lat.value * 1e9:.0f} ns L2 latency x {share:.2f} "
                          f"({blocks_per_sm} blocks per SM), added"))
        time_s += exposed
    if ceil.launch_s is not None:
        terms.append(Term("launch", ceil.launch_s.value, 1, 1 / ceil.launch_s.value, ceil.launch_s.source))
        time_s += ceil.launch_s.value  # events around one launch include its start-up
    return Prediction(
        case=case_name, device=dev.name, params=p, flops=flops,
        global_load_bytes=l1.load_bytes, global_store_bytes=l1.store_bytes,
        global_load_requests=l1.load_requests, global_load_sectors=l1.load_sectors,
        global_store_requests=l1.store_requests, global_store_sectors=l1.store_sectors,
        l2_read_bytes=l2_read, l2_write_bytes=l2_write, dram_read_bytes=dram.read_bytes,
        dram_write_bytes=dram.write_bytes, smem_load_wavefronts=l1.smem_load_wavefronts,
        smem_store_wavefronts=l1.smem_store_wavefronts, occupancy=occ, resident_blocks=resident,
        blocks=launch.blocks, waves=waves, bound=slowest.name, time_s=time_s,
        warp_instructions=issued.warp_instructions if issued else 0.0,
        global_load_wavefronts=l1.global_load_wavefronts, global_store_wavefronts=l1.global_store_wavefronts,
        global_load_tag_wavefronts=l1.load_tag_wavefronts, global_store_tag_wavefronts=l1.store_tag_wavefronts,
        l2_read_requests=req.read,
        l2_write_requests=req.write_hit + req.write_fill + req.write_rmw, breakdown=tuple(terms),
        notes=tuple(notes))
