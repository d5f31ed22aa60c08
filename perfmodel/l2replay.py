"""Matmul's B between one L2 partition and the whole L2, replayed: a launch's recorded block schedule
(experiments/placement.py: each block's SM, start and end) run through a model of the H200's L2 - two
partitions of 30 MiB; an SM looks a line up in its own partition first, a miss on a line homed in the
other partition crosses the fabric and looks it up at home, and only a miss at home reads DRAM (ncu's
lts__t_sectors_srcunit_{tex,ltcfabric}_op_read_lookup_{hit,miss}); each partition keeps the lines its SMs
read, its own and copies of the other's, least recently used first out of sets that lines hash to at
random; a line holds the sectors asked of it (two TILE 16 blocks read half a line's each: a partition
holding the line without the other half misses on it - with whole lines instead, the home hits after a
crossing came out 4-37x ncu's).

What it explains that the model's rule (models.dram.reread_miss: a share linear between one
partition and the whole L2) cannot: TILE 16 loses more of B than TILE 32 at the same size, COARSE 8
(one block per SM, all in step) more than both, because blocks sweep B in the order the scheduler ran
them, not in the grid's. With the launch's own schedule it explains; to predict, the model replays the
schedule recorded at another shape of the same kernel, or where it has none recorded, of the kernel with
its block size and blocks per SM (`predicted_read_bytes`; held-out sets 36 and 37: COARSE 1 and 4).
COARSE 4 and 8 read their own measured curves instead (perfmodel.coarse_curve: held-out set 38, 6.1 % off
where the replay is 10.8 %), the replay only past where those have lost all of B.

Which partition an SM sits beside is not known: the replay puts SMs of even and odd %smid on either
side (the first and second half of the SM ids gave the same counts within 3 % in the exploration).

What it does not explain (found 2026-12-01): TILE 16 (its own schedule: +49...+79 % at B of 24-32 MiB,
-32...-41 % at 45-48 MiB; the model reads TILE 16's own measured loss curve instead, perfmodel.b_curve
- which no replay variant reproduced:
over the 40 own schedules, random replacement 48 % off, copies inserted least recently used 70 %,
sector-sized lines 11 % (TILE 16 23 %), a set hash of its own per partition 11 % (TILE 16 20 %), 128
ways 10 % (TILE 16 13 %, TILE 32 9 %), against 14 % as here (TILE 16 31 %, TILE 32 3 %)); ragged
shapes out of sample (held-out set 28: TILE 32 and COARSE 2 read 24-65 % less than the H200 at 7 of 10
shapes); and the plain cyclic stream probe.l2_read (4 passes, each line
read by one SM): simulated through these partitions it loses 11/36/72/90 % of its re-reads at 36/40/44/
48 MiB, where the H200 loses 1/4/13/24 % (61/83 % at 52/56 MiB) - least-recently-used copies in both
partitions hold less than the H200's L2 does.

A block's B and A tiles are replayed in PHASE_GROUPS groups of its k phases, at the group's share of
the block's recorded time; its C tile at its end. Line granularity is coarsened to those groups;
WAYS counts them (half a group's B tile a way: each tile's lines are homed half in each partition).
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .cache import on_disk
from .coresidency import Placement
from .devices import device as lookup
from .memory.coalescing import LINE_BYTES
from .suite.plan import case_id

REPLAYED = ("matmul.tiled", "matmul.coarsened")  # the kernels whose accesses _stream lays out
PHASE_GROUPS = 16
# chosen among 32, 64, 128 and 256 on the 14 shapes recorded before plan h200_b_replay (mean |error| of
# the DRAM reads 7 % at 64, 8/11/13 % at 32/128/256); on the 14 of h200_b_replay, measured after, 17 %.
# Kept with the mixed set hash: the 40 recorded band shapes over their own schedules, TILE 32 and COARSE
# 4/14/8/11 % at 64/32/128/256 (TILE 16: 31/65/13/14 % - its replay misses, see the module's note)
WAYS = 64
MASK = (1 << 64) - 1


def _set_hash(key: int) -> int:
    """A line's set, as a well-mixed 64-bit hash of its key (splitmix64's finaliser). The keys are
    arithmetic in block and phase indices; multiplicative hashing of them loaded the sets unevenly (a
    cyclic stream's keys: twice the spread of random placement), which lost lines no real L2 loses."""
    key = (key + 0x9E3779B97F4A7C15) & MASK
    key = ((key ^ (key >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    key = ((key ^ (key >> 27)) * 0x94D049BB133111EB) & MASK
    return key ^ (key >> 31)


@dataclass(frozen=True)
class Replay:
    """What the replay's L2 did, in bytes and in sectors as ncu counts them."""

    dram_read_bytes: float
    near_miss_sectors: float  # looked up in the SM's own partition and missed
    crossing_sectors: float  # of those, homed in the other partition: crossed the fabric
    far_hit_sectors: float  # ... and found there


class _Partition:
    """One L2 partition: `sets` least-recently-used sets of `capacity / sets` bytes each."""

    def __init__(self, capacity_bytes: float, sets: int):
        self.sets = [OrderedDict() for _ in range(sets)]
        self.used = [0] * sets
        self.room = capacity_bytes / sets

    def touch(self, key: int, size: int, part: int = 3) -> bool:
        """Look up `part` (sector halves, a bit each) of `key`'s lines: a hit moves them to the front;
        a miss brings them in - lines take their whole size, sectors come as asked. True on a hit."""
        i = _set_hash(key) % len(self.sets)
        held = self.sets[i]
        if key in held:
            held.move_to_end(key)
            have = held[key]
            if have[1] & part == part:
                return True
            held[key] = (size, have[1] | part)
            return False
        held[key] = (size, part)
        self.used[i] += size
        while self.used[i] > self.room:
            self.used[i] -= held.popitem(last=False)[1][0]
        return False


def _stream(params: dict[str, int], pl: Placement, groups: int):
    """The launch's accesses in time order: (unit key, kind 0 B / 1 A / 2 C store, SM side, sector
    halves read) and the bytes of each kind's unit. TILE x TILE blocks; B's unit is a group of k rows by
    the 128-byte line columns a block reads (two blocks of TILE 16 share one, each reading half its
    sectors), A's a block row's TILE rows by a group of k columns."""
    t, k, wide = params["tile"], params["k"], params["tile"] * params.get("coarse", 1)
    gx, gy = pl.grid[0], pl.grid[1]
    b = np.arange(gx * gy)
    bx, by = b % gx, b // gx
    per_line = LINE_BYTES // 4
    b_col = bx * wide // per_line
    line_cols = max(1, wide // per_line)
    rows = k / groups
    sizes = (int(rows * line_cols * LINE_BYTES), int(t * rows * 4), t * wide * 4)
    g = np.arange(groups)
    start, dur = pl.start_ns.astype(float), (pl.end_ns - pl.start_ns).astype(float)
    at = start[:, None] + (g[None, :] + 0.5) / groups * dur[:, None]
    top = 1 << 40
    keys = np.concatenate([(g[None, :] * (b_col.max() + 1) + b_col[:, None]).ravel(),
                           (g[None, :] * gy + by[:, None]).ravel() + top, by * gx + bx + 2 * top])
    kinds = np.concatenate([np.zeros(at.size, np.int8), np.ones(at.size, np.int8), np.full(len(b), 2, np.int8)])
    sector_half = 1 << (bx * wide % per_line * 2 // per_line) if wide < per_line else np.full(len(b), 3)
    parts = np.concatenate([np.repeat(sector_half, groups), np.full(at.size + len(b), 3)])
    sms = np.concatenate([np.repeat(pl.sm, groups), np.repeat(pl.sm, groups), pl.sm])
    order = np.argsort(np.concatenate([at.ravel(), at.ravel(), start + dur]), kind="stable")
    return keys[order].tolist(), kinds[order].tolist(), (sms[order] % 2).tolist(), parts[order].tolist(), sizes


def replay(params: dict[str, int], pl: Placement, device: str = "h200", ways: int = WAYS,
           groups: int = PHASE_GROUPS) -> Replay:
    """matmul.tiled or matmul.coarsened at `params` (m, n, k, tile[, coarse]) run in the schedule `pl`
    through the two partitions."""
    dev = lookup(device)
    keys, kinds, sides, parts, sizes = _stream(params, pl, groups)
    half = [s // 2 for s in sizes]  # each unit's lines: half homed in each partition
    room = dev.l2_partition_bytes
    sets = max(1, round(room / (ways * half[0])))
    l2 = (_Partition(room, sets), _Partition(room, sets))
    dram = near = cross = far_hit = 0
    for key, kind, side, got in zip(keys, kinds, sides, parts, strict=True):
        size = half[kind]
        asked = size if got == 3 else size // 2
        for home in (0, 1):
            line = 2 * key + home
            if kind == 2:  # stores go to the line's home
                l2[home].touch(line, size)
                continue
            if l2[side].touch(line, size, got):
                continue
            near += asked
            if home != side:
                cross += asked
                if l2[home].touch(line, size, got):
                    far_hit += asked
                    continue
            dram += asked
    return Replay(float(dram), near / 32, cross / 32, far_hit / 32)


@functools.cache
def replayed(device_key: str = "h200", min_b_bytes: int = 20 << 20) -> tuple:
    """(recorded launches, the replay of the first) of every recorded tiled or coarsened matmul whose
    B is at least `min_b_bytes`."""
    return tuple((r, replay(r.params, r.launches[0], device_key)) for r in _sources(device_key)
                 if 4 * r.params["k"] * r.params["n"] >= min_b_bytes)


def borrowed(src: Placement, grid: tuple[int, int, int], resident: int) -> Placement:
    """`src`'s schedule in units of its median block time, cut or extended to `grid`'s blocks: past the
    first `resident` blocks its steady part repeats, shifted by its own span."""
    blocks = grid[0] * grid[1]
    t = float(np.median(src.end_ns - src.start_ns))
    start = (src.start_ns - src.start_ns.min()) / t
    took = (src.end_ns - src.start_ns) / t
    sm = src.sm
    steady = np.arange(resident, len(start))
    if blocks > len(start) and len(steady) > 1:
        span = start[steady[-1]] - start[steady[0]] + start[steady[-1]] - start[steady[-2]]
        extra = np.arange(blocks - len(start))
        pick = steady[extra % len(steady)]
        start = np.concatenate([start, start[pick] + span * (1 + extra // len(steady))])
        took = np.concatenate([took, took[pick]])
        sm = np.concatenate([sm, sm[pick]])
    return Placement(sm[:blocks], start[:blocks], start[:blocks] + took[:blocks], grid)


def _kind(case: str, params: dict[str, int]) -> tuple:
    return case, params["tile"], params.get("coarse", 1)


@functools.cache
def _sources(device_key: str) -> tuple:
    """Every recorded launch of a kernel the replay knows (REPLAYED)."""
    from .coresidency import recorded

    return tuple(r for r in recorded(device_key) if r.case in REPLAYED)


def _residency(dev, case: str, params: dict[str, int]) -> tuple[int, int]:
    """(threads a block, blocks an SM) of a replayed kernel at `params`: what shapes its schedule."""
    from .models import case_occupancy
    from .suite.registry import get

    kc = get(case)
    p = kc.bind(**params)
    occ, _ = case_occupancy(dev, kc, p)
    return occ.threads_per_block, occ.blocks_per_sm


def replay_source(case: str, params: dict[str, int], device: str = "h200"):
    """The recording whose schedule predicts `case` at `params`: a tiled or coarsened matmul whose B lies
    between 0.6 of one L2 partition and the whole L2, the largest launch recorded of the same kernel at
    another shape; where the kernel has none recorded (COARSE 1 and 4), that of the recorded kernel with
    its block size and blocks per SM, nearest in coarsening. None where there is none (other kernels and
    sizes, devices without recordings, TILE 16: models.dram.SWEPT)."""
    from .models.dram import swept

    if case not in REPLAYED or swept(case, params):  # TILE 16: the read stream's loss (models.dram.SWEPT)
        return None
    dev = lookup(device)
    if not 0.6 * dev.l2_partition_bytes <= 4 * params["k"] * params["n"] <= dev.l2_bytes:
        return None
    kind = _kind(case, params)
    same = [r for r in _sources(dev.key) if _kind(r.case, r.params) == kind and r.params != params]
    if same:
        return max(same, key=lambda r: len(r.launches[0].sm))
    shaped = _residency(dev, case, params)  # threads a block fix the tile: TILE 16 is never alike
    alike = [r for r in _sources(dev.key) if _residency(dev, r.case, r.params) == shaped]
    return min(alike, key=lambda r: (abs(_kind(r.case, r.params)[2] - kind[2]), -len(r.launches[0].sm)), default=None)


def predicted_read_bytes(case: str, params: dict[str, int], grid: tuple[int, int, int], resident: int,
                         device: str = "h200") -> tuple[float, str] | None:
    """DRAM reads of `case` replayed over `replay_source`'s schedule (`borrowed`), with a note; None
    where it has none. Against the held-out sets' band matmuls, never placed: `band_errors(held_out_band())`."""
    src = replay_source(case, params, device)
    if src is None:
        return None
    got = replay(params, borrowed(src.launches[0], grid, resident), device).dram_read_bytes
    return got, (f"B ({4 * params['k'] * params['n'] / 2**20:.0f} MiB) replayed through the two L2 partitions "
                 f"over the schedule recorded at {case_id(src.case, src.params)}: {got / 2**20:.0f} MiB read "
                 "(l2replay)")


def replayed_alone(case: str, params: dict[str, int], device: str = "h200") -> float | None:
    """`predicted_read_bytes` at the case's own grid and residency: the replay alone, without models.dram's
    split lines or the kernels' own curves; None where it has no schedule."""
    from .models import predict
    from .suite.registry import get

    kc = get(case)
    p = kc.bind(**params)
    got = predicted_read_bytes(case, p, kc.launch(p).grid, predict(case, device, **p).resident_blocks, device)
    return None if got is None else got[0]


NCU = {"dram_read_bytes": "dram__bytes_read.sum",
       "near_miss_sectors": "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
       "crossing_sectors": "lts__t_sectors_srcunit_ltcfabric_op_read.sum",
       "far_hit_sectors": "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum"}


def rule_read_bytes(case: str, params: dict[str, int], device: str = "h200") -> float:
    """The linear share the model takes without a replay (models.dram.dram_traffic: reread_miss)."""
    from .models import predict
    from .models.dram import dram_traffic
    from .suite.registry import get

    dev, kc = lookup(device), get(case)
    p = kc.bind(**params)
    resident = predict(case, dev, **p).resident_blocks
    return dram_traffic(dev, kc.compulsory_bytes(p), resident, kc.launch(p), "matmul", p).read_bytes


def against_ncu(data, device: str = "h200"):
    """Per replayed case: each Replay field beside ncu's counter (median over the recorded runs; NaN
    where none counted it), the model's DRAM reads and its linear share's. `data`: measurements.load.
    Shapes whose DRAM reads no suite run counted (placed for a held-out set) are left out."""
    import pandas as pd

    from .models import predict
    from .suite.registry import get

    ncu = data[data.source.eq("ncu") & data.metric.isin(list(NCU.values()))]
    counted = ncu.groupby(["case_id", "metric"]).value.median()
    rows = []
    for r, rep in replayed(lookup(device).key):
        cid, case, params = case_id(r.case, r.params), r.case, r.params
        row = {"case_id": cid, "tile": params["tile"], "coarse": params.get("coarse", 1),
               "b_mib": 4 * params["k"] * params["n"] / 2**20,
               "model_dram_read_bytes": predict(case, device, **get(case).bind(**params)).dram_read_bytes,
               "rule_read_bytes": rule_read_bytes(case, params, device)}
        for field, metric in NCU.items():
            row[field] = getattr(rep, field)
            row[f"ncu_{field}"] = counted.get((cid, metric), float("nan"))
        rows.append(row)
    return pd.DataFrame(rows).dropna(subset=["ncu_dram_read_bytes"])  # shapes placed for held-out sets


def band_errors(cases, device: str = "h200"):
    """(case, params, measured DRAM read bytes) -> per case the model replays (replay_source), the
    model's error and the linear share's (rule_read_bytes), as fractions."""
    import pandas as pd

    from .models import predict

    rows = [{"case_id": case_id(case, p), "replay": predict(case, device, **p).dram_read_bytes / measured - 1,
             "rule": rule_read_bytes(case, p, device) / measured - 1}
            for case, p, measured in cases if replay_source(case, p, device) is not None]
    return pd.DataFrame(rows, columns=["case_id", "replay", "rule"])


def held_out_band(device: str = "h200", b_bytes: tuple[int, int] = (20 << 20, 64 << 20)) -> list[tuple]:
    """(case, params, ncu's DRAM read bytes) of the held-out sets' tiled and coarsened matmuls whose B
    lies in `b_bytes` (none of them placed)."""
    import json

    from .holdout import HOLDOUT_DIR, sets
    from .measurements import load

    out = []
    for name in sets():
        data = load(lookup(device).key, HOLDOUT_DIR / name)
        sel = data[data.source.eq("ncu") & data.metric.eq(NCU["dram_read_bytes"]) & data.case.isin(REPLAYED)]
        for (case, params), g in sel.groupby(["case", "params"]):
            p = json.loads(params)
            if b_bytes[0] <= 4 * p["k"] * p["n"] <= b_bytes[1]:
                out.append((case, p, float(g.value.median())))
    return out


PAIRS_DIR = "schedule_pairs"  # experiments/schedule_pairs.sh: placements recorded under ncu, one folder per call


@on_disk
def schedule_pairs(device: str = "h200", folder: str = PAIRS_DIR):
    """Every launch experiments/schedule_pairs.sh recorded (under checks/`folder`), its block schedule beside
    its own DRAM reads: call
    (UTC), card (UUID), case_id, b_mib, launch (0-2), ncu_dram_read_bytes, replay_dram_read_bytes (the
    replay of that launch's schedule)."""
    import pandas as pd

    from .allocation import DRAM_READS, card_uuid
    from .coresidency import KINDS, _launches
    from .measurements import DATA_DIR
    from .suite.profile import launch_values

    rows = []
    for call in sorted((DATA_DIR / lookup(device).key / "checks" / folder).glob("*T*Z")):
        card = card_uuid(call / "card.csv")
        for kind_dir in sorted(p for p in call.iterdir() if p.is_dir()):
            case, extra = KINDS[kind_dir.name]
            counts = launch_values(kind_dir / "ncu.csv", DRAM_READS)
            shapes = re.findall(r"m=(\d+) n=(\d+) k=(\d+)", (kind_dir / "log.txt").read_text())
            for j, (m, n, k) in enumerate(shapes):
                params = {"m": int(m), "n": int(n), "k": int(k)} | extra
                launches = _launches(kind_dir / f"placement-{kind_dir.name}-m{m}-n{n}-k{k}.npz")
                for i, pl in enumerate(launches):
                    rows.append({"call": call.name, "card": card, "case_id": case_id(case, params),
                                 "b_mib": 4 * params["k"] * params["n"] / 2**20, "launch": i,
                                 "ncu_dram_read_bytes": counts[len(launches) * j + i],
                                 "replay_dram_read_bytes": replay(params, pl, device).dram_read_bytes})
    return pd.DataFrame(rows)
