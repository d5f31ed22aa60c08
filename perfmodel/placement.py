"""Recorded block placement (which SM ran each block, and when) against the L1 reuse the model leaves
out: blocks that read the same rows, resident on one SM at once, share the lines in its L1.

The model counts each block's distinct sectors (`models.traffic.block_unique_chunks`) less what
co-resident blocks share at the spread of block starts pooled over every recorded launch
(`coresidency.law`, `models.traffic.co_resident_hits`). With one launch's own placement recorded
(experiments/placement.py) this module says what that launch's blocks shared; it predicts nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .coresidency import Placement, recorded_launches
from .devices import device as lookup
from .models import predict
from .models.traffic import address_block_indices, block_key, block_unique_chunks
from .suite.plan import case_id
from .suite.registry import get

# experiments/placement.py's file kinds: the case and the parameters besides m, n, k
KINDS = {"naive": ("matmul.naive", {}), "tiled": ("matmul.tiled", {"tile": 16}),
         "tiled32": ("matmul.tiled", {"tile": 32}), "coarsened2": ("matmul.coarsened", {"tile": 32, "coarse": 2}),
         "coarsened8": ("matmul.coarsened", {"tile": 32, "coarse": 8})}


@dataclass(frozen=True)
class Recorded:
    """The launches recorded of one case at one shape."""

    case: str
    params: dict[str, int]
    launches: list[Placement]


def recorded(device: str = "h200") -> list[Recorded]:
    """Every placement experiments/placement.py recorded (three launches of each case and shape)."""
    out = []
    for stem, launches in recorded_launches(lookup(device).key):
        kind, m, n, k = re.fullmatch(r"placement-(\w+)-m(\d+)-n(\d+)-k(\d+)", stem).groups()
        case, extra = KINDS[kind]
        out.append(Recorded(case, {"m": int(m), "n": int(n), "k": int(k)} | extra, launches))
    return out


def nearest_sharer(key: np.ndarray, pl: Placement) -> np.ndarray:
    """Per block, how long (ns) before its start the latest block with the same key started on its SM
    and was still running then; inf where none."""
    since = np.full(len(key), np.inf)
    for s in np.unique(pl.sm):
        on = np.where(pl.sm == s)[0]
        on = on[np.argsort(pl.start_ns[on])]
        for j, i in enumerate(on):
            before = on[:j]
            live = before[(pl.end_ns[before] > pl.start_ns[i]) & (key[before] == key[i])]
            if len(live):
                since[i] = pl.start_ns[i] - pl.start_ns[live].max()
    return since


def l1_requested_sectors(case: str, params: dict[str, int], pl: Placement, device: str = "h200") -> float:
    """Sectors the L1s request from L2 when a block's loads of an array may hit the lines the latest
    block on its SM that shares the array's block indices brought in: a line survives the SM's
    fills since then as in a randomly replacing cache, exp(-fills / L1 beside the carveout); the
    fills are the SM's resident blocks' predicted L2 reads over the launch's median block time (no
    fitted constant)."""
    dev = lookup(device)
    kc = get(case)
    p = kc.bind(**params)
    launch, accesses = kc.launch(p), kc.accesses(p)
    pred = predict(case, dev, **p)
    blocks = np.arange(len(pl.sm))
    fill_bytes_per_ns = (pred.occupancy.blocks_per_sm * pred.l2_read_bytes / len(blocks)
                         / float(np.median(pl.end_ns - pl.start_ns)))
    l1_bytes = dev.l1_bytes_per_sm - pred.occupancy.carveout_bytes
    total = 0.0
    for a in (a for a in accesses if a.space == "global" and not a.store):
        (sectors,) = block_unique_chunks([a], launch, store=False)
        key = block_key(address_block_indices(a, launch), launch, blocks)
        kept = np.exp(-nearest_sharer(key, pl) * fill_bytes_per_ns / l1_bytes)
        total += sectors * float(np.sum(1 - kept))
    return total


def explained(device: str = "h200") -> dict[str, float]:
    """Per recorded case id: the L1-requested sectors with co-resident sharing, mean over its launches."""
    return {case_id(r.case, r.params): float(np.mean([l1_requested_sectors(r.case, r.params, pl, device)
                                                     for pl in r.launches]))
            for r in recorded(device)}
