"""Shared fixtures: the comparison of the model with the recorded H200 data (built once)."""

from __future__ import annotations

import os

import pytest

# calibrations computed afresh from the recorded data, never read back from a disk cache (perfmodel.cache)
os.environ["PERFMODEL_CACHE_DIR"] = "off"


@pytest.fixture(scope="session")
def recorded():
    """Every recorded H200 measurement (reports/data/h200)."""
    from perfmodel.measurements import load

    data = load("h200")
    if not len(data):
        pytest.skip("no recorded H200 data under reports/data/h200")
    return data


@pytest.fixture(scope="session")
def comparison(recorded):
    from perfmodel.validate import compare

    return compare("h200", recorded, progress=False)


def describe(rows) -> str:
    """A failure message that names study, case, metric, predicted and measured."""
    lines = [f"{r.study} {r.case_id} {r.metric}: predicted {r.predicted:.6g}, measured {r.measured:.6g} "
             f"({100 * r.rel_error:+.2f} %)" for r in rows.head(15).itertuples()]
    return f"{len(rows)} row(s) off:\n  " + "\n  ".join(lines)


def rows_where(t, **eq):
    """The rows of `t` whose column k equals v, or is in v where v is a list, tuple or set, for each k=v."""
    for k, v in eq.items():
        t = t[t[k].isin(v) if isinstance(v, list | tuple | set) else t[k] == v]
    return t
