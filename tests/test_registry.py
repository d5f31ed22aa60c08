"""The registry without a GPU: every case binds, describes its accesses and sets up checked data."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.errors import PerfModelError
from perfmodel.memory import analyse
from perfmodel.suite.plan import load_plan
from perfmodel.suite.registry import get

SMALL = load_plan("experiments/plans/sanitize.toml")


@pytest.mark.parametrize("pc", SMALL, ids=lambda pc: pc.case_id)
def test_small_case_sets_up_fresh_nonzero_data(pc):
    case = get(pc.name)
    setup = case.setup(pc.params, np.random.default_rng(1))
    for name, arr in setup.inputs.items():
        if arr.dtype.kind == "f" and arr.size > 16 and name not in ("c2", "damp"):
            assert np.count_nonzero(arr) > 0.99 * arr.size, name
    expected = setup.expected_values()
    assert set(expected) == set(setup.output_shapes())
    launch = case.launch(pc.params)
    for a in case.accesses(pc.params):
        analyse(a, launch)


def test_textbook_matmul_forms():
    """Tiled global loads 2mnk/TILE; coarsening (mnk/TILE)(1 + 1/C); AI TILE/4 -> TILE/(2(1+1/C))."""
    m = n = k = 4096
    for tile in (16, 32):
        p = perfmodel.predict("matmul.tiled", "h200", m=m, n=n, k=k, tile=tile)
        assert p.global_load_bytes == 4 * 2 * m * n * k // tile
        assert p.arithmetic_intensity["l1"] == pytest.approx(tile / 4, rel=0.01)
    base = perfmodel.predict("matmul.coarsened", "h200", m=m, n=n, k=k, coarse=1).global_load_bytes
    for c, saving in ((2, 0.25), (4, 0.375), (8, 0.4375)):
        p = perfmodel.predict("matmul.coarsened", "h200", m=m, n=n, k=k, coarse=c)
        assert p.global_load_bytes == 4 * m * n * k // 32 * (1 + 1 / c)
        assert 1 - p.global_load_bytes / base == pytest.approx(saving)
    p4 = perfmodel.predict("matmul.coarsened", "h200", m=m, n=n, k=k, coarse=4)
    assert p4.arithmetic_intensity["l1"] == pytest.approx(12.8, rel=0.01)
    naive = perfmodel.predict("matmul.naive", "h200", m=1024, n=1024, k=1024)
    assert naive.global_load_bytes == 8 * 1024**3  # 8 bytes per multiply-add


def test_temporal_blocking_halo_and_redundancy():
    from perfmodel.suite.cases.stencil import temporal_cell_updates

    p = {"nx": 4096, "ny": 4096, "steps": 4, "ppt": 1}
    pred = perfmodel.predict("stencil.temporal", "h200", **p)
    tile, s = 32, 4
    blocks = (4096 // tile) ** 2
    assert pred.global_load_requests > 0
    assert pred.global_load_bytes == pytest.approx(4 * 4 * blocks * (tile + 2 * s) ** 2, rel=0.02)  # halo (T+2S)^2
    assert temporal_cell_updates(p) / (4096 * 4096 * s) == pytest.approx(
        sum((tile + 2 * s - 2 * i) ** 2 for i in range(1, s + 1)) / (s * tile**2))


def test_unknown_case_and_parameter_errors():
    with pytest.raises(PerfModelError, match="did you mean matmul.tiled"):
        perfmodel.predict("matmul.tiledd")
    with pytest.raises(PerfModelError, match="has no parameter"):
        perfmodel.predict("matmul.tiled", "h200", q=3)
    assert "matmul.coarsened" in perfmodel.cases()


def test_launches_that_cannot_run_are_refused_by_name():
    with pytest.raises(PerfModelError, match="blocks = 0"):
        perfmodel.predict("probe.read", "h200", blocks=0)
    with pytest.raises(PerfModelError, match=r"grid \(32, 0, 1\).*m = 0"):
        perfmodel.predict("matmul.tiled", "h200", m=0)
    with pytest.raises(PerfModelError, match="threads per block = 4096"):
        perfmodel.predict("probe.launch", "h200", threads=4096)
    with pytest.raises(PerfModelError, match=r"shared memory per block \(static \+ dynamic\) = 300000"):
        perfmodel.predict("probe.read", "h200", smem_per_block=300000)
    with pytest.raises(PerfModelError, match=r"grid.y = 65536 violates the limit: at most 65535 .*maxGridSize\[1\]"):
        perfmodel.predict("matmul.tiled", "h200", m=65536 * 16, n=16, k=16, tile=16)
    perfmodel.predict("matmul.tiled", "h200", m=65535 * 16, n=16, k=16, tile=16)  # the last grid row that runs
    too_big = r"bytes of its arrays = 160000000000 .*150109880320 \(139.8 GiB\).*totalGlobalMem"
    with pytest.raises(PerfModelError, match=too_big):
        perfmodel.predict("probe.copy", "h200", n=40_000_000_000)


def test_every_parameter_at_zero_one_or_three_predicts_or_is_refused_by_name():
    """No case's parameter, set alone to 0, 1 or 3, ends in anything but a Prediction or a PerfModelError
    (a loop of no trips, lanes that do not divide a warp: named, not a ZeroDivisionError from inside)."""
    import warnings

    from perfmodel.suite.registry import REGISTRY, _load

    _load()
    crashed = []
    for name, case in sorted(REGISTRY.items()):
        for key in case.defaults:
            for value in (0, 1, 3):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("error")
                        perfmodel.predict(name, "h200", **{key: value})
                except PerfModelError:
                    pass
                except Exception as exc:  # noqa: BLE001 - what the test looks for
                    crashed.append(f"{name} {key}={value}: {type(exc).__name__}: {exc}")
    assert not crashed, "\n".join(crashed)


def test_parameters_without_a_compiled_kernel_are_refused_by_name():
    """Template parameters pick an instantiation; one the source does not compile is named, with the
    ones it does (the held-out draw asked for stencil.temporal at 7 steps and the launch failed)."""
    with pytest.raises(PerfModelError, match="no kernel wave_temporal_7_1.*wave_temporal_6_1, wave_temporal_6_2"):
        perfmodel.predict("stencil.temporal", "h200", steps=7)
    with pytest.raises(PerfModelError, match="no kernel transpose_smem_64_1"):
        perfmodel.predict("transpose.smem", "h200", tile=64)


def test_compiled_kernels_read_from_the_sources_match_the_compiler():
    """The macro-expanded extern "C" names of every kernels/*.cu equal the functions nvcc compiled
    (the recorded SASS listing of the H200 run)."""
    import gzip

    from perfmodel.measurements import DATA_DIR
    from perfmodel.sass import parse
    from perfmodel.suite.registry import KERNEL_DIR, compiled_entries

    # the last run's listing, and those recorded beside a check since (checks/naive_unroll: matmul.cu with
    # matmul_naive_unroll1 and 4)
    listings = [sorted((DATA_DIR / "h200").glob("*-sass.txt.gz"))[-1],
                *sorted((DATA_DIR / "h200" / "checks").glob("*/*/sass.txt.gz"))]
    compiled: set[str] = set()
    for listing in listings:
        with gzip.open(listing, "rt") as f:
            compiled |= set(parse(f.read()))
    sources = set().union(*(compiled_entries(f.name) for f in KERNEL_DIR.glob("*.cu")))
    # compiled and run on the H200 after the last listing: read_l2_shared (run 20261201T113926Z, no
    # extras); the barrier probes' _timed twins (experiments/barrier_phase.py, checks/barrier_phase);
    # read_l2_split (plan h200_split_lines, no extras); the placed COARSE 1 and 4 (experiments/schedule_pairs.sh,
    # checks/schedule_pairs_borrowed); written with no device lent and not run yet: l1_survival (plan
    # h200_l1_edge, 2026-12-05; compiled for sm_90 by tests/test_kernels_compile.py)
    later = {"read_l2_shared", "barrier_rounds_0_timed", "barrier_rounds_32_timed", "barrier_rounds_32_2_timed",
             "read_l2_split", "matmul_coarsened_32_1_placed", "matmul_coarsened_32_4_placed", "l1_survival"}
    assert compiled <= sources and sources - compiled <= later, sources ^ compiled


def test_static_shared_memory_matches_the_compiler():
    """Where no compile is recorded the model takes the source's __shared__ arrays: the same bytes
    nvcc reported for every recorded variant."""
    import json

    from perfmodel.measurements import load

    data = load("h200")
    comp = data[(data.source == "compiler") & (data.metric == "shared_size_bytes")]
    checked = 0
    for _, r in comp.drop_duplicates(["case", "params"]).iterrows():
        case = get(r.case)
        if case.name.split(".")[0] in ("matmul", "stencil", "transpose"):
            assert case.static_smem(case.bind(**json.loads(r.params))) == r.value, (r.case, r.params)
            checked += 1
    assert checked >= 20


def test_split_reader_reference_is_the_kernels_indexing_emulated():
    """probe.l2_read_split's expected sums against read_l2_split's index arithmetic run thread by
    thread (a grid-stride loop from each role's first float4), and every float4 read once a pass."""
    case = get("probe.l2_read_split")
    p = case.bind(n=1100004, passes=3, mult=5)
    setup = case.setup(p, np.random.default_rng(3))
    a4 = setup.inputs["in"].reshape(-1, 4).astype(np.float64).sum(axis=1)
    grid, block = case.launch(p).grid[0], case.launch(p).block[0]
    stride, out, reads = grid * block, np.zeros(grid * block), np.zeros(len(a4), int)
    for b in range(grid):
        v = b
        for _ in range(p["passes"]):
            for t in range(block):
                first = (v & ~1) * block + (t >> 2) * 8 + (v & 1) * 4 + (t & 3)
                out[b * block + t] += a4[first::stride].sum()
                reads[first::stride] += 1
            v = v * p["mult"] % grid
    expected = setup.expected_values()["out"]
    assert np.abs(out - expected).max() < 1e-6 * np.abs(expected).max()
    assert (reads == p["passes"]).all()
