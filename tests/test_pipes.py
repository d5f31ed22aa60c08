"""The pipe rules on their own: L1 data and tag stages, L2 requests, loaded latency, dirty lines."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.ceilings import Ceiling, Ceilings
from perfmodel.memory import Access, Launch, analyse, global_access
from perfmodel.memory.coalescing import EXPECTED_PASSES
from perfmodel.models.dram import dirty_at_end
from perfmodel.models.l1 import L1Traffic, block_invariant, block_unique_chunks, edge_classes, l1_windowed_sectors
from perfmodel.models.traffic import l2_requests, store_revisits


def test_expected_fullest_bank_is_exact():
    assert EXPECTED_PASSES[1] == 1 and EXPECTED_PASSES[2] == pytest.approx(1.25)  # 2 lines share 1 in 4
    rng = np.random.default_rng(0)
    throws = rng.integers(0, 4, size=(100_000, 16))
    fullest = np.stack([(throws == k).sum(axis=1) for k in range(4)], axis=1).max(axis=1)
    assert EXPECTED_PASSES[16] == pytest.approx(fullest.mean(), rel=0.01)


@pytest.mark.parametrize(("stride_words", "passes"), [(0, 1), (1, 1), (32, 8), (256, 8), (1024, 8),
                                                      (1000, EXPECTED_PASSES[32])])
def test_tag_passes(stride_words, passes):
    g = global_access(np.arange(32) * stride_words * 4, 4)
    assert g.tag_passes_per_row[0] == pytest.approx(passes)


@pytest.mark.parametrize(("stride_words", "wavefronts"), [(0, 1), (1, 1), (2, 2), (8, 8), (32, 32), (33, 1),
                                                          (264, 8), (1000, 8), (1024, 32)])
def test_global_loads_use_the_shared_memory_bank_rule(stride_words, wavefronts):
    """probe.load_lines on the H200: ncu's data-stage wavefronts equal these for all ten patterns."""
    launch = Launch(block=(32, 1, 1), grid=(1, 1, 1))
    c = analyse(Access("ld", "global", f"tx*{stride_words}"), launch)
    assert c.wavefronts == wavefronts


def test_block_stores_combine_per_line():
    launch = Launch(block=(256, 1, 1), grid=(4, 1, 1))
    c = analyse(Access("st", "global", "bx*bdx + (tx % 32)*8 + tx / 32", store=True), launch)
    assert c.lines == 4 * 8 * 8 and c.block_lines == 4 * 8 and c.block_sectors == 4 * 32


def _l1(**kw) -> L1Traffic:
    return L1Traffic(**{"store_bytes": 4 * 1024, "store_sectors": 1024, "store_lines": 1024,
                        "store_block_lines": 1024, **kw})


def test_l2_requests_hits_fills_and_read_modify_writes():
    resident = l2_requests(_l1(load_requests=1), 0, 1024, 1.0, 1 << 20, 60 << 20)
    assert (resident.write_hit, resident.write_fill, resident.write_rmw) == (1024, 0, 0)
    partial = l2_requests(_l1(load_requests=1), 0, 1024, 1.0, 1 << 30, 60 << 20)
    assert (partial.write_hit, partial.write_rmw) == (0, 1024)
    whole = l2_requests(_l1(store_bytes=32 * 1024, load_requests=1), 0, 1024, 0.0, 1 << 30, 60 << 20)
    assert (whole.write_fill, whole.write_rmw) == (1024, 0)
    merged = l2_requests(_l1(store_block_lines=128), 0, 1024, 1.0, 1 << 20, 60 << 20)
    assert merged.merged and merged.write_hit == 128


def test_store_revisits_only_of_whole_sectors_written_again():
    """A stream writing 1024 whole sectors, 256 distinct, over lines of one sector each: 768 revisits
    over 32 KiB of lines; at a loss of 0.25 a revisit, 256 + 192 of the 1024 writes miss. Sectors written
    in part (4 bytes), or each once, have none; nor has a device with no measured curve."""
    whole = _l1(store_bytes=32 * 1024)
    seen = []
    r = store_revisits(whole, 256, lambda b: seen.append(b) or 0.25)
    assert seen == [256 * 128] and (r.sectors, r.lost) == (768, 0.25)
    assert r.lost_share(1024) == pytest.approx((256 + 192) / 1024)
    req = l2_requests(whole, 0, 256, 0.0, 1 << 20, 60 << 20, lost_share=r.lost_share(1024))
    assert (req.write_hit, req.write_lost, req.write_fill, req.writes) == (576, 448, 0, 1024)
    assert store_revisits(whole, 256, lambda b: 0.0).lost_share(1024) == 0.25  # L2-resident: the first writes
    assert store_revisits(_l1(), 256, lambda b: 0.25) is None  # 4-byte pieces
    assert store_revisits(whole, 1024, lambda b: 0.25) is None  # each once
    assert store_revisits(whole, 256, None) is None and store_revisits(whole, 256, lambda b: None) is None


def test_loaded_latency_by_bytes_in_flight_and_saturates_past_the_heaviest_stream():
    c = Ceiling("x", 1.0, "B/s", "test")
    # streams at 1 and 2 TB/s saw 400 and 500 ns: 0.4 and 1.0 MB of their loads in flight
    ceil = Ceilings(c, c, c, c, c, latency_dram_s=Ceiling("lat", 300e-9, "s", "test"),
                    loaded_latency=((0.0, 350e-9), (1e12, 400e-9), (2e12, 500e-9)))
    assert ceil.dram_latency_s(0.0) == pytest.approx(350e-9)
    assert ceil.dram_latency_s(0.7e6) == pytest.approx(450e-9)
    assert ceil.dram_latency_s(2.0e6) == pytest.approx(1000e-9)  # saturated: 2 MB / 2 TB/s
    assert Ceilings(c, c, c, c, c, latency_dram_s=Ceiling("lat", 300e-9, "s", "t")).dram_latency_s(1e6) == 300e-9


def test_dirty_at_end_is_the_write_share_of_what_l2_holds():
    assert dirty_at_end(300e6, 100e6, 40e6, partial=False) == pytest.approx(10e6)  # a quarter of 40 MB
    assert dirty_at_end(0.0, 5e6, 40e6, partial=False) == 5e6  # never more than was written
    assert dirty_at_end(100e6, 100e6, 40e6, partial=True) == 0.0  # partial sectors: read-modify-write
    assert dirty_at_end(0.0, 0.0, 40e6, partial=False) == 0.0
    # L2 holds whole lines: a store stream filling one sector of each keeps a quarter of the bytes dirty
    assert dirty_at_end(0.0, 500e6, 40e6, partial=False, sectors_per_line=1.0) == pytest.approx(10e6)
    # bound inside the SM: what the reads leave of L2's lines stays dirty, nothing where they fill it
    assert dirty_at_end(33.5e6, 16.8e6, 40e6, partial=False, in_sm=True) == pytest.approx(6.5e6)
    assert dirty_at_end(8e9, 67e6, 40e6, partial=False, in_sm=True) == 0.0


def test_block_invariant_loads_count_once_per_sm():
    launch = Launch(block=(32, 1, 1), grid=(264, 1, 1))
    assert block_invariant(Access("table", "global", "tx"), launch)
    assert not block_invariant(Access("stream", "global", "bx*bdx + tx"), launch)
    assert not block_invariant(Access("guarded", "global", "tx", cond="bx < 3"), launch)
    p = perfmodel.predict("probe.load_lines", "h200", stride=0, iters=4096)
    assert p.l2_read_bytes == 132 * 8 * 32  # 8 sectors, once per SM (ncu's xbar count: 1056 sectors)


def test_l1_reuse_across_loop_iterations_only_within_what_l1_holds():
    """A block cycling through a 64-line pool 1024 times: with L1 room for all 64 lines it misses each
    sector once; with room for 8 lines every load misses (no window of iterations repeats a line); a
    stream that never repeats is unchanged either way."""
    launch = Launch(block=(32, 1, 1), grid=(2, 1, 1), loops={"r": 1024})
    pool = [Access("pool", "global", "bx*2048 + (r % 64)*32 + tx", loops=("r",))]
    (distinct,) = block_unique_chunks(pool, launch, store=False)
    assert distinct == 64 * 4
    assert l1_windowed_sectors(pool, launch, distinct, 64 * 128) == distinct
    assert l1_windowed_sectors(pool, launch, distinct, 8 * 128) == pytest.approx(1024 * 4)
    stream = [Access("stream", "global", "bx*32768 + r*32 + tx", loops=("r",))]
    (once,) = block_unique_chunks(stream, launch, store=False)
    assert l1_windowed_sectors(stream, launch, once, 8 * 128) == pytest.approx(once)


def test_edge_classes_weigh_every_block_once():
    assert edge_classes((5, 1, 1)) == [((0, 0, 0), 1), ((4, 0, 0), 1), ((2, 0, 0), 3)]
    classes = edge_classes((7, 3, 2))
    assert len(classes) == 3 * 3 * 2 and sum(w for _, w in classes) == 7 * 3 * 2


def test_block_sectors_by_edge_class_equal_every_block_counted():
    """The temporal stencil's halo is cut at the grid's edges: the edge classes give the mean over all
    blocks (to 0.01 %); a corner block, which the halo cut makes lighter, stands for one block only."""
    from perfmodel.suite.registry import get

    case = get("stencil.temporal")
    p = {"nx": 200, "ny": 136, "steps": 4, "ppt": 1}
    launch, accesses = case.launch(p), case.accesses(p)
    (by_class,) = block_unique_chunks(accesses, launch, store=False)
    every = []
    for bx in range(launch.grid[0]):
        for by in range(launch.grid[1]):
            one = Launch(block=launch.block, grid=launch.grid, loops=launch.loops, params=launch.params,
                         defs=launch.defs)
            every.append(_sectors_of_block(accesses, one, (bx, by, 0)))
    assert by_class == pytest.approx(np.mean(every), rel=1e-4)
    assert every[0] < 0.9 * np.median(every)  # the corner block


def _sectors_of_block(accesses, launch, block):
    from perfmodel.models import l1

    orig = l1.edge_classes
    l1.edge_classes = lambda grid: [(block, 1)]
    try:
        return l1.block_unique_chunks(accesses, launch, store=False)[0]
    finally:
        l1.edge_classes = orig


def _written(name, **p):
    from perfmodel.models.written import partial_reach_blocks, written_sectors
    from perfmodel.suite.registry import get

    case = get(name)
    p = case.bind(**p)
    launch = case.launch(p)
    pred = perfmodel.predict(name, **p)
    reach = partial_reach_blocks(perfmodel.device("h200"), launch, case.compulsory_bytes(p),
                                 pred.global_load_bytes + pred.global_store_bytes)
    return written_sectors(case.accesses(p), launch, reach)


def test_sectors_written_in_part_are_judged_over_the_blocks_l2_keeps_them_for():
    """A 32 x 1 block writes one word of each of 32 sectors; the 7 blocks below complete them, so the
    kernel writes no sector in part (measured: no DRAM read-modify-write, transpose.naive_rows). A
    shifted copy whose partial sectors another block completes 256 blocks later neither; 8192 blocks
    (16 MiB of traffic) later, L2 has lost some first (measured, probe.split_store: DRAM reads +17 %)."""
    assert not _written("transpose.naive_rows", rows=1024, cols=1024, block_rows=1).partial
    assert not _written("transpose.naive", rows=1024, cols=1024).partial
    assert _written("mem.global_store", stride=2, width=4, offset=0).partial_share == 1.0
    assert not _written("mem.global_store", stride=1, width=4, offset=0).partial
    assert not _written("probe.split_store", n=1 << 26, offset=4, dist=2048).partial
    # a padded transpose into 5561-float rows: the next block row (279 blocks, 2.2 MiB later) completes
    # them (held out, set 7: within 4 % without read-modify-writes, 40 % over with them)
    assert not _written("transpose.smem", rows=5561, cols=8898, tile=32, pad=1).partial
    # each warp writes 5 sectors, the first and last in part, completed by warps 8192 blocks away
    assert _written("probe.split_store", n=1 << 26, offset=4, dist=65536).partial_share == 2 / 5


def test_sectors_two_writers_share_are_lost_by_the_bytes_between():
    """With a loss law (here a made-up one: all past 8 MiB, none before), each sector the middle block
    writes is judged by the distance to its last writer: a shifted copy's shared sectors, one other
    block dist / 8 blocks away (2 KiB of traffic a block), are lost past 8 MiB; sectors 8 warps fill
    in pieces keep the step at the reach; sectors nobody completes are lost."""
    from perfmodel.models.written import MIN_LOST_SHARE, block_bytes, written_sectors
    from perfmodel.suite.registry import get

    def lost(**p):
        case = get(p.pop("name"))
        p = case.bind(**p)
        launch = case.launch(p)
        shape = written_sectors(case.accesses(p), launch, 10**9, block_bytes(launch, case.compulsory_bytes(p), 0),
                                lambda between: float(between > 8 << 20))
        return shape

    near = lost(name="probe.split_store", n=1 << 26, offset=4, dist=16384)  # 4 MiB between
    far = lost(name="probe.split_store", n=1 << 26, offset=4, dist=65536)  # 16 MiB
    assert near.partial_share == 0 and not near.partial
    assert far.partial_share == 2 / 5 and far.completed_share == 1.0 and far.split_share == 2 / 5
    assert abs(far.between_bytes - (16 << 20)) < (16 << 20) / 64  # rings 1/64 of the distance wide
    # 8 writers, 28 MiB from the first to the last: the sector is lost (one fill, shared by its 8 pieces)
    # and written back twice
    pieces = lost(name="probe.piece_store", n=1 << 26, dist=16384)
    assert pieces.partial_share == 1 / 8 and pieces.split_share == 1.0
    assert pieces.completed_share == 1.0 and pieces.rewrites_per_fill == 1.0
    assert abs(pieces.between_bytes - (28 << 20)) < (28 << 20) / 64
    assert lost(name="probe.piece_store", n=1 << 26, dist=256).partial_share == 0  # 3.5 MiB: kept
    halves = lost(name="mem.global_store", stride=2, width=4, offset=0)  # never completed
    assert halves.partial_share == 1.0 and halves.completed_share == 0.0
    assert MIN_LOST_SHARE <= 0.01


def test_sectors_written_per_line():
    """Lines a block alone writes: the sectors it fills of each; lines other blocks share: complete."""

    def per_line(name, **p):
        return _written(name, **p).per_line

    assert per_line("probe.store_lines", lines=4, footprint_lines=1 << 24, passes=497) == 1.0
    assert per_line("probe.store_lines", lines=2, footprint_lines=1 << 16, passes=64) == 2.0
    assert per_line("probe.store_lines", lines=1, footprint_lines=1 << 24, passes=1986) == 4.0
    assert per_line("transpose.naive_rows", rows=4096, cols=4096, block_rows=1) == 4.0


def test_sectors_written_in_pieces_are_filled_where_l2_requests_bound():
    """The naive transpose's 4-byte pieces of sectors, bound by L2's write requests: its prediction adds
    the measured share of fills (read, and written back twice) and says so; not the shared-memory
    transpose, not the scattered stores L1 combines, not the crossbar-bound piece probe."""
    import perfmodel

    def fills(name, **p):
        pred = perfmodel.predict(name, "H200", **p)
        return any("4-byte pieces filled" in n for n in pred.notes), pred

    named, naive = fills("transpose.naive", rows=4096, cols=4096)
    assert named and naive.bound == "l2_requests"
    assert naive.dram_read_bytes > 1.03 * 4 * 4096**2 and naive.dram_write_bytes > 1.03 * 4 * 4096**2
    assert not fills("transpose.smem", rows=4096, cols=4096, tile=32, pad=1)[0]
    assert not fills("probe.scatter_store", n=1 << 22)[0]  # L1 combines the block's pieces into lines
    assert not fills("probe.piece_store", n=1 << 26, dist=1)[0]  # bound by the crossbar into L2


def test_l2_reads_scale_the_exact_l1_count_by_the_sampled_reuse():
    """Rows of 5651 floats start at 8 alignments: the middle block the reuse is sampled on sends 7.7 %
    fewer sectors than the grid's mean block. The naive transpose reuses nothing in L1, so its L2
    reads are its exact L1 sectors (held out, sets 3 and 10: ncu 2,495,160 and 2,495,155 requested,
    the L1s 2,495,770; the per-block count alone said 2,303,910)."""
    p = perfmodel.predict("transpose.naive_rows", rows=2898, cols=5651, block_rows=2)
    assert p.l2_read_bytes / 32 == p.global_load_sectors == 2_495_770


def test_block_dispatcher_queue_is_md1():
    """A freed slot waits S u / (2 (1 - u)) beyond the dispatch at utilisation u (M/D/1), S = SMs / rate."""
    from perfmodel.models.time import dispatch_wait_s

    rate = 1.6e9
    ceil = Ceilings(*[Ceiling("x", 1.0, "", "test")] * 5, blocks_per_s=Ceiling("blocks", rate, "1/s", "test"))
    assert dispatch_wait_s(ceil, 0, 1e-3, 132) == (0.0, 0.0)
    wait, u = dispatch_wait_s(ceil, int(0.5 * rate * 1e-3), 1e-3, 132)
    assert u == pytest.approx(0.5) and wait == pytest.approx(132 / rate * 0.5)
    assert dispatch_wait_s(ceil, int(10 * rate), 1.0, 132)[1] == 0.95  # capped short of saturation
