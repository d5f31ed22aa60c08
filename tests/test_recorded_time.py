"""Time against the recorded H200 CUDA-event times (reports/data/h200): accuracy over the suite and
against the naive roofline, ceilings, barrier rounds, latency and issue bounds, streams.

Runs in CI, no GPU. What is exact is asserted exact; where the model is a bound or has a known, explained
gap the test asserts the bound and names the gap; time accuracy is asserted at the level reached so far.
"""

from __future__ import annotations

import json

import numpy as np

import perfmodel
from perfmodel.devices import device
from perfmodel.measurements import param
from tests.conftest import describe, rows_where

H200 = device("h200")


def test_passes_timed_per_phase(comparison):
    """Passes over one buffer: the first from DRAM, the others from L2 (models.time.first_pass_term),
    the L2 rate from the passes after the first. probe.l2_read and _shared at 2-16 passes, 16-64 MiB:
    -16..+7 %, 4.5 % off on average (at 4 passes -8..-22 % when the slowest resource was taken over the
    whole kernel). Known gap: the shared probe at 44-52 MiB runs 11-16 % longer than the model - its
    lines come from the other partition's L2 more often, which one L2 rate does not charge."""
    t = comparison[comparison.case.isin(["probe.l2_read", "probe.l2_read_shared"]) & (comparison.kind == "time")]
    assert len(t) >= 30
    assert t.rel_error.abs().max() < 0.17 and t.rel_error.abs().mean() < 0.05, describe(t)


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
    t = rows_where(comparison[comparison.kind == "time"], case=["mem.global_store", "probe.split_store"])
    params = t.params.map(json.loads)
    many_waves = params.map(lambda p: p["n"] >= 1 << 24 and p.get("stride", 1) == 1 and p.get("dist", 1) == 1)
    t = t[many_waves]
    assert len(t) >= 7, describe(t)
    assert t.rel_error.abs().max() <= 0.04, describe(t)
    for _, r in t.iterrows():
        latency = next(x for x in perfmodel.predict(r.case, "h200", **json.loads(r.params)).breakdown
                       if x.name == "latency")
        assert "block refills" in latency.note

