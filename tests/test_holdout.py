"""Held-out sets: predictions frozen in a file before their cases were measured, then compared."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING

import pytest

import perfmodel
from perfmodel.holdout import HOLDOUT_DIR, compare_holdout, frozen, sets
from perfmodel.measurements import load, param
from perfmodel.models.base import Prediction
from perfmodel.models.phase_law import CASE as CASE_TEMPORAL

if TYPE_CHECKING:
    import pandas as pd


def test_a_prediction_survives_the_frozen_file():
    p = perfmodel.predict("matmul.coarsened", "h200", m=999, n=1234, k=777, coarse=2)
    assert Prediction.from_dict(json.loads(json.dumps(p.as_dict()))) == p


@pytest.fixture(scope="module", params=sets())
def held(request):
    name = request.param
    data = load("h200", HOLDOUT_DIR / name)
    if not len(data):
        pytest.skip(f"{name}: predictions frozen, not measured yet (no run recorded beside them)")
    return name, frozen(name, "h200"), data, compare_holdout(name, "h200")


def test_predictions_were_frozen_before_the_run_measured_them(held):
    name, (header, preds), data, _ = held
    # 33-41 random draws a set; 20 in set 8, drawn to test one rule; 9-20 in sets 24, 26, 27, 29, chosen by hand
    assert len(preds) >= 9 and header["commit"] and not header["commit"].endswith("-dirty")
    runs = data.drop_duplicates("run_id")
    assert len(runs) and (runs.utc > header["utc"]).all(), f"{name}: a run predates its frozen predictions"
    assert set(data.case_id) <= set(preds)  # nothing measured that was not predicted first


def test_held_out_accuracy(held):
    """The frozen predictions against the held-out runs (H200): time MAPE under 10 % (the issue's
    target; 6.5, 5.8, 7.4, 4.2, 5.5, 4.8, 4.4, 4.9, 3.8, 4.2 (set 3 repeated), 3.3, 4.2 and 6.4 %
    (set 13: barrier-phase kernels only), ... and 8.7 % (set 22: wide transposes) measured),
    within 10 % for most, occupancy exact, L1 counts within 5 % but for three rows - and at most two
    cases past 25 % a set, which the report names."""
    name, _, _, t = held
    time = t[t.kind == "time"]
    assert len(time) >= 9  # set 24: one of its 14 cases did not launch (its check size too small)
    assert time.rel_error.abs().mean() <= 0.10, name
    # set 22 drew wide transposes only, to test the partial-sector law out of sample: 14 of 24 within 10 %
    # (misses: the padded row transposes at 8 blocks per SM, -20..-22 %, the suite's known gap; TILE 16
    # -16/-19 %, losing 5-7 % more sectors than the law; unpadded +8..+14 %, +3..+5 % today)
    # set 30, chosen to test L1's store combining: 11 of 17 within 10 % - its short piece launches run
    # 7-13 % slower than the model (their combining counted right leaves the crossbar term short: a gap)
    # and the shifted copies at 3 Mi words 11-12 % faster
    # set 49, chosen to test the write-back law on probe.split_store's counters: 9 of 14 within 10 % - its
    # scattered store order runs slower than the model (the suite's known gap, -2..-13 % on aligned copies;
    # -9 % on its aligned control here, -11..-18 % with lines split between two warps)
    least = {"h200_holdout22": 0.55, "h200_holdout30": 0.6, "h200_holdout49": 0.6}.get(name, 0.7)
    assert (time.rel_error.abs() <= 0.10).mean() >= least, name
    assert (time.rel_error.abs() > 0.25).sum() <= 2 and time.rel_error.abs().max() < 0.35, name
    assert (t[t.kind == "occupancy"].rel_error == 0).all()
    l1 = t[t.kind == "counter-l1"].rel_error.abs()
    # frozen, three rows were past 5 %: at 7301 x 7983 temporal blocking's requests and sectors -6.5/-7.2 %,
    # a sampled count (the enumeration passed its row budget on the ragged grid; now the grid's edges and
    # one period of its interior are enumerated: ncu's to the request), and at 1358 x 1230, 2 points a
    # thread, its load requests -5.1 % (-4.7 % now)
    assert (l1 <= 0.05).mean() >= 0.98 and l1.max() < 0.08, name
    now = t[t.kind == "counter-l1"]
    assert (now.rel_error_now.abs() <= 0.05).all(), name
    # exact but for temporal blocking's shared wavefronts on ragged grids, 0.3-0.8 % under ncu's
    off = now[now.rel_error_now.abs() >= 1e-3]
    known = (off.case == "stencil.temporal") & off.metric.str.startswith("smem_") & (off.rel_error_now.abs() < 0.01)
    assert len(off) <= 0.05 * len(now) or known.all(), (name, off[["case_id", "metric", "rel_error_now"]])
    baseline = ((time.baseline - time.measured) / time.measured).abs().mean()
    assert baseline > 5 * time.rel_error.abs().mean()  # the naive datasheet roofline, beside it


def test_warp_seams_law_out_of_sample(held):
    """Coarsened matmul's C stores at n off a multiple of 8 (models.combining, the warp-seams law, read off
    plan h200_warp_seams on 2026-12-03): every held-out set measured them before the law existed - 109 rows
    of each metric over 24 sets, 2-7.5 % (sectors) and 9-23 % (requests) under the one-store-at-a-time
    count. With the law: L2 write sectors within 0.9 %, requests within 2.7 %."""
    name, _, _, t = held
    rows = t[t.case.eq("matmul.coarsened") & t.metric.isin(["l2_write_sectors", "l2_write_requests"])]
    ragged = rows[(param(rows, "n") % 8 != 0) & (param(rows, "coarse") > 1)]
    if ragged.empty:
        pytest.skip(f"{name}: no coarsened matmul at n off a multiple of 8")
    sectors = ragged[ragged.metric.eq("l2_write_sectors")].rel_error_now.abs()
    requests = ragged[ragged.metric.eq("l2_write_requests")].rel_error_now.abs()
    assert sectors.max() < 0.01 and requests.max() < 0.03, (name, sectors.max(), requests.max())


def test_hoisted_round_law_out_of_sample(held):
    """COARSE 8's rounds (one block per SM, its next tile loaded inside the work: the idle round and the
    DRAM latency's excess for the sweeps DRAM serves, `models.hoisted_round_s`, added 2026-12-06 from
    the probes; only its 16 suite launches looked at): its 56 held-out launches over 24 sets were
    -10..+14 % under the chain's round (MAPE 6.6 %, 11 past 10 %), -4..+10 % with the launch's average
    sweep share (MAPE 3.2 %), now -4..+8 % with the share averaged over its waves (MAPE 2.7 %). COARSE 2 and
    4 (two blocks an SM; only the first of every C rounds loads after its barrier, `hoisted_pair_round_s`):
    their 50 and 74 held-out launches were -1..+5 % (MAPE 2.4 and 3.5 %), now within 4.1 % (1.1 and 1.2 %)."""
    name, _, _, t = held
    rows = t[t.case.eq("matmul.coarsened") & t.kind.eq("time")]
    coarse = param(rows, "coarse")
    if not coarse.isin([2, 4, 8]).any():
        pytest.skip(f"{name}: no COARSE 2, 4 or 8")
    c8, c24 = rows[coarse == 8], rows[coarse.isin([2, 4])]
    assert (c8.rel_error_now.abs() < 0.08).all(), (name, c8[["case_id", "rel_error", "rel_error_now"]])
    assert (c24.rel_error_now.abs() < 0.045).all(), (name, c24[["case_id", "rel_error", "rel_error_now"]])


def test_issue_phase_law_out_of_sample(held):
    """Temporal blocking in the held-out sets (97 launches over 34 sets, none among the suite's 26 the
    issue-bound phase law was read off): today's model without the law (the rule by blocks per SM
    alone) -15..+20 %, 30 past 10 %; with it -8..+12 %, 6 past 10 %."""
    name, _, _, t = held
    rows = t[t.case.eq(CASE_TEMPORAL) & t.kind.eq("time")]
    if rows.empty:
        pytest.skip(f"{name}: no temporal blocking")
    assert rows.rel_error_now.abs().max() < 0.13, (name, rows[["case_id", "rel_error", "rel_error_now"]])


def test_padded_tile32_smem_transposes_below_the_l2_run_faster_than_the_phase_rule(held):
    """A known gap (FINDINGS, found 2026-12-07): TILE 32 padded shared-memory transposes, two 1024-thread
    blocks an SM with the load phase the longer, are +10..+15 % slow in the model at 6-24 MiB an array
    (all 13 held-out launches; the measured times leave 0.45-0.65 of the work phase exposed, the rule
    all of it) and within 3 % past 57 MiB (9). Fails once a model change closes it: then say so there."""
    name, _, _, t = held
    rows = t[t.case.eq("transpose.smem") & t.kind.eq("time")]
    rows = rows[(param(rows, "tile") == 32) & (param(rows, "pad") == 1)]
    if rows.empty:
        pytest.skip(f"{name}: no padded TILE 32 shared-memory transpose")
    mib = param(rows, "rows") * param(rows, "cols") * 4 / 2**20
    cols = ["case_id", "rel_error_now"]
    assert (rows[mib <= 24].rel_error_now > 0.09).all(), (name, rows[mib <= 24][cols])
    assert (rows[mib >= 57].rel_error_now.abs() < 0.035).all(), (name, rows[mib >= 57][cols])


def test_a_sampled_count_enumerated_in_full_is_ncus():
    """Held out, stencil.temporal at 7301 x 7983: past the row budget the model sampled (-6.5 % frozen);
    with its edges and one period of its interior enumerated, its global load requests are ncu's but
    for one: the source term's single block, which the default budget samples; every row enumerated,
    ncu's to the request (8,452,769)."""
    from perfmodel.memory.pattern import analyse
    from perfmodel.suite.registry import get

    data = load("h200", HOLDOUT_DIR / "h200_holdout5")
    case = get("stencil.temporal")
    p = case.bind(nx=7301, ny=7983, steps=1, ppt=1)
    cid = "stencil.temporal[nx=7301,ny=7983,ppt=1,steps=1]"
    measured = data[(data.case_id == cid) & (data.metric == "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")]
    launch, loads = case.launch(p), [a for a in case.accesses(p) if a.space == "global" and not a.store]
    counts = {}
    for a in loads:  # u, prev, c2 and damp share one pattern: count it once
        key = (a.index, a.cond, a.loops)
        counts[key] = counts.get(key) or analyse(a, launch, row_budget=4_000_000).requests
    total = sum(counts[(a.index, a.cond, a.loops)] for a in loads)
    assert total == measured.value.median()
    assert abs(sum(analyse(a, launch).requests for a in loads) - total) <= 1


@functools.cache
def _compared(name: str) -> pd.DataFrame:
    return compare_holdout(name, "h200")


def _holdout_rows(name: str, metric: str) -> pd.DataFrame:
    t = _compared(name)
    t = t[t.metric == metric]
    keys = ("n", "dist", "k", "m", "tile", "coarse")
    return t.assign(**{p: param(t, p) for p in keys})


def _set_number(name: str) -> int:
    """A held-out set's number in its name (h200_holdout: 1)."""
    return int(name.removeprefix("h200_holdout") or 1)


def _replay_alone(case: str, params: dict[str, int], measured: float) -> float:
    """The replay alone (l2replay.replayed_alone) against `measured`, as a fraction."""
    from perfmodel.l2replay import replayed_alone

    return replayed_alone(case, params) / measured - 1


def test_eight_writers_lost_at_their_span_out_of_sample():
    """Set 24 (chosen by hand, frozen before measured): probe.piece_store's sectors of 8 writers, lost
    with the two-writer loss law's share at their first-to-last span (a rule read off one launch, 28
    MiB): DRAM reads within 5 % at spans of 14-56 MiB and arrays of 256-512 MiB; at 7 MiB the law says
    11 % lost, L2 lost 3 % (+8 %: 8 writers refresh the sector, and at short spans that keeps it). The
    writes follow (one fill, two write-backs) up to 28 MiB; at 56 MiB L2 wrote each sector back 3.0
    times, the model 2 (-35 %: a sector lost more than once between its 8 pieces - a gap)."""
    t = _holdout_rows("h200_holdout24", "dram_read_bytes")
    far = t[t.dist >= 8192]
    assert len(far) >= 5 and far.rel_error.abs().max() < 0.05, far[["case_id", "rel_error"]]
    near = t[t.dist == 4096]
    assert len(near) == 1 and near.rel_error.between(0.05, 0.10).all(), near[["case_id", "rel_error"]]
    w = _holdout_rows("h200_holdout24", "dram_write_bytes")
    w = w[w.dist >= 8192]
    assert w[w.dist < 32768].rel_error.abs().max() < 0.05, w[["case_id", "rel_error"]]
    # measured by the second run (the first one's check did not launch: validate drops that run alone)
    assert (w.dist == 32768).sum() == 1 and w[w.dist == 32768].rel_error.between(-0.40, -0.30).all(), w


def test_l1_combines_more_of_a_small_launchs_pieces():
    """Set 24: L1 combines a block's 4-byte piece stores (dist 1) more the fewer the waves - measured L2
    write sectors 28 % under the model as frozen (one share, calibrated at 2^26 words) at 2^20 words, 11 %
    at 2^23, 2 % at 2^25, none at 2^27. The combining law against waves (models.combining, read off plan
    h200_combine's runs at these sizes, measured a day later) put this earlier run within 1 % at every
    size, the lines-apart variant within 6 % (2^21: -5.8 %): the run-to-run spread of the share. Two
    more runs of piece_store (h200_miss_repeat, another card) stored 0.322 and 0.317 sectors a thread at
    2^21 where h200_combine stored 0.334: with the curve at their median this run is -4.8 % there."""
    t = _holdout_rows("h200_holdout24", "l2_write_sectors")
    t = t[t.case.isin(["probe.piece_store", "probe.piece_spread"]) & t.dist.eq(1)].sort_values("n")
    store = t[t.case.eq("probe.piece_store")]
    ratio = (store.measured / store.predicted).to_numpy()
    assert len(store) >= 5 and ratio[0] < 0.8 and abs(ratio[-1] - 1) < 0.02 and ratio[-2] > ratio[0], store
    assert (store.rel_error > -0.02).all(), store[["case_id", "rel_error"]]
    assert store.rel_error_now.abs().max() < 0.05 and t.rel_error_now.abs().max() < 0.06, t
    assert (store.rel_error_now.abs() < 0.015).sum() >= len(store) - 1, store


def test_recorded_placement_out_of_sample():
    """Set 29 (chosen by hand, frozen before measured; placements recorded in the same device calls,
    after): the naive matmul and TILE 16 at shapes never placed. As frozen (the pooled start-spread
    law) the L1s' requests from L2 were +5..+9 % over ncu at 8 of 10 shapes; with each shape's own
    placement the naive kernel comes within 4 % at all five, TILE 16 within 0.5 % at two of five and
    +6..+9 % at the other three (k = 1024: 1536 x 3584, 3072 x 5120, 2048 x 4608) - the placement
    closes the naive kernel's gap, not all of TILE 16's."""
    t = _holdout_rows("h200_holdout29", "l2_requested_read_sectors")
    assert len(t) == 10 and (t.rel_error > 0.045).sum() >= 8
    naive, tiled = t[t.case.eq("matmul.naive")], t[t.case.eq("matmul.tiled")]
    assert naive.rel_error_now.abs().max() < 0.04, naive[["case_id", "rel_error", "rel_error_now"]]
    assert (tiled.rel_error_now.abs() < 0.01).sum() >= 2 and tiled.rel_error_now.between(0, 0.09).all(), tiled
    times = _holdout_rows("h200_holdout29", "time_s")
    assert times.rel_error.abs().max() < 0.05, times[["case_id", "rel_error"]]


def test_naive_matmul_l1_requests_follow_the_row_alignment():
    """Set 26 (chosen by hand, frozen before measured): the naive matmul's L1 requests from L2 at three
    m x n, k swept. Not k's size but A's row alignment decides where the frozen model missed: k = 2323 and
    2803 (3 mod 16) requested 13-37 % more sectors than it at all three shapes, k = 2220, 2500 and 3200
    beside them within 5 % at 825 x 1342; k a multiple of 1024 7-9 % fewer. Today's model takes each
    residue's measured line and B's pitch (perfmodel.naive_k, fitted on sweeps at other shapes): within 5 %
    at 825 x 1342 and 1024 x 1024; at 1092 x 1049 (66 blocks a row) 12 % short - a known gap. At 1092 x 1049
    the frozen model had 5-16 % too many at every even k: the first wave's blocks 132 apart on one SM share
    B's columns (coresidency.first_wave, added after this set was measured, from the recorded placements):
    within 5 % now but for k = 1024."""
    t = _holdout_rows("h200_holdout26", "l2_requested_read_sectors")
    odd = t[t.k.isin([2323, 2803])]
    assert len(odd) == 5 and odd.rel_error.between(-0.40, -0.12).all(), odd[["case_id", "rel_error"]]
    now = odd.set_index("m").rel_error_now
    assert now.drop(1092).abs().max() < 0.05 and -0.16 < now[1092] < -0.08, now
    beside = t[t.m.eq(825) & t.k.isin([1500, 2000, 2220, 2500, 3200, 4000])]
    assert len(beside) == 6 and beside.rel_error_now.abs().max() < 0.05, beside[["case_id", "rel_error_now"]]
    aligned = t[t.k.isin([1024, 4096]) & ~t.m.eq(1092)]
    assert len(aligned) == 2 and aligned.rel_error_now.between(0.05, 0.10).all(), aligned
    wide = t[t.m.eq(1092) & ~t.k.isin([2323, 2803])]
    assert len(wide) == 7 and wide.rel_error.between(0.05, 0.17).all(), wide[["case_id", "rel_error"]]
    assert wide[wide.k != 1024].rel_error_now.abs().max() < 0.05, wide[["case_id", "rel_error_now"]]


def test_naive_matmul_extra_requests_are_l1_lookup_misses():
    """Set 27 (ncu_detail): at 825 x 1342 the L1 lookups miss 16 % of the sectors at k = 2323 and 2803,
    13 % at 2220 and 2500; what L1 requests from L2 follows its misses (0.92-1.01x) - L1 evicts lines it
    still needs at those row alignments, it does not send a second request for a sector it waits for.
    Its set conflicts per access barely differ (8-9 % against 7.5-8 %): which lines go early is not found."""
    d = load("h200", HOLDOUT_DIR / "h200_holdout27")
    d = d[d.source.eq("ncu")].pivot_table(index="case_id", columns="metric", values="value")
    miss = d["l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum"]
    sent = d["l1tex__m_xbar2l1tex_read_sectors.sum"]
    assert len(d) == 9 and (miss / sent).between(0.9, 1.03).all(), miss / sent
    share = miss / d["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
    at = {k: share[f"matmul.naive[k={k},m=825,n=1342]"] for k in (2220, 2323, 2500, 2803)}
    assert min(at[2323], at[2803]) > 1.2 * max(at[2220], at[2500]), at


def test_band_replay_out_of_sample():
    """Set 28 (seed 20261220, frozen before measured): 25 tiled and coarsened matmuls with B of 18-63
    MiB at ragged shapes. COARSE 8, one block per SM, within 17 % (four of five within 8 %); TILE 32
    and COARSE 2, whose schedules the replay borrows from shapes with whole tiles, read 24-65 % less
    than the H200 at 7 of 10 shapes - the replay keeps B the H200 loses there (as far off with
    the replay's former set hash: 41 % on average both); COARSE 4 has no recorded schedule and takes
    the linear rule (-6...-66 %); TILE 16 reads 11-68 % more. Time still within 11 % for every case."""
    t = _holdout_rows("h200_holdout28", "dram_read_bytes")
    coarse, tile = t.coarse.fillna(1), t.tile
    assert len(t) == 25
    c8 = t[coarse == 8]
    assert len(c8) == 5 and c8.rel_error.abs().max() < 0.17 and (c8.rel_error.abs() < 0.08).sum() >= 4, c8
    whole = t[(tile == 32) & coarse.isin([1, 2])]
    assert (whole.rel_error < -0.2).sum() >= 7 and (whole.rel_error < 0.01).all(), whole[["case_id", "rel_error"]]
    assert (t[tile == 16].rel_error > 0.1).all(), t[tile == 16][["case_id", "rel_error"]]
    time = _compared("h200_holdout28")
    time = time[time.kind == "time"]
    assert len(time) == 25 and time.rel_error.abs().max() < 0.11, time[["case_id", "rel_error"]]


def test_split_line_factor_out_of_sample():
    """Set 34 (seed 20261224, frozen before measured): 10 TILE 32 matmuls with B of 23-40 MiB, drawn to
    test the split-line factor (models.dram.split_line_factor: the replay's re-reads of B scaled by the
    split probe's loss over the shared one's, for the rows whose segments straddle two lines). At the 7
    shapes with B's pitch off the line the frozen DRAM reads were 6.9 % off on average (4 within 5 %),
    the replay alone 14.6 % (-44 % at n = 3272, -32 % at 3336 -> -13 %, +3.4 %); it overshoots two by
    13-14 % the replay had within 3 %. Of the three aligned controls the replay put 4064 (36.7 MiB) +50 %
    (a gap of the aligned replay out of sample)."""
    from perfmodel.models.dram import split_row_share
    from perfmodel.suite.registry import get

    t = _holdout_rows("h200_holdout34", "dram_read_bytes")
    assert len(t) == 10 and (t.tile == 32).all()
    off = t[t.n.map(lambda n: 4 * n % 128 != 0)]
    assert len(off) == 7 and off.rel_error.abs().mean() < 0.08 and (off.rel_error.abs() <= 0.05).sum() >= 4, off
    alone = []
    for params, measured in zip(off.params.map(json.loads), off.measured, strict=True):
        assert split_row_share("matmul.tiled", get("matmul.tiled").bind(**params)) >= 0.5
        alone.append(_replay_alone("matmul.tiled", params, measured))
    assert sum(abs(e) for e in alone) / len(alone) > 1.8 * off.rel_error.abs().mean(), alone


def test_store_combining_law_out_of_sample():
    """Set 30 (chosen by hand, frozen before measured): L1's store combining against waves at launch
    sizes between those it was read off and at seams it was not read off (copies 8, 12 and 20 bytes
    off a sector; 8-byte stores 8 bytes off). L2 write sectors within 1.4 % at 16 of 17 - the shifted
    copies from 0.09 to 186 waves - and +11 % at probe.piece_store's 3 Mi words (12 waves), where the
    suite's 4 Mi is +7 %: pieces combine more there than the law's neighbours (2 and 8 Mi) say."""
    t = _holdout_rows("h200_holdout30", "l2_write_sectors")
    assert len(t) == 17
    off = t.rel_error.abs() > 0.014
    assert off.sum() == 1 and t[off].case_id.str.fullmatch(r"probe\.piece_store\[dist=1,n=3145728\]").all(), t
    assert t[off].rel_error.between(0.05, 0.15).all(), t[["case_id", "rel_error"]]


def test_borrowed_schedule_out_of_sample():
    """Set 36 (seed 20261226, frozen before measured): 8 COARSE 4 and 8 COARSE 1 matmuls with B of 18-44
    MiB, which have no recorded schedule of their own; the replay borrows that of the kernel with their
    block size and blocks per SM (l2replay.replay_source: COARSE 2's and TILE 32's). DRAM reads: COARSE 4
    17 % off on average (the linear rule it took before: 53 %, every shape short by 36-76 %), COARSE 1
    15 % (the rule 22 %); 5 of 16 within 5 %. COARSE 4 +23..+52 % at 22-26 MiB, COARSE 1 -27..-42 % at
    31-42 MiB. Time within 6 % at every shape."""
    from perfmodel.l2replay import rule_read_bytes

    t = _holdout_rows("h200_holdout36", "dram_read_bytes")
    assert len(t) == 16
    for coarse, replay_off, rule_off in ((4, 0.18, 0.5), (1, 0.16, 0.2)):
        s = t[t.coarse == coarse]
        rule = [abs(rule_read_bytes("matmul.coarsened", json.loads(p)) / m - 1)
                for p, m in zip(s.params, s.measured, strict=True)]
        assert len(s) == 8 and s.rel_error.abs().mean() < replay_off < rule_off < sum(rule) / 8, (coarse, rule)
    assert (t.rel_error.abs() <= 0.05).sum() >= 5
    time = _compared("h200_holdout36")
    time = time[time.kind == "time"]
    assert len(time) == 16 and time.rel_error.abs().max() < 0.06, time[["case_id", "rel_error"]]


def test_split_lines_of_coarsened_blocks():
    """COARSE blocks at TILE 32 read 128 x COARSE-byte row segments of B: off the line, each shares the
    two lines at its ends with its neighbours - one line in COARSE read in pieces (models.dram.
    split_row_share; COARSE 1 is TILE 32's kernel). The held-out COARSE 1 and 2 matmuls with B's pitch off
    the line and B of 30-52 MiB (10, all sets; measured before this rule, no parameter fitted to them):
    the replay with the split lines 5.6 % off on average, the replay alone 20 % (every one short)."""
    from perfmodel.models.dram import split_row_share
    from perfmodel.suite.registry import get

    kc, now, alone = get("matmul.coarsened"), [], []
    for name in (s for s in sets() if _set_number(s) < 37):  # drawn before this rule (set 37 for it: below)
        t = _holdout_rows(name, "dram_read_bytes")
        t = t[(t.case == "matmul.coarsened") & t.coarse.isin([1, 2]) & (t.n * 4 % 128 != 0)
              & (4 * t.k * t.n).between(30 << 20, 52 << 20)]
        for params, measured in zip(t.params.map(json.loads), t.measured, strict=True):
            p = kc.bind(**params)
            assert split_row_share("matmul.coarsened", p) == pytest.approx(split_row_share(
                "matmul.tiled", {"tile": 32, "n": p["n"]}) / p["coarse"])
            now.append(perfmodel.predict("matmul.coarsened", "h200", **p).dram_read_bytes / measured - 1)
            alone.append(_replay_alone("matmul.coarsened", params, measured))
    assert len(now) == 10 and max(alone) < 0 and sum(map(abs, alone)) / 10 > 0.18, alone
    assert sum(map(abs, now)) / 10 < 0.06 and max(map(abs, now)) < 0.2, now


def test_split_lines_of_coarsened_blocks_held_out():
    """Set 37 (seed 20261227, frozen with the rule above before measured): 20 coarsened matmuls, B of 25-48
    MiB. Of the 13 COARSE 1, 2 and 4 with B's pitch off the line the frozen DRAM reads were 8.0 % off on
    average, the replay alone 20 %; COARSE 1 -21 % at 32.7 MiB, COARSE 2 +15 % at 34.6 MiB. COARSE 8 as
    frozen 2-11 % short: the cap on the scaled re-reads (all of B a group) cut under the replay's own, which
    re-reads A as well; the cap no longer does (models.dram.with_split_lines), within 7.3 % now."""
    t = _holdout_rows("h200_holdout37", "dram_read_bytes")
    assert len(t) == 20
    off = t[(t.n * 4 % 128 != 0) & (t.coarse < 8)]
    alone = [_replay_alone("matmul.coarsened", params, measured)
             for params, measured in zip(off.params.map(json.loads), off.measured, strict=True)]
    assert len(off) == 13 and off.rel_error.abs().mean() < 0.085 and sum(map(abs, alone)) / 13 > 0.18, alone
    c8 = t[t.coarse == 8]
    assert (c8.rel_error < 0).all() and c8.rel_error_now.abs().max() < 0.075, c8[["case_id", "rel_error_now"]]
    time = _compared("h200_holdout37")
    time = time[time.kind == "time"]
    assert len(time) == 20 and time.rel_error.abs().max() < 0.09, time[["case_id", "rel_error"]]
