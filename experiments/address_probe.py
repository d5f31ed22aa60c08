"""Does where a matmul's arrays lie in memory change how much of B L2 keeps? TILE 32 at 3072^3 read 843 MB
from DRAM alone in a process and 1007 MB inside plan h200_miss_repeat on the same card (plan h200_context).
Here, in one process, each shape is allocated afresh behind a pad buffer of P MiB (so A, B and C land on other
physical pages) and launched twice per allocation; run under ncu:

    ncu --clock-control none --metrics dram__bytes_read.sum --csv --page raw -k regex:matmul_ \
        --log-file $OUT/address/ncu.csv python3 experiments/address_probe.py --out $OUT/address \
        --case matmul.tiled --params tile=32 --shapes 3072,3072,3072 ...

Writes addresses.txt (one line per allocation, in launch order); C is checked against numpy once per shape."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from placement import shape  # experiments/placement.py: "M,N,K"

from perfmodel.suite import gpu
from perfmodel.suite.registry import get

PADS_MIB = (0, 2, 8, 18, 34, 66, 130, 1, 3, 5)


def probe(case: str, extra: dict[str, int], m: int, n: int, k: int, out: list[str], launches: int = 2) -> None:
    kc = get(case)
    p = kc.bind(m=m, n=n, k=k, **extra)
    launch, entry = kc.launch(p), kc.entry(p)
    kern = gpu.kernel("matmul.cu", entry)
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    for i, pad in enumerate(PADS_MIB):
        bufs = gpu.Buffers()
        bufs.empty("pad", (max(1, pad << 18),))  # pad MiB of floats, held while the matmul runs
        args = [bufs.upload("A", a), bufs.upload("B", b), bufs.empty("C", (m, n)), np.int32(m), np.int32(n),
                np.int32(k)]
        bufs.poison("C")
        for _ in range(launches):
            gpu.launch(kern, launch.grid, launch.block, args)
        gpu.synchronize()
        if i == 0:
            ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
            err = float(np.abs(bufs.download("C") - ref).max() / np.abs(ref).max())
            if not err < 1e-4:
                raise SystemExit(f"{entry} {m}x{n}x{k}: C differs from numpy by {err:.1e} (limit 1e-4)")
        out.append(f"case={case} params={','.join(f'{key}={v}' for key, v in sorted(p.items()))} pad_mib={pad} "
                   f"a={int(args[0]):#x} b={int(args[1]):#x} c={int(args[2]):#x} launches={launches}")
        print(out[-1], flush=True)
        bufs.free()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--case", default="matmul.tiled")
    ap.add_argument("--params", default="tile=32", help="the case's parameters besides m, n, k: tile=32[,coarse=2]")
    ap.add_argument("--shapes", type=shape, nargs="+", default=[(3072, 3072, 3072)])
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    print(gpu.software_versions(), flush=True)
    extra = {key: int(v) for key, v in (kv.split("=") for kv in a.params.split(","))}
    lines: list[str] = []
    for m, n, k in a.shapes:
        probe(a.case, extra, m, n, k, lines)
    with open(a.out / "addresses.txt", "a") as f:
        f.write("\n".join(lines) + "\n")
