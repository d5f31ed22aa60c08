"""Recorded block placement (which SM ran each block, and when) against the L1 reuse the model leaves
out: blocks that read the same rows, resident on one SM at once, share the lines in its L1.

The model counts each block's distinct sectors (`models.traffic.block_unique_chunks`): an upper
bound where the block scheduler puts blocks with common reads on one SM. With a placement recorded
(experiments/placement.py) this module says how much of the gap that explains; it predicts nothing
without one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .devices import device as lookup
from .measurements import DATA_DIR
from .memory.pattern import BLOCK_VARS, _Bound
from .models import predict
from .models.traffic import block_unique_chunks
from .suite.registry import get


@dataclass(frozen=True)
class Placement:
    """One launch: per block (row-major over the grid) its SM and its start and end (ns)."""

    sm: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    grid: tuple[int, int, int]


def recorded(case_size: int, device: str = "h200") -> list[Placement]:
    """The launches experiments/placement.py recorded for matmul.naive at m = n = k = case_size."""
    z = np.load(_file(case_size, device))
    grid = tuple(int(g) for g in z["grid"])
    return [Placement(z["sm"][i], z["start_ns"][i], z["end_ns"][i], grid) for i in range(len(z["sm"]))]


def l1_requested_sectors(case: str, params: dict[str, int], placement: Placement, device: str = "h200") -> float:
    """Sectors the L1s request from L2 when a block's loads of an array hit the lines another block
    on its SM brought in: one that shares the array's block indices, started before it, runs while it
    starts, and started no longer ago than L1 keeps lines (the L1 left beside the carveout over the
    SM's predicted fill rate)."""
    dev = lookup(device)
    kc = get(case)
    p = kc.bind(**params)
    launch, accesses = kc.launch(p), kc.accesses(p)
    pred = predict(case, dev, **p)
    fill_per_sm = pred.l2_read_bytes / pred.time_s / dev.sm_count
    keep_ns = 1e9 * (dev.l1_bytes_per_sm - pred.occupancy.carveout_bytes) / fill_per_sm
    loads = [a for a in accesses if a.space == "global" and not a.store]
    blocks = np.arange(len(placement.sm))
    coords = {"bx": blocks % launch.grid[0], "by": blocks // launch.grid[0] % launch.grid[1],
              "bz": blocks // (launch.grid[0] * launch.grid[1])}
    total = 0.0
    for a in loads:
        (sectors,) = block_unique_chunks([a], launch, store=False)
        keys = sorted(_Bound(a, launch).index.names & set(BLOCK_VARS))  # the guard only masks
        key = sum(coords[k] * 10**(6 * i) for i, k in enumerate(keys)) if keys else np.zeros_like(blocks)
        hit = np.zeros(len(blocks), bool)
        for s in np.unique(placement.sm):
            on = np.where(placement.sm == s)[0]
            on = on[np.argsort(placement.start_ns[on])]
            for j, i in enumerate(on):
                before = on[:j]
                live = before[(placement.end_ns[before] > placement.start_ns[i])
                              & (placement.start_ns[i] - placement.start_ns[before] <= keep_ns)]
                hit[i] = bool(np.any(key[live] == key[i]))
        total += sectors * float((~hit).sum())
    return total


def explained(sizes: tuple[int, ...] = (1000, 1024, 2048), device: str = "h200") -> dict[int, float]:
    """matmul.naive: mean over the recorded launches of the L1-requested sectors with co-resident sharing."""
    return {m: float(np.mean([l1_requested_sectors("matmul.naive", {"m": m, "n": m, "k": m}, pl, device)
                              for pl in recorded(m, device)])) for m in sizes if _file(m, device).exists()}


def _file(m: int, device: str) -> Path:
    return DATA_DIR / device / "checks" / "placement" / f"placement-m{m}.npz"
