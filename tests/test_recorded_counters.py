"""The model's counters against the recorded H200 ncu counters (reports/data/h200): global requests and
sectors, shared wavefronts, the L1 stages, L2 requests, occupancy, FLOPs and instructions.

Runs in CI, no GPU. What is exact is asserted exact; where the model is a bound or has a known, explained
gap the test asserts the bound and names the gap.
"""

from __future__ import annotations

import json

import pytest

from perfmodel.devices import device
from perfmodel.measurements import param
from tests.conftest import describe, rows_where

H200 = device("h200")


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
    assert len(rows_where(t, metric="blocks_per_sm")) >= 20
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

