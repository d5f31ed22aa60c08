"""The model against the recorded H200 measurements (reports/data/h200): runs in CI, no GPU.

What is exact is asserted exact; where the model is a bound or has a known, explained gap the
test asserts the bound and names the gap; time accuracy is asserted at the level reached so far.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.devices import device
from perfmodel.measurements import param
from tests.conftest import describe

H200 = device("h200")


def _sel(t, **eq):
    for k, v in eq.items():
        t = t[t[k].isin(v) if isinstance(v, list | tuple | set) else t[k] == v]
    return t


def _late_partials(t: pd.DataFrame) -> pd.Series:
    """For DRAM writes, probe.split_store's sectors completed 8192+ blocks later: the model writes a
    lost sector back once for each piece (one write more per two fills); L2 wrote 0.27-0.68 more per
    fill (h200_split_sweep: -5..+19 % on the copy's writes; held-out 22's wide transposes within 5 %)."""
    dist = param(t, "dist").fillna(0)
    return t.case.eq("probe.split_store") & (dist > 8192)


def test_microbenchmark_counters_are_exact(comparison):
    t = comparison[comparison.case.str.startswith("mem.") & (comparison.kind == "counter-l1")]
    assert len(t) >= 1000
    bad = t[t.rel_error != 0]
    assert bad.empty, describe(bad)


def test_real_kernels_global_requests_and_sectors(comparison):
    t = comparison[~comparison.case.str.startswith("mem.") & comparison.metric.isin(
        ["global_load_requests", "global_load_sectors", "global_store_requests", "global_store_sectors"])]
    assert len(t) >= 200
    bad = t[t.rel_error.abs() > 0.05]  # exact where enumerated, sampled estimates within 5 %
    assert bad.empty, describe(bad)
    assert (t.rel_error == 0).sum() >= len(t) // 2


def test_shared_wavefronts_per_instruction_are_exact(comparison):
    """ncu's per-instruction (SASS) count of shared wavefronts is what the addresses need: the
    model's bank analysis equals it in every real kernel (within 1 %: sampled blocks of the
    temporal stencil's ragged edges)."""
    t = comparison[~comparison.case.str.startswith("mem.")
                   & comparison.metric.isin(["smem_load_wavefronts", "smem_store_wavefronts"])]
    assert len(t) >= 90 and set(t.case) >= {"matmul.tiled", "matmul.coarsened", "transpose.smem",
                                             "stencil.temporal"}
    bad = t[t.rel_error.abs() > 0.01]
    assert bad.empty, describe(bad)


def test_shared_wavefronts_in_the_data_stage_only_add(comparison):
    """The L1 data stage counts more wavefronts than the instructions need where global traffic
    shares it (ncu shows them as bank conflicts): never fewer, at most a quarter more."""
    t = comparison[~comparison.case.str.startswith("mem.") & comparison.metric.str.endswith("stage_wavefronts")
                   & comparison.metric.str.startswith("smem_")]
    assert len(t) >= 90
    below = t[t.rel_error > 0.01]
    assert below.empty, describe(below)
    loose = t[t.rel_error < -0.25]
    assert loose.empty, describe(loose)


def test_occupancy_matches_driver_and_ncu(comparison):
    t = comparison[comparison.metric.isin(["blocks_per_sm", "theoretical_occupancy_pct", "block_limit_warps",
                                           "block_limit_registers", "block_limit_blocks"])]
    assert len(_sel(t, metric="blocks_per_sm")) >= 20
    bad = t[t.rel_error != 0]
    assert bad.empty, describe(bad)


def test_ncu_shared_memory_limit_follows_the_driver_carveout(comparison):
    """ncu takes the shared-memory limit at the carveout the driver configured. The rule in
    occupancy.driver_carveout was read off these launches (mem.carveout probes and the suite's
    kernels), so this is a regression test of that rule, not an independent validation."""
    t = comparison[comparison.metric == "block_limit_shared_memory"]
    assert len(t) >= 300 and t.case.eq("mem.carveout").sum() >= 50
    bad = t[t.rel_error != 0]
    assert bad.empty, describe(bad)


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
    t = _sel(comparison, case="probe.l2_read_shared", metric="dram_read_bytes")
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
    t = _sel(comparison, case="probe.l2_read_split", metric="dram_read_bytes")
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


def test_passes_timed_per_phase(comparison):
    """Passes over one buffer: the first from DRAM, the others from L2 (models.time.first_pass_term),
    the L2 rate from the passes after the first. probe.l2_read and _shared at 2-16 passes, 16-64 MiB:
    -16..+7 %, 4.5 % off on average (at 4 passes -8..-22 % when the slowest resource was taken over the
    whole kernel). Known gap: the shared probe at 44-52 MiB runs 11-16 % longer than the model - its
    lines come from the other partition's L2 more often, which one L2 rate does not charge."""
    t = comparison[comparison.case.isin(["probe.l2_read", "probe.l2_read_shared"]) & (comparison.kind == "time")]
    assert len(t) >= 30
    assert t.rel_error.abs().max() < 0.17 and t.rel_error.abs().mean() < 0.05, describe(t)


def test_naive_transpose_block_shapes(comparison):
    """32 x R threads write R consecutive floats of each of 32 output columns: below R = 8 a block
    writes its sectors in part and the R-row blocks below complete them. Measured: no read-modify-
    write (the model once charged one per sector); time within 10 % at 1024² to 8192² once first
    writes are counted per sector of the kernel, not per block, and cost fills past one L2 partition
    (R = 1 is bound by block launches)."""
    t = comparison[comparison.case.eq("transpose.naive_rows")]
    timed = t[t.metric == "time_s"]
    assert len(timed) >= 40
    assert timed.rel_error.abs().max() < 0.10, describe(timed)
    assert timed.rel_error.abs().mean() < 0.035, describe(timed)
    reads = t[(t.metric == "dram_read_bytes") & (t.kind == "counter")]
    assert len(reads) >= 20 and reads.rel_error.abs().max() < 0.05, describe(reads)


def test_naive_transpose_fills_partial_sectors_from_dram(recorded):
    """The naive transposes' extra DRAM reads are L2 filling sectors from DRAM (lts__d_sectors_fill_device
    x 32 B equals dram__bytes_read) - sectors the kernel writes in 4-byte pieces, since its reads are
    the input's sectors once (L2 read misses = the input). Not capacity: none at 1024² (8 MiB), yet
    1.4-6.3 % at 1536²-2560², where both arrays fit in L2; up to 10 % beyond. The model takes the share
    measured at 32 x 8 threads, by the bytes moved, where L2's write requests bound the kernel (test
    below; 32 x 1 blocks, bound by launches, fill under 2.5 %)."""
    n = recorded[(recorded.source == "ncu") & recorded.case.isin(["transpose.naive", "transpose.naive_rows"])]
    # both counters from the same run (a case measured in several runs pairs each run's own)
    w = n.pivot_table(index=["run_id", "case_id"], columns="metric", values="value", aggfunc="last")
    w = w.dropna(subset=["lts__d_sectors_fill_device.sum", "dram__bytes_read.sum"])
    assert len(w) >= 30
    fills = 32 * w["lts__d_sectors_fill_device.sum"]
    off = (fills / w["dram__bytes_read.sum"] - 1).abs()
    assert (off < 0.005).all(), off[off >= 0.005]
    w = w.droplevel("run_id")
    rows = w.index.str.extract(r"[\[,]rows=(\d+)", expand=False).astype(int).to_numpy()
    cols = w.index.str.extract(r"[\[,]cols=(\d+)", expand=False).astype(int).to_numpy()
    block_rows = w.index.str.extract(r"block_rows=(\d+)", expand=False).fillna("8").astype(int).to_numpy()
    excess = w["dram__bytes_read.sum"].to_numpy() / (4.0 * rows * cols) - 1
    assert (np.abs(excess[rows == 1024]) < 0.002).all()
    fits = (rows >= 1536) & (8 * rows * cols < H200.l2_bytes) & (block_rows > 1)  # 32 x 1 blocks: < 0.5 %
    assert fits.sum() >= 8 and (excess[fits] > 0.01).all() and (excess[fits] < 0.07).all(), excess[fits]
    assert excess.max() < 0.11


def test_naive_transpose_fills_follow_one_measured_curve(comparison):
    """The share of a naive transpose's written sectors L2 fills and writes back twice, measured on
    transpose.naive_rows at 32 x 8 threads (ncu's DRAM reads, by the bytes moved: Ceilings.l2_piece_fills)
    and applied where L2's write requests bound a kernel that writes its sectors in 4-byte pieces:
    every other naive transpose's DRAM reads and writes (the 32 x 8 kernel at 6000² and 8192², 2 to 32
    block rows) within 5 % (they were up to -10 %), the curve's own cases shown apart; the held-out
    draws (never used for the curve) test it out of sample."""
    from perfmodel.ceilings import ceilings

    c = ceilings("h200")
    assert len(c.l2_piece_fills) >= 10 and c.l2_piece_fills_probe.source.startswith("measured")
    assert c.piece_fill_share(8 << 20) < 0.005 and 0.06 < c.piece_fill_share(512 << 20) < 0.11
    t = comparison[comparison.case.isin(["transpose.naive", "transpose.naive_rows"])]
    reads = t[t.metric == "dram_read_bytes"]
    assert (reads.kind == "counter-ceiling").sum() >= 10
    counted = reads[reads.kind == "counter"]
    assert len(counted) >= 25 and counted.rel_error.abs().max() < 0.05, describe(counted)
    big = t[(t.metric == "dram_write_bytes") & (t.predicted >= 16 << 20)]
    assert len(big) >= 20 and (big.rel_error.abs() <= 0.05).mean() >= 0.9, describe(big)
    assert big.rel_error.abs().max() < 0.10, describe(big)
    pieces = perfmodel.predict("probe.piece_store", "h200", n=1 << 26, dist=1)
    assert pieces.dram_read_bytes == 1 << 28  # bound by the crossbar, not L2's requests: no fills (measured)


def test_naive_transpose_fills_need_sectors_l2_does_not_hold():
    """checks/fills_check.csv: at 2048² (the arrays fit in L2) the fills are there after a reading
    flush and gone when the output's sectors are valid in L2 first (read, or written): L2 fills from
    DRAM only sectors it holds no data of, that the kernel writes in 4-byte pieces."""
    import pandas as pd

    path = Path(__file__).parent.parent / "reports/data/h200/checks/fills_check.csv"
    d = pd.read_csv(path)
    w = d[d.metric == "dram__bytes_read.sum"].set_index(["rows", "block_rows", "state"]).value
    for r in (2, 8):
        assert w[(2048, r, "cold")] > 1.02 * 4 * 2048**2
        for state in ("out_read", "out_written"):
            assert abs(w[(2048, r, state)] / (4 * 2048**2) - 1) < 0.001
        assert w[(2048, r, "again")] < 0.01 * 4 * 2048**2  # everything still in L2


def test_cyclic_store_streams_lose_their_revisits_along_the_measured_store_curve():
    """checks/store_footprints: one sector per line, cycling over 8-256 MiB of lines. Past half the L2 the
    revisits miss too - DRAM write-backs grow from ~0 to 94 % of the stores. The model reads that loss off
    these launches (Ceilings.l2_store_loss, in sample) and times the stream as the slower of its write
    requests at the hit rate and its misses at the fill rate (not fitted here: both rates come from the
    suite's probe.store_lines, the law from the next test; its form checked on an H100,
    tests/test_h100_store_loss.py), the hits' side at the whole-sector rate of the suite's L2-resident
    cycle. Within 5 % where the misses bind (64-256 MiB: first writes only, it was 26 % short at 128-256
    MiB), within 6 % below (-5.9 % at 48 MiB, where the two sides are nearly even)."""
    import pandas as pd

    folder = Path(__file__).parent.parent / "reports/data/h200/checks/store_footprints"
    ncu = pd.read_csv(folder / "ncu.csv.gz")
    events = pd.read_csv(folder / "measurements.csv.gz")
    lines = lambda ids: ids.str.extract(r"footprint_lines=(\d+)", expand=False).astype(int)  # noqa: E731
    w = ncu[(ncu.source == "ncu") & (ncu.metric == "dram__bytes_write.sum")].copy()
    w["mib"] = lines(w.case_id) * 128 / 2**20
    stores = 1056 * 8 * 256 * 4  # warps x passes x lines a request x one sector
    share = w.set_index("mib").value.sort_index() / 32 / stores
    assert (share[share.index <= 16] < 0.01).all() and share[256] > 0.9
    assert share.is_monotonic_increasing
    t = events[(events.metric == "time_s") & (events.stat == "median")].copy()
    t["mib"] = lines(t.case_id) * 128 / 2**20
    assert len(t) == 10
    for _, r in t.iterrows():
        pred = perfmodel.predict("probe.store_lines", "h200", **json.loads(r.params))
        err = pred.time_s / r.value - 1
        assert abs(err) < (0.05 if r.mib >= 64 else 0.065), (r.case_id, err)
        assert pred.bound in ("l2_requests", "l2_write_sectors")  # misses, or all the sectors


def test_l2_resident_store_cycles_take_their_time_by_the_sectors_not_the_lines(comparison):
    """The suite's probe.store_lines at 8 MiB of lines, 64 passes: 1, 2 and 4 lines a request write the
    same 2.16 M sectors (in 0.54, 1.08 and 2.16 M request-line pairs) in the same time, 8-32 lines a request
    2-8x the sectors in 2-8x the time - 13.8-14.4 ns per thousand sectors. The model times a cyclic stream
    by its sectors, whole ones at the rate the 4-line launch gives (Ceilings.l2_write_sector_hits_per_s),
    pieces at the 32-line one's: each within 2 % (1 and 2 lines a request were -19 % by their pairs)."""
    t = comparison[(comparison.case == "probe.store_lines") & (comparison.metric == "time_s")]
    t = t[t.params.map(lambda s: json.loads(s)["footprint_lines"] == 65536)]
    lines = t.params.map(lambda s: json.loads(s)["lines"])
    assert sorted(lines) == [1, 2, 4, 8, 16, 32]
    sectors = 1056 * 8 * 64 * lines.map(lambda n: max(n, 4))  # 4 sectors a request, or one a line past 4
    per_sector = t.measured / sectors
    assert per_sector.max() / per_sector.min() < 1.05, per_sector
    assert (t.rel_error.abs() < 0.02).all(), describe(t)


def test_cyclic_store_streams_run_at_the_slower_of_their_hits_and_their_write_backs():
    """The time law above, from the counters alone: with ncu's own count of the sectors L2 wrote back
    (each a line L2 had lost and had to take again), checks/store_footprints' time is the slower of its
    write requests at the hit rate and those write-backs at the fill rate (Ceilings, measured by
    probe.store_lines) - within 9 % at all ten footprints. The sum of the two, the model's law for first
    writes, is 27-34 % long at 40-64 MiB: where some revisits miss, the misses overlap the hits - the law
    models.time takes for them, with the misses from L2's loss curve for stores (softer than the read
    curve: 28 % lost at 32 MiB of lines where reads lose none)."""
    from perfmodel.ceilings import ceilings

    folder = Path(__file__).parent.parent / "reports/data/h200/checks/store_footprints"
    ncu = pd.read_csv(folder / "ncu.csv.gz")
    ncu = ncu[ncu.source == "ncu"].pivot_table(index="case_id", columns="metric", values="value")
    events = pd.read_csv(folder / "measurements.csv.gz")
    t = events[(events.metric == "time_s") & (events.stat == "median")].set_index("case_id").value
    c = ceilings("h200")
    hit, fill = c.l2_write_requests_per_s.value, c.l2_write_fill_requests_per_s.value
    writes = ncu["lts__t_sectors_srcunit_tex_op_write.sum"]
    backs = ncu["dram__bytes_write.sum"] / 32
    slower = np.maximum(writes / hit, backs / fill)
    summed = (writes - backs) / hit + backs / fill
    assert len(t) == 10 and (abs(slower[t.index] / t - 1) < 0.09).all(), slower / t
    mid = backs / writes
    assert ((summed / t)[mid.between(0.4, 0.7)] > 1.25).all(), summed / t


def test_scattered_read_modify_writes_cost_a_third_more_not_five_times():
    """checks/store_scatter (plan h200_scatter): probe.store_lines' first writes of 2 GiB of lines, one
    4-byte piece each (every sector read-modify-written: ncu's fills one per line), with the lines
    permuted `stride` lines apart. In order (stride 1) it is probe.store_lines, 44 ps a fill; scattered
    over DRAM rows (384 bytes to 512 KiB apart) 1.3-1.45x as long, ~60 ps a fill - not the ~250 ps of
    kernel time each fill costs the padded ragged row transpose (h200_rmw_map): a read-modify-write's
    DRAM cost does not explain that gap. Kept beside the suite (the model, one rate for partial
    sectors, is 24-27 % short of the scattered ones), asserted here."""
    import pandas as pd

    folder = Path(__file__).parent.parent / "reports/data/h200/checks/store_scatter"
    ncu = pd.read_csv(folder / "ncu.csv.gz")
    events = pd.read_csv(folder / "measurements.csv.gz")
    assert (events[events.metric == "check_passed"].value == 1).all()
    t = events[(events.metric == "time_s") & (events.stat == "median")].set_index("case_id").value
    fills = ncu[ncu.metric == "lts__d_sectors_fill_device.sum"].set_index("case_id").value
    stride = t.index.str.extract(r"stride=(\d+)", expand=False).fillna("1").astype(int).to_numpy()
    lines = 16777216
    assert len(t) == 5 and (fills / lines).between(1.0, 1.02).all(), fills  # one fill a line, in any order
    in_order = t[stride == 1]
    assert in_order.max() / in_order.min() < 1.02  # store_scatter at stride 1 = store_lines
    scattered = t[stride > 1]
    assert len(scattered) == 3 and (scattered / in_order.mean()).between(1.3, 1.45).all(), scattered
    per_fill = scattered / fills[scattered.index]
    assert per_fill.between(50e-12, 70e-12).all(), per_fill
    for cid, value in scattered.items():
        p = json.loads(events[events.case_id == cid].params.iloc[0])
        assert -0.3 < perfmodel.predict("probe.store_scatter", "h200", **p).time_s / value - 1 < -0.2


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


def test_partial_sectors_lost_by_the_traffic_between_their_writers(recorded, comparison):
    """probe.split_store (h200_split, h200_split_sweep): a sector two warps write in part, the second
    `dist` warps later. The share L2 loses first (filled from DRAM for each piece: the reads past the
    aligned copy's over 2 x the shared sectors) depends on the traffic between the writers alone -
    within 2.5 points at 128, 256 and 512 MiB a buffer. The law fitted at 128 and 512 MiB (ceilings.partial_law:
    Weibull in the bytes between, each fill's cost a power of them) predicts the 256 MiB launches -
    the suite's and the sweep's full range, 2-256 MiB between - lost share within 2 points, the time
    the fills add within 25 %, and those launches' time within 15 %; and the calm tiled transposes'
    shared sectors 2.1 MiB apart within 0.5-2x."""
    from perfmodel.ceilings import PARTIAL_CALIBRATION_N, ceilings, split_store_pairs
    from perfmodel.measurements import median_times

    pairs = split_store_pairs(recorded, median_times(recorded), H200.l2_bytes)
    spread = pairs.groupby("between_bytes").lost.agg(["min", "max", "count"])
    spread = spread[spread["count"] >= 2]
    assert len(spread) >= 3 and (spread["max"] - spread["min"]).max() < 0.025, spread
    law = ceilings("h200").partial_law
    held = pairs[~pairs.n.isin(PARTIAL_CALIBRATION_N) & (pairs.lost >= 0.01)]
    assert held.between_bytes.nunique() >= 6, held
    lost = held.between_bytes.map(law.lost)
    assert (lost - held.lost).abs().max() < 0.02, held.assign(law=lost)
    added = 2 * held.n / 32 * lost * held.between_bytes.map(law.per_fill_s)
    assert (added / held.added_s).between(0.75, 1.25).all(), held.assign(predicted_s=added)
    t = comparison[(comparison.kind == "time") & comparison.case_id.isin(held.case_id)]
    assert len(t) == len(held) and t.rel_error.abs().max() < 0.15, describe(t)
    # another kernel: tiled transposes into rows off a sector, the next block row 2.1 MiB of traffic later -
    # the calm ones (shared-memory, unpadded, capped at 2-4 blocks per SM) lose 0.6-1.6x the law's share
    from perfmodel.report.transpose import partial_law_points

    points = partial_law_points(recorded, comparison, H200.l2_bytes)
    calm = points[points.group.eq("other tiled transposes") & points.mib.between(2, 2.2)]
    ratio = calm.lost / law.lost(calm.mib.iloc[0] * 2**20)
    assert len(calm) >= 10 and ratio.between(0.5, 2.0).all(), calm.assign(ratio=ratio)


def test_partial_sectors_written_back_before_they_are_lost(recorded, comparison):
    """probe.split_store's DRAM writes in the kernel past the aligned copy's, over one write a shared
    sector: L2 writes the first piece back (a fill and one write more) sooner than it loses the
    sector - 60 % of them at 16 MiB between the writers, where 35 % are lost (filled twice); 1.3-1.8x
    the share lost at 4-32 MiB. The write-back law fitted at 128 and 512 MiB a buffer
    (ceilings.PartialLaw.written_back) predicts the
    256 MiB launches at 4-32 MiB between within 2 points (never below the share lost), and the suite's
    shifted copies' DRAM writes (kernel and flush) within 1 %."""
    from perfmodel.ceilings import PARTIAL_CALIBRATION_N, ceilings, split_store_pairs, written_back_shares
    from perfmodel.measurements import median_times

    law = ceilings("h200").partial_law
    shares = written_back_shares(split_store_pairs(recorded, median_times(recorded), H200.l2_bytes))
    held = shares[~shares.n.isin(PARTIAL_CALIBRATION_N) & shares.between_bytes.between(4 << 20, 32 << 20)]
    assert held.between_bytes.nunique() == 4, held
    assert (held.written_back > 1.3 * held.lost).all(), held  # written back sooner than lost
    back = held.between_bytes.map(law.written_back)
    assert (back - held.written_back).abs().max() < 0.02, held.assign(law=back)
    t = comparison[comparison.case.eq("probe.split_store") & comparison.metric.eq("dram_write_bytes")
                   & comparison.params.str.contains('"offset":4')]
    assert len(t) >= 4 and t.rel_error.abs().max() < 0.01, describe(t)


def test_scattered_store_order_is_a_known_gap(comparison):
    """probe.split_store aligned (no shared sector): warps storing segments in address order (dist 1) run
    at the model's latency-bound time; out of order (dist 8-262144: the stores hop 1 KiB-32 MiB) 2-13 %
    slower at the same DRAM bytes (DRAM locality, not modelled; gaps.py). Stores in near order again
    (dist 2^20: two segments apart) are within 3 %."""
    t = comparison[comparison.kind.isin(["time", "time-ceiling"]) & comparison.case.eq("probe.split_store")]
    p = t.params.map(json.loads)
    big = p.map(lambda q: q["offset"] == 0 and q["n"] >= 1 << 25)
    dist = p.map(lambda q: q["dist"])
    ordered, hopping = t[big & dist.isin([1, 1 << 20])], t[big & dist.between(8, 1 << 18)]
    assert len(ordered) >= 2 and ordered.rel_error.abs().max() < 0.03, describe(ordered)
    assert len(hopping) >= 10 and hopping.rel_error.between(-0.13, -0.02).all(), describe(hopping)


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


def test_l2_reads_requested_by_l1(comparison):
    """What the SMs' L1s request from L2 (l1tex__m_xbar2l1tex_read_sectors): the distinct sectors
    each block loads (the grid's edge blocks weighed by their number), block-invariant addresses once
    per SM, less what co-resident blocks of one grid row share in L1: as the launch's recorded placement
    has them meet where one is recorded (models.placed), else with block starts spread as the recorded
    placements spread (models.traffic.co_resident_hits), lines kept as an L1 replacing at random keeps
    them; the first wave's blocks as the dispatcher places them where no barrier holds them in step: at
    1024 x 1048 and 1056, 66 blocks a grid row, blocks 132 apart on one SM share B's columns, +10/+12 %
    -> +2/+4 %). Within 5 % everywhere but TILE 16 with more blocks per grid row than SMs (+0..+6 %,
    2048 x 3072 x 2048 with its own placement; the pooled law alone +7 % at 1536 x 6144 and 2560 x 5376,
    +13..+30 % without the sharing), the naive matmul where k is a multiple of 1024 and no placement is
    recorded (held-out 26: 825 x 1342 x 1024 +8 %, 1024 x 1024 x 4096 +9 %; the pooled law gives the
    recorded 1024 and 2048 +7/+9 %, their own placements +3/+1 %). The barrier-round probes at two blocks
    per SM (their blocks cycle through one tile pool; two on an SM drift into each other's tiles within
    what L1 holds, +5..+10 % without it) as their recorded round clocks replay through L1
    (test_round_replay). Reuse within a block counts only within a window of its longest loop that fits in
    its share of L1 (the probe at one block per SM: exact, 8x fewer sectors without the window)."""
    t = comparison[comparison.metric == "l2_requested_read_sectors"]
    assert len(t) >= 150
    wide16 = t.case_id.str.contains("tile=16") & (param(t, "n").fillna(0) > 16 * 132)
    known = t.case.eq("matmul.naive") | (t.case.eq("matmul.tiled") & wide16)
    bad = t[~known & (t.rel_error.abs() > 0.05)]
    assert bad.empty, describe(bad)
    assert t[known].rel_error.between(-0.05, 0.125).all(), describe(t[known])
    temporal = t[t.case.eq("stencil.temporal")]  # halos cut at the grid's edges
    assert len(temporal) >= 10 and temporal.rel_error.abs().median() < 0.01, describe(temporal)
    resident = t[t.case.isin(L1_RESIDENT)]
    assert len(resident) >= 9 and resident.rel_error.abs().max() < 0.01, describe(resident)


def test_l1_reuse_across_blocks_follows_the_recorded_placement(comparison):
    """The naive matmul's L1s and TILE 16's on grids wider than the SMs request up to 20 % fewer sectors
    than their blocks' distinct ones. Recorded placements (experiments/placement.py: each block's
    SM, start and end; 51 shapes, three launches each) show blocks of one grid row resident on one SM
    at once. Where a launch's placement is recorded the model lets a block's loads hit the lines of
    every live co-resident block sharing its indices, each line surviving the SM's fills since that
    block started as in an L1 that replaces at random (nothing fitted): every recorded case within
    6 % of ncu, 50 of 51 within 5 %. The pooled start-spread law alone (what shapes with no recorded
    placement get), its offsets paired per slot for kernels with barriers: those all within 5 %; the naive
    matmul keeps the earlier law (independent, one spread for all slots: then -3..+8 %, 42 of 51), +7/+8 %
    at 1024 and 2048 - 49 of 51 within 5 %. Since held-out sets 53's and 55's 35 TILE 16 shapes were placed
    (2026-12-05; the pool 195 -> 300 launches): two TILE 16 shapes at +5.0/+5.2 % (1536 x 6144 x 1536,
    2560 x 5376 x 1536), the naive matmul +7.4/+8.6 % - 47 of 51."""
    from perfmodel.placement import pooled_law_sectors

    t = comparison[comparison.metric.eq("l2_requested_read_sectors")].set_index("case_id")
    law = {cid: v for cid, v in pooled_law_sectors().items() if cid in t.index}  # the rest: held-out set 29
    assert len(law) >= 51
    model = t.rel_error[list(law)].abs()
    assert model.max() < 0.06, model.sort_values().tail()
    assert (model <= 0.05).sum() >= 50, model.sort_values().tail()
    off = {cid: abs(v / t.measured[cid] - 1) for cid, v in law.items()}
    assert max(e for cid, e in off.items() if "naive" not in cid) < 0.053 and max(off.values()) < 0.087, off
    assert sum(e <= 0.05 for e in off.values()) >= 47, off


def test_l2_slices_count_merged_requests(comparison):
    """The L2 slices (lts__t_sectors_srcunit_tex_op_read) count fewer sectors than the L1s request
    where SMs ask for the same sectors at once: equal for streams, 1.1-1.4x fewer for matmul,
    3-4x for the L1-resident probes, 1.1-1.8x for the barrier-round probes (all blocks read one tile
    pool in step). The prediction is an upper bound there, not a count."""
    t = comparison[comparison.metric == "l2_read_sectors"]
    streaming = t[t.study.isin(["transpose", "ceilings", "coalescing"]) & ~t.case.isin([*L1_RESIDENT, *ROUND_PROBES])]
    bad = streaming[streaming.rel_error.abs() > 0.05]
    assert bad.empty, describe(bad)
    under = t[t.rel_error < -0.05]
    assert under.empty, describe(under)


L1_RESIDENT = ["probe.load_lines", "probe.pair_lines"]
ROUND_PROBES = ["probe.barrier_rounds", "probe.barrier_waves"]  # blocks cycle through one tile pool in step


def test_l1_data_stage_wavefronts_follow_the_bank_rule(comparison):
    """Global loads go through L1's 32 data banks like shared memory: wavefronts = the most distinct
    words one bank must deliver. Exact where loads hit L1 (probe.load_lines: 10 patterns, 1 to 32
    ways; matmul at k a multiple of 32); misses add wavefronts, so elsewhere it is a lower bound."""
    t = comparison[comparison.metric == "global_load_wavefronts"]
    hits = t[t.case.eq("probe.load_lines")]
    assert len(hits) >= 9 and hits.rel_error.abs().max() < 0.005, describe(hits)  # + the cold first touches
    aligned = t[t.study.eq("matmul") & ~t.params.map(lambda s: any(json.loads(s).get(k, 0) % 32 for k in "mnk"))]
    off = aligned[aligned.rel_error.abs() >= 0.01]
    assert len(aligned) >= 20 and off.empty, describe(off)
    over = t[t.rel_error > 0.01]
    assert over.empty, describe(over)


def test_l1_tag_stage_passes(comparison):
    """4 tag banks per pass, banks an XOR hash of the line address (probe.pair_lines): power-of-two
    line strides fill them evenly, other line sets like random throws. Column-major matmul at
    k = 1000 (16 lines 31.25 lines apart: 6.1 passes, not 4) is within 5 % (-5.02 %, every request
    enumerated). The naive matmul's sweep
    of A's row pitch (h200_stage, k = 1025-1048) counts 0.07-0.15 set conflicts per request more than
    the bank model (-5...-7 %): 88 % of the rows within 5 %."""
    t = comparison[comparison.metric.isin(["global_load_tag_wavefronts", "global_store_tag_wavefronts"])]
    pairs = t[t.case.eq("probe.pair_lines") & t.metric.eq("global_load_tag_wavefronts")]
    dist = param(pairs, "dist")
    lines_apart = dist // 32
    power = (dist % 32 == 0) & ((lines_apart & (lines_apart - 1)) == 0)
    passes = pairs.measured / pairs.measured.min()  # per request: 1 or 2 (averaged over 8 positions)
    assert len(pairs) >= 140 and (passes[power] < 1.13).all()  # never share a bank (d = 1 line: 1 in 8)
    assert passes[~power].mean() == pytest.approx(1.25, abs=0.05)  # share one 1 time in 4, as random banks
    t = t[~t.case.eq("probe.pair_lines")]  # each distance depends on where the buffer starts
    # a warp's 128-byte access 4-64 bytes off a line spans two neighbouring lines: ncu counts 15 tag
    # passes per 14 such requests (coalescing.SPLIT_PAIR_PASSES, read off the shifted copies, 128 KiB
    # to 256 MiB) - and so the row transposes, whose rows start off a line 7 times in 8, to the pass
    params = t.params.map(json.loads)
    offset, stride = params.map(lambda p: p.get("offset", 0)), params.map(lambda p: p.get("stride", 1))
    shifted = t.case.isin(["mem.global_store", "mem.global_load", "probe.split_store"]) & (offset % 32 != 0) & (
        stride == 1) & ~(t.case.eq("mem.global_load") & t.metric.eq("global_store_tag_wavefronts"))
    near = (t.measured - t.predicted).abs() <= (0.001 * t.measured).clip(lower=1)  # the 15/14 rounds at 16 Ki
    assert shifted.sum() >= 10 and near[shifted].all(), describe(t[shifted & ~near])
    rows = t[t.case.isin(["transpose.rows", "transpose.rows_swapped"])]
    off = rows.rel_error.abs() >= 0.01
    assert len(rows) >= 50 and (~off).mean() >= 0.95, describe(rows[off])
    # capped by unused shared memory, the row transpose has 28 KiB of L1 beside the carveout: its loads
    # in flight crowd the L1's sets, and ncu counts more tag passes the more blocks share it (not modelled)
    capped = t[t.case.eq("transpose.rows_capped")]
    bps = param(capped, "blocks_per_sm")
    assert (capped.rel_error[bps <= 2].abs() < 0.01).all() and (capped.rel_error[bps == 8] < -0.05).all(), \
        describe(capped)
    assert len(t) >= 500
    assert (t.rel_error.abs() <= 0.05).mean() >= 0.85
    assert t.rel_error.abs().max() < 0.35, describe(t[t.rel_error.abs() >= 0.35])
    colmajor = t[t.case_id.eq("matmul.naive_colmajor_b[k=1000,m=1000,n=1000]")]
    assert len(colmajor) and colmajor.rel_error.abs().max() < 0.051, describe(colmajor)


def test_l2_write_requests(comparison):
    """One L2 write request per (store instruction, line); load-free kernels' blocks combine their
    warps' stores per line first (probe.scatter_store: 8 warps -> 1 request per line). Where a warp's
    consecutive stores share lines and no law is measured for its run of stores, L2 counts between the
    two bounds; coarsened C at ragged n follows the warp-seams law (test_warp_seams_law)."""
    writes = comparison.metric.isin(["l2_write_requests", "l2_write_sectors"])
    t = comparison[writes & comparison.kind.eq("counter-merged")]
    assert len(t) >= 6
    for _, r in t.iterrows():
        combined = perfmodel.predict(r.case, "h200", **json.loads(r.params)).extra[f"{r.metric}_combined"]
        # (the upper bound is the L1 count, sampled past the enumeration budget: within 2 % at COARSE 8)
        assert combined * 0.99 <= r.measured <= r.predicted * 1.03, (r.case_id, r.metric, combined, r.measured)
    t = comparison[(comparison.metric == "l2_write_requests") & ~comparison.kind.eq("counter-merged")]
    assert len(t) >= 300
    big = t[t.measured >= 10_000]
    # shifted copies, warps next to each other: L1 combines the sector at the seam of two neighbouring
    # warps' stores, the more the shorter the launch (models.combining: 58 % of the seams at 0.06
    # waves, 7 % at 500, read off plan h200_combine's sizes; the suite's 16 Mi and 256 Mi test it)
    shifted = big.case.eq("mem.global_store") & big.params.map(lambda s: json.loads(s).get("offset", 0) % 32 != 0)
    assert shifted.sum() >= 10 and big[shifted].rel_error.abs().max() < 0.05, describe(big[shifted])
    big = big[~shifted]
    # a block's 8 warps writing word k of the same 32 sectors after one load each: L1 combined 55-70 %
    # of the (store, line) pairs (probe.piece_store, dist 1; probe.piece_spread, its 8 lines a row
    # apart, 1-3 points fewer) - though the naive transpose's warps, as close, are not combined (exact
    # above: 32 lines a store, not 8). Timing: the more waves, the less (models.combining, read off
    # h200_combine's sizes, and 5-7 Mi from h200_combine_step); the suite's 4, 16 and 64 Mi within 5 %
    # (4 Mi pieces +3.4 %, lines apart +4.7 %; +7 and +6 % before the 5-7 Mi points)
    pieces = big.case.isin(["probe.piece_store", "probe.piece_spread"]) & param(big, "dist").eq(1)
    # known gap (held-out set 30, h200_combine_step): at 3 Mi those calls' pieces combined more than at 2 Mi
    # (0.30 against 0.32-0.33 sectors a word) - +7 % (+11 % before plan h200_piece_dip's 2.25-4.5 Mi, whose
    # one call wrote 0.31-0.33); another card's six launches (checks/piece_sizes, the test below) wrote
    # 0.33-0.35 a word there, the law 0.32: the share at one size moves by the call
    three_mi = pieces & big.case.eq("probe.piece_store") & param(big, "n").eq(3 << 20)
    assert three_mi.sum() == 1 and big[three_mi].rel_error.abs().max() < 0.08, describe(big[three_mi])
    pieces &= ~three_mi
    assert pieces.sum() >= 6 and big[pieces].rel_error.abs().max() < 0.05, describe(big[pieces])
    big = big[~pieces & ~three_mi]
    assert big.rel_error.abs().max() < 0.05, describe(big[big.rel_error.abs() >= 0.05])
    small = t[t.measured < 10_000]  # 32 Ki-element microbenchmarks: a few lines combine at the edges
    assert small.rel_error.abs().max() < 0.2, describe(small[small.rel_error.abs() >= 0.2])
    merged = t[t.case.eq("probe.scatter_store")]
    assert len(merged) >= 1 and merged.rel_error.abs().max() < 0.05, describe(merged)


def test_piece_store_repeats_scatter_about_the_combining_law(comparison):
    """checks/piece_sizes: probe.piece_store (dist 1) at 1-8 Mi threads in steps of 0.5 Mi, three allocations
    and two launches a size, in one call on one card: the L2 write sectors of one size spread 2-16 %, the
    law (read off plans h200_combine and h200_piece_dip on other cards) within 5 % of their median at 13 of
    the 15 sizes, within 6 % at all (12 and 8 % before the piece_dip sizes). At 3 Mi the suite's launch (the
    suite's one row past 5 %) lies under all six, and the law between the two calls: the share at one size
    moves by the call."""
    from perfmodel.allocation import launch_counts

    w = launch_counts("h200", "piece_sizes", "lts__t_sectors_srcunit_tex_op_write.sum")
    w["n"] = param(w, "n")
    launches = pd.concat([w.set_index("n")["first"], w.set_index("n")["second"]]).groupby(level=0)
    assert len(launches) == 15 and (launches.size() == 6).all()
    law = pd.Series({n: perfmodel.predict("probe.piece_store", "h200", n=int(n), dist=1).l2_write_bytes / 32
                     for n in launches.groups})
    off = law / launches.median() - 1
    assert (off.abs() < 0.05).sum() >= 13 and off.abs().max() < 0.06, off
    suite = _sel(comparison, case="probe.piece_store", metric="l2_write_sectors")
    three = suite[param(suite, "n").eq(3 << 20) & param(suite, "dist").eq(1)]
    assert len(three) == 1 and (three.measured.iloc[0] < launches.min()[3 << 20])
    assert three.measured.iloc[0] < law[3 << 20] < launches.min()[3 << 20]


def test_split_store_in_kernel_writes_repeat_across_allocations(comparison):
    """checks/split_repeat: probe.split_store at 64 Mi threads, 65536 warps apart, offset 4 - the suite's row
    whose DRAM writes miss by 5.2 % - five allocations, two launches each, on another card: the in-kernel
    writes repeat within 1 % and within 1.5 % of the suite's launch. Not a draw of the pages: the gap is the
    loss law's (partial sectors L2 writes back 0.27-0.68 more per fill, the law 0.5)."""
    from perfmodel.allocation import launch_counts

    w = launch_counts("h200", "split_repeat", "dram__bytes_write.sum")
    got = pd.concat([w["first"], w["second"]])
    assert len(got) == 10 and got.max() / got.min() < 1.01
    suite = _sel(comparison, case="probe.split_store", metric="dram_write_bytes_in_kernel")
    row = suite[param(suite, "dist").eq(65536) & param(suite, "n").eq(1 << 26) & param(suite, "offset").eq(4)]
    assert len(row) == 1 and abs(row.measured.iloc[0] / got.median() - 1) < 0.015


def test_warp_seams_law(comparison):
    """A warp's C stores 128 bytes apart meet in a sector where C's rows start off one (matmul.coarsened
    at n off a multiple of 8): L1 combines a share of those seams set by the run of stores, read off plan
    h200_warp_seams (m = k = 1920) - 0.74-0.76, 0.37-0.39 and 0.28-0.30 at C = 2, 4, 8, flat against
    the waves. The suite's own ragged shapes (m = k = 1024, n = 1025, 1028, 1040: 7/8, 1/2 and none of
    the rows off a sector) follow it: L2 write sectors within 1 %, requests within 5 % (they were 2-7 %
    and 9-22 % under the one-store-at-a-time count)."""
    from perfmodel.ceilings import ceilings
    from perfmodel.models.combining import WARP_SEAMS_RUNS, warp_seams

    law = ceilings(device("h200")).store_combining
    shares = {c: law.share(warp_seams(c), 1.0) for c in WARP_SEAMS_RUNS}
    assert 0.70 <= shares[2] <= 0.78 and 0.34 <= shares[4] <= 0.41 and 0.26 <= shares[8] <= 0.32, shares
    assert all(law.share(warp_seams(c), 100.0) == shares[c] for c in WARP_SEAMS_RUNS)  # flat
    coarse = comparison[comparison.case.eq("matmul.coarsened")
                        & comparison.metric.isin(["l2_write_sectors", "l2_write_requests"])]
    ragged = coarse[param(coarse, "k").eq(1024) & param(coarse, "n").isin([1025, 1028, 1040])
                    & param(coarse, "coarse").ge(2)]
    sectors, requests = ragged[ragged.metric.eq("l2_write_sectors")], ragged[ragged.metric.eq("l2_write_requests")]
    assert len(sectors) == 9 and sectors.kind.eq("counter").all(), describe(sectors)
    assert sectors.rel_error.abs().max() < 0.01, describe(sectors)
    assert len(requests) == 9 and requests.rel_error.abs().max() < 0.05, describe(requests)
    # the one-store-at-a-time count missed them: the law, not the count, puts them there
    off = sectors[param(sectors, "n").ne(1040)]
    upper = [perfmodel.predict("matmul.coarsened", "h200", **json.loads(p)).global_store_sectors for p in off.params]
    assert (np.array(upper) / off.measured.to_numpy() - 1 > 0.015).all(), describe(off)


def test_l2_input_transfers_follow_the_crossbar_counter(recorded):
    """What the crossbar carries into L2 (traffic.l2_input_units: a transfer per written sector, one
    more per (request, line) writing a sector in part, one per read request): ncu's busy share of
    that port x the kernel's duration is proportional to it, one rate within 4 % over every profiled
    kernel that stores for 20 µs or more of port time (h200_l2_units: L2-resident and streaming 4- and
    32-byte stores, whole lines, aligned and shifted copies, the naive and tiled transposes,
    probe.piece_store 256 warps apart, whose 4-sector masked lines hold the port at 94 % while L2's
    tag stage idles at 38 %; h200_fabric(2): the row transposes), within 6 % below that (a 1001-row
    transpose, 13 µs of port time, the busy share over its ramp: +5.8 %). Where L1
    combines part of a block's stores (piece_store / piece_spread, dist 1) the count takes the share
    measured on one of them, so those land within 12 %."""
    from perfmodel.validate import l2_input_busy

    t = l2_input_busy("h200", recorded)
    rate = (t.transfers / t.busy_s)[~t.combined]
    combined = (t.transfers / t.busy_s)[t.combined]
    assert len(rate) >= 10 and len(combined) >= 1, t
    off = rate / rate.median() - 1
    long = t.busy_s[~t.combined] >= 20e-6
    assert off[long].abs().max() < 0.04 and off.abs().max() < 0.06, t.assign(off=off)
    assert (combined / rate.median() - 1).abs().max() < 0.12, t.assign(rate=combined / rate.median())


def test_l2_read_requests_are_an_upper_bound(comparison):
    t = comparison[comparison.metric == "l2_read_requests"]
    streaming = t[t.study.isin(["transpose", "coalescing"]) | t.case.isin(["probe.copy", "probe.read"])]
    big = streaming[streaming.measured >= 100_000]  # 32 Ki-element microbenchmarks: edge lines combine
    assert big.rel_error.abs().max() < 0.05, describe(big[big.rel_error.abs() >= 0.05])
    # (the slices merge what they can: mem.global_load width 8 offset 64 counted 2293..2871 in four runs)
    assert streaming.rel_error.abs().max() < 0.3, describe(streaming[streaming.rel_error.abs() >= 0.3])
    # L1 reuse across the blocks of an SM is not modelled: never under, except the naive stencil
    # (-10 %, -14 % before the edge classes: more requests than its lines, not explained)
    naive_stencil = t.case.eq("stencil.naive")
    under = t[(t.rel_error < -0.08) & ~naive_stencil]
    assert under.empty, describe(under)
    assert t[naive_stencil].rel_error.between(-0.11, 0.05).all(), describe(t[naive_stencil])


def test_flops_executed(comparison):
    t = comparison[comparison.metric == "flops"]
    ragged = t.params.map(lambda s: any(v % 32 for v in json.loads(s).values()))
    exact = t[~ragged & (t.rel_error.abs() > 1e-4)]
    assert exact.empty, describe(exact)
    # ragged tiles multiply zero padding: executed FLOPs exceed 2mnk
    assert (t[ragged].measured >= t[ragged].predicted).all()


def test_time_model_beats_the_naive_roofline(comparison):
    t = comparison[comparison.kind == "time"]
    model = t.rel_error.abs().mean()
    baseline = ((t.baseline - t.measured) / t.measured).abs().mean()
    assert model < baseline / 5, f"model MAPE {model:.3f} vs naive roofline {baseline:.3f}"
    assert model <= 0.10, f"time MAPE {model:.3f} > 10 % (the models issue's target)"


def test_time_accuracy(comparison):
    """MAPE <= 10 % over the suite and no case worse than 25 % (the models issue);
    per study the levels reached."""
    t = comparison[comparison.kind == "time"]
    reached = {"ceilings": 0.11, "coalescing": 0.15, "matmul": 0.06, "stencil": 0.07, "transpose": 0.08}
    for study, bound in reached.items():
        s = t[t.study == study]
        mape = s.rel_error.abs().mean()
        assert mape <= bound, f"{study}: time MAPE {mape:.3f} > {bound}\n" + describe(
            s.sort_values("rel_error", key=np.abs, ascending=False))
    tiled = t[t.case.isin(["matmul.tiled", "matmul.coarsened"]) & ~t.case_id.str.contains("coarse=8")]
    assert tiled.rel_error.abs().max() <= 0.10, describe(tiled[tiled.rel_error.abs() > 0.10])
    within = (t.rel_error.abs() <= 0.10).mean()
    assert within >= 0.70, f"only {within:.0%} of timed cases within 10 %"
    worse = t[t.rel_error.abs() > 0.25]  # the issue's target: no case worse than 25 %. The last to miss,
    # padded row transposes into rows off a sector at 6-8 blocks per SM (25-33 % fast), come within it
    # since their writers' store order spreads (store_order, tests/test_store_order.py): -24..-9 %.
    # (The shifted copy whose partial sectors are completed ~8 waves later is within 7 % since the fills of
    # the sectors L2 loses are charged; probe.piece_store and piece_spread, sectors written in 4-byte
    # pieces, within 10 % since the crossbar into L2 and L1's combining of a block's pieces are counted.)
    assert worse.empty, describe(worse)
    pieces = t[t.case.isin(["probe.piece_store", "probe.piece_spread"])]
    assert len(pieces) >= 14 and pieces.rel_error.abs().max() < 0.25, describe(pieces)
    # temporal blocking, issue-bound between barriers (models.phase_law, read off these launches):
    # -8..+4 % (-13..+11 % with the rule by blocks per SM alone)
    temporal = t[t.case == "stencil.temporal"]
    assert temporal.rel_error.abs().max() <= 0.08, describe(temporal)
    scattered = t[t.case.isin(["transpose.naive", "mem.global_store", "probe.scatter_store"])]
    assert scattered.rel_error.abs().max() <= 0.25, describe(scattered)


def test_ragged_transposes_fills_follow_the_store_timing(comparison):
    """Sectors two blocks of a transpose each write in part (output rows that start off a sector):
    DRAM read-modify-writes a share of them (ncu: reads past the input). Plan h200_rmw_map crosses the
    array size with the blocks between the two writers: the padded row transpose - near DRAM's limit -
    fills more the larger its arrays at every distance, up to ~15 %; the unpadded one (stores slowed by
    32-way conflicts) and the shared-memory transposes at the same shapes under half that. Where the
    padded kernel fills more than 5 %, the model - the order its blocks write in spread as recorded
    (store_order) - predicts its DRAM reads within 3 % and its time within -25..0 % (each fill costs
    these kernels more than the copy the law was fitted on)."""
    from perfmodel.report.transpose import fills_per_row_start

    f = fills_per_row_start(comparison)
    padded, others = f[f.kernel.eq("row transpose, pad 1")], f[~f.kernel.eq("row transpose, pad 1")]
    assert len(padded) >= 12 and len(others) >= 12
    for blocks, g in padded.groupby("blocks_apart"):
        g = g.sort_values("array_mib")
        if g.array_mib.iloc[-1] > 2 * g.array_mib.iloc[0]:
            assert g.fills_pct.iloc[-1] > g.fills_pct.iloc[0], (blocks, describe(g))
    assert others.fills_pct.max() < padded.fills_pct.max() / 2, describe(others)
    heavy = padded[padded.fills_pct > 5]
    assert len(heavy) >= 8 and heavy.dram_error_pct.abs().max() < 3, heavy.to_string()
    assert heavy.time_error_pct.between(-25, 0).all(), heavy.to_string()


def test_capped_row_transposes_follow_the_phase_rule_and_fill_with_blocks_in_flight(comparison):
    """transpose.rows capped at 2-8 blocks per SM by unused shared memory (plan h200_capped): into
    aligned rows the model stays within 15 % at every cap - the phase rule below 8 blocks, DRAM speed at
    8. Into ragged rows the shared partial sectors' fills rise with the blocks in flight (~3 % at 2-4
    blocks, three times that at 8), and each fill costs a like time over the aligned kernel at every
    cap (within 3x): a known gap, the fills not predicted."""
    from perfmodel.report.transpose import capped_fills

    f = capped_fills(comparison)
    aligned, ragged = f[f.shared.eq(0)], f[f.shared > 0]
    assert len(aligned) >= 5 and len(ragged) >= 9, f.to_string()
    err = aligned.predicted_us / aligned.measured_us - 1
    assert err.abs().max() < 0.15, aligned.to_string()
    for _, g in ragged.groupby(["rows", "cols"]):
        g = g.sort_values("blocks_per_sm")
        assert g.fills_pct.iloc[-1] > 2 * g.fills_pct.iloc[0], g.to_string()
    cost = ragged.extra_s_per_fill.dropna()
    assert len(cost) >= 5 and cost.min() > 0 and cost.max() < 3 * cost.min(), ragged.to_string()


def test_swapped_grid_removes_the_ragged_row_transpose_loss(comparison):
    """transpose.rows_swapped (plan h200_swapped): the next block completes each shared partial sector.
    Into 3001-float rows the plain kernel fills more than ten times as many sectors a block and runs
    over 1.3x as long; the swapped kernels up to ~100 MB an array are within 13 % of the model, over:
    the model spreads their store order as the plain kernel's (store_order) and so loses their shared
    sectors as the law says at those distances - L2 loses under a fifth of that (a known gap,
    tests/test_store_order.py); into aligned rows within 5 %."""
    from perfmodel.report.transpose import swapped_pairs

    f = swapped_pairs(comparison).set_index(["case", "rows", "cols"])
    plain, swap = f.loc["transpose.rows"], f.loc["transpose.rows_swapped"]
    assert len(swap) >= 6 and (3001, 8556) in plain.index, f.to_string()
    assert plain.measured_us[(3001, 8556)] > 1.3 * swap.measured_us[(3001, 8556)], f.to_string()
    assert plain.extra_reads_per_block[(3001, 8556)] > 10 * swap.extra_reads_per_block[(3001, 8556)]
    small = swap[4.0 * swap.index.get_level_values("rows") * swap.index.get_level_values("cols") < 110e6]
    err = small.predicted_us / small.measured_us - 1
    assert len(small) >= 3 and err.between(-0.05, 0.13).all(), small.to_string()
    assert abs(err[(3000, 8556)]) < 0.05, small.to_string()


def test_ragged_transposes_lose_partial_sectors_as_a_random_replacement_l2_would(comparison):
    """The ragged row and shared-memory transposes' DRAM reads past the input, against the traffic
    between the two blocks that each touch a sector in part over the L2's size (nothing fitted): the
    median within 0.7-1.4x and 8 in 10 within 2x, except the padded row transpose at 6-8 blocks per
    SM, which loses more (a known gap)."""
    from perfmodel.report.transpose import partial_refills

    f = partial_refills(device("h200").l2_bytes, comparison)
    calm = f[~f.fast].ratio
    assert len(calm) >= 20 and 0.7 < calm.median() < 1.4, f[~f.fast].to_string()
    assert ((calm > 0.5) & (calm < 2)).mean() >= 0.8, f[~f.fast].to_string()
    assert f[f.fast].ratio.median() > 2, f[f.fast].to_string()


def test_ragged_row_transposes_stall_at_the_crossbar_but_that_is_not_their_loss(recorded, comparison):
    """h200_fabric(2): padded row transposes into rows off a sector at 8 blocks per SM hold requests
    the crossbar refuses (ncu: over 1 % of the cycles), every other row transpose profiled almost
    never (< 0.5 %); capped at 6-8 blocks by unused shared memory they stall far less yet lose as
    much against the model - the stall accompanies the known gap, it does not measure it."""
    from perfmodel.report.transpose import xbar_stalls

    f = xbar_stalls(recorded, comparison)
    ragged, capped, other = (f[f.group == k] for k in ("ragged", "capped", "other"))
    assert len(ragged) >= 6 and len(capped) >= 3 and len(other) >= 8, f.to_string()
    assert (ragged.stall_avg_pct > 1).all() and (other.stall_avg_pct < 0.5).all(), f.to_string()
    slow_capped = capped[capped.error < -0.2]
    assert len(slow_capped) >= 2 and (slow_capped.stall_avg_pct < 0.5).any(), f.to_string()


def test_ceiling_probes_are_consistent_but_not_counted(comparison):
    t = comparison[comparison.kind == "time-ceiling"]
    assert set(t.case) >= {"probe.copy", "probe.fma", "probe.launch"}
    # probe.barrier_rounds defines its ceilings by slope: its launches' intercept (the cold tile pool
    # read from DRAM in the first rounds, ~90 us) is not modelled
    # probe.split_store's calibration launches define the partial-sector law by difference (shifted less
    # aligned); both keep the scattered store order's gap (-4..-12 %, test_scattered_store_order_is_a_known_gap)
    split = t[t.case == "probe.split_store"]
    assert len(split) >= 10 and split.rel_error.abs().max() < 0.15, describe(split)
    rates = t[~t.case.isin(["probe.launch", "probe.barrier_rounds", "probe.split_store"])]
    assert rates.rel_error.abs().max() < 0.05, describe(rates)
    # events around an empty kernel take longer than what they add to a running kernel
    empty = t[t.case == "probe.launch"]
    assert (empty.measured > empty.predicted).all(), describe(empty)


def test_issued_instructions(comparison):
    """Warp instructions from the SASS, anchored on the exact memory-instruction counts."""
    t = comparison[comparison.metric == "warp_instructions"]
    exact = t[t.case.isin(["matmul.tiled", "matmul.corner_turning", "matmul.coarsened", "stencil.naive",
                           "transpose.naive", "transpose.smem", "mem.global_load", "mem.global_store",
                           "probe.copy", "probe.scatter_store"])]
    assert len(exact) > 100 and exact.rel_error.abs().max() < 0.01, describe(exact[exact.rel_error.abs() >= 0.01])
    # loops peeled or unrolled with remainders: the mix of copies depends on trip counts
    rough = t[t.case.isin(["stencil.temporal", "transpose.rows", "probe.read"])]
    assert rough.rel_error.abs().max() < 0.10, describe(rough)
    unrolled = t[t.case.isin(["matmul.naive", "matmul.naive_colmajor_b"])]  # x16 loop + remainder loops
    assert unrolled.rel_error.abs().max() < 0.25, describe(unrolled)


def test_ceilings_meet_the_suite_targets():
    from perfmodel.ceilings import ceilings

    c = ceilings(H200)
    assert c.dram_bytes_per_s.source.startswith("measured")
    assert c.dram_bytes_per_s.value >= 0.90 * c.memcpy_bytes_per_s.value  # float4 copy vs cuMemcpyDtoD
    assert c.fp32_flops_per_s.value >= 0.90 * 67e12
    assert c.latency_l1_s.value < c.latency_l2_s.value < c.latency_dram_s.value


def test_stream_startup_predicts_small_streams(comparison):
    """The start-up is the intercept of the float4 read stream over 64 MiB and up; the smaller reads
    (1-32 MiB, not in the fit) land within 15 %. Copies of 2-64 MiB per array run up to 15 % faster
    than the model: part of their writes is still in L2 when they end."""
    c = comparison
    t = c[(c.kind == "time") & c.case.isin(["probe.read", "probe.copy"]) & c.params.str.contains('"vec":1')
          & ~c.params.str.contains('"smem_per_block":[1-9]')]
    n = param(t, "n")
    small_reads = t[t.case.eq("probe.read") & (n < 1 << 24)]
    assert len(small_reads) >= 6 and small_reads.rel_error.abs().max() < 0.15, describe(small_reads)
    copies = t[t.case.eq("probe.copy")]
    assert len(copies) >= 8 and copies.rel_error.between(-0.05, 0.16).all(), describe(copies)


def test_coarse_8_waits_on_shared_loads_not_on_the_pipe(recorded):
    """COARSE 8 runs one block (32 warps) per SM. ncu's stall reasons (plan h200_stalls_matmul): at
    COARSE 1-4 (two blocks per SM) warps queue on the full shared-memory pipe (mio throttle); at COARSE 8
    they wait for shared loads' results instead (short scoreboard), the pipe no longer full - at every
    size, while what the model still misses (test_block_alone_on_its_sm_pays_the_measured_round) comes
    with tiles from DRAM."""
    stalled = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    d = recorded[(recorded.source == "ncu") & recorded.case.eq("matmul.coarsened")]
    w = d.pivot_table(index="case_id", columns="metric", values="value", aggfunc="median")
    w = w.dropna(subset=[stalled.format("short_scoreboard")])
    coarse = w.index.str.extract(r"coarse=(\d+)", expand=False).astype(int).to_numpy()
    mio, short = w[stalled.format("mio_throttle")].to_numpy(), w[stalled.format("short_scoreboard")].to_numpy()
    assert (coarse == 8).sum() >= 2 and (coarse < 8).sum() >= 6
    assert (mio[coarse < 8] > 10).all() and (mio[coarse == 8] < 2).all()
    assert (short[coarse == 8] > 14).all() and (short[coarse == 8] > short[coarse < 8].max()).all()


def test_issue_bound_probes_are_not_pipe_bound(recorded):
    """The probes the model calls issue-bound run at ~2.9 warp instructions per SM per cycle, not 4;
    ncu's per-pipe counts and peaks (plan h200_pipes) show no pipe near its peak, so a per-pipe issue
    model would not explain the gap (FINDINGS.md says so)."""
    from perfmodel.suite.profile import PIPES

    d = recorded
    d = d[(d.source == "ncu") & d.case.isin(["probe.load_lines", "probe.store_lines"])]
    w = d.pivot_table(index="case_id", columns="metric", values="value", aggfunc="median")
    w = w.dropna(subset=["sm__inst_executed_pipe_alu.sum.peak_sustained"])
    assert len(w) >= 5
    cycles = w["sm__cycles_active.sum"]
    ipc = w["smsp__inst_executed.sum"] / cycles
    assert ipc.between(2.7, 3.1).all(), ipc
    share = {p: w[f"sm__inst_executed_pipe_{p}.sum"] * H200.sm_count
             / (cycles * w[f"sm__inst_executed_pipe_{p}.sum.peak_sustained"])
             for p in PIPES if f"sm__inst_executed_pipe_{p}.sum" in w}
    busiest = np.max(np.vstack(list(share.values())), axis=0)
    assert len(share) >= 8 and (busiest < 0.65).all(), share


def test_issue_bound_probes_stall_on_the_integer_multiply_pipe(recorded):
    """Their warps wait on a throttled math pipe and on dispatch (plan h200_stalls), as FINDINGS.md says."""
    d = recorded
    d = d[(d.source == "ncu") & d.case.isin(["probe.load_lines", "probe.store_lines"])
          & d.metric.str.startswith("smsp__average_warps_issue_stalled_")]
    stalled = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    w = d.pivot_table(index="case_id", columns="metric", values="value", aggfunc="median")
    w = w.dropna(subset=[stalled.format("math_pipe_throttle")])
    assert len(w) >= 2
    assert (w[stalled.format("math_pipe_throttle")] > 2).all() and (w[stalled.format("dispatch_stall")] > 1).all()
    assert (w[stalled.format("long_scoreboard")] < 0.5).all()  # not waiting on memory


def test_run_to_run_spread_is_below_the_accuracy_asked_for(recorded):
    """The floor under any model error: the same case's time moves by a median 0.5 % between recorded
    runs (all within 5 %), ncu's DRAM reads by a median far less (3.8 % at the 90th percentile, cases
    re-measured on other days: the re-read probes between one L2 partition and the whole L2, measured
    again in h200_fabric_reads, moved by up to 18 % - where the arrays lie, FINDINGS.md; 2.9 % without
    that run); the 5 % and 10 % targets are above the noise."""
    from perfmodel.measurements import run_to_run

    r = run_to_run(recorded).set_index("quantity")
    time_row = r.loc["time (CUDA events, after the reading flush)"]
    assert time_row.cases >= 100 and time_row.median_spread < 0.01 and time_row.max_spread < 0.05
    dram = r.loc["DRAM read bytes (ncu)"]
    # since cases were re-measured on other days and cards (h200_session_check: band matmuls +2..+10 %; the
    # split probe's two calls at 32-36 and 52 MiB; h200_fabric_reads: the re-read probes); within one run far less
    assert dram.cases >= 100 and dram.p90_spread < 0.04


def test_barrier_kernels_with_enough_loads_in_flight_stream(comparison):
    """transpose.rows issues four loads a thread before its barrier: its resident blocks cover DRAM's
    bandwidth-delay product and it runs at DRAM speed (within 10 %; the phase rule had it +11..+16 %);
    the one-load shared-memory transposes do not, and keep the phase rule. Output rows that do not
    start on a sector (h200_ragged_rows, h200_rmw_map) past the whole L2 run slower, the padded kernel
    up to 33 % (its DRAM read-modify-writes, the fills test): a gap."""
    rows = perfmodel.predict("transpose.rows", "h200", rows=4096, cols=4096, pad=1)
    assert rows.bound == "dram" and any("streams past its barriers" in n for n in rows.notes)
    assert perfmodel.predict("transpose.smem", "h200", rows=4096, cols=4096, tile=32, pad=1).bound == "barrier"
    t = comparison[(comparison.case == "transpose.rows") & (comparison.kind == "time")]
    aligned = t[param(t, "rows") % 8 == 0]
    padded = aligned[aligned.params.str.contains('"pad":1')]
    assert len(padded) >= 7 and padded.rel_error.abs().max() < 0.12, describe(padded)
    assert len(aligned) >= 8 and aligned.rel_error.abs().max() < 0.12, describe(aligned)  # pad 0: phase rule
    ragged = t[~t.index.isin(aligned.index)]
    assert len(ragged) >= 5 and (ragged.rel_error > -0.35).all() and (ragged.rel_error < 0.1).all(), describe(ragged)


def test_block_alone_on_its_sm_pays_the_measured_round(comparison):
    """probe.barrier_rounds (tiled matmul's round on one wave of 32 x 32 blocks reading L2-resident
    tiles): alone on its SM a round costs more beyond its work with matmul's 32-FMA chain than without
    one; both define the barrier term of kernels with one block per SM. COARSE 8 (one block per SM) loads
    its next B tile inside the round's work (SASS), so the chain runs while the load is in flight: its
    round costs the idle round, and a round whose tiles DRAM serves the DRAM latency's excess over L2's
    more (`hoisted_round_s`), for the share of the sweeps DRAM serves averaged over the waves (a partial
    last wave finds B in L2: the launch's average share had the 1.2-wave launches +8 %). Charged the chain's
    round instead, its suite launches were +7 % where L2 holds the tiles, -9 % where they come from DRAM
    (MAPE 6.1 %); the launch's average share, MAPE 3.8 %, all within 9 %; now MAPE 2.5 %, within 4 % - and the
    two-blocks-per-SM probe rounds, which the model charges one L2 latency, within 16 % (15 % until the
    L1 hits between the two blocks were counted: the L1 tag stage's misses fell 9 %, and WORK 0's time
    with them, -13.9 -> -15.6 %). Part of what is left is measured, not modelled: the warp schedulers
    favour one block of the two, which ends its rounds 1.36x (WORK 0) to 1.65x (WORK 32) sooner, and the
    other runs on alone - the launch takes 8.5-8.8 % longer than an even share of the SM would
    (checks/barrier_phase, every SM alike)."""
    from perfmodel.ceilings import ceilings
    from perfmodel.models import round_exposed_s

    ceil = ceilings("h200")
    assert ceil.barrier_round_s and ceil.barrier_round_idle_s
    idle, full = round_exposed_s(device("h200"), 1, 0, 1), round_exposed_s(device("h200"), 1, 32, 1)
    assert 50e-9 < idle < full < 400e-9, (idle, full)
    t = comparison[comparison.kind.isin(["time", "time-ceiling"])]
    probe = t[t.case == "probe.barrier_rounds"]
    assert set(probe.kind[probe.case_id.str.contains("blocks_per_sm=1")]) == {"time-ceiling"}
    two = probe[probe.case_id.str.contains("blocks_per_sm=2")]
    assert len(two) == 4 and (two.kind == "time").all() and two.rel_error.abs().max() < 0.16, describe(two)
    c8 = t[t.case_id.str.contains("coarse=8")]
    assert len(c8) >= 10 and c8.rel_error.abs().max() <= 0.05, describe(c8)
    assert c8.rel_error.abs().mean() < 0.03, describe(c8)
    assert all("next tile loaded inside the work" in
               next(b.note for b in perfmodel.predict("matmul.coarsened", "h200", **json.loads(params)).breakdown
                    if b.name == "barrier") for params in c8.params)


def test_two_blocks_on_an_sm_pay_the_measured_round_per_tile(comparison):
    """probe.barrier_waves, two blocks per SM over 8 waves: a round of both costs beyond its work
    about twice as much loading two tiles a round as one (H200: 72 and 144 ns) - less than one wave
    started together exposes. COARSE 1 and TILE 32 (two tiles a round) within 5 %. COARSE 2 and 4 load
    B's later tiles inside the work of the round before (SASS): those rounds expose nothing, the first of
    every C pays the two-tile round (`hoisted_pair_round_s`) - within 4.1 %, MAPE 1.4 and 1.6 % (were +1..+5 %,
    MAPE 3.0 % each, charged the round of the 1.5 and 1.25 tiles they load on average; +4..+8 % under one L2
    latency a round)."""
    from perfmodel.models import round_exposed_s

    one, two = (round_exposed_s(device("h200"), 2, 32, tiles) for tiles in (1, 2))
    assert 30e-9 < one < two < 250e-9 and 1.5 < two / one < 2.5, (one, two)
    t = comparison[comparison.kind == "time"]
    coarse = param(t[t.case.eq("matmul.coarsened")], "coarse")
    c24 = t[t.case.eq("matmul.coarsened")][coarse.isin([2, 4])]
    assert len(c24) >= 15 and c24.rel_error.abs().max() < 0.045, describe(c24)
    assert c24.rel_error.abs().mean() < 0.02, describe(c24)
    two_tiles = t[(t.case.eq("matmul.coarsened") & t.case_id.str.contains("coarse=1,"))
                  | (t.case.eq("matmul.tiled") & t.case_id.str.contains("tile=32"))]
    assert len(two_tiles) >= 15 and two_tiles.rel_error.abs().max() < 0.05, describe(two_tiles)


def test_two_blocks_started_together_pay_the_round_at_their_waves(comparison):
    """probe.barrier_waves measured the two-block round at 1 and 8 waves: blocks started together expose
    about twice the round of blocks later waves start apart (H200: 141 and 72 ns with one tile, 276 and
    144 with two). The model takes the round at a launch's own waves, linear in log(waves) between them and
    held past 8 (`models._pair_round_s`; an H100 measured the curve at 1-32 waves, tests/test_h100_waves.py).
    The suite's two-block matmuls under 8 waves were -4.1..+1.9 % charged the 8-wave round (MAPE 2.2 %,
    -1.3 % on average); now within 3.5 %, MAPE under 2 %."""
    t = comparison[(comparison.kind == "time") & comparison.case.str.startswith("matmul.")]
    preds = [perfmodel.predict(c, "h200", **json.loads(p)) for c, p in zip(t.case, t.params, strict=True)]
    chosen = [p.occupancy.blocks_per_sm == 2 and p.waves < 8 for p in preds]
    few = t[chosen]
    assert len(few) >= 20, describe(few)
    assert few.rel_error.abs().max() < 0.035 and few.rel_error.abs().mean() < 0.02, describe(few)
    assert abs(few.rel_error.mean()) < 0.015, describe(few)
    assert all("log scale" in next(b.note for b in p.breakdown if b.name == "barrier")
               for p, c in zip(preds, chosen, strict=True) if c)


def test_latency_bound_streams_wait_for_block_refills(comparison):
    """A 4-byte copy, one load per thread over 62-248 waves, is latency-bound; past the first wave
    each block slot waits for the dispatcher's next block (an SM gets one every SMs / probe.blocks'
    rate, 79 ns): with it the copies are within 4 %, without it 10-14 % short."""
    t = _sel(comparison[comparison.kind == "time"], case=["mem.global_store", "probe.split_store"])
    params = t.params.map(json.loads)
    many_waves = params.map(lambda p: p["n"] >= 1 << 24 and p.get("stride", 1) == 1 and p.get("dist", 1) == 1)
    t = t[many_waves]
    assert len(t) >= 7, describe(t)
    assert t.rel_error.abs().max() <= 0.04, describe(t)
    for _, r in t.iterrows():
        latency = next(x for x in perfmodel.predict(r.case, "h200", **json.loads(r.params)).breakdown
                       if x.name == "latency")
        assert "block refills" in latency.note


def test_the_data_file_is_what_the_driver_reported():
    """Every recorded run's cudaDeviceProp values (device.json, from the driver) equal the H200 data file's -
    global memory too, which the model's launch limits read (it said 150754820096 bytes until 2026-12-02;
    the driver reports 150109880320)."""
    from perfmodel.devices import DeviceSpec
    from perfmodel.devices.spec import PROPERTY_FIELDS
    from perfmodel.holdout import HOLDOUT_DIR
    from perfmodel.measurements import DATA_DIR

    ref = device("h200")
    runs = sorted((DATA_DIR / "h200").glob("run-*-device.json")) + sorted(HOLDOUT_DIR.glob("*/h200/run-*-device.json"))
    assert len(runs) >= 100
    limits = 0
    for run in runs:
        props = json.loads(run.read_text())["properties"]
        live = DeviceSpec.from_properties(props)
        for field in PROPERTY_FIELDS.values():
            assert getattr(live, field) == getattr(ref, field), (run.name, field)
        if "maxGridSize" in props:  # recorded since 2026-12-02 (held-out set 42)
            limits += 1
            assert tuple(props["maxGridSize"]) == ref.arch.max_grid
            assert tuple(props["maxThreadsDim"]) == ref.arch.max_block
    assert limits >= 1
