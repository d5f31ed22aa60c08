"""A ceiling and the curves measured ones are read off: ncu's DRAM reads of a probe's launches as
(x, y) points, interpolated."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Ceiling:
    name: str
    value: float
    unit: str
    source: str  # "measured: <case>" or "datasheet"
    cases: tuple[str, ...] = ()  # the recorded cases a fitted ceiling comes from


def _ncu_read_curve(data, case: str, point,
                    draws: pd.DataFrame | None = None) -> tuple[tuple[tuple[float, float], ...], list[str]]:
    """A curve from ncu's DRAM reads of a case's launches (median per case): `point(params, bytes)`
    gives each one's (x, y), or None to leave it out; a y measured twice at one x is their median.
    `draws`: more launches of the case (case_id, params, value), each one y of its own (`_allocation_draws`).
    Returns the curve sorted by x, and the cases used."""
    sel = data[(data.case == case) & (data.source == "ncu") & (data.metric == "dram__bytes_read.sum")]
    reads = sel.groupby(["case_id", "params"]).value.median().reset_index()
    if draws is not None and len(draws):
        reads = pd.concat([reads, draws[["case_id", "params", "value"]]], ignore_index=True)
    pts: dict[float, list[float]] = {}
    cases = []
    for cid, params, value in zip(reads.case_id, reads.params, reads.value, strict=True):
        if (xy := point(json.loads(params), float(value))) is not None:
            pts.setdefault(float(xy[0]), []).append(xy[1])
            cases.append(cid)  # a draw's id tags its case's with "@call"
    return tuple(sorted((x, float(np.median(y))) for x, y in pts.items())), sorted(cases)


READERS = {"one": "l2_retention", "shared": "l2_shared_retention", "split": "l2_split_retention"}
RETENTION_PASSES = 4  # the pass count the retention curves are measured at over 16-128 MiB


def _at(curve: tuple[tuple[float, float], ...], x: float) -> float:
    xs, ys = zip(*curve, strict=True)
    return float(np.interp(x, xs, ys))


def _scaled(curve: tuple[tuple[float, float], ...], main: tuple[tuple[float, float], ...], x: float) -> float:
    """`curve` at x; below its sizes `main` at x times their ratio at curve's smallest; above them `main`
    (past the whole L2 every pass loses all: held-out set 33's 61 MiB stream, 8 passes, 94 % per pass)."""
    if x > curve[-1][0]:
        return _at(main, x)
    if x >= curve[0][0]:
        return _at(curve, x)
    ref = _at(main, curve[0][0])
    return _at(main, x) * curve[0][1] / ref if ref > 0 else _at(main, x)
