"""When the two blocks of an SM read each other's tiles in probe.barrier_rounds / barrier_waves.

    source .gpu/setup.sh && python3 experiments/barrier_phase.py --out $OUT/phase
    ncu --clock-control none --kernel-name regex:_timed --csv --log-file $OUT/ncu.csv \
        --metrics l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,\
l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum \
        python3 experiments/barrier_phase.py --out $OUT/under-ncu --launches 1

At two blocks per SM (no dynamic shared memory: a ~240 KB L1) the probes' L1s serve 0.4-9 % of
the tile loads (ncu), where the addresses alone give none: block b reads tile (b + r) mod 512 and
its SM's other block sits ~84-132 blocks away. Each case runs its `_timed` twin (thread (0, 0)
stamps every round's start on the SM clock, and its SM): the output is checked against numpy, and
per launch the stamps of every STRIDE-th round are kept (phase-<case>-<params>.npz) with the replayed
L1 hit share at several capacities printed (perfmodel.round_replay)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from perfmodel.round_replay import RoundTrace, l1_tile_hits
from perfmodel.suite import gpu
from perfmodel.suite.cases.probes import POOL_TILES
from perfmodel.suite.registry import get
from perfmodel.suite.runner import relative_error

STRIDE = 4
CAPACITIES = (32, 44, 52, 60)  # tiles of 4 KB an SM's L1 holds, replayed
CASES = [("probe.barrier_rounds", {"blocks_per_sm": 2, "rounds": rounds, "work": work})
         for rounds in (1024, 4096) for work in (0, 32)]
CASES += [("probe.barrier_waves", {"blocks_per_sm": 2, "loads": loads, "rounds": rounds, "waves": waves, "work": 32})
          for loads in (1, 2) for rounds in (128, 512) for waves in (1, 8)]


def file_name(case: str, p: dict[str, int]) -> str:
    return f"phase-{case.split('.')[1]}-" + "-".join(f"{k}{v}" for k, v in sorted(p.items())) + ".npz"


def run(case_name: str, p: dict[str, int], launches: int, out: Path, rng: np.random.Generator) -> None:
    case = get(case_name)
    shape, setup = case.launch(p), case.setup(p, rng)
    kern = gpu.kernel(case.source, case.entry(p) + "_timed")
    bufs = gpu.Buffers()
    for name, host in setup.inputs.items():
        bufs.upload(name, host)
    for name, (oshape, dtype) in setup.output_shapes().items():
        bufs.empty(name, oshape, dtype)
        bufs.poison(name)
    blocks, rounds = shape.grid[0], p["rounds"]
    args = [bufs.device[a] if isinstance(a, str) else a for a in setup.args]
    args.append(bufs.empty("stamps", (blocks, rounds + 1), np.int64))
    smem = case.dynamic_smem(p)
    gpu.set_max_dynamic_smem(kern, smem)
    traces: list[RoundTrace] = []
    shares: list[float] = []
    for _ in range(launches):
        gpu.launch(kern, shape.grid, shape.block, args, smem)
        gpu.synchronize()
        st = bufs.download("stamps")
        sm = st[:, rounds].astype(np.int16)
        base = np.full(sm.max() + 1, np.iinfo(np.int64).max)
        np.minimum.at(base, sm, st[:, 0])
        full = RoundTrace(sm, st[:, :rounds] - base[sm][:, None], 1, rounds)  # each SM's clock from its first round
        traces.append(RoundTrace(sm, full.clock[:, ::STRIDE], STRIDE, rounds))
        if len(traces) == 1:  # the first launch replayed at full resolution (the others offline, thinned)
            shares = [l1_tile_hits(full, POOL_TILES, p.get("loads", 1), c) for c in CAPACITIES]
    err = max(relative_error(bufs.download(k), v) for k, v in setup.expected_values().items())
    bufs.free()
    if not err < setup.rtol:
        raise SystemExit(f"{case_name} {p}: output differs from numpy by {err:.1e} (limit {setup.rtol:.0e})")
    np.savez_compressed(out / file_name(case_name, p), sm=np.stack([t.sm for t in traces]),
                        clock=np.stack([t.clock.astype(np.int32) for t in traces]), stride=STRIDE, rounds=rounds,
                        capacities=np.array(CAPACITIES), first_replayed_hit_share=np.array(shares), rel_error=err)
    print(json.dumps({"case": case_name, "params": p, "rel_error": err, "capacities_tiles": CAPACITIES,
                      "first_replayed_hit_share": [round(s, 4) for s in shares]}), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--launches", type=int, default=3)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    print(gpu.software_versions(), flush=True)
    rng = np.random.default_rng(12)
    for i, (name, params) in enumerate(CASES):
        print(f"[{i + 1}/{len(CASES)}] {name} {params}", flush=True)
        run(name, params, a.launches, a.out, rng)
