"""Access descriptions: index expressions of thread, block and loop indices -> per-warp addresses.

A kernel describes each memory instruction once (`Access`); `analyse` enumerates every warp of
every block and loop iteration that the expression can tell apart, and multiplies by the
iterations it cannot (names the expression does not read); periodic variables and the interior
of a ragged grid count once per period. Past a row budget it keeps the rows that stand for many
(a folded interior) and samples the rest uniformly and scales, and says so.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..errors import AccessError
from .banks import shared_access
from .coalescing import global_access, masked_lines
from .expr import inlined
from .lanes import WARP, distinct_sorted, line_keys, sorted_keys

BLOCK_VARS = ("bx", "by", "bz")


@dataclass(frozen=True)
class Access:
    """One memory instruction of a kernel, as its source code indexes the array."""

    name: str
    space: Literal["global", "shared"]
    index: str  # element index
    elem_bytes: int = 4
    width_bytes: int = 0  # bytes per lane; 0 = elem_bytes
    store: bool = False
    cond: str = ""  # predicate: lanes where it is false are inactive
    loops: tuple[str, ...] = ()  # loops (of the launch) around this instruction
    base_bytes: int = 0  # byte offset of the array in its space
    array: str = ""
    l1_cached: bool = True  # False for ld.global.cg / .cv: every sector goes to L2

    @property
    def width(self) -> int:
        return self.width_bytes or self.elem_bytes


@dataclass(frozen=True)
class Launch:
    """Geometry and constants that bind an access description to one launch."""

    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    loops: Mapping[str, int] = field(default_factory=dict)  # trip counts
    params: Mapping[str, int] = field(default_factory=dict)
    defs: Mapping[str, str] = field(default_factory=dict)  # named sub-expressions

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)

    @property
    def warps_per_block(self) -> int:
        return -(-self.threads_per_block // WARP)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)

    def constants(self) -> dict[str, int]:
        env = dict(self.params)
        env.update(bdx=self.block[0], bdy=self.block[1], bdz=self.block[2],
                   gdx=self.grid[0], gdy=self.grid[1], gdz=self.grid[2])
        return env


@dataclass(frozen=True)
class AccessCount:
    """Totals of one access over a launch (what ncu's L1TEX counters report)."""

    name: str
    space: str
    store: bool
    width_bytes: int
    requests: int  # warp-level instructions with an active lane
    sectors: int = 0
    lines: int = 0
    bytes_requested: int = 0
    wavefronts: int = 0  # L1 data-stage wavefronts (shared: bank conflicts; global: the same banks)
    ideal_wavefronts: int = 0
    tag_wavefronts: int = 0  # global: L1 tag-stage passes (expected: 4 tag banks, hashed)
    block_lines: int = 0  # global stores: distinct lines of all the block's warps at one instruction
    block_sectors: int = 0  # ... and their distinct sectors
    masked_lines: int = 0  # global stores: (request, line) pairs writing some sector in part
    block_masked_lines: int = 0  # ... of the block's warps at one instruction, taken together
    max_ways: int = 0
    sampled_fraction: float = 1.0  # < 1: estimated from a uniform sample of the rows

    @property
    def bytes_moved(self) -> int:
        return self.sectors * 32

    @property
    def efficiency(self) -> float:
        return self.bytes_requested / self.bytes_moved if self.sectors else 1.0


class _Bound:
    """An access with its expressions inlined and checked against one launch."""

    def __init__(self, access: Access, launch: Launch) -> None:
        self.access, self.launch = access, launch
        self.index = inlined(access.index, launch.defs)
        self.cond = inlined(access.cond, launch.defs) if access.cond else None
        unknown = [lp for lp in access.loops if lp not in launch.loops]
        if unknown:
            raise AccessError(f"{access.name}: loop(s) {unknown} have no trip count in the launch")

    @functools.cached_property
    def names(self) -> frozenset[str]:
        return self.index.names | (self.cond.names if self.cond else frozenset())

    def variables(self) -> tuple[list[tuple[str, int]], int]:
        """(distinguishing variables and their counts, multiplicity of the rest)."""
        counts = dict(zip(BLOCK_VARS, self.launch.grid, strict=True))
        counts.update({lp: self.launch.loops[lp] for lp in self.access.loops})
        used = [(v, n) for v, n in counts.items() if v in self.names]
        rest = math.prod(n for v, n in counts.items() if v not in self.names)
        return used, rest

    def addresses(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """(rows, warps, 32) byte addresses; rows follow the arrays in `values`."""
        bx, by, bz = self.launch.block
        tid = np.arange(self.launch.warps_per_block * WARP)
        tx, ty, tz = tid % bx, (tid // bx) % by, tid // (bx * by)
        env: dict[str, object] = self.launch.constants()
        env.update(tx=tx, ty=ty, tz=tz, lane=tid % WARP, warp=tid // WARP)
        for v in (*BLOCK_VARS, *self.launch.loops):  # loops outside this access sit at 0
            env.setdefault(v, 0)
        env.update({k: np.asarray(a)[:, None] for k, a in values.items()})
        idx = np.broadcast_to(self.index.evaluate(env), (max(_rows(values), 1), tid.size))
        active = tid < self.launch.threads_per_block
        if self.cond is not None:
            active = active & self.cond.evaluate(env).astype(bool)
        addr = self.access.base_bytes + idx.astype(np.int64) * self.access.elem_bytes
        addr = np.where(np.broadcast_to(active, addr.shape), addr, -1)
        if np.any(addr[addr != -1] < 0):
            raise AccessError(f"{self.access.name}: index {self.access.index!r} goes below 0")
        return addr.reshape(addr.shape[0], self.launch.warps_per_block, WARP)


def _rows(values: Mapping[str, np.ndarray]) -> int:
    return len(next(iter(values.values()))) if values else 1


def addresses(access: Access, launch: Launch, **fixed: int) -> np.ndarray:
    """(warps, 32) byte addresses of one block at fixed block and loop indices (default 0)."""
    bound = _Bound(access, launch)
    values = {k: np.array([v]) for k, v in fixed.items()}
    return bound.addresses(values)[0]


def _period(bound: _Bound, name: str, n: int, used: list[tuple[str, int]]) -> int:
    """Smallest p such that shifting `name` by p moves every address by a multiple of 128 bytes,
    or n when the index is not affine in `name` (or the predicate reads it). Affinity is checked
    on the first values, random values across the whole range and the last one, at two settings
    of the other variables."""
    if bound.cond is not None and name in bound.cond.names:
        return n
    rng = np.random.default_rng(1)
    probe = np.unique(np.concatenate([np.arange(min(n, 16)), rng.integers(0, n, 48), [n - 1]]))
    coeff = None
    for trial in range(2):
        fixed = {v: (0 if trial == 0 else int(rng.integers(c))) for v, c in used if v != name}
        values = {**{v: np.full(len(probe), x) for v, x in fixed.items()}, name: probe}
        idx = bound.addresses(values).reshape(len(probe), -1).astype(np.int64)
        live = idx[0] >= 0
        if not np.all((idx >= 0) == live):
            return n
        if len(probe) < 2 or not live.any():
            return 1 if len(probe) == n else n
        c = (idx[1, live] - idx[0, live]) // (probe[1] - probe[0])
        if not np.all(c == c[0]):
            return n
        c = int(c[0])
        if not np.all(idx[:, live] - idx[0, live] == c * (probe - probe[0])[:, None]):
            return n
        if coeff is not None and c != coeff:
            return n
        coeff = c
    return min(n, 128 // math.gcd(128, abs(coeff))) if coeff else 1


def _strata(bound: _Bound, name: str, n: int, used: list[tuple[str, int]]) -> tuple[np.ndarray, np.ndarray] | None:
    """Values of a predicate variable to enumerate and the weight of each: every value at which the
    lanes' mask differs from the middle value's (the grid's ragged edges), and of the contiguous
    interior, where it does not at the other variables' two end values each side and middle, one
    period of the index (one value where the index does not read it). None where there is no such interior,
    or where the predicate tests equality (a point, as a source term's block, that probes would miss)."""
    if "==" in bound.cond.text or "!=" in bound.cond.text:
        return None
    others = [(v, c) for v, c in used if v != name]
    probes = [sorted({0, 1, c // 2, c - 2, c - 1} & set(range(c))) for _, c in others]
    settings = [dict(zip([v for v, _ in others], combo, strict=True)) for combo in itertools.product(*probes)]
    if n < 8 or len(settings) > 125 or n * len(settings) * bound.launch.warps_per_block > 4_000_000:
        return None
    interior = np.ones(n, dtype=bool)
    for s in settings:
        values = {**{v: np.full(n, x) for v, x in s.items()}, name: np.arange(n)}
        active = bound.addresses(values).reshape(n, -1) >= 0
        interior &= (active == active[n // 2]).all(axis=1)
    inside = np.flatnonzero(interior)
    if len(inside) < 4 or inside[-1] - inside[0] + 1 != len(inside):
        return None
    lo, hi = int(inside[0]), int(inside[-1]) + 1
    p = _interior_period(bound, name, lo, hi, settings)
    if p is None:
        return None
    reps = lo + np.arange(p)
    weights = np.array([len(range(r, hi, p)) for r in reps], dtype=np.float64)
    edges = np.concatenate([np.arange(lo), np.arange(hi, n)])
    return np.concatenate([edges, reps]), np.concatenate([np.ones(len(edges)), weights])


def _interior_period(bound: _Bound, name: str, lo: int, hi: int, settings: list[dict[str, int]]) -> int | None:
    """Smallest power of two p (<= 128) such that, inside [lo, hi), shifting `name` by p keeps every
    lane's mask and moves every address by one multiple of 128 bytes, at each setting of the others."""
    for p in (1, 2, 4, 8, 16, 32, 64, 128):
        if hi - lo <= p:
            return None
        vs = lo + np.arange(min(hi - lo - p, 64))
        ok = True
        for s in settings:
            at = {v: np.full(len(vs), x) for v, x in s.items()}
            a = bound.addresses({**at, name: vs}).reshape(len(vs), -1)
            b = bound.addresses({**at, name: vs + p}).reshape(len(vs), -1)
            live = a >= 0
            shift = (b - a)[live]
            if not np.array_equal(live, b >= 0) or (len(shift) and (np.any(shift != shift[0]) or shift[0] % 128)):
                ok = False
                break
        if ok:
            return p
    return None


# rows past which a sample's weights are not listed: it is drawn uniformly instead
WEIGHED_SAMPLE_ROWS = 4_000_000


def _sample_rows(axis_weights: list[np.ndarray], total: int, take: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """About `take` of the `total` rows (flat indices, the last axis fastest) and what each stands
    for: every row that weighs more than a sampled row would stand for (a ragged edge's interior
    folded into one value outweighs the edge's rows by the interior's length: dropping it would
    lose it all), and a uniform sample of the rest, scaled by how many of them each stands for."""
    rng = np.random.default_rng(seed)
    keep = np.zeros(total if total <= WEIGHED_SAMPLE_ROWS else 0, dtype=bool)
    if len(keep):
        weight = functools.reduce(np.multiply.outer, axis_weights).ravel()
        for _ in range(8):  # each round's heavy rows leave less room and weight to the rest
            room = take - int(keep.sum())
            heavy = ~keep & (weight * room >= weight[~keep].sum())
            if room <= 0 or not heavy.any():
                break
            keep |= heavy
    if not keep.any():
        return rng.choice(total, size=take, replace=False), np.full(take, total / take)
    others = np.flatnonzero(~keep)
    drawn = rng.choice(others, size=min(len(others), max(take - int(keep.sum()), 1)), replace=False)
    return (np.concatenate([np.flatnonzero(keep), drawn]),
            np.concatenate([np.ones(int(keep.sum())), np.full(len(drawn), len(others) / max(len(drawn), 1))]))


def analyse(access: Access, launch: Launch, row_budget: int = 20_000,
            seed: int = 0) -> AccessCount:
    """Count requests/sectors (global) or wavefronts (shared) of `access` over the launch.

    Exact where the enumeration fits the row budget: variables the expression does not read
    only multiply, and a variable that shifts every address by a multiple of 128 bytes every p
    steps (an affine index outside the predicate) is enumerated over one period and weighted; a
    variable the predicate reads (a ragged grid edge), at its edge values and over one period of
    its interior (`_strata`). Past the budget, the rows heavier than a sampled row would stand for and a
    uniform sample of the others, scaled (`_sample_rows`; sampled_fraction < 1).
    """
    bound = _Bound(access, launch)
    used, rest = bound.variables()
    warps = launch.warps_per_block
    axes = []  # (name, values enumerated, weight of each value)
    for name, n in used:
        strata = _strata(bound, name, n, used) if bound.cond is not None and name in bound.cond.names else None
        if strata is not None:
            axes.append((name, *strata))
            continue
        p = _period(bound, name, n, used) if n > 1 else n
        vals = np.arange(p)
        weights = np.full(p, n // p, dtype=np.float64) + (vals < n % p)
        axes.append((name, vals, weights))
    total = math.prod(len(v) for _, v, _ in axes)
    if total * warps > row_budget:
        flat, scale = _sample_rows([w for _, _, w in axes], total, max(row_budget // warps, 1), seed)
    else:
        flat, scale = np.arange(total), np.ones(total)
    fraction = len(flat) / total
    values, weight = {}, scale * rest
    for name, vals, w in reversed(axes):
        pick = flat % len(vals)
        values[name] = vals[pick]
        weight = weight * w[pick]
        flat = flat // len(vals)
    chunk = max(262_144 // warps, 1)
    n_rows = len(weight)
    totals = np.zeros(11)
    max_ways = 0
    for start in range(0, n_rows, chunk):
        part = {k: v[start:start + chunk] for k, v in values.items()}
        w = np.repeat(weight[start:start + chunk], warps)
        wide = bound.addresses(part)
        rows = wide.reshape(-1, WARP)
        if access.space == "global" and access.store:
            blk = wide.reshape(len(wide), -1)
            by_sector = sorted_keys(blk >> 5, blk >= 0)
            totals[7] += weight[start:start + chunk] @ distinct_sorted(line_keys(by_sector))
            totals[8] += weight[start:start + chunk] @ distinct_sorted(by_sector)
            totals[10] += weight[start:start + chunk] @ masked_lines(blk, blk >= 0, access.width)
        if access.space == "global":
            g = global_access(rows, access.width, access.store)
            data = shared_access(rows, access.width, access.store)  # L1's data banks, as for shared
            totals += (w @ (g.active_per_row > 0), w @ g.sectors_per_row, w @ g.lines_per_row,
                       w @ g.active_per_row * access.width, w @ data.wavefronts_per_row, 0,
                       w @ g.tag_passes_per_row, 0, 0, w @ g.masked_lines_per_row if access.store else 0, 0)
        else:
            sh = shared_access(rows, access.width, access.store)
            active = (rows >= 0).any(axis=1)
            totals += (w @ active, 0, 0, 0, w @ sh.wavefronts_per_row, w @ sh.ideal_per_row, 0, 0, 0, 0, 0)
            max_ways = max(max_ways, sh.max_ways)
    t = [round(v) for v in totals]
    return AccessCount(name=access.name, space=access.space, store=access.store,
                       width_bytes=access.width, requests=t[0], sectors=t[1], lines=t[2],
                       bytes_requested=t[3], wavefronts=t[4], ideal_wavefronts=t[5],
                       tag_wavefronts=t[6], block_lines=t[7], block_sectors=t[8], masked_lines=t[9],
                       block_masked_lines=t[10],
                       max_ways=max_ways, sampled_fraction=fraction)
