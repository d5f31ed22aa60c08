"""The store-loss law's form, checked on an H100 (reports/data/h100/checks/store_footprints): the same
cyclic store stream as the H200's checks/store_footprints, through an L2 of 50 MiB to the H200's 60.
The H200's curve (Ceilings.l2_store_loss), read at the footprint scaled by the two L2 sizes, is the H100's
own loss; and the H100's time is the slower of its write requests at its L2 hit rate and its write-backs
at its fill rate, both rates measured on that card by the launches the model's H200 rates come from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfmodel.ceilings import ceilings
from perfmodel.devices import device
from perfmodel.measurements import written_back

CHECKS = Path(__file__).resolve().parents[1] / "reports" / "data" / "h100" / "checks"
FOLDER = CHECKS / "store_footprints"
REVISITS = CHECKS / "store_revisits"  # held-out set 64's plan, run on an H100 first
HIT = "probe.store_lines[footprint_lines=65536,lines=32,passes=64]"  # L2-resident 4-byte stores
FILL = "probe.store_lines[footprint_lines=16777216,lines=4,passes=497]"  # first writes of 2 GiB of lines
WRITES = "lts__t_requests_srcunit_tex_op_write.sum"


def _read(folder: Path) -> pd.DataFrame:
    return pd.concat([pd.read_csv(folder / f, dtype={"commit": str, "run_id": str})
                      for f in ("ncu.csv.gz", "measurements.csv.gz")], ignore_index=True)


@pytest.fixture(scope="module")
def run() -> pd.DataFrame:
    return _read(FOLDER)


def _cycles(run: pd.DataFrame, curve_only: bool = True) -> pd.DataFrame:
    """The cyclic launches (`curve_only`: the curve's, 4 lines a request and 256 passes): lines, passes,
    footprint, the share of the revisited lines L2 lost (the write-back pass's DRAM writes beyond one a
    line), ncu's write requests and in-kernel write-backs (sectors), and the median CUDA-event time."""
    wb = written_back(run)
    ncu = run[run.source == "ncu"].pivot_table(index="case_id", columns="metric", values="value")
    t = run[(run.metric == "time_s") & (run.stat == "median")].set_index("case_id").value
    rows = []
    for cid, params in run[["case_id", "params"]].drop_duplicates().itertuples(index=False):
        p = json.loads(params)
        if not cid.startswith("probe.store_lines") or (curve_only and (p["lines"], p["passes"]) != (4, 256)):
            continue
        writes = 1056 * 8 * p["passes"] * p["lines"]  # warps x passes x lines a request (line writes)
        foot, sectors = p["footprint_lines"], max(1, 4 // p["lines"])  # whole sectors a line
        if writes <= foot:
            continue
        rows.append({"lines": p["lines"], "passes": p["passes"], "line_bytes": 128 * foot,
                     "lost": (wb.written_bytes[cid] / 32 / sectors - foot) / (writes - foot),
                     "writes": ncu.loc[cid, WRITES], "backs": ncu.loc[cid, "dram__bytes_write.sum"] / 32,
                     "time_s": t[cid]})
    return pd.DataFrame(rows).sort_values(["lines", "passes", "line_bytes"], ignore_index=True)


def test_the_h200_store_curve_scaled_by_l2_size_is_the_h100s(run):
    """Guessed in the plan before it ran (experiments/plans/h100_store_footprints.toml). At 11 footprints
    of 8-256 MiB of lines the H100's loss is the H200 curve's at 1.2x the footprint within 0.035 (its loss
    rises from 0.11 at 24 MiB to 0.73 at 64); read at the footprint itself the curve is 0.08-0.15 low at
    24-64 MiB."""
    c = _cycles(run)
    h200 = ceilings("h200")
    scale = device("h200").l2_bytes / device("h100").l2_bytes
    assert len(c) == 11 and scale == pytest.approx(1.2)
    scaled = c.line_bytes.map(lambda b: h200.l2_store_loss(b * scale)) - c.lost
    unscaled = c.line_bytes.map(h200.l2_store_loss) - c.lost
    assert scaled.abs().max() < 0.035, scaled
    mid = c.line_bytes.between(24 << 20, 64 << 20)
    assert (unscaled[mid] < -0.07).all(), unscaled


def test_the_h100s_cyclic_stores_run_at_the_slower_of_hits_and_write_backs(run):
    """The time law models.time takes for a cyclic store stream, with the H100's own rates (61.7 G write
    requests/s L2-resident, 36.4 G/s first writes past L2): within 4 % where the write-backs bind (48-256
    MiB of lines) and within 12 % everywhere - L2-resident, 4 lines a request run 10-12 % faster than the
    32-line requests the hit rate is measured with (the H200: 4-9 %)."""
    c = _cycles(run)
    ncu = run[run.source == "ncu"].pivot_table(index="case_id", columns="metric", values="value")
    t = run[(run.metric == "time_s") & (run.stat == "median")].set_index("case_id").value
    hit, fill = ncu.loc[HIT, WRITES] / t[HIT], ncu.loc[FILL, WRITES] / t[FILL]
    slower = pd.concat([c.writes / hit, c.backs / fill], axis=1).max(axis=1)
    err = slower / c.time_s - 1
    assert (err.abs() < 0.12).all(), err
    bound = c.backs / fill > c.writes / hit
    assert bound.sum() >= 4 and (err[bound].abs() < 0.04).all(), err[bound]


def test_the_h100_loses_revisits_by_the_lines_cycled_over_at_any_pass_count(run):
    """Held-out set 64's plan (footprints between the curve's points, whole lines a request, 64 passes),
    run on an H100 (run 20261206T094418Z, card GPU-47bc2e3a) against the H100's own curve: whole lines
    (4 sectors each) lose as many lines as one sector a line at the same bytes of lines (within 0.045) -
    not at the same bytes of data, where the curve says 0.81-0.95 and they lost 0.15-0.78; 64 passes lose
    what 256 do (within 0.03); between the curve's points the curve holds within 0.05."""
    curve = _cycles(run)
    new = _cycles(_read(REVISITS), curve_only=False)
    at = lambda b: np.interp(b, curve.line_bytes, curve.lost)  # noqa: E731
    by_lines = at(new.line_bytes) - new.lost
    whole = new.lines == 1
    assert whole.sum() == 3 and (by_lines[whole].abs() < 0.045).all(), by_lines[whole]
    assert (at(4 * new.line_bytes[whole]) - new.lost[whole] > 0.1).all()  # by the data: far too much
    few = new.passes == 64
    assert few.sum() == 2 and (by_lines[few].abs() < 0.03).all(), by_lines[few]
    assert len(new) == 14 and (by_lines.abs() < 0.05).all(), by_lines


def test_l2_resident_store_cycles_go_by_their_sectors_on_the_h100_too():
    """store_widths (plan experiments/plans/h100_store_widths.toml, run 20261206T100330Z, card
    GPU-12e47656): 8 MiB of lines, 1-32 lines a request, 64 and 256 passes. By the (request, line) pairs
    the model once counted, whole lines would take a quarter of 4 lines a request's time; they take 87-93 %
    of it. Per sector the twelve launches lie within 33 % of each other (12.6-16.7 ps a sector: whole and half
    lines cheapest, 4 lines a request between, the partial sectors of 8-32 most) - on the H200 the suite
    has 1, 2 and 4 lines equal, 8-32 within 5 % of them."""
    run = _read(CHECKS / "store_widths")
    ncu = run[run.source == "ncu"].pivot_table(index="case_id", columns="metric", values="value")
    t = run[(run.metric == "time_s") & (run.stat == "median")].set_index("case_id").value
    p = run.drop_duplicates("case_id").set_index("case_id").params.map(json.loads)
    per_sector = t / ncu.loc[t.index, "lts__t_sectors_srcunit_tex_op_write.sum"]
    per_pair = t / ncu.loc[t.index, WRITES]
    assert len(t) == 12 and per_sector.max() / per_sector.min() < 1.35, per_sector
    for passes in (64, 256):
        by = {p[c]["lines"]: c for c in t.index if p[c]["passes"] == passes}
        assert 0.85 < t[by[1]] / t[by[4]] < 0.95
        assert per_pair[by[1]] / per_pair[by[4]] > 3.4


def test_whole_line_first_writes_are_held_by_the_same_per_sector_path_on_both_cards():
    """store_first_writes (plan experiments/plans/h100_store_first_writes.toml, run 20261206T101650Z, card
    GPU-dcfd86ae): first writes of 2 GiB of whole lines (one line a request) take 820 us on the H100 and
    811 on the H200 (the suite's launch), whose DRAM is 1.4x as fast: 81.9 and 82.7 G sectors/s, within
    5 % of the whole-sector rate the H200's L2-resident cycle gives (Ceilings.l2_write_sector_hits_per_s,
    79 G/s) - the write path of the die both cards share, not their DRAM (the model's l2_write_sectors
    term). One sector of each of 4 lines a request runs at the fill rate instead (36.9 G requests/s)."""
    from perfmodel.measurements import load, median_times

    run = _read(CHECKS / "store_first_writes")
    ncu = run[run.source == "ncu"].pivot_table(index="case_id", columns="metric", values="value")
    t = run[(run.metric == "time_s") & (run.stat == "median")].set_index("case_id").value
    sectors = ncu.loc[t.index, "lts__t_sectors_srcunit_tex_op_write.sum"]
    whole = "probe.store_lines[footprint_lines=16777216,lines=1,passes=1986]"
    rate = ceilings("h200").l2_write_sector_hits_per_s.value
    h200_s = median_times(load("h200"))[whole]
    assert sectors[whole] == pytest.approx(16777216 * 4, rel=1e-4)  # each line once, 512 twice
    for s in (t[whole], h200_s):
        assert abs(sectors[whole] / s / rate - 1) < 0.05, sectors[whole] / s
    assert abs(t[whole] / h200_s - 1) < 0.03
    four = "probe.store_lines[footprint_lines=16777216,lines=4,passes=497]"
    assert sectors[four] / t[four] < 0.5 * sectors[whole] / t[whole]
