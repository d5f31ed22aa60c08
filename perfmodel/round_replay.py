"""The L1 of an SM replayed over the tiles its blocks load, in the order their recorded round clocks
put them (experiments/barrier_phase.py): in probe.barrier_rounds / barrier_waves block b reads tile
(b + r) mod POOL in round r, so two blocks sharing an SM read each other's tiles only when one runs a
partner's index distance (80-132 blocks on the H200) of rounds ahead of the other - a drift the
rounds' timing decides, not the addresses."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cache import on_disk
from .measurements import DATA_DIR

# the probes' pool: 2 MiB of 32 x 32 tiles, L2-resident, block b reading tile (b + r) mod POOL_TILES in round r
POOL_TILES = 512
TILE_BYTES = 4096
# experiments/barrier_phase.py's cases, in the order it runs them (and ncu lists them)
TRACED_CASES = [("probe.barrier_rounds", {"blocks_per_sm": 2, "rounds": rounds, "work": work})
                for rounds in (1024, 4096) for work in (0, 32)]
TRACED_CASES += [("probe.barrier_waves",
                  {"blocks_per_sm": 2, "loads": loads, "rounds": rounds, "waves": waves, "work": 32})
                 for loads in (1, 2) for rounds in (128, 512) for waves in (1, 8)]


@dataclass(frozen=True)
class RoundTrace:
    """One launch: per block its SM and the SM clock at the start of every `stride`-th round."""

    sm: np.ndarray  # (blocks,)
    clock: np.ndarray  # (blocks, ceil(rounds / stride)), cycles of the block's SM since the SM's first round
    stride: int
    rounds: int

    def blocks_by_sm(self) -> list[np.ndarray]:
        """The blocks of each SM, SM by SM (in one wave of two per SM: each SM's pair)."""
        return [np.flatnonzero(self.sm == sm) for sm in np.unique(self.sm)]

    def round_clocks(self) -> np.ndarray:
        """(blocks, rounds + 1): every round's start, interpolated between the recorded ones, and the
        last round's end (the last recorded pace carried on past the last recorded round)."""
        have = np.arange(0, self.rounds, self.stride)[: self.clock.shape[1]]
        clock = self.clock.astype(np.float64)
        one = len(have) < 2
        pace = np.zeros(len(clock)) if one else (clock[:, -1] - clock[:, -2]) / (have[-1] - have[-2])
        end = clock[:, -1] + pace * (self.rounds - have[-1])
        have, clock = np.append(have, self.rounds), np.column_stack([clock, end])
        every = np.arange(self.rounds + 1)
        return np.stack([np.interp(every, have, c) for c in clock])


def tile_loads(block: int, rounds: int, pool: int, loads: int) -> tuple[np.ndarray, np.ndarray]:
    """(round of each load, tiles) of one block: the B tile (b + r) mod pool each round; the A tile
    b mod pool once before round 0 (loads 1) or (b + r + pool/2) mod pool each round (loads 2)."""
    r = np.arange(rounds)
    b_tiles = (block + r) % pool
    if loads == 2:
        return np.concatenate([r, r]), np.concatenate([(block + r + pool // 2) % pool, b_tiles])
    return np.concatenate([[0], r]), np.concatenate([[block % pool], b_tiles])


def l1_tile_hits(trace: RoundTrace, pool: int, loads: int, capacity_tiles: int) -> float:
    """Share of the launch's tile loads an LRU L1 of `capacity_tiles` tiles per SM serves: every
    SM's loads merged in clock order (one block's loads of a round before the next block's)."""
    clocks = trace.round_clocks()
    hits = total = 0
    for blocks in trace.blocks_by_sm():
        t, tiles, who = [], [], []
        for b in blocks:
            rounds_of, ids = tile_loads(int(b), trace.rounds, pool, loads)
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


def save_traces(path: Path, traces: list[RoundTrace], **meta: float) -> None:
    """One case's launches, the clocks as increments between kept rounds (they compress ~4x better)."""
    clock = np.stack([t.clock for t in traces]).astype(np.int64)
    steps = np.diff(clock, axis=2, prepend=0)
    np.savez_compressed(path, sm=np.stack([t.sm for t in traces]).astype(np.int16),
                        steps=steps.astype(np.uint32 if steps.min() >= 0 else np.int64),
                        stride=traces[0].stride, rounds=traces[0].rounds, **meta)


def load_traces(path: Path) -> list[RoundTrace]:
    z = np.load(path)
    clock = np.cumsum(z["steps"].astype(np.int64), axis=2)
    return [RoundTrace(sm, c, int(z["stride"]), int(z["rounds"])) for sm, c in zip(z["sm"], clock, strict=True)]


def trace_file(case: str, params: dict[str, int]) -> str:
    """phase-<kind>-<sorted params>.npz, as experiments/barrier_phase.py names a case's launches."""
    return f"phase-{case.split('.')[1]}-" + "-".join(f"{k}{v}" for k, v in sorted(params.items())) + ".npz"


def phase_dir(device_key: str) -> Path:
    return DATA_DIR / device_key / "checks" / "barrier_phase"


def recorded_traces(device_key: str, case: str, params: dict[str, int], run: str = "plain") -> list[RoundTrace]:
    """The launches experiments/barrier_phase.py recorded of one case (none where none is): `plain`
    (three launches each), or `under-ncu` (the one launch ncu counted, ncu.csv beside it)."""
    path = phase_dir(device_key) / run / trace_file(case, params)
    return load_traces(path) if path.exists() else []


def ncu_hit_shares(device_key: str) -> list[float]:
    """Per TRACED_CASES entry, the share of its global load sectors the L1s hit in the launch
    recorded under ncu (l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit / _ld)."""
    import pandas as pd

    raw = pd.read_csv(phase_dir(device_key) / "under-ncu" / "ncu.csv", comment="=", thousands=",")
    table = raw.pivot_table(index="ID", columns="Metric Name", values="Metric Value")
    hits = table["l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum"]
    return (hits / table["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]).tolist()


@on_disk
def _replayed(device_key: str, case: str, items: tuple[tuple[str, int], ...], capacity_tiles: int) -> float | None:
    params = dict(items)
    traces = recorded_traces(device_key, case, params)
    if not traces:
        return None
    return float(np.mean([l1_tile_hits(t, POOL_TILES, params.get("loads", 1), capacity_tiles) for t in traces]))


def replayed_hit_share(device_key: str, case: str, params: dict[str, int], l1_bytes: float) -> float | None:
    """Share of a barrier probe's tile loads its SMs' L1s (`l1_bytes` each) serve, over the recorded
    launches' round clocks; None where this case's clocks were not recorded."""
    if case not in {name for name, _ in TRACED_CASES}:
        return None
    return _replayed(device_key, case, tuple(sorted(params.items())), int(l1_bytes // TILE_BYTES))
