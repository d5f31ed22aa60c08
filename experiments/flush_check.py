"""Does the state the GPU is in before each timed launch change the time? Times each planned case
with CUDA events after each of several preparations and prints the medians side by side:

  write       memset of twice the L2 size (leaves an L2 of dirty lines)
  read        reading flush (clean lines; the suite's default)
  read_spin   reading flush, then one warp spinning 50 us: the host enqueues the timed launch while
              the GPU is still busy, so no host launch latency falls between the events
  read2_spin  two reading flushes, then the spin
  spin        the spin alone (the previous repetition's lines still in L2)

    source .gpu/setup.sh && python3 experiments/flush_check.py --out $OUT [--modes read,read_spin]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from perfmodel.measurements import Recorder
from perfmodel.suite import gpu
from perfmodel.suite.campaign import provenance
from perfmodel.suite.plan import load_plan
from perfmodel.suite.runner import Bound, time_case, time_rows


def preparations(l2_bytes: int) -> dict:
    write, read, spin = gpu.L2Flusher(l2_bytes), gpu.L2Flusher(l2_bytes, mode="read"), gpu.Spinner()

    def chain(*steps):
        def run() -> None:
            for step in steps:
                step()
        return run

    return {"write": write, "read": read, "read_spin": chain(read, spin), "read2_spin": chain(read, read, spin),
            "spin": spin}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", default="experiments/plans/h200_flush.toml")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--modes", default="write,read", help="comma-separated, from: write, read, read_spin, "
                                                          "read2_spin, spin")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    gpu.context()
    prov = provenance(time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    rec = Recorder(a.out / "measurements.csv", prov)
    prep = preparations(int(gpu.device_properties()["l2CacheSize"]))
    modes = a.modes.split(",")
    unknown = [m for m in modes if m not in prep]
    if unknown:
        raise SystemExit(f"unknown mode(s) {unknown}; known: {list(prep)}")
    rng = np.random.default_rng(int(time.time()))
    cases = [pc for pc in load_plan(a.plan) if pc.time]
    for i, pc in enumerate(cases, 1):
        bound = Bound.make(pc.name, pc.params)
        medians = {}
        for mode in modes:
            t = time_case(bound, rng, prep[mode], reps=30, budget_s=0.3)
            medians[mode] = float(np.median(t))
            rec.write(list(time_rows(bound.case.study, pc.name, pc.params, t, metric=f"time_s_flush_{mode}")))
        shown = "  ".join(f"{m} {v * 1e6:9.2f} us" for m, v in medians.items())
        print(f"[{i:3d}/{len(cases)}] {pc.case_id:66s} {shown}", flush=True)
    rec.close()
