"""The matmul page's barrier rounds: read from the device's recorded probes, never typed in."""

import json

import pandas as pd

from perfmodel.ceilings import ROUND_CHAIN_FMAS
from perfmodel.devices import device
from perfmodel.models import predict, round_exposed_s
from perfmodel.report.matmul import _round_costs, _rounds_paired, measured_rounds


def test_the_prose_quotes_the_rounds_the_figure_draws():
    """The prose and the 'rounds alone on an SM' figure's levels come from one place (measured_rounds),
    which reads probe.barrier_rounds and probe.barrier_waves through round_exposed_s."""
    h200 = device("h200")
    r = measured_rounds(h200)
    assert r is not None
    assert r.chain_s == round_exposed_s(h200, 1, ROUND_CHAIN_FMAS, 1)
    assert r.idle_s == round_exposed_s(h200, 1, 0, 1)
    assert r.idle_s < r.chain_s and r.pair_s < r.pair_two_tiles_s, r
    assert r.pair_one_wave_s == round_exposed_s(h200, 2, ROUND_CHAIN_FMAS, 1, 1)
    assert r.pair_s < r.pair_one_wave_s and r.pair_two_tiles_s < r.pair_two_tiles_one_wave_s, r
    prose = _round_costs(h200)
    for key, s in vars(r).items():
        assert f"{s * 1e9:.0f} ns" in prose, (key, prose)


def test_a_device_without_the_probes_says_so():
    h100 = device("h100")
    assert measured_rounds(h100) is None
    assert _round_costs(h100) == f"not recorded on {h100.name}"


def test_the_paired_rounds_figure_reads_a_matmul_round_off_its_measured_time():
    """A tiled TILE 32 matmul (two blocks an SM, two tiles a round, none hoisted): the round the figure
    draws is its measured time less the model's without the barrier term, over its rounds."""
    h200 = device("h200")
    p = {"m": 2048, "n": 2048, "k": 2048, "tile": 32}
    pred = predict("matmul.tiled", h200, **p)
    barrier = next(b for b in pred.breakdown if b.name == "barrier")
    measured = 1.1 * pred.time_s
    table = pd.DataFrame([{"kind": "time", "case": "matmul.tiled", "params": json.dumps(p), "measured": measured,
                           "case_id": "matmul.tiled[k=2048,m=2048,n=2048,tile=32]"}])
    row = _rounds_paired(h200, table).iloc[0]
    assert row.variant == "tiled (from its measured time)"
    assert row.waves == pred.waves
    assert abs(row.round_ns / (1e9 * (measured - pred.time_s + barrier.time_s) / barrier.work) - 1) < 1e-9
