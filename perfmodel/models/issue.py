"""Warp instructions a launch issues, from its SASS and its access description.

The access description counts every memory instruction exactly (warp-level, per access); the
SASS says how many instructions surround them. Accesses are grouped by their outermost loop
(inner loops the compiler unrolls end up in the outer loop's SASS); each SASS loop region goes
to the group whose memory-instruction mix it resembles most, and the group's regions run as
often as makes their memory instructions match the group's counts (least squares over the
kinds). The straight-line code runs once per warp; an access group no loop region took adds
just its memory instructions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..memory import Access, Launch
from ..memory.pattern import AccessCount
from ..sass import KINDS, Function

_KIND_ORDER = sorted(set(KINDS.values()))


def _kind(a: Access) -> str:
    return f"{a.space}_{'st' if a.store else 'ld'}"


def _vector(kinds: dict[str, float]) -> np.ndarray:
    return np.array([kinds.get(k, 0.0) for k in _KIND_ORDER], dtype=float)


def _fit(static: np.ndarray, dynamic: np.ndarray) -> float:
    """Runs of a code region whose memory instructions best match the dynamic counts."""
    return float(static @ dynamic) / float(static @ static) if static.any() else 0.0


@dataclass(frozen=True)
class Instructions:
    warp_instructions: float
    memory_instructions: float  # of them, from the access description
    note: str


def warp_instructions(fn: Function, accesses: list[Access], counts: list[AccessCount],
                      launch: Launch) -> Instructions:
    warps = launch.blocks * launch.warps_per_block
    groups: dict[tuple[str, ...], dict[str, float]] = {}
    for a, c in zip(accesses, counts, strict=True):
        g = groups.setdefault(a.loops[:1], {})
        g[_kind(a)] = g.get(_kind(a), 0.0) + c.requests
    straight = [r for r in fn.regions if r.depth == 0]
    loops = [r for r in fn.regions if r.depth > 0]
    total = sum(r.instructions for r in straight) * float(warps)
    # the straight-line code (once per warp) holds memory instructions of the loop-free group,
    # and peeled first iterations of loops: take them out of the groups' counts
    spent = _vector({k: v * warps for r in straight for k, v in r.kinds.items()})
    keys = list(groups)
    demand = {g: _vector(groups[g]) for g in keys}
    if () in demand:
        used = np.minimum(demand[()], spent)
        demand[()] = demand[()] - used
        spent = spent - used
    share = sum(demand.values()) if keys else spent
    for g in keys:
        demand[g] = np.maximum(demand[g] - spent * np.divide(demand[g], share, out=np.zeros_like(spent),
                                                             where=share > 0), 0)
    taken: dict[tuple[str, ...], list] = {g: [] for g in keys}
    idle = 0
    for r in loops:
        s = _vector(r.kinds)
        if not s.any() or not keys:
            idle += r.instructions
            continue
        cos = [float(s @ demand[g]) / (np.linalg.norm(s) * np.linalg.norm(demand[g]) or 1) for g in keys]
        taken[keys[int(np.argmax(cos))]].append(r)
    covered = np.zeros(len(_KIND_ORDER), dtype=bool)
    for g, regions in taken.items():
        if not regions:
            continue
        left = demand[g]
        top = min(r.depth for r in regions)
        outer = [r for r in regions if r.depth == top]
        if len(outer) < len(regions) and g:
            # an outer loop's own code runs once per trip; its inner loops take the rest
            s = sum(_vector(r.kinds) for r in outer)
            runs = min(launch.loops.get(g[0], 1) * float(warps), _fit(s, left))
            total += runs * sum(r.instructions for r in outer)
            left = np.maximum(left - s * runs, 0)
            regions = [r for r in regions if r.depth > top]
        s = sum(_vector(r.kinds) for r in regions)
        total += _fit(s, left) * sum(r.instructions for r in regions)
        covered |= s > 0
    for g, regions in taken.items():
        if g != () and not regions and not (demand[g][covered] > 0).any():
            total += float(demand[g].sum())
    total += idle * float(warps)  # loop control without memory instructions: once per warp
    memory = float(sum(c.requests for c in counts))
    return Instructions(total, memory, f"{fn.name}: {len(loops)} SASS loop regions, "
                                       f"{total / max(memory, 1):.1f} instructions per memory instruction")
