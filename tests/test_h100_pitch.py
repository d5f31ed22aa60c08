"""A gap found and recorded, not modelled: one-step temporal blocking is slower where its rows' pitch
is a power of two (reports/data/h100/checks/temporal_pitch, three H100 cards: an H200 was not lent
that session). Every suite shape of stencil.temporal has such a pitch, so the phase law fitted on
them carries the slowdown into the held-out shapes, none of which has one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1] / "reports" / "data" / "h100" / "checks" / "temporal_pitch"


@pytest.fixture(scope="module")
def launches() -> pd.DataFrame:
    """Median CUDA-event time and ncu's DRAM reads per launch, with the card that ran it."""
    rows = []
    for run in sorted(p for p in ROOT.iterdir() if p.is_dir()):
        card = json.loads((run / "device.json").read_text())["gpu"]["uuid"]
        m = pd.read_csv(run / "measurements.csv.gz")
        n = pd.read_csv(run / "ncu.csv.gz")
        dram = n[n.metric == "dram__bytes_read.sum"].set_index("case_id").value
        t = m[(m.metric == "time_s") & (m.stat == "median")]
        for _, r in t.iterrows():
            p = json.loads(r.params)
            rows.append({"card": card, "nx": p["nx"], "ny": p["ny"], "ppt": p["ppt"], "steps": p["steps"],
                         "time_s": r.value, "dram_read_bytes": dram[r.case_id]})
    out = pd.DataFrame(rows)
    out["s_per_point"] = out.time_s / (out.nx * out.ny)
    out["dram_read_bytes_per_point"] = out.dram_read_bytes / (out.nx * out.ny)
    return out


def _pair(t: pd.DataFrame, card: str, ppt: int, a: tuple[int, int], b: tuple[int, int],
          steps: int = 1) -> tuple[pd.Series, pd.Series] | None:
    sel = t[(t.card == card) & (t.ppt == ppt) & (t.steps == steps)].set_index(["nx", "ny"])
    return (sel.loc[a], sel.loc[b]) if a in sel.index and b in sel.index else None


PITCH_PAIRS = [((4096, 4096), (4104, 4096)), ((8192, 2048), (8200, 2048)), ((2048, 8192), (2056, 8192))]


def _pitch_pairs(t: pd.DataFrame, steps: int) -> list[tuple[pd.Series, pd.Series]]:
    """Per card, points a thread and pair measured at `steps`: (the power-of-two pitch, 8 columns more)."""
    pairs = (_pair(t, card, ppt, pow2, off, steps)
             for card in t.card.unique() for ppt in (1, 2) for pow2, off in PITCH_PAIRS)
    return [pair for pair in pairs if pair]


def _gains(t: pd.DataFrame, steps: int) -> list[float]:
    """Time per point at the power-of-two pitch over 8 columns more, per measured pair."""
    return [a.s_per_point / b.s_per_point - 1 for a, b in _pitch_pairs(t, steps)]


def test_power_of_two_pitch_is_slower(launches):
    """At one step, the same rows and 8 columns more (pitch off a power of two): every pair on three cards
    runs 3.8-6.9 % faster per point at one point a thread, 6.6-15.6 % at two (the cards within 0.7 %
    of each other), with DRAM reads within 0.5 % of each other per point."""
    for a, b in _pitch_pairs(launches, 1):
        assert b.dram_read_bytes_per_point == pytest.approx(a.dram_read_bytes_per_point, rel=5e-3)
    gains = _gains(launches, 1)
    assert len(gains) == 16
    assert min(gains) > 0.03 and max(gains) < 0.2, gains


def test_the_pitch_not_the_arrays_spacing(launches):
    """Arrays a little over 64 MiB with the pitch a power of two (4096 x 4100, 8192 x 2052) run as slowly
    as at 64 MiB; a little under 64 MiB with the pitch off it (4104 x 4088, 8200 x 2046) as fast as 4104 and
    8200 columns: within 1.5 % per point, where the pitch makes 4-16 %."""
    split = [((4096, 4096), (4096, 4100)), ((8192, 2048), (8192, 2052)),
             ((4104, 4096), (4104, 4088)), ((8200, 2048), (8200, 2046))]
    cards = launches.groupby("card").filter(lambda g: (g.ny == 4100).any()).card.unique()
    assert len(cards) == 1
    for ppt in (1, 2):
        for a_shape, b_shape in split:
            a, b = _pair(launches, cards[0], ppt, a_shape, b_shape)
            assert b.s_per_point == pytest.approx(a.s_per_point, rel=0.015), (ppt, a_shape, b_shape)


def test_the_pitch_costs_the_load_phase(launches):
    """The cost falls with the load phase's share of the time: 2.3-6.5 % at two steps, none past 1 % at four
    and eight (h100_temporal_pitch_steps, one card)."""
    two, four, eight = (_gains(launches, s) for s in (2, 4, 8))
    assert len(two) == len(four) == len(eight) == 4
    assert all(0.015 < g < 0.07 for g in two), two
    assert all(abs(g) < 0.01 for g in four + eight), (four, eight)
