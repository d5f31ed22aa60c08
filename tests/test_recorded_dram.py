"""The model's DRAM traffic against the recorded H200 runs (reports/data/h200): reads after L2 reuse,
L2's retention curves, B's band in the matmuls, writes inside the kernel.

Runs in CI, no GPU. What is exact is asserted exact; where the model is a bound or has a known, explained
gap the test asserts the bound and names the gap.
"""

from __future__ import annotations

import json

import pandas as pd

import perfmodel
from perfmodel.devices import device
from perfmodel.measurements import param
from tests.conftest import describe, rows_where

H200 = device("h200")


def _late_partials(t: pd.DataFrame) -> pd.Series:
    """For DRAM writes, probe.split_store's sectors completed 8192+ blocks later: the model writes a
    lost sector back once for each piece (one write more per two fills); L2 wrote 0.27-0.68 more per
    fill (h200_split_sweep: -5..+19 % on the copy's writes; held-out 22's wide transposes within 5 %)."""
    dist = param(t, "dist").fillna(0)
    return t.case.eq("probe.split_store") & (dist > 8192)


def matmul_b_mib(t) -> pd.Series:
    """B's size (k x n floats) of the matmul rows, in MiB (0 for other cases)."""
    b = 4 * param(t, "k").fillna(0) * param(t, "n").fillna(0) / 2**20
    return b.where(t.case.str.startswith("matmul"), 0.0)


def test_dram_reads(comparison):
    """Within 5 % but for known gaps: matmuls whose B is 20-60 MiB (plans/h200_reuse.toml): they lose
    0-100 % of B between re-reads by variant, the model a share linear between one L2 partition and the
    whole L2 (-83..+39 %: -63 % for TILE 16 at 2048 x 3584 x 2048, B = 28 MiB, measured in h200_l1share,
    -83 % for COARSE 8 at 3072 x 4608 x 1792, h200_b_replay_coarse; the step it replaced was off by up to
    4x; the recorded schedules replayed through the two L2 partitions explain it, tests/test_l2replay.py).
    TILE 32 and COARSE are now predicted by replaying another shape's recorded schedule (24 rows 4.6 % off
    on average, none past 21 %), TILE 16 by the read stream's measured loss (test below). The naive
    transposes' L2 fills are modelled by a curve measured on those at 32 x 8 threads (their rows are
    'counter-ceiling': shown, not counted); every other naive transpose within 5 % (test below)."""
    t = comparison[(comparison.metric == "dram_read_bytes") & (comparison.kind == "counter")]
    band = matmul_b_mib(t).between(20, 60)
    # known gap (h200_split_lines): split lines read by the same two SMs every pass lose less than the
    # stream whose curve the model gives them at 52 MiB (54 against 61 %): +8 %; at 40 and 48 MiB +3 %
    same_pair = t.case.eq("probe.l2_read_split") & param(t, "mult").eq(1)
    assert same_pair.sum() == 3 and t[same_pair].rel_error.abs().max() < 0.09, describe(t[same_pair])
    bad = t[~band & ~same_pair & (t.rel_error.abs() > 0.05)]
    assert bad.empty, describe(bad)
    # a copy whose sectors get 8 pieces ~14k blocks apart: L2 fills 72 %, the loss law at the span 67 %
    pieces = t[t.case.eq("probe.piece_store")]
    late = pieces[pieces.measured > 1.1 * 4 * param(pieces, "n")]
    assert len(late) >= 1, describe(pieces)
    # the shifted copies whose partial sectors L2 loses in part (the loss law, fitted at other sizes)
    split = t[t.case.eq("probe.split_store")]
    split = split[split.measured > 1.01 * 4 * param(split, "n")]
    assert len(split) >= 5 and split.rel_error.abs().max() < 0.02, describe(split)
    assert band.sum() >= 15 and t[band].rel_error.abs().max() < 1.0, describe(t[band])
    # known gap (h200_shared): B's rows off the 128-byte lines - TILE 32 at n = 5112 loses 41 % of B per
    # re-read, not the 23 % of n = 5120 whose schedule the model borrows; the split-line factor takes the
    # replay's -41 % to -14 %, and n = 4088, which lost only 9 % against 8 % at 4096, from +3 % to +36 %;
    # coarsened at m = k = 1920, n = 3845 (plan h200_warp_seams, B 28 MiB, 31 of 32 rows off the line):
    # COARSE 2 +28 % (the borrowed schedule and the split-line factor), COARSE 4 +6.7 % and COARSE 8 +12 %
    # on their aligned curves (off the line COARSE 8 loses less: coarse_curve's note)
    ragged = band & (4 * param(t, "n") % 128 != 0) & t.case.isin(["matmul.tiled", "matmul.coarsened"])
    assert ragged.sum() >= 2 and t[ragged].rel_error.abs().max() < 0.5, describe(t[ragged])
    whole = t[band & ~ragged & ~(t.case.eq("matmul.tiled") & param(t, "tile").eq(16))]
    # COARSE 8 at 2048 x 3072 x 2048 -16.3 %: re-measured a day later it read 7-10 % more (h200_session_check);
    # TILE 32 at 2048 x 4096 x 2048 +20.3 %: its runs read 165-210 MB (h200_miss_repeat on three cards,
    # h200_context), its allocations 181-220 MB (tests/test_allocation.py): the model's 233 MB misses them all
    assert len(whole) >= 24 and whole.rel_error.abs().max() < 0.21, describe(whole)
    assert (whole.rel_error.abs() <= 0.05).sum() >= 17, describe(whole)


def _tile16_band(t: pd.DataFrame) -> pd.DataFrame:
    return t[t.case.eq("matmul.tiled") & param(t, "tile").eq(16) & matmul_b_mib(t).between(20, 60)]


def test_tile16_b_by_its_own_curve(comparison):
    """TILE 16's B (20-60 MiB) is lost between block rows along TILE 16's own measured curve (perfmodel.b_curve:
    m = k = 1920, no suite or held-out shape; scaled by k and by the share of B's row segments across a line):
    suite DRAM reads 9 of 15 within 5 %, 5.5 % off on average, worst -28 % (1536 x 4608 x 2560, B 45 MiB:
    its family jumps towards all of B sooner than the curve's). The read stream at 4/3 of B, before: 7 of 15,
    13.5 % off, worst +59 % (2048 x 5120: the stream loses 69 % at 53 MiB, TILE 16 44 % at 40). B's rows off
    the line (n = 5112, 4088): +38/-22 % then, -6/+12 % now. Held out: tests/test_b_curve.py."""
    t = _tile16_band(comparison[(comparison.metric == "dram_read_bytes") & (comparison.kind == "counter")])
    off_lines = 4 * param(t, "n") % 128 != 0
    assert off_lines.sum() == 2 and t[off_lines].rel_error.abs().max() < 0.13, describe(t[off_lines])
    assert len(t) >= 15 and (t.rel_error.abs() <= 0.05).sum() >= 9, describe(t)
    assert t.rel_error.abs().mean() < 0.06 and t.rel_error.abs().max() < 0.29, describe(t)


def test_l2_retention_curve_is_measured(recorded):
    """probe.l2_read over 16-128 MiB, 4 passes: all of a re-read buffer stays in L2 up to 36 MiB,
    half is lost near 51 MiB, all of it from 80 MiB (ncu's DRAM reads)."""
    from perfmodel.ceilings import ceilings

    c = ceilings("h200")
    assert len(c.l2_retention) >= 10 and c.l2_retention_probe.source.startswith("measured")
    assert c.l2_loss(36 * 2**20) < 0.02 and c.l2_loss(96 * 2**20) > 0.98
    assert 44 * 2**20 < c.l2_retention_probe.value < 56 * 2**20
    losses = [y for _, y in c.l2_retention]
    assert all(b >= a - 0.01 for a, b in zip(losses, losses[1:], strict=False))  # grows with the footprint


SPLIT_FIRST, SPLIT_REPEATS = "20261201T212117Z", ("20261201T212315Z", "20261201T212338Z", "20261201T212357Z")


SPLIT_AND_SHARED = "20261201T215036Z"  # h200_split_lines_repeat again, read_l2_shared held to eight blocks an SM


FABRIC_READS = "20261205T182216Z"  # h200_fabric_reads: the stream, shared and split probes at 24-64 MiB, one run


def _retention_by_run(recorded, case: str) -> pd.DataFrame:
    """`case`'s 4-pass launches with readers changing: the share lost per pass, by run and size (MiB)."""
    from perfmodel.ceilings import retention_by_run

    return pd.DataFrame([{"run": run, "mib": x / 2**20, "lost": y}
                         for run, curve in retention_by_run(recorded, case).items() for x, y in curve])


def test_shared_reader_retention_and_its_control(comparison):
    """probe.l2_read_shared (h200_shared): each line read by another SM on every pass, as matmul's B
    by each block row. It loses more than the stream below the whole L2 (32-48 MiB) and less past it
    (56-64 MiB); its curve predicts its own reads (shown, not counted). With mult = 1 the same kernel is the
    stream again: those launches are counted against the stream's curve, within 5 %."""
    from perfmodel.ceilings import ceilings

    c = ceilings("h200")
    assert len(c.l2_shared_retention) >= 12 and c.l2_shared_retention_probe.source.startswith("measured")
    for mib in (32, 36, 40, 44, 48):
        assert c.l2_loss(mib * 2**20, readers="shared") > c.l2_loss(mib * 2**20) + 0.02, mib
    for mib in (56, 64):
        assert c.l2_loss(mib * 2**20, readers="shared") < c.l2_loss(mib * 2**20) - 0.05, mib
    t = rows_where(comparison, case="probe.l2_read_shared", metric="dram_read_bytes")
    assert set(t.kind) == {"counter", "counter-ceiling"}
    control = t[t.kind == "counter"]
    assert len(control) == 3 and control.rel_error.abs().max() < 0.05, describe(control)


def test_split_lines_lose_more_than_whole_lines(recorded, comparison):
    """probe.l2_read_split (h200_split_lines, h200_split_lines_repeat): each line's two halves read by two SMs,
    others on every pass - as TILE 16's blocks share B's lines, or TILE 32's where B's pitch is off the
    line. In one run L2 loses 1.2-2.3x what it loses of whole lines read by one SM each pass (the shared
    probe, eight blocks an SM): 2.3x at 32 MiB, 1.8x at 40, 1.4x at 48; three runs in one device call
    repeat within 3 %, the call before within 2.5 points at 36-48 MiB (at 32 MiB 6.1 against 4.5 %, at 52
    MiB 73 against 78 %). Four days later, in the run that counted their fabric crossings (h200_fabric_reads),
    again 2.0x, 1.8x and 1.4x at 32, 40 and 48 MiB.
    The matmuls show the same: in one run (h200_session_check) TILE 32 at 2048 x 5112 x 2048 (pitch off
    the line) loses of B what TILE 16 does, 1.8x TILE 32 at n = 5120. With the same two SMs every pass
    (mult 1) the split lines lose as the stream does: counted against its curve, +3..+8 %."""
    split = _retention_by_run(recorded, "probe.l2_read_split")
    shared = _retention_by_run(recorded, "probe.l2_read_shared")
    assert sorted(split.run.unique()) == [SPLIT_FIRST, *SPLIT_REPEATS, SPLIT_AND_SHARED, FABRIC_READS]
    repeats = split[split.run.isin(SPLIT_REPEATS)].groupby("mib").lost  # one device call
    assert (repeats.count() == 3).all() and (repeats.max() / repeats.min() < 1.03).all(), repeats.describe()
    first = split[split.run == SPLIT_FIRST].set_index("mib").lost  # the call before
    near = repeats.median().index[repeats.median().index >= 36]
    apart = (first[near] - repeats.median()[near]).abs()
    assert len(near) == 5 and (apart[apart.index <= 48] < 0.025).all() and apart.max() < 0.06, apart
    # in one run, beside the shared probe at eight blocks an SM
    a = split[split.run == SPLIT_AND_SHARED].set_index("mib").lost
    b = shared[shared.run == SPLIT_AND_SHARED].set_index("mib").lost
    assert len(a) == len(b) == 6 and (a > 1.15 * b).all() and (a > 1.4 * b)[a.index <= 48].all(), (a, b)
    a = split[split.run == FABRIC_READS].set_index("mib").lost
    b = shared[shared.run == FABRIC_READS].set_index("mib").lost
    band = [m for m in a.index if 32 <= m <= 48]
    assert len(band) == 5 and (a[band] > 1.35 * b[band]).all(), (a, b)
    t = rows_where(comparison, case="probe.l2_read_split", metric="dram_read_bytes")
    control = t[(t.kind == "counter") & param(t, "mult").eq(1)]
    assert len(control) == 3 and control.rel_error.abs().max() < 0.09, describe(control)
    # the matmuls in one run: B lost per re-read (A and B once, then B m / tile - 1 more times)
    mm = recorded[(recorded.run_id == "20261201T212542Z") & recorded.case.eq("matmul.tiled")
                  & recorded.metric.eq("dram__bytes_read.sum")]
    lost = {}
    for params, read in zip(mm.params.map(json.loads), mm.value, strict=True):
        if params["m"] == 2048:
            b = 4 * params["k"] * params["n"]
            again = b * (params["m"] / params["tile"] - 1)
            lost[params["n"], params["tile"]] = (read - 4 * params["m"] * params["k"] - b) / again
    assert abs(lost[5112, 32] / lost[5120, 16] - 1) < 0.1 and lost[5112, 32] > 1.6 * lost[5120, 32], lost


def test_shared_probe_at_six_blocks_an_sm_lost_less(recorded):
    """Sharing sweep_cg with read_l2 took read_l2_shared to 38 registers: six blocks an SM, its 1056
    blocks in 1.33 waves (ncu, h200_split_lines's and h200_split_lines_repeat's shared launches). Those launches
    lost 14/24/37 % a pass at 40/48/52 MiB against 19/41/61 % at eight blocks an SM (h200_shared): kept
    apart (checks/shared_38_registers), the kernel is held to eight blocks (__launch_bounds__). Held so,
    it lost 20/43/62 % (run 20261201T215036Z, another card: GPU-dd5fb7cf) - within 2 points at 32-52 MiB."""
    from perfmodel.measurements import DATA_DIR

    ncu = pd.read_csv(DATA_DIR / "h200" / "checks" / "shared_38_registers" / "ncu.csv.gz")
    regs = ncu[ncu.metric == "launch__registers_per_thread"].value
    limit = ncu[ncu.metric == "launch__occupancy_limit_registers"].value
    assert len(regs) >= 20 and (regs == 38).all() and (limit == 6).all()
    assert (_retention_by_run(ncu, "probe.l2_read_shared").groupby("run").size() >= 3).all()
    six = _retention_by_run(ncu, "probe.l2_read_shared").groupby("mib").lost.median()
    eight = _retention_by_run(recorded, "probe.l2_read_shared").pivot(index="mib", columns="run", values="lost")
    first, again = eight["20261201T113926Z"], eight[SPLIT_AND_SHARED].dropna()
    assert len(again) == 6 and ((again - first[again.index]).abs() < 0.02).all(), eight  # another card
    for mib in (40, 48, 52):
        assert six[mib] < 0.8 * first[mib], (mib, six[mib], first[mib])


def test_band_matmuls_re_measured_in_another_session(recorded):
    """h200_session_check (card GPU-c39c349a, nvidia-smi) re-measured four read-stream sizes and six band
    matmuls recorded 1-2 days before: the stream within 5 %, the matmuls +2..+10 % (TILE 16 at 1536 x
    6144 x 1536 +10 %, COARSE 8 at 2048 x 3072 x 2048 +7..+10 %) - the floor under the band's DRAM
    rows is a few percent, not the run-to-run spread within one session."""
    check = recorded[(recorded.run_id == "20261201T212542Z") & (recorded.metric == "dram__bytes_read.sum")]
    earlier = recorded[(recorded.run_id < "20261201T212542Z") & (recorded.metric == "dram__bytes_read.sum")]
    earlier = earlier.groupby("case_id").value.median()
    moved = pd.Series({cid: v / earlier[cid] - 1 for cid, v in zip(check.case_id, check.value, strict=True)
                       if cid in earlier})
    stream = moved[moved.index.str.startswith("probe.l2_read")]
    assert len(moved) == 10 and len(stream) == 4 and stream.abs().max() < 0.05, moved
    assert moved.drop(stream.index).between(0.0, 0.11).all(), moved


def test_matmul_dram_reuse_model_at_4096(comparison):
    t = comparison[(comparison.metric == "dram_read_bytes") & comparison.case_id.str.contains("m=4096")]
    assert len(t) >= 6 and t.measured.min() > 8 * 134e6  # far past compulsory: the reuse model is tested
    bad = t[t.rel_error.abs() > 0.1]
    assert bad.empty, describe(bad)


def test_matmul_dram_reuse_model_at_8192_out_of_sample(comparison):
    """The reuse rule (B streamed once per group of max(SMs, blocks per row) blocks) was read off the
    runs up to 4096; at 8192 - measured after it was written - all eight variants' DRAM reads, 17 to
    138 GB, land within 2 %."""
    t = comparison[(comparison.metric == "dram_read_bytes") & comparison.case_id.str.contains("m=8192")
                   & comparison.case.str.startswith("matmul")]
    assert len(t) == 8 and t.measured.min() > 25 * 4 * 2 * 8192**2, describe(t)  # far past compulsory
    assert t.rel_error.abs().max() < 0.02, describe(t)


def test_dram_writes_in_the_kernel(comparison):
    """ncu counts the write-backs during the kernel; at its end L2 still holds ~40 MB of recent lines
    (measured in the write-back pass), the kernel's write share of them dirty; a kernel bound inside
    the SM keeps dirty only the room its reads leave. ncu's count also holds the ~2.4 MB its own
    setup left dirty (measured on a read stream that writes nothing). 80 % of the kernels writing
    16 MB and more within 5 %, the naive transposes' L2 fills (written back twice) included."""
    t = comparison[comparison.metric == "dram_write_bytes_in_kernel"]
    t = t[~_late_partials(t)]
    big = t[t.measured >= 16e6]
    assert len(big) >= 40 and (big.rel_error.abs() <= 0.05).mean() >= 0.8, describe(big)
    # at most 30 %: COARSE 8 at 2048 x 3072 +18 % (the dirty share at the end follows the reads, which the
    # B replay has 15 % short); TILE 16 at 2048 x 2560 x 2048 +11 %
    assert big.rel_error.abs().max() < 0.30, describe(big[big.rel_error.abs() >= 0.30])
    over = t[t.measured > 1.1 * t.predicted + (8 << 20)]
    assert over.empty, describe(over)
    # against everything the kernel writes (the earlier stops' bound): never more, apart from write-backs
    # of earlier kernels' lines (<= 2.3 MiB seen), and never short by more than an L2
    written = t.apply(lambda r: perfmodel.predict(r.case, "h200", **json.loads(r.params)).dram_write_bytes, axis=1)
    assert t[t.measured > 1.02 * written + (4 << 20)].empty, describe(t[t.measured > 1.02 * written + (4 << 20)])
    assert t[written - t.measured > H200.l2_bytes].empty


def test_dram_writes_with_the_residue(comparison):
    """The kernel between two reading flushes, without ncu's cache control: its writes plus the
    second flush's are everything it wrote. Outputs of 16 MiB and more within 5 % (the naive
    transposes' L2 fills written back twice included; two at 2 block rows, which fill more than the
    curve's 8, -5/-10 %); below that a floor of ~0.1-0.9 MB per profiled kernel that no output explains
    (ncu's own records, presumably), and up to 2.2 MB (14 %) more for the naive transposes."""
    t = comparison[comparison.metric == "dram_write_bytes"]
    t = t[~_late_partials(t)]
    assert len(t) >= 80
    scattered = t.case.isin(["transpose.naive", "transpose.naive_rows"])
    big = t.predicted >= 16 << 20
    bad = t[big & ~scattered & (t.rel_error.abs() > 0.05)]
    assert (big & ~scattered).sum() >= 50 and bad.empty, describe(bad)
    naive = t[big & scattered]
    assert (naive.rel_error.abs() <= 0.05).mean() >= 0.9 and naive.rel_error.abs().max() < 0.1, describe(naive)
    off = t[~big & ~scattered & ((t.measured - t.predicted).abs() > 1.2e6)]
    assert off.empty, describe(off)
    extra = t[~big & scattered]
    assert extra.rel_error.between(-0.20, 0.01).all() and (extra.measured - extra.predicted).max() < 2.5e6

