"""Which L2 state makes the naive transpose's L2 fill sectors from DRAM? Under ncu without its cache
control, each size and block shape runs in four states, the kernel's DRAM reads and L2 fills counted:

  cold         after a reading flush (the output's sectors are not in L2)
  again        right after `cold` (output and input still in L2 where they fit: valid, dirty)
  out_read     after a flush and a read of the output (its sectors valid and clean in L2)
  out_written  after a flush and a memset of the output (its sectors valid and dirty)

    source .gpu/setup.sh && python3 experiments/fills_check.py --out $OUT

Writes fills_check.csv (one row per launch and metric, with provenance) and checks every output.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "lts__d_sectors_fill_device.sum",
           "lts__t_sectors_srcunit_tex_op_write.sum"]
STATES = ["cold", "again", "out_read", "out_written"]
CASES = [(n, r) for n in (2048, 4096) for r in (2, 8)]


def worker() -> None:
    from perfmodel.suite import gpu
    from perfmodel.suite.runner import Bound

    gpu.context()
    flush = gpu.L2Flusher(int(gpu.device_properties()["l2CacheSize"]), mode="read")
    rng = np.random.default_rng(int(time.time()))
    for n, r in CASES:
        params = {"rows": n, "cols": n, "block_rows": r}
        bound = Bound.make("transpose.naive_rows", params)
        setup = bound.case.setup(params, rng)
        bufs, args = bound.upload(setup)
        run, out = bound.runner(args), bufs.device["out"]
        for state in STATES:
            if state != "again":
                flush()
            if state == "out_read":
                flush.read(out, n * n)
            if state == "out_written":
                bufs.poison("out")
            run()
            gpu.synchronize()
            got = bufs.download("out")
            if not np.array_equal(got, setup.inputs["in"].T):
                sys.exit(f"transpose.naive_rows {params} {state}: wrong output")
        bufs.free()
        print(f"  {n}² x {r} rows: 4 states checked", file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    from perfmodel.suite.campaign import provenance
    from perfmodel.suite.profile import profile_script

    rows = profile_script(__file__, "^transpose_naive$", METRICS, a.out / "ncu_fills.csv", [])
    prov = provenance(time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    launches = [(n, r, s) for n, r in CASES for s in STATES]
    if len(rows) != len(launches):
        sys.exit(f"{len(rows)} profiled launches, {len(launches)} expected")
    with open(a.out / "fills_check.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rows", "block_rows", "state", "metric", "value", "device", "driver", "commit", "utc"])
        for (n, r, s), rec in zip(launches, rows, strict=True):
            for m in METRICS:
                w.writerow([n, r, s, m, rec[m].replace(",", ""), prov.device, prov.driver, prov.commit, prov.utc])
                if m == "dram__bytes_read.sum":
                    print(f"{n:5d}² x {r:2d} rows {s:12s} DRAM read {float(rec[m].replace(',', '')) / 1e6:8.2f} MB "
                          f"(input {4 * n * n / 1e6:.2f} MB)")


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        main()
