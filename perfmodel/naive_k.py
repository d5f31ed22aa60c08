"""The naive matmul's L1 misses against k (checks/naive_k and naive_unroll; a known gap).

At held-out naive shapes with k = 1501, 2323, 2545, 2677 and 2803 the model predicted 11-39 % fewer L2 sectors
than the L1s requested; it counts each block's own sectors of A and B once (its L1 keeps them while the
block runs). The
sweep (experiments/naive_k_specs.txt) - every k at 2300-2340, 2665-2689 and 2790-2820 at m = n = 1024, every
29th k from 1001 to 4090, and the held-out shapes' m and n around their k - shows the excess following k
modulo 16, the times nvcc unrolls the k loop (the SASS issues 16 A and 16 B loads a trip): A's rows start k
floats apart, so k sets where each row's burst of loads falls in its sectors. k = 5 and 13 mod 16 miss the
most, then 3 and 11, then 1, 2, 6, 9 and 10; the residues 0, 4, 7, 8, 12, 14 and 15 lie on the model at
m = n = 1024 (at 1092 x 1049, 7 runs 8-12 % above it and 4 5 %). The excess grows with k (k = 5 mod 16 at
m = n = 1024: +6 % at 1349, +40 % at 3669) and with the shape (k = 2805 at 1092 x 1049: +76 %, at
1024 x 1024: +31 %). ncu's set-conflict counter does not follow it.

The same kernel with its loop unrolled once or 4 times (matmul.naive_unrolled, experiments/
naive_unroll_specs.txt, another card) settles the cause: unrolled once, no k stands out, and every k
requests 11-13 % less than the model's per-block count (L1 shares more between blocks); unrolled 4 times, the
excess follows k mod 4 (k = 1 mod 4 most). Which lines L1 drops early, and why the burst decides it, is not
found, so the model does not predict it."""

from __future__ import annotations

import json

import pandas as pd

from .allocation import launch_counts
from .devices import device as lookup
from .memory.coalescing import SECTOR_BYTES
from .sass import functions

FOLDER = "naive_k"  # matmul.naive over k
UNROLLED = "naive_unroll"  # matmul.naive_unrolled (unroll 1 and 4) beside matmul.naive
REQUESTED = "l1tex__m_xbar2l1tex_read_sectors.sum"  # the L2 read sectors the L1s request (l2_requested_read_sectors)


def unroll(device_key: str = "h200") -> int:
    """How many k the naive kernel's main loop takes a trip: its recorded SASS's largest loop's global loads
    over the two (A and B) each k issues."""
    loops = [r for r in functions(device_key)["matmul_naive"].regions if r.depth > 0]
    return max(r.kinds.get("global_ld", 0) for r in loops) // 2


def sweep(device: str = "h200", folder: str = FOLDER) -> pd.DataFrame:
    """One row per swept launch pair: case, unroll (matmul.naive's: `unroll`), m, n, k, residue (k modulo
    16, the default kernel's unroll) and requested_sectors (the mean of its two launches); empty where not
    recorded."""
    counts = launch_counts(device, folder, REQUESTED)
    cols = ["case", "unroll", "m", "n", "k", "residue", "requested_sectors"]
    if counts.empty:
        return pd.DataFrame(columns=cols)
    params = pd.json_normalize(counts.params.map(json.loads).tolist())
    default = unroll(lookup(device).key)
    out = pd.DataFrame({"case": counts.case, "m": params.m, "n": params.n, "k": params.k,
                        "unroll": params.get("unroll", pd.Series(index=params.index, dtype=float)).fillna(default),
                        "requested_sectors": (counts["first"] + counts["second"]) / 2})
    out["unroll"] = out.unroll.astype(int)
    out["residue"] = out.k % default
    return out[cols]


def against_model(device: str, shapes: pd.DataFrame) -> pd.DataFrame:
    """`shapes` (rows of `sweep`) with the model's requested sectors and measured over predicted."""
    from . import predict

    pred = [predict(case, device, m=int(m), n=int(n), k=int(k),
                    **({"unroll": int(u)} if case != "matmul.naive" else {})).l2_read_bytes / SECTOR_BYTES
            for case, u, m, n, k in zip(shapes.case, shapes.unroll, shapes.m, shapes.n, shapes.k, strict=True)]
    return shapes.assign(predicted_sectors=pred, ratio=shapes.requested_sectors.to_numpy() / pred)
