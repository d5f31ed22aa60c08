"""The compiled kernels' SASS (cuobjdump -sass, recorded per device): instructions and loops.

Recorded under reports/data/<device>/run-*-sass.txt.gz by experiments/gpu_session.sh. A loop is
the address range of a backward branch; a region is the code of one loop without its inner
loops, or the straight-line code outside every loop (depth 0). Only memory instructions get a
kind, because the access descriptions count those exactly and anchor the rest.
"""

from __future__ import annotations

import functools
import gzip
import re
from dataclasses import dataclass, field

from .measurements import DATA_DIR

_LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
_FUNC = re.compile(r"Function : (\w+)")
_TARGET = re.compile(r"0x([0-9a-f]+)")
# memory instruction kinds, matched on the opcode's base name
KINDS = {"LDS": "shared_ld", "LDSM": "shared_ld", "STS": "shared_st", "LDG": "global_ld", "STG": "global_st"}


@dataclass(frozen=True)
class Region:
    """Instructions of one loop body without its inner loops (or of the straight-line code)."""

    start: int
    end: int
    depth: int  # 0 for straight-line code
    instructions: int
    kinds: dict[str, int] = field(default_factory=dict)  # memory instructions by kind


@dataclass(frozen=True)
class Function:
    name: str
    instructions: int  # up to the last EXIT (the padding after it never runs)
    regions: tuple[Region, ...]
    # global loads issued inside a round's work (after a barrier and a shared load, before the next
    # barrier): the compiler moved a later round's load up, so its round trip runs under this work
    loads_in_work: int = 0
    barriers: int = 0  # BAR instructions: two a load -> barrier -> work -> barrier round

    @property
    def hoisted_share(self) -> float:
        """The share of the load -> barrier -> work -> barrier rounds whose load sits in the work before."""
        return self.loads_in_work / (self.barriers / 2) if self.barriers else 0.0


def parse(text: str) -> dict[str, Function]:
    """Every function of a cuobjdump -sass listing."""
    out: dict[str, Function] = {}
    name, rows = None, []
    for line in text.splitlines() + ["Function : _end"]:
        m = _FUNC.search(line)
        if m:
            if name:
                out[name] = _function(name, rows)
            name, rows = m.group(1), []
            continue
        m = _LINE.match(line)
        if m and name:
            rows.append((int(m.group(1), 16), m.group(3), m.group(4)))
    return out


def _function(name: str, rows: list[tuple[int, str, str]]) -> Function:
    last_exit = max((i for i, r in enumerate(rows) if r[1] == "EXIT"), default=len(rows) - 1)
    rows = rows[: last_exit + 1]
    loops = []  # (start address, end address) of each backward branch
    for addr, op, args in rows:
        if op.startswith("BRA") and (t := _TARGET.search(args)) and int(t.group(1), 16) <= addr:
            loops.append((int(t.group(1), 16), addr))
    loops = sorted(set(loops), key=lambda lo: (lo[0], -lo[1]))

    def owner(addr: int) -> tuple[int, int] | None:
        inside = [lo for lo in loops if lo[0] <= addr <= lo[1]]
        return min(inside, key=lambda lo: lo[1] - lo[0]) if inside else None

    counts: dict[tuple[int, int] | None, list] = {}
    for addr, op, _ in rows:
        key = owner(addr)
        entry = counts.setdefault(key, [0, {}])
        entry[0] += 1
        kind = KINDS.get(op.split(".")[0])
        if kind:
            entry[1][kind] = entry[1].get(kind, 0) + 1
    regions = []
    for key, (n, kinds) in counts.items():
        if key is None:
            regions.append(Region(0, rows[-1][0] if rows else 0, 0, n, kinds))
        else:
            depth = sum(1 for lo in loops if lo[0] <= key[0] and key[1] <= lo[1])
            regions.append(Region(key[0], key[1], depth, n, kinds))
    return Function(name, len(rows), tuple(sorted(regions, key=lambda r: r.start)), *_barrier_rounds(rows))


def _barrier_rounds(rows: list[tuple[int, str, str]]) -> tuple[int, int]:
    """(global loads between a barrier's shared loads and the next barrier, barriers), in address order."""
    barriers = found = 0
    shared = False
    for _, op, _ in rows:
        kind = KINDS.get(op.split(".")[0])
        if op.startswith("BAR"):
            barriers, shared = barriers + 1, False
        elif kind == "shared_ld":
            shared = True
        elif kind == "global_ld" and barriers and shared:
            found += 1
    return found, barriers


@functools.cache
def functions(device_key: str, check: str | None = None) -> dict[str, Function]:
    """The newest recorded SASS listing of a device ({} when none is recorded): a run's, or with `check` the
    one recorded beside that checks folder's sweeps (checks/<check>/<utc>/sass.txt.gz)."""
    files = sorted((DATA_DIR / device_key).glob("run-*-sass.txt.gz") if check is None else
                   (DATA_DIR / device_key / "checks" / check).glob("*/sass.txt.gz"))
    if not files:
        return {}
    with gzip.open(files[-1], "rt") as fh:
        return parse(fh.read())
