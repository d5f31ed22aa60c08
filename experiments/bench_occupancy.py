"""Time the vectorised occupancy core on a full sweep (about 530 k launch configurations).

    python experiments/bench_occupancy.py
"""

from __future__ import annotations

import time

import numpy as np

import perfmodel
from perfmodel.occupancy import limits

if __name__ == "__main__":
    dev = perfmodel.device("h200")
    threads = np.arange(32, 1025, 32)[:, None, None]
    regs = np.arange(0, 256)[None, :, None]
    smem = np.linspace(0, 48 * 1024, 64).astype(int)[None, None, :]
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        lim = limits(dev, threads, regs, 0, smem)
        best = min(best, time.perf_counter() - t0)
    n = lim.blocks.size
    print(f"{n} configurations (32 block sizes x 256 register counts x 64 shared-memory sizes) "
          f"in {best:.3f} s (best of 5, one core): {n / best / 1e6:.2f} M configurations/s")
