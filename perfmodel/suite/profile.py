"""Nsight Compute: launch each planned case once under ncu, parse its counters into tidy rows.

The worker (`python -m perfmodel.suite.profile worker PLAN SELECT MANIFEST`) launches the selected
cases in order and writes a manifest; ncu's rows are matched to it by launch order and kernel name.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from ..measurements import WRITEBACK_SOURCE, Measurement
from .gpu import FLUSH_KERNEL
from .plan import load_plan, params_json


def flop_metrics(precision: str) -> list[str]:
    """ncu's thread-level FMA, add and multiply counts on the FP32 or FP64 pipe (FLOPs: 2 fma + add + mul)."""
    op = "d" if precision == "fp64" else "f"
    return [f"smsp__sass_thread_inst_executed_op_{op}{i}_pred_on.sum" for i in ("fma", "add", "mul")]


METRICS = [
    "gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second",
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum",
    "lts__t_sectors_op_read.sum", "lts__t_sectors_op_write.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_st.sum",
    "smsp__inst_executed_op_global_ld.sum", "smsp__inst_executed_op_global_st.sum",
    "launch__occupancy_limit_blocks", "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps",
    "launch__registers_per_thread", "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic", "launch__block_size", "launch__grid_size",
    "launch__waves_per_multiprocessor", "sm__maximum_warps_per_active_cycle_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    *flop_metrics("fp32"), *flop_metrics("fp64"),
    "smsp__inst_executed.sum", "sm__cycles_active.avg",
    "lts__t_requests_srcunit_tex_op_read.sum", "lts__t_requests_srcunit_tex_op_write.sum",
    "l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_output_wavefronts_pipe_lsu_mem_global_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_lgds_cmd_read.sum", "l1tex__data_pipe_lsu_wavefronts_mem_lgds_cmd_write.sum",
    "l1tex__m_xbar2l1tex_read_sectors.sum",
    # ncu's per-instruction (SASS) count of shared wavefronts: the addresses' own, without the data
    # stage's extra passes that the hardware count above also holds
    "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
]
# more of the L1/L2 store and load paths, for plans that set `ncu_detail = true` (kept where this ncu knows them)
DETAIL_METRICS = [
    "l1tex__data_pipe_lsu_wavefronts.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_gds_op_ld.sum",
    "l1tex__t_set_accesses_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_set_conflicts_pipe_lsu_mem_global_op_ld.sum",
    "sm__ctas_launched.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum",
    "l1tex__m_l1tex2xbar_write_sectors.sum",
    "l1tex__m_l1tex2xbar_req.sum",
    "lts__t_sectors_srcunit_tex_op_write_lookup_hit.sum", "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
    "l1tex__throughput.avg.pct_of_peak_sustained_active", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__cycles_elapsed.avg.per_second",
    "dram__cycles_elapsed.avg.per_second", "lts__t_tag_requests.sum",
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_drain_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    # sectors L2 filled from DRAM (reads, and partial sectors completed before their write-back), and
    # writes that crossed to the other L2 partition
    "lts__d_sectors_fill_device.sum", "lts__t_sectors_srcunit_ltcfabric_op_write.sum",
]

# instructions per execution pipe and each pipe's peak per cycle as ncu knows it (plan h200_pipes)
PIPES = ["alu", "fma", "fmaheavy", "fmalite", "lsu", "uniform", "cbu", "adu", "xu", "fp64"]
PIPE_METRICS = [f"sm__inst_executed_pipe_{p}.sum{s}" for p in PIPES for s in ("", ".peak_sustained")] + [
    f"sm__pipe_{p}_cycles_active.sum{s}" for p in ("alu", "fma", "fmaheavy", "fmalite") for s in ("", ".peak_sustained")
] + ["smsp__issue_active.sum", "smsp__issue_active.sum.peak_sustained", "sm__cycles_active.sum"]
# why warps did not issue: warps stalled for each reason per issued instruction
STALLS = ["barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
          "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
          "short_scoreboard", "sleeping", "tex_throttle", "wait"]
STALL_METRICS = [f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS]
# reads crossing between the two L2 partitions, and the L2's own lookups of them (plan h200_b_band)
PARTITION_METRICS = [f"lts__t_sectors_srcunit_ltcfabric_op_read{s}.sum" for s in ("", "_lookup_hit", "_lookup_miss")]
PARTITION_METRICS += ["lts__t_sectors_srcunit_ltcfabric.sum", "lts__t_sectors_srcnode_gpc_op_read.sum"]
BREAKDOWN = "breakdown:"  # a plan's `breakdown:<unit>__throughput...`: ncu reports the sub-units' percentages
KEPT = frozenset(METRICS + DETAIL_METRICS + PIPE_METRICS + STALL_METRICS + PARTITION_METRICS)  # what parse() records

# DRAM writes a kernel causes, dirty lines left in L2 included: profiled without ncu's cache control,
# the kernel between two reading L2 flushes; the second flush's write-backs are the kernel's residue
WRITEBACK_METRICS = ["dram__bytes_write.sum", "dram__bytes_read.sum"]
WRITEBACK = "writeback"  # the worker's `select` for that mode (all planned ncu cases)
PRE_FLUSHES = 1


def worker(plan: str, select: str, manifest: str) -> None:
    from . import gpu
    from .registry import get
    from .runner import Bound

    writeback = select == WRITEBACK
    cases = [pc for pc in load_plan(plan) if pc.ncu and (writeback or get(pc.name).study == select)]
    flush = gpu.L2Flusher(gpu.device_properties()["l2CacheSize"], mode="read") if writeback else None
    rng = np.random.default_rng(7)
    done = []
    for pc in cases:
        try:
            bound = Bound.make(pc.name, pc.params)
            setup = bound.case.setup(pc.params, rng)
            bufs, args = bound.upload(setup)
            for _ in range(PRE_FLUSHES if flush else 0):
                flush()
            bound.runner(args)()
            if flush:
                flush()
            gpu.synchronize()
            bufs.free()
            done.append({"case": pc.name, "case_id": pc.case_id, "params": pc.params,
                         "study": bound.case.study, "kernel": bound.kernel.name})
        except Exception as exc:  # noqa: BLE001
            print(f"ncu worker: {pc.case_id} failed: {exc}", file=sys.stderr, flush=True)
            done.append({"case": pc.name, "case_id": pc.case_id, "failed": str(exc)})
        part = Path(f"{manifest}.part")  # replaced whole: a reader never sees half a manifest
        part.write_text(json.dumps(done))
        part.replace(manifest)


def available_metrics(metrics: list[str]) -> list[str]:
    """Keep the metrics this ncu knows (by base name); all of them if the query fails."""
    try:
        out = subprocess.run(["ncu", "--query-metrics", "--csv"], capture_output=True, text=True,
                             timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return metrics
    known = {line.split(",")[0].strip('"') for line in out.splitlines()[1:]}
    if len(known) < 50:
        return metrics
    return [m for m in metrics if m.startswith(BREAKDOWN) or m.split(".")[0] in known]


def run_ncu(plan: str, select: str, workdir: Path, metrics: list[str], timeout_s: int = 900) -> Path:
    """Profile one study's planned cases (or all, after and before a reading flush, for
    `select` WRITEBACK); returns the raw CSV path (manifest beside it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    raw, manifest = workdir / f"ncu_{select}.csv", workdir / f"manifest_{select}.json"
    cache = ["--cache-control", "none"] if select == WRITEBACK else []
    cmd = ["ncu", "--clock-control", "none", *cache, "--csv", "--page", "raw", "--print-units", "base",
           "--metrics", ",".join(metrics), "--log-file", str(raw),
           sys.executable, "-m", "perfmodel.suite.profile", "worker", plan, select, str(manifest)]
    run_profiled(cmd, timeout_s, check=False)
    return raw


def run_profiled(cmd: list[str], timeout_s: int, check: bool) -> None:
    """Run ncu and the program it profiles in their own process group; past `timeout_s` the whole group
    is killed (none keeps the GPU busy unprofiled) and TimeoutExpired raised; with `check`, a failed
    run raises CalledProcessError."""
    with subprocess.Popen(cmd, start_new_session=True) as proc:
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if check and code:
        raise subprocess.CalledProcessError(code, cmd)


def table_start(lines: list[str]) -> int | None:
    """The line of ncu's raw CSV header (what ncu and the profiled program printed before it skipped)."""
    return next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)


def raw_launches(raw: Path) -> list[dict[str, str]]:
    """One dict of ncu's raw columns per profiled launch, in launch order (a .gz log read as it is)."""
    lines = (gzip.decompress(raw.read_bytes()).decode() if raw.suffix == ".gz" else raw.read_text()).splitlines()
    start = table_start(lines)
    if start is None:
        return []
    return [r for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))) if r["ID"].isdigit()]


def launch_values(raw: Path, metric: str) -> list[float]:
    """One metric's value per profiled launch of ncu's raw CSV (thousands separators dropped)."""
    return [float(r[metric].replace(",", "")) for r in raw_launches(raw)]


def profile_script(script: str, kernel_regex: str, metrics: list[str], raw: Path, worker_args: list[str],
                   timeout_s: int = 600) -> list[dict[str, str]]:
    """Run `python script --worker ARGS` under ncu without its clock or cache control (the script
    flushes L2 itself), profiling the kernels that match `kernel_regex`: raw_launches of its log."""
    run_profiled(["ncu", "--clock-control", "none", "--cache-control", "none", "-k", f"regex:{kernel_regex}",
                  "--csv", "--page", "raw", "--print-units", "base", "--metrics", ",".join(metrics),
                  "--log-file", str(raw), sys.executable, script, "--worker", *worker_args], timeout_s, check=True)
    return raw_launches(raw)


def parse(raw: Path, manifest: Path) -> list[Measurement]:
    """ncu's raw CSV (one row per launch) -> tidy rows matched to the manifest by launch order."""
    import pandas as pd

    if not raw.exists() or not manifest.exists():
        return []
    lines = raw.read_text().splitlines()
    start = table_start(lines)
    if start is None:
        return []
    df = pd.read_csv(io.StringIO("\n".join(lines[start:])))
    df = df[pd.to_numeric(df["ID"], errors="coerce").notna()].reset_index(drop=True)
    launched = [m for m in json.loads(manifest.read_text()) if "failed" not in m]
    writeback = manifest.name == f"manifest_{WRITEBACK}.json"
    if writeback:  # flushes, kernel, flush per case: the kernel's row, then the last flush's
        launched = [dict(m, after=a) for m in launched for a in (*[None] * PRE_FLUSHES, False, True)]
    rows: list[Measurement] = []
    for (_, rec), info in zip(df.iterrows(), launched, strict=False):
        name = str(rec.get("Kernel Name", ""))
        expect = FLUSH_KERNEL if writeback and info["after"] is not False else info["kernel"]
        if not name.startswith(expect):
            print(f"ncu parse: launch order mismatch ({name} vs {expect}); stopping", file=sys.stderr)
            break
        if writeback and info["after"] is None:
            continue
        if writeback and info["after"]:  # the flushes write nothing: no sink to subtract
            rows.append(Measurement(info["study"], info["case"], info["case_id"], params_json(info["params"]),
                                    "flush_sink_bytes", "B", "value", 0.0, WRITEBACK_SOURCE))
        for metric in df.columns:
            if metric not in KEPT and "pct_of_peak" not in metric:  # breakdowns' sub-unit percentages
                continue
            value = pd.to_numeric(str(rec[metric]).replace(",", ""), errors="coerce")
            if pd.isna(value):
                continue
            if writeback and info["after"]:
                metric = metric.replace(".sum", "_after.sum")  # the second flush's: the kernel's residue
            rows.append(Measurement(info["study"], info["case"], info["case_id"], params_json(info["params"]),
                                    metric, "", "value", float(value), WRITEBACK_SOURCE if writeback else "ncu"))
    return rows


def planned_studies(plan: str) -> list[str]:
    from .registry import get

    seen: list[str] = []
    for pc in load_plan(plan):
        study = get(pc.name).study
        if pc.ncu and study not in seen:
            seen.append(study)
    return seen




if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "worker":
        worker(*sys.argv[2:])
    else:
        sys.exit("usage: python -m perfmodel.suite.profile worker PLAN STUDY MANIFEST")
