"""Band matmuls' DRAM reads against where their arrays lie in memory (perfmodel.allocation; experiments/
address_sweep.sh: each shape allocated ten times, two launches each, under ncu, on two H200 cards 2026-12-02)."""

from __future__ import annotations

import json

import pytest

from perfmodel.allocation import PLACED_BY_PAGES, against_model, allocations
from perfmodel.models import predict

CUBE = "matmul.tiled[k=3072,m=3072,n=3072,tile=32]"
CONTROL = "matmul.tiled[k=2048,m=2048,n=5120,tile=32]"  # in the suite within 1 %


@pytest.fixture(scope="module")
def swept():
    s = against_model("h200")
    s = s[s.case.isin(PLACED_BY_PAGES)].copy()
    if not len(s):
        pytest.skip("no address sweep recorded under reports/data/h200/checks/address")
    return s.set_index("case_id")


def test_the_allocation_moves_band_reads_more_than_launches_do(swept):
    """TILE 32 at 3072^3 read 681-963 MB over 30 allocations on three cards (39 % of the median) while each
    allocation's two launches agreed within 5.3 %: the pages B got decide how much of it L2 keeps. Nine of the
    18 shapes spread over 15 %; the control (TILE 32 2048 x 5120, in the suite within 1 %) 5.4 %."""
    cube = swept.loc[CUBE]
    assert cube.spread > 0.35 and cube.launch_gap < 0.06
    assert cube.low_bytes > 0.67e9 and cube.high_bytes < 0.97e9
    assert swept.loc[CONTROL].spread < 0.06
    assert (swept.spread > 0.15).sum() == 9


def test_the_allocations_median_repeats_on_another_card():
    """Ten allocations' median per shape on card GPU-58107ebd against GPU-da695229: within 3 % at 15 of 18
    shapes, TILE 16 at 2048 x 5120, 1536 x 4608 x 2560 and 2048 x 5112 4-7 % apart - single allocations
    spread up to 38 %, their median does not move."""
    a = allocations("h200")
    a = a[a.case.isin(PLACED_BY_PAGES)]
    per_call = a.groupby(["case_id", "call"]).read_bytes.median().unstack()
    if per_call.shape[1] < 2:
        pytest.skip("one address sweep recorded")
    gap = (per_call.max(axis=1) / per_call.min(axis=1) - 1)
    assert (gap < 0.03).sum() == 15 and gap.max() < 0.07, gap


def test_which_band_misses_are_the_allocations(swept):
    """The model within 5 % of the allocations' range at 13 of 18 shapes - its misses there are one draw of
    the pages (TILE 32 3072^3 -9 % in the suite, +25 % against the sweep's median). TILE 16 reads its own
    measured curve (perfmodel.b_curve, m = k = 1920, none of these shapes): within 3.5 % of the allocations'
    median at 7 of its 8 shapes (the read stream at 4/3 of B had 2048 x 5120 and 5112 at +61 and +42 %); left
    1536 x 4608 x 2560 -27 % (B 45 MiB, where its family jumps towards all of B sooner than the curve's).
    COARSE 8 reads its own curve too (perfmodel.coarse_curve): both its shapes within 3 % of the median (the
    replay had 2048 x 3072 at -15 %, outside every allocation). At the other 4 the model misses every
    allocation, its own error: COARSE 2 at 3072 x 4608 -14 %, TILE 32 at 2048 x 5112 -13 %, 2048 x 4096 +14 %
    and 2048 x 3584 -10 %."""
    inside = set(swept.index[swept.inside])
    tile16 = swept[swept.index.str.contains("tile=16")]
    assert len(inside) == 13 and {CUBE, CONTROL} <= inside, swept.error
    assert len(tile16) == 8 and (tile16.error.abs() < 0.035).sum() == 7, tile16.error
    assert swept.error["matmul.tiled[k=2560,m=1536,n=4608,tile=16]"] == pytest.approx(-0.27, abs=0.02)
    err = swept.error
    coarse8 = err[err.index.str.contains("coarse=8")]
    assert len(coarse8) == 2 and coarse8.abs().max() < 0.03, coarse8
    assert (err[~swept.inside].abs() > 0.05).all()


def test_a_band_prediction_says_its_dram_reads_hang_on_the_pages():
    """The note names the recorded spread: the shape's own where swept, the widest band shape's elsewhere;
    none past the whole L2 or for other kernels."""
    def pages(case: str, **p: int) -> list[str]:
        return [n for n in predict(case, "h200", **p).notes if "physical pages" in n]

    assert "39 % apart" in pages("matmul.tiled", m=3072, n=3072, k=3072, tile=32)[0]
    assert "up to 39 %" in pages("matmul.coarsened", m=2048, n=4608, k=2048, tile=32, coarse=4)[0]
    assert not pages("matmul.tiled", m=4096, n=4096, k=4096, tile=32)
    assert not pages("transpose.smem", rows=4096, cols=4096, tile=32, pad=1)


def test_the_read_streams_curve_is_not_tile_16s_gap():
    """probe.l2_read (4 passes) allocated ten times a size: at 40-54 MiB (card GPU-c35d742e) and at 36-56 MiB
    (GPU-507cf182), its loss per pass moves at most 6.5 points between allocations (52 MiB 0.54-0.59), and the
    suite's own runs of it lie within 5.5 points of the allocations' median at every size - so TILE 16's +61 %
    at 2048 x 5120 when the model read that curve at 4/3 of B (53 MiB) was the mapping's, not the curve's (TILE
    16 now reads its own, perfmodel.b_curve). The model's curve pools both (`ceilings.retention._l2_retention`)."""
    from perfmodel.ceilings import ceilings
    from perfmodel.ceilings.base import _at
    from perfmodel.ceilings.retention import _l2_retention
    from perfmodel.measurements import load

    a = allocations("h200")
    a = a[a.case.eq("probe.l2_read")].copy()
    if a.empty:
        pytest.skip("the read stream's address sweep is not recorded")
    p = a.params.map(json.loads)
    a["bytes"] = [4 * q["n"] for q in p]
    a["loss"] = (a.read_bytes - a.bytes) / ((p.map(lambda q: q["passes"]) - 1) * a.bytes)
    g = a.groupby("bytes").loss
    assert len(g) == 13 and a.card.nunique() == 2 and (g.max() - g.min()).max() < 0.065
    suite = _l2_retention(load("h200"))["l2_retention"]
    assert all(abs(_at(suite, b) - m) < 0.055 for b, m in g.median().items())
    curve = ceilings("h200")
    assert all(abs(curve.l2_loss(b) - m) < 0.01 for b, m in g.median().items())
