"""The block scheduler's co-residency law, read off the recorded placements (experiments/placement.py):
how many blocks, and how long, before a block each of its SM's co-resident blocks started. With B blocks
per SM on S SMs, the j-th latest started j/B of a block's time earlier and j x S blocks earlier - the
law is the spread around that: for kernels with barriers per slot j, the two offsets drawn together,
pooled over their recorded launches (TILE 16 and 32, COARSE 2 and 8); for the others (the naive
matmul) one spread for all slots, pooled over every recorded launch, the offsets independent."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .cache import on_disk
from .measurements import DATA_DIR

if TYPE_CHECKING:
    from .suite.registry import KernelCase

SAMPLES = 256  # pairs a slot of the law with barriers, a systematic sample of all of them
QUANTILES = 24  # of each offset, the law without


@dataclass(frozen=True)
class Placement:
    """One launch: per block (row-major over the grid) its SM and its start and end (ns)."""

    sm: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    grid: tuple[int, int, int]


def _launches(path: Path) -> list[Placement]:
    z = np.load(path)
    grid = tuple(int(g) for g in z["grid"])
    return [Placement(z["sm"][i], z["start_ns"][i], z["end_ns"][i], grid) for i in range(len(z["sm"]))]


def _folder(device_key: str) -> Path:
    return DATA_DIR / device_key / "checks" / "placement"


def recorded_launches(device_key: str) -> list[tuple[str, list[Placement]]]:
    """(file stem, its launches) of every placement experiments/placement.py recorded on a device."""
    return [(f.stem, _launches(f)) for f in sorted(_folder(device_key).glob("placement-*.npz"))]


# experiments/placement.py's file kinds: the case and the parameters besides m, n, k
KINDS = {"naive": ("matmul.naive", {}), "tiled": ("matmul.tiled", {"tile": 16}),
         "tiled32": ("matmul.tiled", {"tile": 32}), "coarsened2": ("matmul.coarsened", {"tile": 32, "coarse": 2}),
         "coarsened1": ("matmul.coarsened", {"tile": 32, "coarse": 1}),
         "coarsened4": ("matmul.coarsened", {"tile": 32, "coarse": 4}),
         "coarsened8": ("matmul.coarsened", {"tile": 32, "coarse": 8})}


@dataclass(frozen=True)
class Recorded:
    """The launches recorded of one case at one shape."""

    case: str
    params: dict[str, int]
    launches: list[Placement]


@lru_cache(maxsize=4)
def recorded(device_key: str) -> tuple[Recorded, ...]:
    """Every placement experiments/placement.py recorded on a device (three launches of each case and shape)."""
    out = []
    for stem, launches in recorded_launches(device_key):
        kind, m, n, k = re.fullmatch(r"placement-(\w+)-m(\d+)-n(\d+)-k(\d+)", stem).groups()
        case, extra = KINDS[kind]
        out.append(Recorded(case, {"m": int(m), "n": int(n), "k": int(k)} | extra, launches))
    return tuple(out)


def placements_of(device_key: str, case: str, params: dict[str, int]) -> tuple[Placement, ...]:
    """The recorded launches of exactly this case and shape on a device; none where none is recorded."""
    shape = {d: params.get(d) for d in "mnk"}
    for kind, (name, extra) in KINDS.items():
        if name == case and params == shape | extra:
            path = _folder(device_key) / f"placement-{kind}-m{shape['m']}-n{shape['n']}-k{shape['k']}.npz"
            return tuple(_launches(path)) if path.is_file() else ()
    return ()


@dataclass(frozen=True)
class CoResidency:
    """Per slot j (the j-th latest block started on the SM before a block, j = 1, 2, ...; the last row
    serves any later slot), pairs of (blocks between the two - j x S, start offset / median block time -
    j / B) drawn together - a predecessor fewer blocks back also started more recently (correlation
    ~0.5), so the two are not independent - and the share of such predecessors still running."""

    index_offsets: np.ndarray  # (slots, pairs)
    time_offsets: np.ndarray  # (slots, pairs), paired with index_offsets element by element
    running: np.ndarray  # (slots,)
    launches: int

    def slot(self, j: int) -> int:
        """The row that serves slot j."""
        return min(j, len(self.running)) - 1


@dataclass(frozen=True)
class _Ordered:
    """One launch set up once for every slot: its blocks by SM, then by start; SMs, blocks per SM (the
    first wave on one SM) and the median block time."""

    pl: Placement
    order: np.ndarray
    sms: int
    blocks_per_sm: int
    block_ns: float


def _ordered(pl: Placement) -> _Ordered:
    sm, start, end = pl.sm, pl.start_ns, pl.end_ns
    first = np.where(sm == sm[0])[0]
    b = int(np.sum(start[first] < end[first].min()))
    return _Ordered(pl, np.lexsort((start, sm)), len(np.unique(sm)), b, float(np.median(end - start)))


def _lagged(o: _Ordered, j: int) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(index distance - j S, time offset / T - j / B, blocks with a j-th predecessor) from each block past
    the first wave to the block that started j-th latest before it on its SM, where that one is still
    running; None where the launch has no more than j blocks per SM."""
    sm, start, end = o.pl.sm, o.pl.start_ns, o.pl.end_ns
    b, sms = o.blocks_per_sm, o.sms
    if j >= b:
        return None
    cur, prev = o.order[j:], o.order[:-j]
    later = (sm[cur] == sm[prev]) & (cur >= b * sms)
    keep = later & (end[prev] > start[cur])
    cur, prev = cur[keep], prev[keep]
    return cur - prev - j * sms, (start[cur] - start[prev]) / o.block_ns - j / b, int(later.sum())


def in_step(case: KernelCase) -> bool:
    """Whether a kernel's blocks wait at barriers (its suite.registry.KernelCase): all the recorded
    matmuls but the naive one."""
    return bool(case.sync_after_loads or case.barrier_phases)


@on_disk
def law(device_key: str, barriers: bool = True) -> CoResidency | None:
    """The law for kernels with barriers (`barriers`): pooled over their recorded launches, per slot, the
    two offsets paired - blocks held in step keep their predecessors' spread at every slot (TILE 16: the
    middle 80 % within +-83 blocks at all seven). Without barriers the earlier law: one slot for all, the
    offsets' quantiles over every recorded launch taken independently - the naive matmul's own per-slot
    law (its blocks spread wider the further back: +-105 blocks at slot 1, +-145 at 4) shares too much
    (held out: its L2 reads -4.2 % on average, 40 of 118 rows past 5 %, against -0.7 % and 8), which its
    recorded placements, replayed, do not (within 3.6 %): not understood, so not taken. None where none
    is recorded."""
    from .suite.registry import get

    cases = recorded(device_key)
    if not barriers:
        got = [r for c in cases for pl in c.launches if (r := _lagged(_ordered(pl), 1)) is not None]
        if not got:
            return None
        q = (np.arange(QUANTILES) + 0.5) / QUANTILES
        i, o = (np.quantile(np.concatenate([r[n] for r in got]), q) for n in (0, 1))
        index, times = np.meshgrid(i, o, indexing="ij")  # every pairing: independent
        return CoResidency(index.reshape(1, -1), times.reshape(1, -1), np.ones(1), len(got))
    launches = [_ordered(pl) for c in cases if in_step(get(c.case)) for pl in c.launches]
    index, times, running = [], [], []
    for j in range(1, 64):
        got = [r for o in launches if (r := _lagged(o, j)) is not None]
        if not got:
            break
        i, o = np.concatenate([d for d, _, _ in got]), np.concatenate([t for _, t, _ in got])
        order = np.lexsort((o, i))
        pick = order[((np.arange(SAMPLES) + 0.5) * len(order) / SAMPLES).astype(np.int64)]
        index.append(i[pick].astype(float))
        times.append(o[pick])
        running.append(len(i) / sum(n for _, _, n in got))
    if not index:
        return None
    return CoResidency(np.array(index), np.array(times), np.array(running), len(launches))


@on_disk
def first_wave(device_key: str, blocks_per_sm: int) -> tuple[np.ndarray, ...]:
    """The SM of each first-wave block (ids 0 .. B x SMs - 1), one map per recorded launch with B
    blocks per SM whose first wave started together (before any of its blocks ended); none where none
    is recorded. Each SM's blocks lie ~SMs apart (132 +- 8 on the H200), but which ones varies from
    launch to launch: the model averages over the maps."""
    maps = []
    for _, launches in recorded_launches(device_key):
        for pl in launches:
            sm, start, end = pl.sm, pl.start_ns, pl.end_ns
            n0 = blocks_per_sm * len(np.unique(sm))
            if len(sm) <= n0 or not (np.bincount(sm[:n0]) == blocks_per_sm).all():
                continue
            if start[:n0].max() < end[:n0].min() and start[:n0].max() <= start[n0:].min():
                maps.append(sm[:n0].copy())
    return tuple(maps)
