"""Matmul's B band replayed through the two L2 partitions over each launch's recorded block schedule
(perfmodel.l2replay) against ncu: the DRAM reads and the partition counters."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from perfmodel.coresidency import Placement
from perfmodel.l2replay import against_ncu, replay
from perfmodel.measurements import DATA_DIR


def _one_row_after_another(gx: int, gy: int) -> Placement:
    """Each grid row's blocks start together on their own SMs once the row before has ended."""
    b = np.arange(gx * gy)
    start = (b // gx) * 1000.0
    return Placement(b % 132, start, start + 900.0, (gx, gy, 1))


def test_replay_reads_what_fits_once_and_rereads_what_does_not():
    """B of 8 MiB fits one partition: read once (A and B compulsory). B of 128 MiB, past the whole
    L2, read again by the second block row."""
    small = {"m": 64, "n": 2048, "k": 1024, "tile": 32}
    r = replay(small, _one_row_after_another(64, 2))
    assert r.dram_read_bytes == 4 * (64 * 1024 + 1024 * 2048)
    big = {"m": 64, "n": 16384, "k": 2048, "tile": 32}
    r = replay(big, _one_row_after_another(512, 2))
    a, b = 4 * 64 * 2048, 4 * 2048 * 16384
    assert r.dram_read_bytes == pytest.approx(a + 2 * b, rel=0.01)


@pytest.fixture(scope="module")
def replayed(recorded):
    t = against_ncu(recorded)
    t["replay"] = t.dram_read_bytes / t.ncu_dram_read_bytes - 1
    t["model"] = t.rule_read_bytes / t.ncu_dram_read_bytes - 1  # the linear share
    return t


def _show(t, col: str = "replay") -> str:
    return "\n".join(f"{r.case_id} B {r.b_mib:.1f} MiB: {col} {100 * getattr(r, col):+.1f} %" for r in t.itertuples())


def test_b_band_dram_reads_replayed_through_two_partitions(replayed):
    """40 recorded matmuls with B of 20-64 MiB - TILE 16 and 32, COARSE 2 and 8 (26 of them, plans
    h200_b_replay and h200_b_replay_coarse, replayed before ncu's counts were read): the replay's DRAM
    reads are 14 % off on average where the model's rule is 30 % off, 29 within 10 % (the rule: 6).
    TILE 32 and COARSE, 25 shapes: 4 % off on average, 19 within 5 %, none past 16 %; COARSE 8, one
    block per SM, within 0.5 % past 33 MiB. The known miss is TILE 16 (two blocks read half a line
    each): it reads 49-79 % more than the H200 at 24-32 MiB and 32-41 % less at 45-48 MiB.
    Re-measured on another card (h200_miss_repeat, two runs): TILE 32 at 3072^3 read 22 % more than its
    first run, at 2048 x 3584 x 2048 3 % more - with the medians, 27 within 10 % (the rule: 7), TILE 32
    and COARSE 4.2 % off on average, 18 within 5 %."""
    t = replayed
    assert len(t) >= 40 and t.ncu_dram_read_bytes.notna().all()
    assert t.replay.abs().mean() <= 0.15 and t.replay.abs().mean() <= 0.5 * t.model.abs().mean(), _show(t)
    assert (t.replay.abs() <= 0.10).sum() >= 27 > (t.model.abs() <= 0.10).sum() * 3, _show(t)
    whole = t[~(t.tile.eq(16) & t.coarse.eq(1))]
    assert len(whole) >= 25 and whole.replay.abs().mean() <= 0.042, _show(whole)
    # COARSE 8 at 2048 x 3072 x 2048 -15 %: re-measured a day later it read 7-10 % more (h200_session_check),
    # the median of its three runs moving the replay's -13.7 % to -15.1 %
    assert (whole.replay.abs() <= 0.05).sum() >= 18 and (whole.replay.abs() <= 0.16).all(), _show(whole)
    c8 = t[t.coarse.eq(8) & (t.b_mib > 33)]
    assert len(c8) >= 4 and (c8.replay.abs() <= 0.005).all(), _show(c8)
    worse = t[t.replay.abs() > 0.16]
    assert worse.tile.eq(16).all() and (worse.replay.abs() < 0.8).all(), _show(worse)


def test_b_band_partition_counters_replayed(replayed):
    """Where ncu counted the partition lookups (plans h200_b_band, h200_b_replay, h200_b_replay_coarse):
    sectors missing the SM's own partition and crossing to the other within 31 % where B is past
    28 MiB (medians 11 and 6 %; TILE 16's blocks read half a line's sectors each, and a line a
    partition holds lacks the other half until asked). Sectors found at home after crossing: within
    45 % but for TILE 16 with B of 45-48 MiB, 1.9-4.7x ncu's - the known gap: the H200 loses those
    copies, the replay's least-recently-used sets keep them - and where B is 24 MiB."""
    t = replayed.dropna(subset=["ncu_crossing_sectors"])
    assert len(t) >= 30
    past = t.b_mib > 28
    for f in ("near_miss_sectors", "crossing_sectors"):
        e = t[f] / t[f"ncu_{f}"] - 1
        assert e.abs().median() <= 0.12 and (e[past].abs() <= 0.31).all(), describe_counter(t, f)
    hit = t.far_hit_sectors / t.ncu_far_hit_sectors - 1
    late = t.tile.eq(16) & t.coarse.eq(1) & t.b_mib.between(44, 49)
    assert (hit[~late & past].abs() <= 0.45).all(), describe_counter(t, "far_hit_sectors")
    assert late.sum() >= 3 and (hit[late] > 0.8).all(), describe_counter(t, "far_hit_sectors")


def describe_counter(t, field: str) -> str:
    return "\n".join(f"{r.case_id}: replay {getattr(r, field):.4g}, ncu {getattr(r, 'ncu_' + field):.4g}"
                     for r in t.itertuples())


def test_which_b_rule_each_matmul_takes():
    """In the band, TILE 16's B takes its own measured loss curve (perfmodel.b_curve; without one the read
    stream's measured loss at 4/3 of B, models.dram.swept_loss), TILE 32 a replayed schedule, corner turning
    the linear share; a device with neither curve falls back to the linear share."""
    from perfmodel import predict
    from perfmodel.b_curve import loss_at
    from perfmodel.ceilings import ceilings
    from perfmodel.models.dram import swept_footprint

    def b_note(case: str, device: str = "h200", **p) -> str:
        return next(n for n in predict(case, device, m=2048, n=4096, k=2048, **p).notes if "B (" in n)

    b = 4 * 2048 * 4096
    loss = loss_at("h200", 0.0, b)
    assert swept_footprint(b) == pytest.approx(4 / 3 * b) and 0.05 < loss < 0.2
    assert 0.05 < ceilings("h200").l2_loss(swept_footprint(b)) < 0.2
    assert "TILE 16's own measured loss at 32 MiB" in b_note("matmul.tiled", tile=16)
    assert f"missing {100 * loss:.0f} %" in b_note("matmul.tiled", tile=16)
    assert "replayed through the two L2 partitions" in b_note("matmul.tiled", tile=32)
    assert "stream" not in b_note("matmul.corner_turning", tile=16, pad=1)
    assert "stream" not in b_note("matmul.tiled", "h100", tile=16)


@pytest.fixture(scope="module")
def pairs():
    """experiments/schedule_pairs.sh's launches: each placement beside its own ncu DRAM reads, per card."""
    from perfmodel.l2replay import schedule_pairs

    d = schedule_pairs("h200")
    if not len(d):
        pytest.skip("no schedule pairs recorded under reports/data/h200/checks/schedule_pairs")
    return d


def _per_card(d):
    g = d.groupby(["case_id", "card"])
    out = g.agg(ncu=("ncu_dram_read_bytes", "median"), replay=("replay_dram_read_bytes", "median"))
    out["ncu_spread"] = g.ncu_dram_read_bytes.agg(lambda v: (v.max() - v.min()) / v.median())
    out["replay_spread"] = g.replay_dram_read_bytes.agg(lambda v: (v.max() - v.min()) / v.median())
    return out.reset_index()


def test_launches_spread_where_their_schedules_do_not(pairs):
    """Three launches of one shape on one card (three cards, 2026-12-02): TILE 32 at 2048 x 4088 and 4096
    x 2048 read 10-31 % apart from launch to launch on five of their six cards, the other shapes within 5 %;
    the same launches' own block schedules replayed stay within 10 % of each other and do not follow the
    counts - where a band matmul lands between its launches is not in the order its blocks ran."""
    t = _per_card(pairs)
    wide = t[t.ncu_spread > 0.09]
    assert set(wide.case_id) == {"matmul.tiled[k=2048,m=2048,n=4088,tile=32]",
                                 "matmul.tiled[k=2048,m=2048,n=4096,tile=32]"}, wide
    assert len(wide) >= 4 and wide.ncu_spread.max() > 0.25
    assert (wide.replay_spread < 0.10).all() and (wide.replay_spread < wide.ncu_spread).sum() >= 4
    assert (t[~t.case_id.isin(wide.case_id)].ncu_spread < 0.05).all()


def test_calls_agree_where_launches_do(pairs, recorded):
    """Each call allocates each shape once: the shapes whose launches agree read within 3 % between the three
    calls (three cards). TILE 32 at 3072^3 read 808-830 MB in all nine launches, where the suite's runs of plan
    h200_miss_repeat read 991-1015 MB - not the card (GPU-75369f81 read both, minutes apart): the pages each
    allocation got (tests/test_allocation.py: 692-956 MB over ten allocations on one card)."""
    t = _per_card(pairs)
    steady = t[t.ncu_spread < 0.05].groupby("case_id").ncu.agg(lambda v: (v.max() - v.min()) / v.median())
    assert (steady < 0.03).all(), steady
    cube = pairs[pairs.case_id.eq("matmul.tiled[k=3072,m=3072,n=3072,tile=32]")]
    assert cube.ncu_dram_read_bytes.min() > 805e6 and cube.ncu_dram_read_bytes.max() < 835e6
    suite = recorded[recorded.case_id.eq("matmul.tiled[k=3072,m=3072,n=3072,tile=32]")
                     & recorded.metric.eq("dram__bytes_read.sum") & recorded.source.eq("ncu")]
    high = suite[suite.value > 990e6].run_id.unique()
    devices = [json.loads((DATA_DIR / "h200" / f"run-{run}-device.json").read_text()) for run in high]
    cards = {d.get("gpu", {}).get("uuid") for d in devices}
    assert len(high) >= 3 and set(cube.card) & cards  # one card read both


def test_replay_misses_the_same_on_every_card(pairs):
    """The replay's error over each launch's own schedule repeats from card to card (within 4 points): its
    misses are its own, not the schedules' - COARSE 8 at 2048 x 3072 -17 %, TILE 32 at 2048 x 3584 and COARSE
    2 at 3072 x 4608 x 1792 -9...-11 %, TILE 32 at 3072^3 +1...+4 %; TILE 32 at 5112 -45 % (B's rows
    straddle lines: the model scales the replay, models.dram.with_split_lines)."""
    t = _per_card(pairs)
    t = t[t.ncu_spread < 0.05]
    err = (t.replay / t.ncu - 1).groupby(t.case_id).agg(["min", "max"])
    assert (err["max"] - err["min"] < 0.04).all(), err
    assert err.loc["matmul.coarsened[coarse=8,k=2048,m=2048,n=3072,tile=32]"].between(-0.19, -0.15).all()
    assert err.loc["matmul.tiled[k=3072,m=3072,n=3072,tile=32]"].between(0.0, 0.05).all()


def test_borrowed_schedules_beside_their_own():
    """COARSE 1 and 4, placed under ncu at set 36's shapes (experiments/schedule_pairs.sh, folder
    schedule_pairs_borrowed): COARSE 1's own schedules replay as far off as the borrowed one (within 3
    points; -43 % at 36 MiB, -33 % at 31 MiB): its misses there are the replay's L2, not the schedule.
    COARSE 4's own replay 11-23 % more than the borrowed (COARSE 2's): 9 % off ncu on average at its four
    shapes, the borrowed 13 % - one kernel's blocks each holding 4 B tiles drift apart otherwise than 2's."""
    from perfmodel.l2replay import replayed_alone, schedule_pairs
    from perfmodel.suite.registry import get

    d = schedule_pairs("h200", "schedule_pairs_borrowed")
    if not len(d):
        pytest.skip("no schedule pairs recorded under reports/data/h200/checks/schedule_pairs_borrowed")
    kc = get("matmul.coarsened")
    own = d.groupby("case_id").agg(ncu=("ncu_dram_read_bytes", "median"), own=("replay_dram_read_bytes", "mean"))
    assert len(own) == 7
    for cid, row in own.iterrows():
        p = kc.bind(**{k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", cid)})
        lent = replayed_alone("matmul.coarsened", p)
        if p["coarse"] == 1:
            assert abs(row.own - lent) / row.ncu < 0.03, cid
        else:
            assert 0.1 < row.own / lent - 1 < 0.25, cid
