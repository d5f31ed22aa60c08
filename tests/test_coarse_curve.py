"""COARSE 4 and 8's own loss of B (perfmodel.coarse_curve): m = k = 1920 swept from 14 to 56 MiB, four
allocations a size (b_curve and b_curve_coarse, 2026-12-02), other families as checks, held-out set 38
(drawn and frozen with the curve, then measured) out of sample."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.coarse_curve import _curve, coarse_points
from perfmodel.holdout import compare_holdout

CALIBRATION = (1920, 1920)


@pytest.fixture(scope="module")
def pts() -> pd.DataFrame:
    p = coarse_points("h200")
    if p.empty:
        pytest.skip("no COARSE curves recorded under reports/data/h200/checks")
    return p


def _off_curve(pts: pd.DataFrame, coarse: int, by: str) -> pd.Series:
    """Other families' losses in the ramp (5-95 % of B) less the calibration curve's, read by `by`
    (group_bytes: the model's footprint; b_bytes: B alone)."""
    cal = pts[(pts.coarse == coarse) & (pts.m == CALIBRATION[0]) & (pts.k == CALIBRATION[1])].sort_values(by)
    other = pts[(pts.coarse == coarse) & ~((pts.m == CALIBRATION[0]) & (pts.k == CALIBRATION[1]))]
    ramp = other[other.loss.between(0.05, 0.95)]
    return ramp.loss - np.interp(ramp[by], cal[by], np.maximum.accumulate(cal.loss.clip(0, 1)))


def test_coarse_8_loses_b_inside_one_partition(pts):
    """One block an SM, in step: COARSE 8 at m = k = 1920 loses ~3 % of B at 16 MiB, ~40 % at 24, all of it by
    31 - well inside one 30 MiB L2 partition, where the linear rule (models.dram.reread_miss) says none."""
    _, xs, ys = _curve("h200", 8)
    cal = pts[(pts.coarse == 8) & (pts.m == 1920) & (pts.k == 1920)].set_index("n")
    assert cal.loss[2048] < 0.02 and 0.30 < cal.loss[3264] < 0.45 and cal.loss[4096] > 0.95
    assert cal.b_bytes[4096] < 31 * 2**20 and ys[-1] == 1.0 and len(xs) >= 30


def test_off_the_line_coarse_8_loses_less():
    """B's pitch off the line (n one more at m = k = 1920: 31 of 32 rows across a line; b_curve_coarse_pitch,
    card GPU-f6a51f5f): COARSE 8 loses less than aligned from its onset until both have lost all of B (0.47/
    0.69/0.81 against 0.65/0.80/0.98 at 28/30/32 MiB of footprint), COARSE 4 the same within ~0.03 past 24
    MiB. Neither is read: the ratio in proportion to the share left fewer held-out rows within 5 %
    (COARSE 8 20 -> 19, COARSE 4 24 -> 23; module note). The suite's COARSE 8 at n = 3845 (plan
    h200_warp_seams, the family's m and k) read 0.69 of B a re-read, where the aligned curve says 0.81."""
    from perfmodel.coarse_curve import coarse_loss
    from perfmodel.devices import device
    from perfmodel.models.dram import group_bytes
    from perfmodel.suite.registry import get

    for coarse, lower in ((8, True), (4, False)):
        _, x0, y0 = _curve("h200", coarse)
        wide, x1, y1 = _curve("h200", coarse, pitched=True)
        assert wide == 31 / 32 and len(x1) >= 20
        aligned = np.interp(x1, x0, y0)
        mid = (np.array(x1) > 27.5 * 2**20) & (np.array(aligned) < 0.99)
        gap = aligned[mid] - np.array(y1)[mid]
        assert mid.sum() >= 2 and ((gap > 0.1).all() if lower else (np.abs(gap) < 0.04).all()), (coarse, gap)
    params = dict(m=1920, n=3845, k=1920, tile=32, coarse=8)
    dev, launch = device("h200"), get("matmul.coarsened").launch(params)
    _, x0, y0 = _curve("h200", 8)
    assert coarse_loss(dev, launch, params)[0] == pytest.approx(np.interp(group_bytes(dev, launch, params), x0, y0))


def test_families_lie_on_one_curve_over_b_and_a_groups_a(pts):
    """At one B a larger k loses more (COARSE 8 at 24.4 MiB: k = 1536, 1920, 2560 lose 0.25, 0.43, 0.74): over
    B and one group's A strips (models.dram.group_bytes) the other families lie closer to the calibration's
    curve than over B alone - COARSE 8 median 0.06 against 0.08 (worst 0.16 against 0.31), COARSE 4 0.04
    against 0.06."""
    for coarse, at_most in ((8, 0.065), (4, 0.045)):
        footprint, b_alone = _off_curve(pts, coarse, "group_bytes"), _off_curve(pts, coarse, "b_bytes")
        assert len(footprint) >= 10
        assert footprint.abs().median() < at_most < b_alone.abs().median()
        assert footprint.abs().max() < b_alone.abs().max()
    at = pts[(pts.coarse == 8) & (pts.b_bytes == 4 * 1920 * 3328)]
    k2560 = pts[(pts.coarse == 8) & (pts.k == 2560) & (pts.n == 2496)]
    assert at.loss.iloc[0] < 0.5 < 0.7 < k2560.loss.iloc[0]


def test_suite_coarse_8_reads_its_curve():
    """Every suite COARSE 8 with B from 16 to 56 MiB within 3.5 % of ncu's DRAM reads (the replay had 2048 x
    3072 at -13 % and 3072 x 4608 at -7 %); the note names the curve, and from where it has lost all of B the
    replay takes over (A's reuse)."""
    from perfmodel.measurements import load
    from perfmodel.validate import compare

    data = load("h200")
    band = data[data.case_id.str.contains(r"coarse=8,k=(?:2048|1792|2560),m=\d+,n=(?:2048|3072|4608|5120|6144|7168)",
                                          regex=True)]
    rows = compare("h200", band, progress=False)
    rows = rows[rows.metric == "dram_read_bytes"]
    assert len(rows) >= 7 and rows.rel_error.abs().max() < 0.035, rows[["case_id", "rel_error"]]
    at24 = perfmodel.predict("matmul.coarsened", "h200", m=2048, n=3072, k=2048, tile=32, coarse=8)
    assert any("COARSE 8's own measured loss" in n for n in at24.notes)
    at56 = perfmodel.predict("matmul.coarsened", "h200", m=2048, n=7168, k=2048, tile=32, coarse=8)
    assert any("replayed" in n for n in at56.notes)


def test_coarse_curves_out_of_sample():
    """Set 38 (seed 20261228: 10 COARSE 4 and 10 COARSE 8 at random shapes, B 11-52 MiB, frozen with the
    curves, run 20261202T163437Z on card GPU-4f7da538): DRAM reads 14 of 20 within 5 %, 4.0 % off on average
    (the model before, replay and linear rule: 12, 6.3 %); on the 12 the replay covers, 6.1 % off against the
    replay's 10.8 %. Left: COARSE 4 at 3732 x 2660 x 2551 (25.9 MiB) -24 %, which the replay missed as well."""
    from perfmodel.l2replay import replayed_alone

    d = compare_holdout("h200_holdout38")
    if d.empty:
        pytest.skip("set 38 not measured")
    r = d[d.metric == "dram_read_bytes"]
    assert len(r) == 20 and (r.rel_error.abs() <= 0.05).sum() == 14 and r.rel_error.abs().mean() < 0.045
    replay, curve = [], []
    for x in r.itertuples():
        if (got := replayed_alone(x.case, json.loads(x.params))) is not None:
            replay.append(abs(got / x.measured - 1))
            curve.append(abs(x.rel_error))
    assert len(replay) == 12 and np.mean(curve) < 0.07 < 0.10 < np.mean(replay)
    worst = r.loc[r.rel_error.abs().idxmax()]
    assert worst.case_id == "matmul.coarsened[coarse=4,k=2551,m=3732,n=2660,tile=32]" and worst.rel_error < -0.2


def test_the_loss_rises_with_the_groups_that_re_read_b():
    """At one B, m swept from 768 to 5120 (k = 2048; COARSE 4 at 26 MiB, COARSE 8 at 22 MiB; card
    GPU-1cf4cd8e): the more groups re-read B, the more each re-read loses - COARSE 4 0.19-0.20 up to m = 1024,
    0.26-0.28 past 2560; COARSE 8 0.17 at 768, 0.28-0.31 from 2560. The model, calibrated at m = 1920, reads
    the aligned ones +8..-12 % (COARSE 4) and +5..-10 % (COARSE 8): a correction sparing the first re-reads
    was tried and not taken (held out: fewer rows within 5 %). Off the line COARSE 8 loses less than aligned,
    and the model reads it -2..+18 % (COARSE 4 +10..-12 %)."""
    from perfmodel.b_curve import points
    from perfmodel.coarse_curve import ROWS

    pts = points("h200", ROWS)
    if pts.empty:
        pytest.skip("the m sweep is not recorded")
    aligned = pts[pts.share == 0].set_index(["coarse", "m"]).loss
    assert aligned[4].loc[[768, 1024]].max() < 0.21 < 0.25 < aligned[4].loc[[2560, 3072, 5120]].min()
    assert aligned[8].loc[768] < 0.18 < 0.27 < aligned[8].loc[[2560, 3072, 3584, 4096, 5120]].min()
    off = pts[(pts.share > 0) & (pts.coarse == 8)].set_index("m").loss
    assert (off < aligned[8]).mean() >= 0.8
    err = [perfmodel.predict("matmul.coarsened", "h200", m=m, n=n, k=k, tile=32, coarse=c).dram_read_bytes / r - 1
           for m, n, k, c, r in zip(pts.m, pts.n, pts.k, pts.coarse, pts.read_bytes, strict=True)]
    assert max(map(abs, err)) < 0.2
