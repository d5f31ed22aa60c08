"""Shared-memory bank conflicts: wavefronts per warp instruction (32 banks of 4 bytes).

A warp's lanes are served in groups (LANES_PER_GROUP: the whole warp for accesses of up to 4
bytes, half-warps for 8- and 16-byte accesses, as the H200's counters show). In a group each
bank delivers one 4-byte word per wavefront and lanes reading the same word share it
(broadcast), so a group costs the most distinct words any one bank must deliver; an
instruction costs the sum over its groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lanes import INACTIVE, WARP, as_rows

BANKS = 32
BANK_BYTES = 4
LANES_PER_GROUP = {1: 32, 2: 32, 4: 32, 8: 16, 16: 16}


@dataclass(frozen=True)
class SharedAccess:
    width_bytes: int
    store: bool
    instructions: int
    wavefronts: int
    ideal_wavefronts: int
    wavefronts_per_row: np.ndarray
    ways_per_row: np.ndarray

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


def shared_access(addresses: object, width: int, store: bool = False) -> SharedAccess:
    """Wavefronts, ideal wavefronts, conflicts and conflict degree ("ways") per instruction."""
    a, active = as_rows(addresses, width)
    rows = a.shape[0]
    words_per_lane = max(width // BANK_BYTES, 1)
    phases = WARP // LANES_PER_GROUP[width]
    slots = WARP * words_per_lane // phases
    # every lane's words: (rows, 32, words_per_lane), then (rows*groups, word slots of a group)
    word0 = a // BANK_BYTES
    words = word0[..., None] + np.arange(words_per_lane)
    live = np.broadcast_to(active[..., None], words.shape)
    words = words.reshape(rows * phases, slots)
    live = live.reshape(rows * phases, slots)
    # sort key (bank, word); int32 when the words fit in 20 bits (all of shared memory does)
    shift, inactive = (20, np.int32(np.iinfo(np.int32).max)) if words.max(initial=0) < 1 << 20 \
        else (40, INACTIVE)
    key = np.where(live, (words % BANKS) << shift | words, inactive).astype(type(inactive))
    key.sort(axis=1)
    live = key != inactive
    new = np.empty(key.shape, dtype=bool)  # first lane of a distinct word
    new[:, 0] = live[:, 0]
    np.not_equal(key[:, 1:], key[:, :-1], out=new[:, 1:])
    new &= live
    bank = key >> shift
    run_start = np.empty(key.shape, dtype=bool)  # first slot of a bank's run
    run_start[:, 0] = True
    np.not_equal(bank[:, 1:], bank[:, :-1], out=run_start[:, 1:])
    seen = np.cumsum(new, axis=1, dtype=np.int8)
    before = np.where(run_start, seen - new, 0)
    np.maximum.accumulate(before, axis=1, out=before)
    phase_waves = (seen - before).max(axis=1).reshape(rows, phases)
    distinct_words = seen[:, -1].reshape(rows, phases).sum(axis=1, dtype=np.int64)
    waves = phase_waves.sum(axis=1)
    ways = phase_waves.max(axis=1)
    ideal = np.where(distinct_words > 0, np.maximum(-(-distinct_words // BANKS), phases), 0)
    return SharedAccess(width_bytes=width, store=store,
                        instructions=int(np.count_nonzero(active.any(axis=1))),
                        wavefronts=int(waves.sum()), ideal_wavefronts=int(ideal.sum()),
                        wavefronts_per_row=waves, ways_per_row=ways)
