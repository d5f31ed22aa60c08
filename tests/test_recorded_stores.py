"""Stores against the recorded H200 runs (reports/data/h200): L2's write requests and store streams,
sectors written in part and lost between their writers, the crossbar into L2.

Runs in CI, no GPU. What is exact is asserted exact; where the model is a bound or has a known, explained
gap the test asserts the bound and names the gap.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.devices import device
from perfmodel.measurements import param
from tests.conftest import describe, rows_where

H200 = device("h200")


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
    suite = rows_where(comparison, case="probe.piece_store", metric="l2_write_sectors")
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
    suite = rows_where(comparison, case="probe.split_store", metric="dram_write_bytes_in_kernel")
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

