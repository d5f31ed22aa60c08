"""The transposes against the recorded H200 runs (reports/data/h200): the naive kernel's block shapes and
DRAM fills, the ragged row transposes' lost partial sectors, capped and swapped grids, the crossbar.

Runs in CI, no GPU. What is exact is asserted exact; where the model is a bound or has a known, explained
gap the test asserts the bound and names the gap.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.devices import device
from tests.conftest import describe

H200 = device("h200")


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

    path = Path(__file__).parent.parent / "reports/data/h200/checks/fills_check.csv"
    d = pd.read_csv(path)
    w = d[d.metric == "dram__bytes_read.sum"].set_index(["rows", "block_rows", "state"]).value
    for r in (2, 8):
        assert w[(2048, r, "cold")] > 1.02 * 4 * 2048**2
        for state in ("out_read", "out_written"):
            assert abs(w[(2048, r, state)] / (4 * 2048**2) - 1) < 0.001
        assert w[(2048, r, "again")] < 0.01 * 4 * 2048**2  # everything still in L2


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

