"""Time the coalescing and bank-conflict analyses on 1 M warp instructions (32 M addresses).

    python experiments/bench_memory.py
"""

from __future__ import annotations

import time

import numpy as np

from perfmodel.memory import global_access, shared_access

if __name__ == "__main__":
    rng = np.random.default_rng(0)
    rows = 1 << 20
    strided = (np.arange(rows * 32, dtype=np.int64) * 4).reshape(rows, 32)
    scattered = rng.integers(0, 1 << 30, size=(rows, 32)) * 4
    smem = (rng.integers(0, 12288, size=(rows, 32)) * 4)
    for name, fn, addr, width in (("global, coalesced", global_access, strided, 4),
                                  ("global, scattered", global_access, scattered, 4),
                                  ("shared, random 4 B", shared_access, smem, 4),
                                  ("shared, 16 B", shared_access, (smem // 16) * 16, 16)):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            fn(addr, width)
            best = min(best, time.perf_counter() - t0)
        print(f"{name:20s}: {rows} warp instructions in {best:.2f} s (best of 3, one core)")
