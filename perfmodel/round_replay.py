"""The L1 of an SM replayed over the tiles its blocks load, in the order their recorded round clocks
put them (experiments/barrier_phase.py): in probe.barrier_rounds / barrier_waves block b reads tile
(b + r) mod POOL in round r, so two blocks sharing an SM read each other's tiles only when one runs a
partner's index distance (~84-132 blocks on the H200) of rounds ahead of the other - a drift the
rounds' timing decides, not the addresses."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RoundTrace:
    """One launch: per block its SM and the SM clock at the start of every `stride`-th round."""

    sm: np.ndarray  # (blocks,)
    clock: np.ndarray  # (blocks, rounds // stride), cycles of the block's SM
    stride: int
    rounds: int

    def round_clocks(self) -> np.ndarray:
        """(blocks, rounds): every round's start, interpolated between the recorded ones."""
        have = np.arange(0, self.rounds, self.stride)[: self.clock.shape[1]]
        every = np.arange(self.rounds)
        return np.stack([np.interp(every, have, c.astype(np.float64)) for c in self.clock])


def tile_loads(block: int, rounds: int, pool: int, loads: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """(round of each load, tiles) of one block: the B tile (b + r) mod pool each round; the A tile
    b mod pool once before round 0 (loads 1) or (b + r + pool/2) mod pool each round (loads 2)."""
    r = np.arange(rounds)
    b_tiles = (block + r) % pool
    if loads == 2:
        return np.concatenate([r, r]), [np.concatenate([(block + r + pool // 2) % pool, b_tiles])]
    return np.concatenate([[0], r]), [np.concatenate([[block % pool], b_tiles])]


def l1_tile_hits(trace: RoundTrace, pool: int, loads: int, capacity_tiles: int) -> float:
    """Share of the launch's tile loads an LRU L1 of `capacity_tiles` tiles per SM serves: every
    SM's loads merged in clock order (one block's loads of a round before the next block's)."""
    clocks = trace.round_clocks()
    hits = total = 0
    for sm in np.unique(trace.sm):
        t, tiles, who = [], [], []
        for b in np.flatnonzero(trace.sm == sm):
            rounds_of, (ids,) = tile_loads(int(b), trace.rounds, pool, loads)
            t.append(clocks[b][rounds_of])
            tiles.append(ids)
            who.append(np.full(len(ids), b))
        order = np.lexsort((np.concatenate(who), np.concatenate(t)))
        seq = np.concatenate(tiles)[order]
        lru: OrderedDict[int, None] = OrderedDict()
        for tile in seq.tolist():
            if tile in lru:
                hits += 1
                lru.move_to_end(tile)
            else:
                lru[tile] = None
                if len(lru) > capacity_tiles:
                    lru.popitem(last=False)
        total += len(seq)
    return hits / total if total else 0.0
