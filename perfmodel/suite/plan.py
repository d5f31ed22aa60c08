"""Which cases to measure at which parameters: a TOML plan (experiments/plans/*.toml).

    [[case]]
    name = "matmul.tiled"
    params = { m = [1024, 4096], tile = [16, 32] }   # cartesian product
    tie = { n = "m", k = "m" }                          # n and k follow m
    check = { m = 997, n = 1003, k = 1009 }             # ragged size for the correctness check
    ncu = true                                          # also profile under Nsight Compute
"""

from __future__ import annotations

import itertools
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PerfModelError
from .registry import get


@dataclass(frozen=True)
class PlannedCase:
    name: str
    params: dict[str, int]
    check: dict[str, int] | None = None  # None: check at params
    time: bool = True
    ncu: bool = False
    cold: bool = True  # flush L2 between timed repetitions
    extra: dict = field(default_factory=dict)

    @property
    def case_id(self) -> str:
        return case_id(self.name, self.params)


def case_id(name: str, params: dict[str, int]) -> str:
    return f"{name}[{','.join(f'{k}={v}' for k, v in sorted(params.items()))}]"


def params_json(params: dict[str, int]) -> str:
    return json.dumps(dict(sorted(params.items())), separators=(",", ":"))


def _read(path: str | Path) -> dict:
    try:
        return tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PerfModelError(f"cannot read plan {path}: {exc}") from exc


def plan_setting(path: str | Path, key: str, default: object = False) -> object:
    """A plan's top-level setting: `ncu_detail = true` asks for the detail counters too,
    `ncu_metrics = [...]` for these counters instead, `ncu_writeback = true` for the write-back
    pass after the studies (perfmodel.suite.profile.WRITEBACK), `ncu_writeback_only = true` for it alone."""
    return _read(path).get(key, default)


def load_plan(path: str | Path) -> list[PlannedCase]:
    doc = _read(path)
    out: list[PlannedCase] = []
    for i, entry in enumerate(doc.get("case", [])):
        if "name" not in entry:
            raise PerfModelError(f"{path}: [[case]] #{i + 1} has no name")
        case = get(entry["name"])
        grid = {k: v if isinstance(v, list) else [v] for k, v in entry.get("params", {}).items()}
        tie = entry.get("tie", {})
        for combo in itertools.product(*grid.values()) if grid else [()]:
            raw = dict(zip(grid, combo, strict=True))
            raw.update({k: raw[v] for k, v in tie.items()})
            params = case.bind(**raw)
            check = entry.get("check")
            check_params = case.bind(**{**params, **check}) if check else None
            out.append(PlannedCase(entry["name"], params, check_params, entry.get("time", True),
                                   entry.get("ncu", False), entry.get("cold", True)))
    return out
