"""A measurement campaign on the live GPU: device properties, checked and timed cases, latency,
streams, then Nsight Compute counters; every row lands in tidy CSVs as soon as it is measured."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..devices import DeviceSpec
from ..measurements import Provenance, Recorder, git_commit, utc_now
from . import gpu, profile, special
from .plan import load_plan, plan_setting
from .runner import measure, progress


def provenance(run_id: str) -> Provenance:
    props = gpu.device_properties()
    soft = gpu.software_versions()
    clock = str(props.get("clockRate", 0) // 1000)
    smi = soft.get("nvidia_smi", "")
    if smi:  # "driver, current sm, max sm, mem" as nvidia-smi reports them
        clock = smi.split(",")[1].strip().replace(" MHz", "") + " (max " + smi.split(",")[2].strip() + ")"
    return Provenance(run_id=run_id, device=props["name"], driver=soft["driver"], cuda=soft["cuda"],
                      pycuda=soft["pycuda"], sm_clock_mhz=clock, commit=git_commit(), utc=utc_now())


EXTRAS = {"chase": special.chase, "chase_l1_edge": special.chase_l1_edge, "l1_survival": special.l1_survival,
          "chase_loaded": special.chase_loaded, "chase_shared": special.chase_shared,
          "memcpy": special.memcpy_dtod, "streams": special.streams}
# a full run's extras; the L1 probes (plan h200_l1_edge) run only when named
DEFAULT_EXTRAS = ("chase", "chase_loaded", "chase_shared", "memcpy", "streams")


def run(plan: str, out: Path, *, ncu: bool = True, extras: bool | tuple[str, ...] = True,
        check_only: bool = False, budget_s: float = 540.0) -> None:
    """Check, time and profile the plan's cases, then the measurements that are not one launch
    (`extras`: the default ones, none, or those named)."""
    t0 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    gpu.context()
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    prov = provenance(run_id)
    props = gpu.device_properties()
    (out / "device.json").write_text(json.dumps({"properties": props, "provenance": prov.__dict__,
                                                     "gpu": gpu.identity()}, indent=1))
    spec = DeviceSpec.from_properties(props, name=props["name"])
    print(f"device {spec.name} cc {spec.compute_capability}, {spec.sm_count} SMs, L2 {spec.l2_bytes >> 20} MiB; "
          f"driver {prov.driver}, CUDA {prov.cuda}, PyCUDA {prov.pycuda}, SM clock {prov.sm_clock_mhz}", flush=True)
    rec = Recorder(out / "measurements.csv", prov)
    flusher = gpu.L2Flusher(spec.l2_bytes, mode="read")  # clean lines: no write-backs of the flush itself
    rng = np.random.default_rng(int(time.time()))  # fresh inputs every run
    cases = load_plan(plan)
    todo = [pc for pc in cases if ("check", pc.case_id) not in rec.done]
    failures = 0
    for i, pc in enumerate(todo, 1):
        if time.time() - t0 > budget_s:
            print("time budget reached: stopping (the run can resume)", flush=True)
            break
        if check_only:
            pc = type(pc)(pc.name, pc.check or pc.params, None, False, False)
        rows = measure(pc, spec, flusher, rng)
        failures += any(r.metric == "check_passed" and r.value == 0 for r in rows)
        rec.write(rows)
        if i % 10 == 0 or i == len(todo):
            progress(i, len(todo), pc.case_id, t0)
    if check_only:
        print(f"checked {len(todo)} cases, {failures} failed", flush=True)
        rec.close()
        sys.exit(1 if failures else 0)
    if extras:
        for name, fn in EXTRAS.items():
            if name not in (DEFAULT_EXTRAS if extras is True else extras):
                continue
            try:
                print(f"{name} ...", flush=True)
                rec.write(fn())
            except Exception as exc:  # noqa: BLE001
                print(f"  {name} FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    rec.close()
    print(f"events phase done in {time.time() - t0:.0f}s, {failures} failed cases", flush=True)
    if ncu and shutil.which("ncu"):
        profile_all(plan, out, prov, budget_s - (time.time() - t0))


def profile_all(plan: str, out: Path, prov: Provenance, budget_s: float) -> None:
    t0 = time.time()
    wanted = list(plan_setting(plan, "ncu_metrics", None)
                  or profile.METRICS + (profile.DETAIL_METRICS if plan_setting(plan, "ncu_detail") else []))
    metrics = profile.available_metrics(wanted)
    print(f"ncu: {len(metrics)} of {len(wanted)} metrics known", flush=True)
    rec = Recorder(out / "ncu.csv", prov)
    work = out / "ncu_raw"
    only = plan_setting(plan, "ncu_writeback_only")
    studies = [] if only else profile.planned_studies(plan)
    for study in studies + ([profile.WRITEBACK] if only or plan_setting(plan, "ncu_writeback") else []):
        left = budget_s - (time.time() - t0)
        if left < 20:
            print(f"ncu: no time left for {study}", flush=True)
            continue
        t1 = time.time()
        try:
            wanted = profile.WRITEBACK_METRICS if study == profile.WRITEBACK else metrics
            raw = profile.run_ncu(plan, study, work, wanted, timeout_s=int(left))
        except subprocess.TimeoutExpired:
            print(f"ncu: {study} timed out; keeping what was written", flush=True)
            raw = work / f"ncu_{study}.csv"
        rows = profile.parse(raw, work / f"manifest_{study}.json")
        rec.write(rows)
        print(f"ncu: {study}: {len({r.case_id for r in rows})} launches in {time.time() - t1:.0f}s", flush=True)
    rec.close()
    subprocess.run(["tar", "czf", str(out / "ncu_raw.tar.gz"), "-C", str(out), "ncu_raw"], check=False)
    shutil.rmtree(work, ignore_errors=True)
