"""Shared-memory bank conflicts: wavefronts per warp instruction (32 banks of 4 bytes).

The rules, as the H200's counters show them (mem.shared_* microbenchmarks, reports/data/h200):
- Lanes are served in groups of 128 bytes of requests: the whole warp for accesses of up to 4
  bytes, half-warps for 8 bytes, quarter-warps for 16 bytes. In a group each bank delivers
  one 4-byte word per wavefront and lanes reading the same word share it (broadcast), so a
  group costs the most distinct words that any one bank must deliver.
- Two neighbouring groups (half-warps of an 8-byte access, quarter-warps 0+1 and 2+3 of a
  16-byte access) share wavefronts when their banks do not overlap, or when every lane of the
  pair reads one and the same address; otherwise their costs add up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lanes import INACTIVE, WARP, as_rows

BANKS = 32
BANK_BYTES = 4
LANES_PER_GROUP = {1: 32, 2: 32, 4: 32, 8: 16, 16: 8}


@dataclass(frozen=True)
class SharedAccess:
    width_bytes: int
    store: bool
    instructions: int
    wavefronts: int
    ideal_wavefronts: int
    wavefronts_per_row: np.ndarray
    ways_per_row: np.ndarray
    ideal_per_row: np.ndarray | None = None

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.ideal_wavefronts

    @property
    def max_ways(self) -> int:
        return int(self.ways_per_row.max()) if self.ways_per_row.size else 0

    def describe(self) -> str:
        ways = self.max_ways
        kind = "no bank conflict" if ways <= 1 else f"{ways}-way bank conflict"
        return (f"{kind}: {self.wavefronts} wavefronts for {self.instructions} instructions "
                f"(ideal {self.ideal_wavefronts})")


def _group_costs(words: np.ndarray, live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of word slots: most distinct words in one bank, and the number of distinct words."""
    small = words.max(initial=0) < 1 << 20  # all of shared memory: sort 32-bit (bank, word) keys
    shift, inactive, kind = (20, np.iinfo(np.int32).max, np.int32) if small else (40, INACTIVE, np.int64)
    w = words.astype(kind, copy=False)
    key = ((w & (BANKS - 1)) << shift) | w
    if not live.all():
        key[~live] = inactive
    key.sort(axis=1)
    new = np.empty(key.shape, dtype=bool)  # first slot of a distinct word
    new[:, 0] = key[:, 0] != inactive
    np.not_equal(key[:, 1:], key[:, :-1], out=new[:, 1:])
    new[:, 1:] &= key[:, 1:] != inactive
    bank = key >> shift
    run_start = np.empty(key.shape, dtype=bool)  # first slot of a bank's run
    run_start[:, 0] = True
    np.not_equal(bank[:, 1:], bank[:, :-1], out=run_start[:, 1:])
    seen = np.cumsum(new, axis=1, dtype=np.int8)
    before = np.where(run_start, seen - new, 0).astype(np.int8)
    np.maximum.accumulate(before, axis=1, out=before)
    return (seen - before).max(axis=1).astype(np.int64), seen[:, -1].astype(np.int64)


def shared_access(addresses: object, width: int, store: bool = False) -> SharedAccess:
    """Wavefronts, ideal wavefronts, conflicts and conflict degree ("ways") per instruction."""
    a, active = as_rows(addresses, width)
    rows = a.shape[0]
    words_per_lane = max(width // BANK_BYTES, 1)
    groups = WARP // LANES_PER_GROUP[width]
    base = a >> 2 if a.max(initial=0) < 1 << 31 else a // BANK_BYTES
    if base.dtype != np.int32 and base.max(initial=0) < 1 << 20:
        base = base.astype(np.int32)
    words = base[..., None] + np.arange(words_per_lane, dtype=base.dtype) if words_per_lane > 1 else base
    live = np.broadcast_to(active[..., None], words.shape) if words_per_lane > 1 else active
    cost, distinct = _group_costs(words.reshape(rows * groups, -1), live.reshape(rows * groups, -1))
    cost, distinct = cost.reshape(rows, groups), distinct.reshape(rows, groups)
    if groups == 1:
        waves, ways = cost[:, 0], cost[:, 0]
        ideal = -(-distinct[:, 0] // BANKS)
    else:
        bank_bits = np.left_shift(np.uint32(1), (words & (BANKS - 1)).astype(np.uint32))
        bank_bits[~np.broadcast_to(live, bank_bits.shape)] = 0
        bank_bits = bank_bits.reshape(rows, groups, -1)
        mask = np.bitwise_or.reduce(bank_bits, axis=2)
        pair_addr = np.where(active, a, -1).reshape(rows, groups // 2, -1)
        lo = np.where(pair_addr >= 0, pair_addr, np.iinfo(np.int64).max).min(axis=2)
        uniform = lo == pair_addr.max(axis=2)
        c0, c1 = cost[:, 0::2], cost[:, 1::2]
        disjoint = (mask[:, 0::2] & mask[:, 1::2]) == 0
        pair = np.where(disjoint, np.maximum(c0, c1), np.where(uniform, 1, c0 + c1))
        waves, ways = pair.sum(axis=1), np.maximum(c0, c1).max(axis=1)
        pair_words = distinct[:, 0::2] + distinct[:, 1::2]
        ideal = np.where(pair > 0, np.maximum(-(-pair_words // BANKS), 1), 0).sum(axis=1)
        ideal = np.minimum(ideal, waves)
    ideal = np.where(active.any(axis=1), ideal, 0)
    return SharedAccess(width_bytes=width, store=store,
                        instructions=int(np.count_nonzero(active.any(axis=1))),
                        wavefronts=int(waves.sum()), ideal_wavefronts=int(ideal.sum()),
                        wavefronts_per_row=waves, ways_per_row=ways, ideal_per_row=ideal)
