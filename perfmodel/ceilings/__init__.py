"""Ceilings of a device: measured by the suite where recorded (reports/data/<device>/), datasheet
values otherwise, each labelled with where it came from. L2's loss curves are read in `retention`, the
law for sectors two writers share in `partial`, the shared curve helpers in `base`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..cache import on_disk
from ..devices import DeviceSpec
from ..devices import device as lookup
from ..errors import PerfModelError
from ..measurements import load, median_times, param, written_back
from .base import READERS, RETENTION_PASSES, Ceiling, _at, _ncu_read_curve, _scaled
from .partial import (
    PARTIAL_CALIBRATION_N,
    PartialLaw,
    _partial_loss,
    partial_law,
    split_store_pairs,
    written_back_shares,
)
from .retention import (
    STORE_FOOTPRINTS,
    _allocation_draws,
    _l2_retention,
    _l2_store_loss,
    _line_writes,
    retention_by_run,
)

if TYPE_CHECKING:
    from ..models.combining import StoreCombining

ROUND_CHAIN_FMAS = 32  # probe.barrier_rounds' work per round (tiled matmul's at TILE 32)


__all__ = ["FABRIC_READ", "PARTIAL_CALIBRATION_N", "READERS", "RETENTION_PASSES", "ROUND_CHAIN_FMAS",
           "STORE_FOOTPRINTS", "Ceiling", "Ceilings", "PartialLaw", "ceilings", "in_flight_curve", "partial_law",
           "retention_by_run", "round_slopes_by_waves", "split_store_pairs", "written_back_shares"]


@dataclass(frozen=True)
class Ceilings:
    dram_bytes_per_s: Ceiling
    l2_bytes_per_s: Ceiling
    smem_bytes_per_s: Ceiling
    fp32_flops_per_s: Ceiling
    fp64_flops_per_s: Ceiling
    dram_read_bytes_per_s: Ceiling | None = None  # read-only stream (no bus turnarounds)
    latency_dram_s: Ceiling | None = None
    latency_l2_s: Ceiling | None = None
    latency_l1_s: Ceiling | None = None
    memcpy_bytes_per_s: Ceiling | None = None
    launch_s: Ceiling | None = None  # what CUDA events add to a kernel's own duration
    empty_launch_s: Ceiling | None = None  # events around one empty kernel
    l2_write_requests_per_s: Ceiling | None = None  # (store, line) requests that hit in L2
    l2_write_sector_hits_per_s: Ceiling | None = None  # whole sectors stored, one at a time through L2's write path
    l2_write_fill_requests_per_s: Ceiling | None = None  # ... that allocate whole sectors missing in L2
    l2_write_rmw_requests_per_s: Ceiling | None = None  # ... that miss with sectors written in part
    l2_input_per_s: Ceiling | None = None  # crossbar transfers into the L2 slices (traffic.l2_input_units)
    store_combining: StoreCombining | None = None  # what L1 combines of a block's warps' stores (models.combining)
    blocks_per_s: Ceiling | None = None  # thread blocks launched and retired
    # probe.barrier_rounds: one load -> barrier -> compute -> barrier round, one block per SM, without
    # a multiply-add chain and with one of ROUND_CHAIN_FMAS (tiled matmul's at TILE 32)
    barrier_round_idle_s: Ceiling | None = None
    barrier_round_s: Ceiling | None = None
    # probe.barrier_waves: the round with two blocks per SM over 8 waves, one tile loaded a round or two ...
    barrier_pair_s: Ceiling | None = None
    barrier_pair_two_tiles_s: Ceiling | None = None
    # ... and at every wave count recorded ((waves, round), ...): blocks started together expose more of it
    barrier_pair_s_by_waves: tuple[tuple[int, Ceiling], ...] = ()
    barrier_pair_two_tiles_s_by_waves: tuple[tuple[int, Ceiling], ...] = ()
    stream_startup_s: Ceiling | None = None  # a DRAM-bound kernel's ramp-up and drain, once
    l2_dirty_at_end_bytes: Ceiling | None = None  # lines L2 holds at a stream's end; its write share stays dirty
    ncu_dirty_before_bytes: Ceiling | None = None  # dirty lines ncu's own setup leaves before a profiled kernel
    # DRAM latency while other blocks stream reads (and copy): ((bytes moved/s, latency s), ...)
    # in the order measured: scalar streams, then 16-byte streams
    loaded_latency: tuple[tuple[float, float], ...] = ()
    loaded_latency_copy: tuple[tuple[float, float], ...] = ()
    loaded_latency_wide: tuple[tuple[float, float], ...] = ()  # a warp's 512-byte requests (16 B per lane)
    loaded_latency_source: str = ""
    # what a buffer read again and again loses from L2 between passes: ((footprint bytes, share), ...)
    l2_retention: tuple[tuple[float, float], ...] = ()
    l2_retention_probe: Ceiling | None = None  # where the curve comes from; value: the footprint losing half
    # the same where each line is read by another SM on every pass (probe.l2_read_shared)
    l2_shared_retention: tuple[tuple[float, float], ...] = ()
    l2_shared_retention_probe: Ceiling | None = None
    # the same where each line's two halves are read by two SMs (probe.l2_read_split, h200_split_lines)
    l2_split_retention: tuple[tuple[float, float], ...] = ()
    l2_split_retention_probe: Ceiling | None = None
    # both at other pass counts than the curves' (RETENTION_PASSES): ((passes, curve), ...); L2 loses
    # less on each later pass (h200_passes)
    l2_retention_passes: tuple[tuple[int, tuple[tuple[float, float], ...]], ...] = ()
    l2_shared_retention_passes: tuple[tuple[int, tuple[tuple[float, float], ...]], ...] = ()
    l2_split_retention_passes: tuple[tuple[int, tuple[tuple[float, float], ...]], ...] = ()
    # sectors warps complete in 4-byte pieces while L2's write requests bound the kernel: the share of the
    # written bytes L2 fills from DRAM and writes back twice, by the bytes the kernel moves ((bytes, share), ...)
    l2_piece_fills: tuple[tuple[float, float], ...] = ()
    l2_piece_fills_probe: Ceiling | None = None  # where the curve comes from; value: its largest share
    # sectors two writers share: what L2 loses before the second writes, and what each fill costs
    partial_law: PartialLaw | None = None
    partial_loss_probe: Ceiling | None = None  # where the law comes from; value: the bytes between losing half
    fabric_bytes_per_s: Ceiling | None = None  # reads crossing between the L2 partitions (models.fabric)
    fabric_half_line_bytes_per_s: Ceiling | None = None  # ... in 64-byte requests (two SMs read a line's halves)
    # what a store stream cycling over its lines loses from L2 between its visits to a line (written back,
    # then taken again): ((bytes of the lines it cycles over, share of the revisits), ...)
    l2_store_loss_curve: tuple[tuple[float, float], ...] = ()
    l2_store_loss_probe: Ceiling | None = None  # where the curve comes from; value: the footprint losing half

    def l2_loss(self, footprint_bytes: float, readers: str = "one", passes: int = 0) -> float | None:
        """The share of a re-read buffer L2 loses between passes, on average over `passes` (measured; None
        where not); `readers` (READERS): "one" SM reads each line every pass, "shared": another SM each
        pass, "split": two SMs a line's two halves, others each pass. The curves' own pass count where
        `passes` is 0. Between measured pass counts the lost total ((passes - 1) x share) is interpolated
        linearly; at sizes a pass count was not measured at, the main curve's share (`_scaled`)."""
        if readers not in READERS:
            raise PerfModelError(f"readers = {readers!r}: one of {', '.join(READERS)}")
        key = READERS[readers]
        curve, others = getattr(self, key), getattr(self, f"{key}_passes")
        if not curve:
            return None
        main = _at(curve, footprint_bytes)
        if not passes or passes == RETENTION_PASSES or not others:
            return main
        totals = sorted([(RETENTION_PASSES, main)] + [(n, _scaled(c, curve, footprint_bytes)) for n, c in others])
        if passes >= totals[-1][0]:
            return totals[-1][1]
        if passes <= totals[0][0]:
            return totals[0][1]
        lost = np.interp(passes, [k for k, _ in totals], [(k - 1) * y for k, y in totals])
        return float(lost / (passes - 1))

    def l2_store_loss(self, line_footprint_bytes: float) -> float | None:
        """The share of a cyclic store stream's revisits L2 has lost (written the line back) since the
        last visit, by the bytes of the lines it cycles over (measured, interpolated; the curve's ends
        beyond it; None where not measured)."""
        return _at(self.l2_store_loss_curve, line_footprint_bytes) if self.l2_store_loss_curve else None

    def piece_fill_share(self, moved_bytes: float) -> float:
        """The share of a piece-writing kernel's written bytes L2 fills and writes back twice (measured
        curve, interpolated by the bytes the kernel moves; 0 where not measured)."""
        if not self.l2_piece_fills:
            return 0.0
        x, y = zip(*self.l2_piece_fills, strict=True)
        return float(np.interp(moved_bytes, x, y))

    def dram_time_s(self, read_bytes: float, write_bytes: float) -> float:
        """DRAM time of a read/write mix: reads at the read-only rate, and writes at what makes
        an equal mix run at the copy rate (each write costs the bus turnarounds it causes)."""
        copy = self.dram_bytes_per_s.value
        if self.dram_read_bytes_per_s is None:
            return (read_bytes + write_bytes) / copy
        read = self.dram_read_bytes_per_s.value
        return read_bytes / read + write_bytes * (2 / copy - 1 / read)

    def dram_latency_s(self, in_flight_bytes: float, write_share: float = 0.0,
                       request_bytes: float = 128.0) -> float:
        """DRAM latency seen with `in_flight_bytes` of loads outstanding: the loaded chase's latency
        under the stream whose own loads in flight (its read rate x latency, Little's law) match -
        under a read stream (128-byte requests, moved towards the 512-byte chase for wider
        requests), plus what a copy stream adds per byte the kernel writes for each it reads. Past the
        heaviest stream DRAM is saturated: latency grows as in flight / its rate. The idle chase
        where no loaded chase is recorded."""
        if not self.loaded_latency:
            return self.latency_dram_s.value if self.latency_dram_s else float("nan")

        def at(curve: tuple[tuple[float, float], ...], read_share: float = 1.0) -> float:
            n, lat = zip(*in_flight_curve(curve, read_share), strict=True)
            if in_flight_bytes > n[-1]:  # saturated: the stream's best rate
                return in_flight_bytes / (max(rate for rate, _ in curve) * read_share)
            return float(np.interp(in_flight_bytes, n, lat))

        narrow = at(self.loaded_latency)
        read = narrow
        if self.loaded_latency_wide and request_bytes > 128:
            read += min((request_bytes - 128) / (512 - 128), 1.0) * (at(self.loaded_latency_wide) - narrow)
        if not self.loaded_latency_copy or write_share <= 0:
            return read
        # the copy stream writes a byte per byte it reads: weigh it by the kernel's writes per read
        writes_per_read = write_share / (1 - write_share) if write_share < 0.5 else 1.0
        return read + writes_per_read * (at(self.loaded_latency_copy, 0.5) - narrow)

    def all(self) -> list[Ceiling]:
        return [c for c in self.__dict__.values() if isinstance(c, Ceiling)]


def in_flight_curve(curve: tuple[tuple[float, float], ...], read_share: float = 1.0) -> list[tuple[float, float]]:
    """(stream bytes/s, latency) -> (the stream's read bytes in flight, latency), by Little's law,
    sorted; `read_share` of the bytes a stream moves are reads (a copy: 0.5)."""
    return sorted((rate * lat * read_share, lat) for rate, lat in curve)


def _loaded_latency(data, dev: DeviceSpec) -> dict[str, object]:
    """Ceilings fields from probe.chase_loaded: latency vs streamed bytes/s under a read stream (a
    warp's 128-byte requests where measured, else one thread's), under a copy stream, and for
    512-byte requests; each curve starts at the idle chase (0 streaming blocks)."""
    chased = data[data.case == "probe.chase_loaded"]
    if not len(chased):
        return {}
    lanes_of, copy_of = param(chased, "lanes").fillna(1), param(chased, "copy").fillna(0)
    lanes = 32 if lanes_of.eq(32).any() else 1
    idle = param(chased, "blocks").eq(0)

    def curve(copy: int, width: int = lanes) -> tuple[tuple[float, float], ...]:
        sel = chased[lanes_of.eq(width) & (copy_of.eq(copy) | (copy_of.eq(0) & idle))]
        t = sel.pivot_table(index="params", columns="metric", values="value", aggfunc="median")
        if "cycles_per_load" not in t:
            return ()
        rate = t.get("stream_bytes_per_s", t.cycles_per_load * 0).fillna(0.0)
        return tuple(sorted((float(a), float(b)) for a, b in zip(rate, t.cycles_per_load / dev.sm_clock_hz,
                                                                 strict=True)))

    read, copy = curve(0), curve(1)
    if not read:
        return {}
    copy = copy if len(copy) > 2 else ()
    return {"loaded_latency": read, "loaded_latency_copy": copy, "loaded_latency_wide": curve(0, 128),
            "loaded_latency_source": (f"measured: probe.chase_loaded ({lanes} lanes) under read"
                                      + (" and copy" if copy else "")
                                      + f" streams up to {read[-1][0] / 1e12:.2f} TB/s")}


FABRIC_BUSY = "lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed"
FABRIC_READ = "lts__t_sectors_srcunit_ltcfabric_op_read.sum"


def _fabric_rate(data, startup_s: float, cases: tuple[str, ...], what: str, busy_pct: float = 85.0) -> Ceiling | None:
    """Bytes of reads crossing between the L2 partitions per second of a launch past its start-up:
    the median over the recorded launches of `cases` that kept the fabric >= `busy_pct` % busy (plan
    h200_fabric_reads)."""
    prof = data[(data.source == "ncu") & data.case.isin(cases)]
    # the split probe's same-pair control (mult = 1) is not the split-line pattern (_lost_per_pass)
    prof = prof[~(prof.case.eq("probe.l2_read_split") & param(prof, "mult").eq(1))]
    wide = prof.pivot_table(index=["run_id", "case_id"], columns="metric", values="value", aggfunc="median")
    if not {FABRIC_BUSY, FABRIC_READ, "gpu__time_duration.sum"} <= set(wide.columns):
        return None
    busy = wide[wide[FABRIC_BUSY] >= busy_pct].dropna(subset=[FABRIC_READ, "gpu__time_duration.sum"])
    if busy.empty:
        return None
    rate = 32 * busy[FABRIC_READ] / (busy["gpu__time_duration.sum"] * 1e-9 - startup_s)
    return Ceiling(f"L2 fabric (reads crossing between the partitions, {what})", float(rate.median()), "B/s",
                   f"measured: {len(busy)} launches of {' and '.join(cases)} with the fabric >= {busy_pct:.0f} % busy",
                   tuple(busy.index.get_level_values("case_id")))


def _stream_startup(data, times, launch_s: float, min_bytes: int = 64 << 20) -> Ceiling | None:
    """What a DRAM stream pays once beyond its bytes and the launch: the intercept of time against
    bytes of the float4 read stream (probe.read, one 8-block wave) over sizes of 64 MiB and up."""
    sel = data[(data.case == "probe.read") & param(data, "smem_per_block").eq(0)
               & param(data, "vec").eq(1)].drop_duplicates("case_id")
    pts = {c: (4 * n, times[c]) for c, n in zip(sel.case_id, param(sel, "n"), strict=True)
           if c in times.index and 4 * n >= min_bytes}
    if len(pts) < 3:
        return None
    nbytes, t = np.array(list(pts.values())).T
    _, intercept = np.polyfit(nbytes, t, 1)
    return Ceiling("DRAM stream start-up and drain (beyond the launch)", max(float(intercept) - launch_s, 0.0), "s",
                   f"measured: intercept of time vs bytes, probe.read float4 at {len(pts)} sizes "
                   f"of {min_bytes >> 20} MiB and up", tuple(sorted(pts)))


def _dirty_at_end(data, min_bytes: int = 64 << 20) -> Ceiling | None:
    """How much L2 holds when a streaming kernel ends: the dirty bytes the flush after it writes
    back, over the kernel's share of writes in its DRAM traffic (both measured in the write-back
    pass), median over the kernels that write 64 MB and more with a write share of 15-55 %."""
    wb = written_back(data)
    share = wb.written_bytes / (wb.written_bytes + wb.read_bytes)
    sel = (wb.written_bytes >= min_bytes) & share.between(0.15, 0.55)
    if sel.sum() < 5:
        return None
    held = (wb.after_bytes / share)[sel]
    return Ceiling("L2 lines held at a streaming kernel's end (dirty: that share of them)", float(held.median()),
                   "B", f"measured: write-back pass, median over {int(sel.sum())} kernels")


def _round_slope(data, times, case: str, what: str, **match: int) -> Ceiling | None:
    """A load -> barrier -> compute -> barrier round of tiled matmul (probe.barrier_rounds or
    probe.barrier_waves, the parameters `match` picks): the time per round between two round counts,
    so launch, ramp and the cold tile pool drop out (per round of every block of a wave: the slope
    over the waves)."""
    sel = {}
    for cid in _case_ids(data, case):
        p = json.loads(data[data.case_id == cid].params.iloc[0])
        if all(p.get(k) == v for k, v in match.items()) and cid in times:
            sel[p["rounds"]] = (times[cid], cid)
    if len(sel) < 2:
        return None
    (r0, (t0, c0)), (r1, (t1, c1)) = min(sel.items()), max(sel.items())
    per_round = (t1 - t0) / (r1 - r0) / match.get("waves", 1)
    return Ceiling(f"load-barrier round, {what}", per_round, "s", f"measured: slope {c0} -> {c1}", (c0, c1))


def round_slopes_by_waves(data: pd.DataFrame, times: pd.Series, loads: int,
                          what: str) -> tuple[tuple[int, Ceiling], ...]:
    """probe.barrier_waves' round with two blocks per SM at each wave count recorded (`_round_slope`)."""
    waves = set()
    for cid in _case_ids(data, "probe.barrier_waves"):
        p = json.loads(data[data.case_id == cid].params.iloc[0])
        if p.get("blocks_per_sm") == 2 and p.get("loads") == loads:
            waves.add(p["waves"])
    slopes = ((w, _round_slope(data, times, "probe.barrier_waves", f"two blocks per SM over {w} waves, {what}",
                               blocks_per_sm=2, waves=w, loads=loads)) for w in sorted(waves))
    return tuple((w, c) for w, c in slopes if c)


def _l2_input_rate(dev: DeviceSpec):
    """probe.store_lines inside L2: its crossbar transfers (counted as the model counts them) per second."""
    def pick(c, p, t):
        if p["footprint_lines"] * 128 > dev.l2_bytes:
            return None
        from ..models.l1 import case_l1
        from ..models.traffic import block_merged, l2_input_units

        l1 = case_l1(c, p)
        return l2_input_units(l1, 0.0, block_merged(l1)) / t
    return pick


def _l2_piece_fills(data) -> dict[str, object]:
    """transpose.naive_rows at 32 x 8 threads under ncu (each warp writes one 4-byte word of 32 lines,
    a block completes its sectors, blocks a grid row apart its lines; bound by L2's write requests):
    its DRAM reads past the input, over the bytes it writes, by the bytes it moves (input and output)."""
    def past_input(p, read):
        array = 4 * p["rows"] * p["cols"]
        return None if p.get("block_rows") != 8 else (2 * array, max(read / array - 1, 0.0))

    curve, cases = _ncu_read_curve(data, "transpose.naive_rows", past_input)
    if len(curve) < 4:
        return {}
    return {"l2_piece_fills": curve, "l2_piece_fills_probe": Ceiling(
        "L2 fills of sectors completed in 4-byte pieces (largest share)", max(y for _, y in curve), "",
        f"measured: transpose.naive_rows (32 x 8 threads) under ncu at {len(curve)} sizes, "
        f"{int(curve[0][0]) >> 20}-{int(curve[-1][0]) >> 20} MiB moved", tuple(cases))}


def _case_ids(df, case: str) -> list[str]:
    return sorted(set(df[df.case == case].case_id))


@on_disk
def ceilings(device: str | DeviceSpec = "h200") -> Ceilings:
    """The roofline's ceilings, preferring the suite's recorded measurements."""
    dev = lookup(device)
    data = load(dev.key)
    sheet = "datasheet"
    dram = Ceiling("DRAM bandwidth", dev.dram_bandwidth_bytes_per_s, "B/s", sheet)
    l2 = Ceiling("L2 bandwidth", 0.0, "B/s", "unknown")
    smem = Ceiling("shared-memory bandwidth", dev.smem_bandwidth_bytes_per_s, "B/s",
                   "datasheet (banks x 4 B x clock x SMs)")
    fp32 = Ceiling("FP32", dev.fp32_flops_per_s, "FLOP/s", sheet)
    fp64 = Ceiling("FP64", dev.fp64_flops_per_s, "FLOP/s", sheet)
    extra: dict[str, object] = {}
    if len(data):
        from ..suite.registry import REGISTRY, _load

        _load()

        launch_s = 0.0
        times = median_times(data)
        # ncu's durations from the runs that profiled the full counter set (the write-back pass runs
        # without cache control and the few-counter passes time their launches differently)
        prof = data[data.source == "ncu"]
        full = prof.groupby("run_id").metric.nunique()
        prof = prof[prof.run_id.isin(full[full >= 30].index)]
        ncu = prof[prof.metric == "gpu__time_duration.sum"].groupby("case_id").value.median() * 1e-9
        gap = (times - ncu).dropna()
        if len(gap):
            launch_s = max(float(gap.median()), 0.0)
            extra["launch_s"] = Ceiling("launch (CUDA events minus the kernel's ncu duration)", launch_s, "s",
                                        f"measured: median over {len(gap)} profiled cases")

        def measured(case: str, pick) -> tuple[float, str] | None:
            """The best rate of a probe, its launch's start-up (timed with it) taken out."""
            best = None
            for cid in _case_ids(data, case):
                t = times.get(cid)
                if not t:
                    continue
                params = json.loads(data[data.case_id == cid].params.iloc[0])
                busy = t - launch_s if case != "probe.launch" and t > 2 * launch_s else t
                value = pick(REGISTRY.get(case), params, busy)  # None for driver calls (memcpy)
                if value and (best is None or value > best[0]):
                    best = (value, cid)
            return best

        def moved(c, p, t):  # past 16 L2s: the ~20 MB of writes L2 still holds at the end are < 2 %
            r, w = c.compulsory_bytes(p)
            return (r + w) / t if r + w >= 16 * dev.l2_bytes else None

        if (m := measured("probe.copy", moved)):
            dram = Ceiling("DRAM bandwidth (copy, read + write)", m[0], "B/s", f"measured: {m[1]}")
        if (m := measured("probe.read", lambda c, p, t: 4 * p["n"] / t if p["vec"] and not p["smem_per_block"]
                          else None)):
            extra["dram_read_bytes_per_s"] = Ceiling("DRAM bandwidth (read only)", m[0], "B/s", f"measured: {m[1]}")
        def l2_passes(c, p, t):  # the passes after the first, which reads the buffer from DRAM
            first = 4 * p["n"] / extra["dram_read_bytes_per_s"].value if "dram_read_bytes_per_s" in extra else 0.0
            return 4 * p["n"] * (p["passes"] - 1) / (t - first) if p["passes"] > 1 and t > 2 * first else None

        if (m := measured("probe.l2_read", l2_passes)):
            l2 = Ceiling("L2 bandwidth (ld.global.cg, L2-resident; the passes after the first)", m[0], "B/s",
                         f"measured: {m[1]}")
        def smem_read(c, p, t):
            launch = c.launch(p)
            return 16 * launch.threads_per_block * launch.blocks * p["iters"] / t

        if (m := measured("probe.smem_bw", smem_read)):
            smem = Ceiling("shared-memory bandwidth", m[0], "B/s", f"measured: {m[1]}")
        if (m := measured("probe.fma", lambda c, p, t: c.flops(p) / t)):
            fp32 = Ceiling("FP32 (FMA)", m[0], "FLOP/s", f"measured: {m[1]}")
        if (m := measured("probe.dfma", lambda c, p, t: c.flops(p) / t)):
            fp64 = Ceiling("FP64 (DFMA)", m[0], "FLOP/s", f"measured: {m[1]}")
        if (m := measured("probe.memcpy_dtod", lambda c, p, t: 2 * p["bytes"] / t)):
            extra["memcpy_bytes_per_s"] = Ceiling("cuMemcpyDtoD", m[0], "B/s", f"measured: {m[1]}")
        if (m := measured("probe.launch", lambda c, p, t: 1 / t)):
            extra["empty_launch_s"] = Ceiling("empty kernel (events)", 1 / m[0], "s", f"measured: {m[1]}")
        def store_requests(lines: int, resident: bool):
            def pick(c, p, t):
                if p["lines"] != lines or (p["footprint_lines"] * 128 <= dev.l2_bytes) != resident:
                    return None
                writes = _line_writes(c, p)
                if not resident and writes > 1.05 * p["footprint_lines"]:
                    return None  # past L2 the rates are of first writes: each line written once
                return writes / t
            return pick

        for key, lines, resident, what in (
                ("l2_write_requests_per_s", 32, True, "L2 write requests, L2-resident (4-byte stores, 32 lines each)"),
                ("l2_write_fill_requests_per_s", 4, False, "L2 write requests allocating full sectors (DRAM-sized)"),
                ("l2_write_rmw_requests_per_s", 32, False, "L2 write requests to sectors written in part "
                                                            "(DRAM read-modify-write)")):
            if (m := measured("probe.store_lines", store_requests(lines, resident))):
                extra[key] = Ceiling(what, m[0], "1/s", f"measured: {m[1]}")
        if (m := measured("probe.store_lines", _l2_input_rate(dev))):
            extra["l2_input_per_s"] = Ceiling("crossbar transfers into L2 (a sector, a byte mask, a read request)",
                                              m[0], "1/s", f"measured: {m[1]}")
        from ..models.combining import calibrate

        if (combining := calibrate(data)):
            extra["store_combining"] = combining
        if (startup := _stream_startup(data, times, launch_s)):
            extra["stream_startup_s"] = startup

            def whole_sector_hits(c, p, t):  # cycling L2-resident, one whole sector of each of 4 lines a request
                sectors = _line_writes(c, p)
                cyclic = p["lines"] == 4 and p["footprint_lines"] * 128 <= dev.l2_partition_bytes
                return sectors / (t - startup.value) if cyclic and sectors > p["footprint_lines"] else None

            if (m := measured("probe.store_lines", whole_sector_hits)):
                extra["l2_write_sector_hits_per_s"] = Ceiling(
                    "whole sectors stored, through L2's write path (a store stream cycling over its lines, "
                    "L2-resident)", m[0],
                    "1/s", f"measured: {m[1]}, start-up and drain taken out", (m[1],))
        for key, cases, what in (("fabric_bytes_per_s", ("probe.l2_read", "probe.l2_read_shared"), "whole lines"),
                                 ("fabric_half_line_bytes_per_s", ("probe.l2_read_split",), "64-byte halves")):
            if startup and (fabric := _fabric_rate(data, startup.value, cases, what)):
                extra[key] = fabric
        if (dirty := _dirty_at_end(data)):
            extra["l2_dirty_at_end_bytes"] = dirty
        reads_only = data[(data.source == "ncu") & (data.case == "probe.read")
                          & (data.metric == "dram__bytes_write.sum")]
        if len(reads_only):  # a kernel that writes nothing, streaming 512 MB through L2, pushes them out
            extra["ncu_dirty_before_bytes"] = Ceiling(
                "DRAM writes ncu counts in a kernel that writes nothing", float(reads_only.value.median()), "B",
                f"measured: probe.read under ncu, median over {len(reads_only)} profiled launches")
        if (m := measured("probe.blocks", lambda c, p, t: p["blocks"] / t if p["blocks"] >= 1 << 18 else None)):
            extra["blocks_per_s"] = Ceiling("thread blocks launched and retired", m[0], "1/s", f"measured: {m[1]}")
        extra.update(_loaded_latency(data, dev))
        extra.update(_l2_retention(data, draws=_allocation_draws(dev.key, "probe.l2_read")))
        extra.update(_l2_retention(data, "probe.l2_read_shared", "l2_shared_retention",
                                   "a buffer each line of which another SM reads on each pass"))
        extra.update(_l2_retention(data, "probe.l2_read_split", "l2_split_retention",
                                   "a buffer each line's halves of which two other SMs read on each pass"))
        extra.update(_l2_piece_fills(data))
        extra.update(_l2_store_loss(dev))
        extra.update(_partial_loss(data, times, dev))
        for key, case, what, match in (
                ("barrier_round_idle_s", "probe.barrier_rounds", "one block per SM, no FMA chain",
                 {"work": 0, "blocks_per_sm": 1}),
                ("barrier_round_s", "probe.barrier_rounds", f"one block per SM, {ROUND_CHAIN_FMAS}-FMA chain",
                 {"work": ROUND_CHAIN_FMAS, "blocks_per_sm": 1}),
                ("barrier_pair_s", "probe.barrier_waves", "two blocks per SM over 8 waves, one tile a round",
                 {"blocks_per_sm": 2, "waves": 8, "loads": 1}),
                ("barrier_pair_two_tiles_s", "probe.barrier_waves", "two blocks per SM over 8 waves, two tiles",
                 {"blocks_per_sm": 2, "waves": 8, "loads": 2})):
            if (rounds := _round_slope(data, times, case, what, **match)):
                extra[key] = rounds
        for key, loads, what in (("barrier_pair_s_by_waves", 1, "one tile a round"),
                                 ("barrier_pair_two_tiles_s_by_waves", 2, "two tiles a round")):
            extra[key] = round_slopes_by_waves(data, times, loads, what)
        lat = data[(data.metric == "cycles_per_load")]
        clock = dev.sm_clock_hz
        for key, case, lo, hi in (("latency_l1_s", "probe.chase_ca", 0, 64 << 10),
                                  ("latency_l2_s", "probe.chase_cg", 1 << 20, 16 << 20),
                                  ("latency_dram_s", "probe.chase_cg", 256 << 20, 1 << 30)):
            sel = lat[lat.case == case]
            sizes = param(sel, "bytes")
            sel = sel[(sizes >= lo) & (sizes <= hi)]
            if len(sel):
                extra[key] = Ceiling(key.replace("_s", "").replace("_", " "), float(sel.value.median()) / clock,
                                     "s", f"measured: {case} {lo >> 10}..{hi >> 10} KiB, at {clock / 1e9:.2f} GHz")
    if l2.value == 0:
        l2 = Ceiling("L2 bandwidth", 2.5 * dram.value, "B/s", "assumed 2.5 x DRAM (no measurement)")
    return Ceilings(dram, l2, smem, fp32, fp64, **extra)
