"""Held-out sets: predictions frozen in a file before their cases were measured, then compared."""

from __future__ import annotations

import json

import pytest

import perfmodel
from perfmodel.holdout import HOLDOUT_DIR, compare_holdout, frozen, sets
from perfmodel.measurements import load
from perfmodel.models.base import Prediction


def test_a_prediction_survives_the_frozen_file():
    p = perfmodel.predict("matmul.coarsened", "h200", m=999, n=1234, k=777, coarse=2)
    assert Prediction.from_dict(json.loads(json.dumps(p.as_dict()))) == p


@pytest.fixture(scope="module", params=sets())
def held(request):
    name = request.param
    return name, frozen(name, "h200"), load("h200", HOLDOUT_DIR / name), compare_holdout(name, "h200")


def test_predictions_were_frozen_before_the_run_measured_them(held):
    name, (header, preds), data, _ = held
    assert len(preds) >= 30 and header["commit"] and not header["commit"].endswith("-dirty")
    runs = data.drop_duplicates("run_id")
    assert len(runs) and (runs.utc > header["utc"]).all(), f"{name}: a run predates its frozen predictions"
    assert set(data.case_id) <= set(preds)  # nothing measured that was not predicted first


def test_held_out_accuracy(held):
    """The frozen predictions against the held-out runs (H200): time MAPE under 10 % (the issue's
    target; 6.5, 5.8 and 7.4 % measured), within 10 % for most, occupancy exact, L1 counts within 5 %
    (one row 5.1 %) - and one or two cases past 25 %, which the report names."""
    name, _, _, t = held
    time = t[t.kind == "time"]
    assert len(time) >= 30
    assert time.rel_error.abs().mean() <= 0.10, name
    assert (time.rel_error.abs() <= 0.10).mean() >= 0.7, name
    assert (time.rel_error.abs() > 0.25).sum() <= 2 and time.rel_error.abs().max() < 0.35, name
    assert (t[t.kind == "occupancy"].rel_error == 0).all()
    l1 = t[t.kind == "counter-l1"].rel_error.abs()
    # one row past 5 %: stencil.temporal at 1358 x 1230, 2 points a thread, its global load requests
    # -5.1 % (edge blocks of a small, ragged grid; the model weighs first, middle and last blocks)
    assert (l1 <= 0.05).mean() >= 0.99 and l1.max() < 0.06, name
    baseline = ((time.baseline - time.measured) / time.measured).abs().mean()
    assert baseline > 5 * time.rel_error.abs().mean()  # the naive datasheet roofline, beside it
