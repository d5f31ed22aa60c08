"""Does the way L2 is flushed before each timed launch change the time? The suite's flush writes a
buffer of twice the L2 size (memset), which leaves dirty lines the next kernel must write back.
Times a few cases after a write flush and after a read flush, and prints both beside each other.

    source .gpu/setup.sh && python3 experiments/flush_check.py --out $OUT
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from perfmodel.measurements import Recorder
from perfmodel.suite import gpu
from perfmodel.suite.campaign import provenance
from perfmodel.suite.plan import load_plan
from perfmodel.suite.runner import Bound, time_case, time_rows

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", default="experiments/plans/h200_flush.toml")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    gpu.context()
    import time

    prov = provenance(time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    rec = Recorder(a.out / "measurements.csv", prov)
    props = gpu.device_properties()
    l2 = int(props["l2CacheSize"])
    flushers = {"write": gpu.L2Flusher(l2), "read": gpu.L2Flusher(l2, mode="read")}
    rng = np.random.default_rng(int(time.time()))
    for pc in load_plan(a.plan):
        if not pc.time or not pc.cold:
            continue
        bound = Bound.make(pc.name, pc.params)
        medians = {}
        for mode, fl in flushers.items():
            t = time_case(bound, rng, fl, reps=30, budget_s=0.3)
            medians[mode] = float(np.median(t))
            rec.write(list(time_rows(bound.case.study, pc.name, pc.params, t, metric=f"time_s_flush_{mode}")))
        print(f"{pc.case_id:70s} write-flush {medians['write'] * 1e6:10.2f} us  read-flush "
              f"{medians['read'] * 1e6:10.2f} us", flush=True)
    rec.close()
