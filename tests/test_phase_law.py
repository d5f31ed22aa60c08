"""The issue-bound phase law (models.phase_law), read off the suite's temporal-blocking launches by
their CUDA-event times, against what ncu counted on the same launches."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.devices import device
from perfmodel.measurements import load, param
from perfmodel.models.phase_law import CASE, issue_phase_law

ISSUE, CYCLES = "smsp__issue_active.sum", "sm__cycles_active.sum"


@pytest.fixture(scope="module")
def law():
    fitted = issue_phase_law(device("h200"))
    assert fitted is not None, "no suite launches of stencil.temporal recorded"
    return fitted


def test_issue_share_is_ncus_issue_active(law):
    """Where the work phase is nearly all of the launch (6 and 8 steps at 4096 squared, run
    20261206T012812Z and earlier), ncu's issue-active share of the four schedulers' cycles is the
    phase's: the law, fitted to times alone, lands within 0.04 of it for both block shapes (H200:
    0.818 and 0.868 against 0.79-0.80 and 0.85-0.86), and in the same order - 512-thread blocks, four
    an SM, wait less at their barriers than 1024-thread blocks, two an SM."""
    d = load("h200")
    d = d[(d.case == CASE) & (d.source == "ncu") & d.metric.isin([ISSUE, CYCLES])]
    counted = d.pivot_table(index=["case_id", "params"], columns="metric", values="value", aggfunc="median")
    counted = counted.dropna().reset_index()
    long = counted[param(counted, "steps") >= 6]
    assert len(long) >= 4
    for ppt, blocks in ((1, 2), (2, 4)):
        rows = long[param(long, "ppt") == ppt]
        share = rows[ISSUE] / (4 * rows[CYCLES])
        fitted = law.issue_shares[law.blocks_per_sm.index(blocks)]
        assert len(rows) >= 2 and (abs(share - fitted) < 0.04).all(), (ppt, fitted, share.tolist())
    assert law.issue_shares[law.blocks_per_sm.index(4)] > law.issue_shares[law.blocks_per_sm.index(2)]


def test_load_phase_hides_as_the_work_phase_grows(law):
    """Exposed share of the load phase: most of it at even phases with two blocks an SM, less with
    four, none once the work phase is some four times longer."""
    for blocks in law.blocks_per_sm:
        assert law.phases(blocks, 1.0, 0.5) is None  # the work phase shorter: the block rule's
        _, even = law.phases(blocks, 1.0, 1.01 * law.issue_shares[law.blocks_per_sm.index(blocks)])
        _, long = law.phases(blocks, 1.0, 6.0)
        assert 0.2 < even < 1.0 and long == 0.0
    assert 3.0 < law.hidden_at_ratio < 5.0


@pytest.mark.parametrize("tile", [16, 32])
def test_issue_bound_transposes_keep_the_block_rule(tile):
    """A shared-memory transpose's work phase is bound by issue but shorter than its loads: the law
    does not reach it."""
    p = perfmodel.predict("transpose.smem", "h200", rows=4096, cols=4096, tile=tile, pad=1)
    by = {t.name: t for t in p.breakdown}
    assert p.bound == "barrier" and by["issue"].time_s >= by["l1"].time_s
    assert "issuing at" not in by["barrier"].note
