"""When the two blocks of an SM read each other's tiles in probe.barrier_rounds / barrier_waves.

    source .gpu/setup.sh && python3 experiments/barrier_phase.py --out $OUT/phase
    ncu --clock-control none --kernel-name regex:_timed --csv --log-file $OUT/ncu.csv \
        --metrics l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,\
l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum \
        python3 experiments/barrier_phase.py --out $OUT/under-ncu --launches 1 --no-times

At two blocks per SM (no dynamic shared memory: a ~240 KB L1) the probes' L1s serve 0.4-9 % of
the tile loads (ncu), where the addresses alone give none: block b reads tile (b + r) mod 512 and
its SM's other block sits 80-132 blocks away. Each case runs its `_timed` twin (thread (0, 0)
keeps every 16th round's start on the SM clock in shared memory, and its SM): the output is checked
against numpy, the stamps kept per launch (phase-<case>-<params>.npz) with the replayed L1 hit share
at several capacities printed (perfmodel.round_replay), and both kernels timed with CUDA events (does
stamping move the rounds?)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from perfmodel.round_replay import POOL_TILES, TRACED_CASES, RoundTrace, l1_tile_hits, save_traces, trace_file
from perfmodel.suite import gpu
from perfmodel.suite.runner import Bound, relative_error

STRIDE, SLOTS = 16, 256  # kernels/probes.cu STAMP_STRIDE, STAMP_SLOTS
CAPACITIES = (32, 44, 52, 60)  # tiles of 4 KB an SM's L1 holds, replayed


def run(case_name: str, p: dict[str, int], launches: int, out: Path, rng: np.random.Generator,
        timing: bool = True) -> None:
    bound = Bound.make(case_name, p)  # the suite's kernel, its inputs uploaded and outputs poisoned
    case, plain = bound.case, bound.kernel
    shape, setup = case.launch(p), case.setup(p, rng)
    kern = gpu.kernel(case.source, case.entry(p) + "_timed")
    bufs, args = bound.upload(setup)
    blocks, rounds = shape.grid[0], p["rounds"]
    timed_args = [*args, bufs.empty("stamps", (blocks, SLOTS + 1), np.int64)]
    smem = case.dynamic_smem(p)
    kept = -(-rounds // STRIDE)  # stamped rounds
    traces: list[RoundTrace] = []
    for _ in range(launches):
        gpu.launch(kern, shape.grid, shape.block, timed_args, smem)
        gpu.synchronize()
        st = bufs.download("stamps")
        sm = st[:, SLOTS].astype(np.int16)
        base = np.full(sm.max() + 1, np.iinfo(np.int64).max)
        np.minimum.at(base, sm, st[:, 0])
        traces.append(RoundTrace(sm, st[:, :kept] - base[sm][:, None], STRIDE, rounds))  # from each SM's first
    err = max(relative_error(bufs.download(k), v) for k, v in setup.expected_values().items())
    if not err < setup.rtol:
        raise SystemExit(f"{case_name} {p}: output differs from numpy by {err:.1e} (limit {setup.rtol:.0e})")
    # does stamping move the rounds? both kernels' CUDA-event times
    times = {}
    for name, k, a in (("untimed_s", plain, args), ("timed_s", kern, timed_args)):
        if timing:
            launch = lambda k=k, a=a: gpu.launch(k, shape.grid, shape.block, a, smem)  # noqa: E731
            times[name] = float(np.median(gpu.time_launches(launch, reps=7)))
    bufs.free()
    shares = [l1_tile_hits(t, POOL_TILES, p.get("loads", 1), c) for t in traces for c in CAPACITIES]
    save_traces(out / trace_file(case_name, p), traces, rel_error=err, **times)
    print(json.dumps({"case": case_name, "params": p, "rel_error": err, **times, "capacities_tiles": CAPACITIES,
                      "replayed_hit_share": np.round(shares, 4).reshape(launches, -1).tolist()}), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--launches", type=int, default=3)
    ap.add_argument("--no-times", action="store_true", help="skip the event timing (under ncu)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    print(gpu.software_versions(), flush=True)
    rng = np.random.default_rng(12)
    for i, (name, params) in enumerate(TRACED_CASES):
        print(f"[{i + 1}/{len(TRACED_CASES)}] {name} {params}", flush=True)
        run(name, params, a.launches, a.out, rng, timing=not a.no_times)
