"""Does where B lies in memory change how much of it L2 keeps? TILE 32 at 3072^3 read 843 MB from DRAM alone in a
process and 1007 MB inside plan h200_miss_repeat on the same card (plan h200_context). Here, in one process, a
pad buffer of P MiB is allocated before A, B and C, moving them; run under ncu:

    ncu --clock-control none --metrics dram__bytes_read.sum --csv --page raw -k regex:matmul_tiled_32 \
        --log-file $OUT/address/ncu.csv python3 experiments/address_probe.py --out $OUT/address

Prints each pad's B address; C is checked against numpy once."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from perfmodel.suite import gpu

PADS_MIB = (0, 2, 8, 18, 34, 66, 130, 1, 3, 5)


def main(out: Path, m: int = 3072, n: int = 3072, k: int = 3072, launches: int = 2) -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    kern = gpu.kernel("matmul.cu", "matmul_tiled_32")
    grid = ((n + 31) // 32, (m + 31) // 32, 1)
    lines = []
    for i, pad in enumerate(PADS_MIB):
        bufs = gpu.Buffers()
        bufs.empty("pad", (max(1, pad << 18),))  # pad MiB of floats, held while the matmul runs
        args = [bufs.upload("A", a), bufs.upload("B", b), bufs.empty("C", (m, n)), np.int32(m), np.int32(n),
                np.int32(k)]
        bufs.poison("C")
        for _ in range(launches):
            gpu.launch(kern, grid, (32, 32, 1), args)
        gpu.synchronize()
        if i == 0:
            ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
            err = float(np.abs(bufs.download("C") - ref).max() / np.abs(ref).max())
            if not err < 1e-4:
                raise SystemExit(f"C differs from numpy by {err:.1e} (limit 1e-4)")
        lines.append(f"pad_mib={pad} a={int(args[0]):#x} b={int(args[1]):#x} c={int(args[2]):#x} launches={launches}")
        print(lines[-1], flush=True)
        bufs.free()
    (out / "addresses.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    print(gpu.software_versions(), flush=True)
    main(a.out)
