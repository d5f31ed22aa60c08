"""In what order do a row transpose's blocks write, and does that order explain how many of the
sectors two blocks share L2 loses (ceilings.PartialLaw, fitted on probe.split_store's launch order)?

The stamped twins of transpose.rows / rows_swapped (kernels/transpose.cu, STAMP) take a ticket from
one atomic counter as their stores begin and read %globaltimer: ticket k is the k-th block to write.
Each case runs once under ncu (DRAM reads, L2 write sectors; the tickets of that same launch are
kept), then without ncu: timed against the plain kernel (the stamp's cost), tickets kept again.

    source .gpu/setup.sh && python3 experiments/store_order.py --out $OUT/order

Writes store_order.csv (one row per case, launch and metric, with provenance) and stamps_{ncu,events}.npz
(per case and launch: each block's ticket minus its linear index, and its globaltimer in ns from
the first). Every output is checked against numpy.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

METRICS = ["dram__bytes_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum", "gpu__time_duration.sum"]
# (rows, cols, blocks per SM, swapped): the suite's padded row transposes that miss, the aligned twin
CASES = [(r, c, b, False) for r, c in ((9001, 8556), (3001, 8556), (9001, 4278), (9000, 8556))
         for b in (2, 4, 6, 8)] + [(9001, 8556, 8, True), (3001, 8556, 8, True)]
REPS = 20


def label(case: tuple[int, int, int, bool]) -> str:
    r, c, b, s = case
    return f"{'swapped' if s else 'rows'}_{r}x{c}_b{b}"


def one_case(case: tuple[int, int, int, bool], profiled: bool, flush, rng: np.random.Generator,
             stamps: dict[str, np.ndarray], times: list[tuple[str, str, float]]) -> None:
    """Check the stamped twin's output and tickets, keep them; without ncu, time both kernels."""
    from perfmodel.suite import gpu
    from perfmodel.suite.runner import Bound

    rows, cols, bps, swapped = case
    name = "transpose.rows_swapped" if swapped else "transpose.rows_capped"
    params = {"rows": rows, "cols": cols, "pad": 1} | ({} if swapped else {"blocks_per_sm": bps})
    plain = Bound.make(name, params)
    grid, block, smem = plain.launch_geometry
    stamped = gpu.kernel("transpose.cu", plain.kernel.name.replace("_32_1", "_stamped_32_1"))
    gpu.set_max_dynamic_smem(stamped, smem)
    setup = plain.case.setup(params, rng)
    bufs, args = plain.upload(setup)
    blocks = int(np.prod(grid))
    ticket, order, when = (bufs.empty("ticket", (1,), np.uint32), bufs.empty("order", (blocks,), np.uint32),
                           bufs.empty("when", (blocks,), np.uint64))

    def run_stamped() -> None:
        gpu._driver().memset_d32(ticket, 0, 1)
        gpu.launch(stamped, grid, block, [*args, ticket, order, when], smem)

    def keep(tag: str) -> None:
        bufs.poison("order")
        flush()
        run_stamped()
        gpu.synchronize()
        if not np.array_equal(bufs.download("out"), setup.inputs["in"].T):
            sys.exit(f"{label(case)} {tag}: wrong output")
        o = bufs.download("order").astype(np.int64)
        if not np.array_equal(np.sort(o), np.arange(blocks)):
            sys.exit(f"{label(case)} {tag}: tickets are not a permutation of the blocks")
        w = bufs.download("when")
        stamps[f"{label(case)}/{tag}/ticket_minus_index"] = (o - np.arange(blocks)).astype(np.int32)
        stamps[f"{label(case)}/{tag}/ns"] = (w - w.min()).astype(np.uint32)

    try:
        if profiled:
            keep("ncu")
            return
        keep("events")
        bufs.poison("out")
        for tag, run in (("plain", plain.runner(args)), ("stamped", run_stamped)):
            t = gpu.time_launches(run, reps=REPS, before=flush)
            times.append((label(case), tag, float(np.median(t))))
            times.append((label(case), tag + "_cv", float(np.std(t) / np.mean(t))))
        if not np.array_equal(bufs.download("out"), setup.inputs["in"].T):
            sys.exit(f"{label(case)}: wrong output after timing")
    finally:
        bufs.free()


def worker(out: Path, profiled: bool) -> None:
    from perfmodel.suite import gpu

    gpu.context()
    flush = gpu.L2Flusher(int(gpu.device_properties()["l2CacheSize"]), mode="read")
    rng = np.random.default_rng(int(time.time()))
    stamps: dict[str, np.ndarray] = {}
    times: list[tuple[str, str, float]] = []
    for i, case in enumerate(CASES):
        one_case(case, profiled, flush, rng, stamps, times)
        print(f"  [{i + 1}/{len(CASES)}] {label(case)} {'ncu' if profiled else 'timed'}", file=sys.stderr, flush=True)
    np.savez_compressed(out / f"stamps_{'ncu' if profiled else 'events'}.npz", **stamps)
    if times:
        with open(out / "times.csv", "w", newline="") as f:
            csv.writer(f).writerows([("case", "kernel", "value"), *times])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    from perfmodel.suite.campaign import provenance
    from perfmodel.suite.profile import profile_script

    print("profiling the stamped kernels under ncu", file=sys.stderr, flush=True)
    recs = profile_script(__file__, "stamped", METRICS, a.out / "ncu_order.csv", ["ncu", "--out", str(a.out)], 400)
    print("timing plain and stamped kernels", file=sys.stderr, flush=True)
    worker(a.out, profiled=False)
    prov = provenance(time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    if len(recs) != len(CASES):
        sys.exit(f"{len(recs)} profiled launches, {len(CASES)} expected")
    with open(a.out / "times.csv") as f:
        timed = list(csv.DictReader(f))
    with open(a.out / "store_order.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "rows", "cols", "blocks_per_sm", "swapped", "metric", "value", "source",
                    "device", "driver", "commit", "utc"])
        for case, rec in zip(CASES, recs, strict=True):
            tail = [prov.device, prov.driver, prov.commit, prov.utc]
            for m in METRICS:
                w.writerow([label(case), *case, m, rec[m].replace(",", ""), "ncu", *tail])
            for t in timed:
                if t["case"] == label(case):
                    w.writerow([label(case), *case, f"time_s_{t['kernel']}", t["value"], "events", *tail])
            print(f"{label(case):24s} DRAM read {float(rec[METRICS[0]].replace(',', '')) / 1e6:8.2f} MB", flush=True)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--worker")
        ap.add_argument("--out", type=Path)
        w = ap.parse_args()
        worker(w.out, profiled=True)
    else:
        main()
