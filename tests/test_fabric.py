"""Reads crossing between the H200's two L2 partitions (models.fabric) against ncu's count of them
(plan h200_fabric_reads: the re-read probes at 24-64 MiB, recorded under reports/data/h200)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.ceilings import FABRIC_READ, ceilings
from perfmodel.measurements import DATA_DIR, load
from perfmodel.models.fabric import crossing_read_bytes
from perfmodel.suite.registry import get


def test_crossings_without_loss_follow_the_readers_sides():
    """Two partitions, nothing lost: the first pass crosses for half the buffer; one reader a line
    crosses no more, readers that change each pass cross for half the lines not yet read on their
    side: 1/2 + 1/4 + 1/8 + 1/16 of the buffer over 4 passes. One partition: nothing crosses."""
    assert crossing_read_bytes(1024, 1024, 4, "one", 2) == (512, 512)
    assert crossing_read_bytes(1024, 1024, 4, "shared", 2) == (960, 512)
    assert crossing_read_bytes(1024, 1024, 4, "shared", 1) == (0, 0)
    # all lost each pass: every re-read of a line homed away crosses
    assert crossing_read_bytes(1024, 4096, 4, "shared", 2) == (2048, 512)


@pytest.fixture(scope="module")
def h200_ncu():
    """The recorded H200 ncu rows (loaded once for the module)."""
    data = load("h200")
    return data[data.source == "ncu"]


@pytest.fixture(scope="module")
def launches(h200_ncu):
    rows = h200_ncu[(h200_ncu.metric == FABRIC_READ) & h200_ncu.case.str.startswith("probe.l2_read")]
    if rows.empty:
        pytest.skip("no recorded fabric counts (plan h200_fabric_reads)")
    return rows.groupby(["case", "params"]).value.median().reset_index()


def test_the_model_counts_the_crossings_ncu_counts(launches):
    """Each launch's crossing sectors, the model's (from its own DRAM reads) against ncu's: low in the
    band, where the reader's copies are lost a little sooner than the home's lines, most at 44 MiB for
    the plain stream, whose DRAM reads the model also has 11-17 % low there (-19 %, -24 % at 8 passes) -
    within 25 %, 7 % on average, never over by 5 %."""
    err = []
    for case, params, measured in launches.itertuples(index=False):
        p = json.loads(params)
        fabric = [t for t in perfmodel.predict(case, "h200", **p).breakdown if t.name == "fabric"]
        assert fabric, f"{case} {p}: no fabric term"
        err.append(fabric[0].work / (32 * measured) - 1)
    err = np.array(err)
    assert len(err) >= 30
    assert np.abs(err).max() <= 0.25 and np.abs(err).mean() <= 0.07 and err.max() <= 0.05, np.round(100 * err, 1)


def test_the_fabric_rates_are_measured():
    """Whole lines cross at about half the read stream's DRAM rate (each side serves the other half of
    a stream), 64-byte halves slower a byte."""
    ceil = ceilings("h200")
    whole, halves = ceil.fabric_bytes_per_s, ceil.fabric_half_line_bytes_per_s
    assert whole.source.startswith("measured") and halves.source.startswith("measured")
    assert 0.45 <= whole.value / ceil.dram_read_bytes_per_s.value <= 0.55
    assert 0.85 <= halves.value / whole.value <= 0.97


def _crossing_errors(ncu: pd.DataFrame) -> np.ndarray:
    """Per launch: the law's crossings from the launch's own DRAM reads against ncu's."""
    wide = ncu.pivot_table(index=["case", "params"], columns="metric", values="value", aggfunc="median")
    err = []
    for (case, params), row in wide.iterrows():
        p = json.loads(params)
        law = crossing_read_bytes(4 * p["n"], row["dram__bytes_read.sum"], p["passes"], get(case).rereaders(p), 2)[0]
        err.append(law / (32 * row[FABRIC_READ]) - 1)
    return np.array(err)


def test_the_crossing_law_holds_on_another_l2(h200_ncu):
    """The same probes through an H100's L2 (two partitions of 25 MiB: the band moves down by 10 MiB),
    each launch's crossings from its own DRAM reads (the law has no H100 number in it): within 13 %, 3.2 %
    low on average (the plain stream at 44 MiB, 8 passes -12 %). On the H200 the same within 17 %, 4.7 %."""
    ncu = pd.read_csv(DATA_DIR / "h100" / "checks" / "fabric_reads" / "ncu.csv.gz")
    err = _crossing_errors(ncu)
    assert len(err) == 33
    assert np.abs(err).max() <= 0.13 and np.abs(err).mean() <= 0.04, np.round(100 * err, 1)
    err = _crossing_errors(h200_ncu[h200_ncu.run_id.astype(str) == "20261205T182216Z"])
    assert len(err) == 33
    assert np.abs(err).max() <= 0.17 and np.abs(err).mean() <= 0.05, np.round(100 * err, 1)
