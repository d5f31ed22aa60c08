"""One case's recorded measurements beside today's prediction: the suite's runs and every held-out
set's, through the same comparison as the report (`validate.compare`), with the runs' provenance."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from .devices import device as lookup
from .measurements import DATA_DIR, load
from .suite.plan import case_id

if TYPE_CHECKING:
    import pandas as pd

RUN_COLUMNS = ["source_set", "run_id", "device", "driver", "cuda", "sm_clock_mhz", "commit", "utc"]


@dataclass(frozen=True)
class CaseMeasurements:
    """`rows`: validate.compare's rows for the case (predicted by today's model), one block per place it
    was recorded (`source_set`: "suite" or a held-out set's name); `runs`: those runs' provenance."""

    case_id: str
    rows: pd.DataFrame
    runs: pd.DataFrame


@lru_cache(maxsize=2)
def _recorded(device_key: str) -> tuple[tuple[str, pd.DataFrame], ...]:
    """(name, runs) of the suite ("suite") and of each held-out set with a run recorded, read once."""
    from .holdout import HOLDOUT_DIR, sets

    places = [("suite", DATA_DIR), *((name, HOLDOUT_DIR / name) for name in sets())]
    return tuple((name, data) for name, folder in places if len(data := load(device_key, folder)))


def measured(case: str, device: str, params: dict[str, int]) -> CaseMeasurements:
    """Every recorded measurement of exactly this case and these (complete) parameters on a device."""
    import pandas as pd

    from .validate import compare

    dev = lookup(device)
    cid = case_id(case, params)
    rows, runs = [], []
    for name, data in _recorded(dev.key):
        data = data[data.case_id == cid]
        if not len(data):
            continue
        rows.append(compare(dev.key, data, progress=False).assign(source_set=name))
        runs.append(data.drop_duplicates("run_id").assign(source_set=name)[RUN_COLUMNS])
    if not rows:
        return CaseMeasurements(cid, pd.DataFrame(), pd.DataFrame(columns=RUN_COLUMNS))
    return CaseMeasurements(cid, pd.concat(rows, ignore_index=True), pd.concat(runs, ignore_index=True))


def nearest(case: str, device: str, params: dict[str, int], most: int = 5) -> list[str]:
    """The recorded case ids of this case nearest these parameters (the sum over them of |log ratio|,
    1 where one is zero or missing), suite and held out."""
    dev = lookup(device)
    seen: dict[str, float] = {}
    for _, data in _recorded(dev.key):
        for cid, p in data[data.case == case].drop_duplicates("case_id")[["case_id", "params"]].itertuples(
                index=False):
            other = json.loads(p)
            seen[cid] = sum(_distance(params[k], other.get(k)) for k in params)
    return sorted(seen, key=seen.get)[:most]


def _distance(want: int, got: object) -> float:
    if got == want:
        return 0.0
    if isinstance(got, int) and got > 0 and want > 0:
        return float(abs(np.log(got / want)))
    return 1.0
