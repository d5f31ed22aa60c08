"""The naive matmul's L1 misses against k (checks/naive_k, experiments/naive_k_specs.txt; a known gap).

Held-out naive shapes at k = 1501, 2323, 2545, 2677 and 2803 requested 15-39 % more L2 sectors than the
model, which counts each block's own sectors of A and B once (its L1 keeps them while the block runs). The
sweep - every k at 2300-2340, 2665-2689 and 2790-2820 at m = n = 1024, every 29th k from 1001 to 4090, and
the held-out shapes' m and n around their k - shows that the excess follows k modulo 16, the times nvcc
unrolls the k loop (the SASS issues 16 A and 16 B loads a trip): A's rows start k floats apart, so k mod 16
sets where each row's 16-load burst falls in its sectors. k = 5 and 13 mod 16 miss the most, then 3 and 11,
1, 2, 9 and 10; the residues 0, 4, 7, 8, 12, 14 and 15 lie on the model. The excess grows with k (k = 5 mod 16
at m = n = 1024: +6 % at 1349, +40 % at 3669) and with the shape (k = 2805 at 1092 x 1049: +76 %, at
1024 x 1024: +31 %). ncu's set-conflict counter does not follow it; which lines L1 drops early is not
found, so the model does not predict it."""

from __future__ import annotations

import json

import pandas as pd

from .allocation import launch_counts
from .devices import device as lookup
from .sass import functions

FOLDER = "naive_k"
REQUESTED = "l1tex__m_xbar2l1tex_read_sectors.sum"  # the L2 read sectors the L1s request (l2_requested_read_sectors)


def unroll(device_key: str = "h200") -> int:
    """How many k the naive kernel's main loop takes a trip: its recorded SASS's largest loop's global loads
    over the two (A and B) each k issues."""
    loops = [r for r in functions(device_key)["matmul_naive"].regions if r.depth > 0]
    return max(r.kinds.get("global_ld", 0) for r in loops) // 2


def sweep(device: str = "h200") -> pd.DataFrame:
    """One row per swept shape: m, n, k, residue (k modulo `unroll`) and requested_sectors (the mean of its
    two launches); empty where not recorded."""
    counts = launch_counts(device, FOLDER, REQUESTED)
    params = pd.json_normalize(counts.params.map(json.loads)) if len(counts) else pd.DataFrame()
    out = pd.DataFrame({"m": params.get("m"), "n": params.get("n"), "k": params.get("k"),
                        "requested_sectors": (counts.first + counts.second) / 2})
    out["residue"] = out.k % unroll(lookup(device).key)
    return out[["m", "n", "k", "residue", "requested_sectors"]]


def against_model(device: str, shapes: pd.DataFrame) -> pd.DataFrame:
    """`shapes` (rows of `sweep`) with the model's requested sectors and measured over predicted."""
    from . import predict

    pred = [predict("matmul.naive", device, m=int(m), n=int(n), k=int(k)).l2_read_bytes / 32
            for m, n, k in zip(shapes.m, shapes.n, shapes.k, strict=True)]
    return shapes.assign(predicted_sectors=pred, ratio=shapes.requested_sectors.to_numpy() / pred)
