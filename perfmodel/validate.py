"""Predictions beside measurements: one tidy table for every prediction that has a measurement."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING

import numpy as np

from .ceilings import ceilings
from .devices import device as lookup
from .measurements import load, median_times, written_back

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from .ceilings import Ceilings
    from .devices import DeviceSpec
    from .models.base import Prediction

# compared row -> (Prediction field, ncu metric, unit, scale applied to the prediction)
COUNTERS = {
    "global_load_requests": ("global_load_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "request", 1),
    "global_load_sectors": ("global_load_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "sector", 1),
    "global_store_requests": ("global_store_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "request", 1),
    "global_store_sectors": ("global_store_sectors", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "sector", 1),
    # shared wavefronts as ncu counts them per instruction (SASS): what the addresses need ...
    "smem_load_wavefronts": ("smem_load_wavefronts", "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                             "wavefront", 1),
    "smem_store_wavefronts": ("smem_store_wavefronts",
                              "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "wavefront", 1),
    # ... and as the L1 data stage counts them: more where global traffic shares the stage (ncu shows
    # the excess as "bank conflicts"; the addresses have none)
    "smem_load_stage_wavefronts": ("smem_load_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                                   "wavefront", 1),
    "smem_store_stage_wavefronts": ("smem_store_wavefronts",
                                    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "wavefront", 1),
    # the sectors the SMs' L1s request from L2 (what crosses the crossbar) ...
    "l2_requested_read_sectors": ("l2_read_bytes", "l1tex__m_xbar2l1tex_read_sectors.sum", "sector", 1 / 32),
    # ... and what the L2 slices count: fewer where SMs ask for the same sector at once (merged)
    "l2_read_sectors": ("l2_read_bytes", "lts__t_sectors_srcunit_tex_op_read.sum", "sector", 1 / 32),
    "l2_write_sectors": ("l2_write_bytes", "lts__t_sectors_srcunit_tex_op_write.sum", "sector", 1 / 32),
    "dram_read_bytes": ("dram_read_bytes", "dram__bytes_read.sum", "B", 1),
    # dirty lines may stay in L2 past the kernel's end: what ncu counts in the kernel
    "dram_write_bytes_in_kernel": ("dram_write_bytes_in_kernel", "dram__bytes_write.sum", "B", 1),
    "warp_instructions": ("warp_instructions", "smsp__inst_executed.sum", "instruction", 1),
    "global_load_wavefronts": ("global_load_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_lgds_cmd_read.sum",
                               "wavefront", 1),
    "global_load_tag_wavefronts": ("global_load_tag_wavefronts",
                                   "l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_ld.sum", "wavefront", 1),
    "global_store_tag_wavefronts": ("global_store_tag_wavefronts",
                                    "l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_st.sum", "wavefront", 1),
    "l2_read_requests": ("l2_read_requests", "lts__t_requests_srcunit_tex_op_read.sum", "request", 1),
    "l2_write_requests": ("l2_write_requests", "lts__t_requests_srcunit_tex_op_write.sum", "request", 1),
}
# (the data stage's write wavefronts, ..._cmd_write, also count L1 fills: no store-only counter to compare)
STAGES = {"global_load_wavefronts", "global_load_tag_wavefronts", "global_store_tag_wavefronts",
          "l2_read_requests", "l2_write_requests", "smem_load_stage_wavefronts", "smem_store_stage_wavefronts"}
EXACT = {"global_load_requests", "global_load_sectors", "global_store_requests", "global_store_sectors",
         "smem_load_wavefronts", "smem_store_wavefronts"}
SMALL_DRAM_BYTES = 1 << 20
# the write-back pass's totals (measurements.written_back) carry 0.1-0.9 MB per profiled kernel that
# no output explains (a 1 MiB store probe measures 1.1-1.5 MB): below 16 MiB the comparison is shown
# as noise (tests bound it absolutely)
WRITEBACK_FLOOR_BYTES = 16 << 20
LIMITS = {"warps": "launch__occupancy_limit_warps", "registers": "launch__occupancy_limit_registers",
          "shared_memory": "launch__occupancy_limit_shared_mem", "blocks": "launch__occupancy_limit_blocks"}


def _rel(pred: float, meas: float) -> float:
    if meas == 0:
        return 0.0 if pred == 0 else float("inf")
    return (pred - meas) / meas


def ncu_dirty_before(ceil: Ceilings, pred: Prediction, dev: DeviceSpec) -> float:
    """What ncu's count of a kernel's DRAM writes holds besides the kernel's own: lines its setup left
    dirty, written back as the kernel's traffic evicts them (all of them once it moves an L2's worth)."""
    if ceil.ncu_dirty_before_bytes is None:
        return 0.0
    moved = pred.dram_read_bytes + pred.dram_write_bytes
    return ceil.ncu_dirty_before_bytes.value * min(1.0, moved / dev.l2_bytes)


def compare(device: str = "h200", data: pd.DataFrame | None = None, progress: bool = True,
            predictor: Callable[..., Prediction] | None = None) -> pd.DataFrame:
    """study, case, case_id, params, metric, unit, kind, predicted, measured, rel_error, baseline.
    `predictor(case, device, **params)`: where the predictions come from (default: the model now)."""
    import pandas as pd

    from .models import naive_roofline_time, predict
    from .suite.profile import flop_metrics
    from .suite.registry import REGISTRY, _load

    _load()
    dev = lookup(device)
    data = load(dev.key) if data is None else data
    # a run whose check of a case failed (wrong results, or it did not launch) measured nothing of it;
    # another run of the case may have
    checks = data[data.metric == "check_passed"]
    failed_runs = checks[checks.value == 0][["run_id", "case_id"]].drop_duplicates()
    if len(failed_runs):
        bad = data.set_index(["run_id", "case_id"]).index.isin(pd.MultiIndex.from_frame(failed_runs))
        data = data[~bad]
    ncu = data[data.source == "ncu"].pivot_table(index="case_id", columns="metric", values="value",
                                                  aggfunc="median")
    wb = written_back(data).written_bytes
    events = median_times(data)
    driver = data[(data.source == "driver") & (data.metric == "blocks_per_sm")].groupby("case_id").value.first()
    cases = data[data.case.isin(REGISTRY)].drop_duplicates("case_id")[["study", "case", "case_id", "params"]]
    ceil_dev = ceilings(dev)
    ceiling_ids = {c.source.removeprefix("measured: ") for c in ceil_dev.all()}
    # cases whose DRAM reads define a measured curve (L2 retention, piece fills): those rows shown, not
    # counted (their time is, and the piece fills' writes, which the read curve predicts)
    defines_reads = {cid for c in (ceil_dev.l2_retention_probe, ceil_dev.l2_shared_retention_probe,
                                   ceil_dev.l2_split_retention_probe, ceil_dev.l2_piece_fills_probe)
                     if c for cid in c.cases}
    ceiling_ids |= {cid for c in ceil_dev.all() for cid in c.cases} - defines_reads
    # the partial-sector law's launches define both its loss (DRAM reads) and its fill cost (time)
    defines_reads |= set(ceil_dev.partial_loss_probe.cases) if ceil_dev.partial_loss_probe else set()
    rows: list[dict] = []
    t0 = time.time()
    for i, (_, c) in enumerate(cases.iterrows(), 1):
        if progress and (i % 50 == 0 or i == len(cases)):
            print(f"  compare: {i}/{len(cases)} cases ({time.time() - t0:.0f}s)", file=sys.stderr, flush=True)
        params = json.loads(c.params)
        pred = (predictor or predict)(c.case, dev, **params)

        def add(metric: str, unit: str, kind: str, p: float, m: float, baseline: float = np.nan,
                _c=c) -> None:
            rows.append(dict(study=_c.study, case=_c.case, case_id=_c.case_id, params=_c.params, metric=metric,
                             unit=unit, kind=kind, predicted=float(p), measured=float(m),
                             rel_error=_rel(float(p), float(m)), baseline=baseline))

        if c.case_id in ncu.index:
            m = ncu.loc[c.case_id]
            for row, (field, metric, unit, scale) in COUNTERS.items():
                if metric in m and not np.isnan(m[metric]):
                    p = getattr(pred, field) * scale
                    if row == "dram_write_bytes_in_kernel":
                        p += ncu_dirty_before(ceil_dev, pred, dev)
                    if p == 0 and m[metric] == 0:
                        continue
                    kind = "counter-l1" if row in EXACT else "counter"
                    if row.startswith("dram") and max(p, m[metric]) < SMALL_DRAM_BYTES:
                        kind = "counter-noise"  # code and constant fetches of a tiny kernel
                    elif row in STAGES:
                        kind = "counter-stage"  # L1 data-stage wavefronts and L2 requests: the time model's work
                    elif row == "warp_instructions":
                        kind = "counter-issue"  # estimated from the SASS around the exact memory counts
                    elif row == "dram_write_bytes_in_kernel":  # the dirty-residue law: for outputs past the floor
                        big = pred.dram_write_bytes >= WRITEBACK_FLOOR_BYTES
                        kind = "counter-writeback" if big else "counter-noise"
                    elif row == "l2_read_sectors":
                        kind = "counter-merged"  # the L2 slices merge SMs' simultaneous requests for a sector
                    if row in ("l2_write_sectors", "l2_write_requests") and f"{row}_combined" in pred.extra:
                        kind = "counter-merged"  # L1 may combine a warp's consecutive stores into one line
                    if row == "dram_read_bytes" and c.case_id in defines_reads:
                        kind = "counter-ceiling"
                    add(row, unit, kind, p, m[metric])
            occ = pred.occupancy
            if "sm__maximum_warps_per_active_cycle_pct" in m:
                add("theoretical_occupancy_pct", "%", "occupancy", round(100 * occ.occupancy, 2),
                    m["sm__maximum_warps_per_active_cycle_pct"])
            limits = {"warps": occ.block_limit_warps, "registers": occ.block_limit_registers,
                      "shared_memory": occ.block_limit_shared_memory_at_carveout,
                      "blocks": occ.block_limit_blocks}
            for name, metric in LIMITS.items():
                if metric in m and limits[name] is not None:
                    add(f"block_limit_{name}", "block", "occupancy", limits[name], m[metric])
            flops = flop_metrics(pred.precision)
            if pred.flops and all(f in m and not np.isnan(m[f]) for f in flops) \
                    and c.case.startswith(("matmul", "probe.fma", "probe.dfma")):
                add("flops", "FLOP", "counter", pred.flops, 2 * m[flops[0]] + m[flops[1]] + m[flops[2]])
        if c.case_id in wb.index:
            # everything the kernel writes reaches DRAM: in the kernel, or when the next flush evicts it
            m_all = wb[c.case_id]
            p = pred.dram_write_bytes
            if p or m_all:
                add("dram_write_bytes", "B", "counter-noise" if max(p, m_all) < WRITEBACK_FLOOR_BYTES else "counter",
                    p, m_all)
        if c.case_id in driver.index:
            add("blocks_per_sm", "block", "occupancy", pred.occupancy.blocks_per_sm, driver[c.case_id])
        if c.case_id in events.index:
            # a probe that defines a ceiling predicts itself: shown, but not counted as validation
            kind = "time-ceiling" if c.case_id in ceiling_ids else "time"
            add("time_s", "s", kind, pred.time_s, events[c.case_id],
                baseline=naive_roofline_time(c.case, dev, **params))
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per study and kind: cases, exact matches, median and max |error|, MAPE."""
    t = table.assign(abs_err=table.rel_error.abs().replace(np.inf, np.nan))
    g = t.groupby(["study", "kind"])
    return g.agg(rows=("metric", "size"), exact=("rel_error", lambda s: int((s == 0).sum())),
                 within_5pct=("abs_err", lambda s: int((s <= 0.05).sum())),
                 median_abs_error=("abs_err", "median"), max_abs_error=("abs_err", "max"),
                 mape=("abs_err", "mean")).reset_index()


XBAR_BUSY = "lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed"


def l2_input_busy(dev: str | DeviceSpec, recorded: pd.DataFrame) -> pd.DataFrame:
    """For every profiled kernel that stores (h200_l2_units): the model's crossbar transfers into L2
    (the l2_input term's work) beside ncu's busy time of that port (its busy share x the duration),
    and whether the model has L1 combine part of the stores. One rate should fit them all."""
    import pandas as pd

    from .models import predict

    dev = lookup(dev)
    n = recorded[(recorded.source == "ncu") & recorded.metric.isin([XBAR_BUSY, "gpu__time_duration.sum"])]
    w = n.pivot_table(index="case_id", columns="metric", values="value", aggfunc="median")
    if XBAR_BUSY not in w:
        return pd.DataFrame(columns=["case_id", "transfers", "busy_s", "combined"])
    params = n.drop_duplicates("case_id").set_index("case_id").params
    rows = []
    for cid, r in w.dropna().iterrows():
        pred = predict(cid.split("[")[0], dev, **json.loads(params[cid]))
        units = next(t.work for t in pred.breakdown if t.name == "l2_input")
        combined = pred.l2_write_bytes < 32 * pred.global_store_sectors
        if pred.global_store_sectors < pred.l2_read_requests:
            continue  # read streams: a read request costs the port ~0.4 transfers there
        rows.append(dict(case_id=cid, transfers=units, busy_s=r[XBAR_BUSY] / 100 * r["gpu__time_duration.sum"] * 1e-9,
                         combined=combined))
    return pd.DataFrame(rows)
