"""Where a matmul's blocks run: each block's SM and its start and end on the global timer.

    source .gpu/setup.sh && python3 experiments/placement.py --out $OUT \
        [--case matmul.naive|matmul.tiled|matmul.tiled32|matmul.coarsened{1,2,4,8}] [--shapes M,N,K ...]

Writes placement-<case>-m<M>-n<N>-k<K>.npz (block ids row-major over the grid; sm, start_ns, end_ns:
three launches) per shape and checks C against numpy. The L1s of matmul.naive (at m = 1024 and 2048)
and matmul.tiled at TILE 16 (on grids wider than the SMs) request up to 20 % fewer sectors from L2
than their blocks' distinct ones: do blocks that share A rows or B columns share an SM at the same time?
The same schedules, replayed through the L2 (perfmodel.l2replay), explain how much of B a matmul re-reads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from perfmodel.suite import gpu

ENTRIES = {"matmul.naive": ("matmul_naive_placed", 16, 1), "matmul.tiled": ("matmul_tiled_16_placed", 16, 1),
           "matmul.tiled32": ("matmul_tiled_32_placed", 32, 1),
           "matmul.coarsened1": ("matmul_coarsened_32_1_placed", 32, 1),
           "matmul.coarsened2": ("matmul_coarsened_32_2_placed", 32, 2),
           "matmul.coarsened4": ("matmul_coarsened_32_4_placed", 32, 4),
           "matmul.coarsened8": ("matmul_coarsened_32_8_placed", 32, 8)}  # kernel, block edge, C tiles a block


def file_name(case: str, m: int, n: int, k: int) -> str:
    return f"placement-{case.split('.')[1]}-m{m}-n{n}-k{k}.npz"  # tiled32: TILE 32; coarsened2: COARSE 2


def run(case: str, m: int, n: int, k: int, out: Path, rng: np.random.Generator) -> None:
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    entry, edge, coarse = ENTRIES[case]
    kern = gpu.kernel("matmul.cu", entry)
    bufs = gpu.Buffers()
    grid = ((n + edge * coarse - 1) // (edge * coarse), (m + edge - 1) // edge, 1)
    blocks = grid[0] * grid[1]
    args = [bufs.upload("A", a), bufs.upload("B", b), bufs.empty("C", (m, n)), np.int32(m), np.int32(n),
            np.int32(k), bufs.empty("place", (blocks, 3), np.uint64)]
    bufs.poison("C")
    runs = []
    for _ in range(3):  # three launches: is the placement the same each time?
        gpu.launch(kern, grid, (edge, edge, 1), args)
        gpu.synchronize()
        runs.append(bufs.download("place"))
    c = bufs.download("C")
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    err = float(np.abs(c - ref).max() / np.abs(ref).max())
    bufs.free()
    if not err < 1e-4:
        raise SystemExit(f"{case} {m}x{n}x{k}: C differs from numpy by {err:.1e} (limit 1e-4)")
    place = np.stack(runs)
    np.savez_compressed(out / file_name(case, m, n, k), sm=place[..., 0].astype(np.int16),
                        start_ns=place[..., 1].astype(np.int64), end_ns=place[..., 2].astype(np.int64),
                        grid=np.array(grid), rel_error=err)
    first = place[0]
    t0 = first[:, 1].astype(np.int64) - int(first[:, 1].min())
    print(f"{case} m={m} n={n} k={k}: {blocks} blocks on {len(np.unique(first[:, 0]))} SMs, check rel error "
          f"{err:.1e}, block time median {np.median(first[:, 2] - first[:, 1]) / 1e3:.1f} us, "
          f"first 12 blocks' SMs {first[:12, 0].tolist()}, start order of blocks 0..7 {np.argsort(t0)[:8].tolist()}, "
          f"same SMs in all launches: {bool((place[:, :, 0] == place[0, :, 0]).all())}", flush=True)


def shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(v) for v in text.split(","))
    return m, n, k


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--case", choices=sorted(ENTRIES), default="matmul.naive")
    ap.add_argument("--shapes", type=shape, nargs="+", default=[(1000,) * 3, (1024,) * 3, (2048,) * 3])
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    print(gpu.software_versions(), flush=True)
    rng = np.random.default_rng(11)
    for m, n, k in a.shapes:
        run(a.case, m, n, k, a.out, rng)
