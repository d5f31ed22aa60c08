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
excess follows k mod 4 (k = 1 mod 4 most). With A or B read past L1 (matmul.naive_bypass, ld.global.cg,
experiments/naive_bypass_specs.txt, the same 16-times unrolled loop) the residue is gone: at m = n = 1024 the
requested sectors vary 2.3 % (A past L1) and 0.5 % (B past L1) over k = 2300-2339, where the kernel itself
varies 22 %, and the model's per-block count holds both within 3.5 % (B's misses with A past L1 run 9-13 %
above it at 1092 x 1049). Neither array's misses follow k mod 16 alone: the excess comes where A's and B's
lines share L1. And it is L1's capacity: launched with 12 KiB of shared memory a block it leaves unused
(matmul.naive_smem, experiments/naive_smem_specs.txt; L1 124 KiB where it had 224) k = 0 and 8 mod 16 still
request within 3 % of the model's count while 5 and 13 request 49-58 % more (20 % at 224 KiB), and at 24 KiB
a block (L1 28 KiB) every k requests 2.1-3.6x the count - the model's window rule (models.l1.
l1_windowed_sectors) gives it only 1-18 % more. Which lines a small L1 drops first, and why the burst's
position in A's sectors decides it, is not modelled: the model keeps the per-block count."""

from __future__ import annotations

import functools
import json

import pandas as pd

from .allocation import launch_counts
from .devices import DeviceSpec
from .devices import device as lookup
from .memory.coalescing import SECTOR_BYTES
from .sass import functions

FOLDER = "naive_k"  # matmul.naive over k
UNROLLED = "naive_unroll"  # matmul.naive_unrolled (unroll 1 and 4) beside matmul.naive
BYPASS = "naive_bypass"  # matmul.naive_bypass (A or B past L1) beside matmul.naive
SMEM = "naive_smem"  # matmul.naive_smem: the kernel with L1 at 224, 124 and 28 KiB
REQUESTED = "l1tex__m_xbar2l1tex_read_sectors.sum"  # the L2 read sectors the L1s request (l2_requested_read_sectors)


def unroll(device_key: str = "h200", kernel: str = "matmul_naive", check: str | None = None) -> int:
    """How many k a naive kernel's main loop takes a trip: its recorded SASS's largest loop's global loads
    over the two (A and B) each k issues (`check`: the listing recorded beside that checks folder)."""
    loops = [r for r in functions(device_key, check)[kernel].regions if r.depth > 0]
    return max(r.kinds.get("global_ld", 0) for r in loops) // 2


def sweep(device: str = "h200", folder: str = FOLDER) -> pd.DataFrame:
    """One row per swept launch pair: case, unroll (matmul.naive's: `unroll`), bypass (matmul.naive_bypass's
    array read past L1: 1 A, 2 B; else 0), smem (matmul.naive_smem's unused shared memory a block, bytes;
    else 0), m, n, k, residue (k modulo 16, the default kernel's unroll) and requested_sectors (the mean of
    its two launches); empty where not recorded."""
    counts = launch_counts(device, folder, REQUESTED)
    cols = ["case", "unroll", "bypass", "smem", "m", "n", "k", "residue", "requested_sectors"]
    if counts.empty:
        return pd.DataFrame(columns=cols)
    params = pd.json_normalize(counts.params.map(json.loads).tolist())
    default = unroll(lookup(device).key)

    def given(name: str, otherwise: int) -> pd.Series:
        return params.get(name, pd.Series(index=params.index, dtype=float)).fillna(otherwise).astype(int)

    out = pd.DataFrame({"case": counts.case, "m": params.m, "n": params.n, "k": params.k,
                        "unroll": given("unroll", default), "bypass": given("bypass", 0), "smem": given("smem", 0),
                        "requested_sectors": (counts["first"] + counts["second"]) / 2})
    out["residue"] = out.k % default
    return out[cols]


def against_model(device: str, shapes: pd.DataFrame) -> pd.DataFrame:
    """`shapes` (rows of `sweep`) with the model's requested sectors and measured over predicted."""
    from . import predict
    from .suite.registry import get

    pred = [predict(r.case, device, m=int(r.m), n=int(r.n), k=int(r.k),
                    **{p: int(getattr(r, p)) for p in ("unroll", "bypass", "smem") if p in get(r.case).defaults}
                    ).l2_read_bytes / SECTOR_BYTES for r in shapes.itertuples()]
    return shapes.assign(predicted_sectors=pred, ratio=shapes.requested_sectors.to_numpy() / pred)


CAUTION_EXCESS = 0.05  # residues whose sectors a k lie this far above the sweep's lower half get a note


@functools.cache
def residue_excess(device_key: str) -> dict[int, float]:
    """Per k mod (the loop's unroll): the sweep's requested sectors a k at m = n = 1024, k = 2300-2340
    (its median per residue), over the median of the lower half of the residues (those the model's
    per-block count meets); {} where the sweep is not recorded."""
    s = sweep(device_key)
    s = s[(s.m == 1024) & (s.n == 1024) & s.k.between(2300, 2340)]
    if s.empty:
        return {}
    per = (s.requested_sectors / s.k).groupby(s.residue).median()
    base = per.sort_values().iloc[: len(per) // 2].median()
    return {int(r): float(v / base - 1) for r, v in per.items()}


def caution(dev: DeviceSpec, case: str, params: dict[str, int]) -> str | None:
    """A note for a naive matmul at a k whose residue the recorded sweep found missing more in L1 than
    the per-block count (None elsewhere, or where the sweep or SASS is not recorded)."""
    if case != "matmul.naive" or not (excess := residue_excess(dev.key)):
        return None
    step = unroll(dev.key)
    r = params["k"] % step
    if excess.get(r, 0.0) < CAUTION_EXCESS:
        return None
    return (f"k = {params['k']} is {r} mod {step}, the times nvcc unrolls the k loop: at such k the recorded sweep's"
            f" L1s requested {100 * excess[r]:.0f} % more L2 sectors than at the k the per-block count meets"
            " (m = n = 1024, k near 2300; more at larger k) - not in this count (perfmodel.naive_k)")
