"""Does where a kernel's arrays lie in memory change how much of them L2 keeps? TILE 32 at 3072^3 read 843 MB
from DRAM alone in a process and 1007 MB inside plan h200_miss_repeat on the same card (plan h200_context).
Here, in one process, each case is allocated afresh behind a pad buffer of P MiB (so its arrays land on other
physical pages) and launched twice per allocation; run under ncu:

    ncu --clock-control none --metrics dram__bytes_read.sum --csv --page raw -k regex:matmul_ \
        --log-file $OUT/address/ncu.csv python3 experiments/address_probe.py --out $OUT/address \
        --case matmul.tiled --params tile=32 --shapes 3072,3072,3072 ...

--shapes gives m,n,k of a matmul; --sizes instead gives n of any other registry case (probe.l2_read ...).
Appends to addresses.txt (one line per allocation, in launch order); the first allocation's outputs are checked
against the case's numpy reference."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from placement import shape  # experiments/placement.py: "M,N,K"

from perfmodel.suite import gpu
from perfmodel.suite.registry import get
from perfmodel.suite.runner import Bound, check_outputs

PADS_MIB = (0, 2, 8, 18, 34, 66, 130, 1, 3, 5)


def probe(case: str, params: dict[str, int], out: list[str], launches: int = 2, allocations: int = 10) -> None:
    bound = Bound.make(case, get(case).bind(**params))
    setup = bound.case.setup(bound.params, np.random.default_rng(sum(params.values())))
    for i, pad in enumerate(PADS_MIB[:allocations]):
        held = gpu.Buffers()
        held.empty("pad", (max(1, pad << 18),))  # pad MiB of floats, held while the case runs
        bufs, args = bound.upload(setup)
        run = bound.runner(args)
        for _ in range(launches):
            run()
        gpu.synchronize()
        if i == 0:
            check_outputs(bound, setup, bufs)  # CheckFailed on a wrong result
        where = " ".join(f"{k.lower()}={int(bufs.device[k]):#x}" for k in bufs.device)
        out.append(f"case={case} params={','.join(f'{k}={v}' for k, v in sorted(bound.params.items()))} "
                   f"pad_mib={pad} {where} launches={launches}")
        print(out[-1], flush=True)
        bufs.free()
        held.free()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--case", default="matmul.tiled")
    ap.add_argument("--params", default="tile=32", help="the case's parameters besides the size: tile=32[,coarse=2]")
    ap.add_argument("--shapes", type=shape, nargs="*", default=[], help="matmul sizes M,N,K")
    ap.add_argument("--sizes", type=int, nargs="*", default=[], help="n of a case sized by n")
    ap.add_argument("--allocations", type=int, default=len(PADS_MIB), choices=range(1, len(PADS_MIB) + 1),
                    metavar=f"1-{len(PADS_MIB)}", help="allocations per shape (the first of the pads)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    print(gpu.software_versions(), flush=True)
    extra = {key: int(v) for key, v in (kv.split("=") for kv in a.params.split(",") if kv)}
    lines: list[str] = []
    for m, n, k in a.shapes:
        probe(a.case, {"m": m, "n": n, "k": k, **extra}, lines, allocations=a.allocations)
    for n in a.sizes:
        probe(a.case, {"n": n, **extra}, lines, allocations=a.allocations)
    with open(a.out / "addresses.txt", "a") as f:
        f.write("\n".join(lines) + "\n")
