"""How the H200's L1 replaces lines, from the recorded pointer chase (probe.chase_ca: one thread, a random
cycle through the working set's 128-byte lines, warmed once, 4096 timed steps; nine runs, 2026-11-29).
The share of loads an L1 serves is read off the cycles per load between the L1 and L2 plateaus."""

import numpy as np
import pandas as pd
import pytest

from perfmodel.ceilings import ceilings
from perfmodel.devices import device
from perfmodel.measurements import DATA_DIR, load, param
from perfmodel.models.placed import cyclic_hits_at_random, kept


def _l1_share(cycles):
    """The share of a chase's loads L1 served, read off its cycles per load between the H200's measured L1
    and L2 latencies."""
    dev = device("h200")
    ceil = ceilings(dev)
    l1, l2 = ceil.latency_l1_s.value * dev.sm_clock_hz, ceil.latency_l2_s.value * dev.sm_clock_hz
    return ((l2 - cycles) / (l2 - l1)).clip(0, 1)


def _survival(folder: str, keys: dict[str, int | None]) -> pd.DataFrame:
    """A recorded l1_survival check's hit shares, with `keys` of its params as columns (the value where a
    run did not record the key; None: every run did) and the fill in KiB as `kib`."""
    d = pd.read_csv(DATA_DIR / folder / "measurements.csv.gz")
    d = d[d.metric == "l1_hit_share"].copy()
    for key, absent in {"fill_bytes": None, **keys}.items():
        d[key] = param(d, key).fillna(absent).astype(int)
    d["kib"] = d.fill_bytes // 1024
    return d


@pytest.fixture(scope="module")
def hit_share():
    data = load("h200")
    chase = data[data.case.eq("probe.chase_ca") & data.metric.eq("cycles_per_load")]
    if chase.empty:
        pytest.skip("no pointer chase recorded for the H200")
    return _l1_share(chase.groupby(param(chase, "bytes")).value.median())


def test_the_l1_keeps_by_recency_not_at_random(hit_share):
    """192 KiB all hit, 256 KiB 41 %, 384 and 512 KiB none (medians of the nine runs: 1.0, 0.41, under
    0.004). An L1 that replaced at random and held 192 KiB whole would still keep 20 % or more of a 384 KiB
    cycle (h = exp(-x (1 - h)), x <= 2) - so the L1 keeps by recency, as LRU does, and holds between 192
    and 256 KiB for this kernel."""
    kib = 1 << 10
    assert hit_share[192 * kib] > 0.99
    assert 0.35 < hit_share[256 * kib] < 0.45
    assert hit_share[384 * kib] < 0.01 and hit_share[512 * kib] < 0.01
    for l1 in (192 * kib, 224 * kib, 255 * kib):
        assert cyclic_hits_at_random(384 * kib, l1) > 0.2 > 20 * hit_share[384 * kib]


def test_cyclic_hits_at_random_is_the_survival_law_fixed_point():
    """The chase's random-replacement share is the model's own survival law over one cycle's misses."""
    for x in (1.25, 1.5, 2.0, 3.0):
        h = cyclic_hits_at_random(x, 1.0)
        assert h == pytest.approx(float(kept(x * (1 - h), 1.0)), rel=1e-9) and 0 < h < 1
    assert cyclic_hits_at_random(0.9, 1.0) == 1.0
    assert cyclic_hits_at_random(2.0, 1.0) == pytest.approx(0.2032, abs=1e-4)


def test_the_survival_probes_fill_walks_cover_each_trials_own_lines_once():
    """kernels/probes.cu l1_survival walks, per trial t, from word t x fills x 32 through fill[] until a 0:
    each trial must touch exactly its own `fills` lines, each once, none another trial's (the probe's
    fills are lines L1 has not seen), and end on 0 (the reload's offset)."""
    import numpy as np

    from perfmodel.suite.special import WORDS_PER_LINE, survival_chain

    trials, fills = 5, 37
    host = survival_chain(trials, fills, np.random.default_rng(7))
    for t in range(trials):
        k, seen = t * fills * WORDS_PER_LINE, []
        for _ in range(fills):
            seen.append(k // WORDS_PER_LINE)
            k = int(host[k])
        assert k == 0 and sorted(seen) == list(range(t * fills, (t + 1) * fills))
    assert not host[np.arange(host.size) % WORDS_PER_LINE != 0].any()
    assert survival_chain(3, 0, np.random.default_rng(7)).size == WORDS_PER_LINE  # no fills: one idle line


def test_full_runs_leave_the_l1_probes_to_their_plan():
    """A full suite run measures the default extras; the L1 probes run only when named (plan h200_l1_edge)."""
    from perfmodel.suite import campaign

    assert set(campaign.DEFAULT_EXTRAS) < set(campaign.EXTRAS)
    assert not {"chase_l1_edge", "l1_survival"} & set(campaign.DEFAULT_EXTRAS)


def test_the_l1_edge_is_sharp_below_and_spread_above():
    """checks/l1_edge (plan h200_l1_edge, 2026-12-05): the ld.ca chase at 160-384 KiB in 8 KiB steps, three
    cycle orders. Every order hits L1 on every load up to 216 KiB; past it the share falls over 224-344 KiB
    (about a third at 256 KiB), the orders within 5 points of each other at every size. Neither law the
    model knows draws that: an LRU L1 holding 216 KiB whole keeps none of a larger cycle (but 10 % or more
    is kept to 288 KiB), and one replacing at random keeps a fifth of 384 KiB (none is kept)."""
    d = pd.read_csv(DATA_DIR / "h200/checks/l1_edge/measurements.csv.gz")
    d["kib"] = param(d, "bytes") // 1024
    share = _l1_share(d.pivot_table(index="kib", columns="seed", values="value"))
    assert share.shape == (29, 3)
    assert (share.max(axis=1) - share.min(axis=1) < 0.05).all()
    mid = share.median(axis=1)
    assert (share.loc[:216] > 0.99).all().all() and mid[224] < 0.95
    assert 0.2 < mid[256] < 0.45 and (mid.loc[224:288] > 0.1).all() and (mid.loc[352:] < 0.01).all()
    assert (mid.loc[216:352].diff().dropna() < 0.01).all()  # falling, to a point of noise
    assert cyclic_hits_at_random(384 << 10, 216 << 10) > 0.2


def test_a_line_read_once_leaves_l1_by_recency_a_line_read_twice_stays():
    """reports/data/h100/checks/l1_survival (H100 cards: the H200's SM and L1; two runs): a line loaded once
    is still in L1 after 128 KiB of lines L1 had not seen (all 64 trials), then leaves it over 160-240 KiB
    and is gone from 256 KiB - wherever it lies (its own allocation or the fill buffer's). At the driver's
    carveout (the probe's 4 bytes of shared memory) it goes sooner. A line loaded twice stays through
    1 MiB of such lines, and through lines walked twice (hit as it was). Where the fills are walked twice,
    a line loaded once goes far sooner (gone by 128 KiB): L1 keeps lines it has hit over lines it has
    only filled - neither LRU over one store nor the random replacement `models.placed.kept` draws
    (exp(-fills / L1): 0.55 of a line at 128 KiB)."""
    d = _survival("h100/checks/l1_survival", {"carveout_pct": None, "x_in_fill": None, "touches": None,
                                               "fill_passes": 1})
    assert d.run_id.nunique() == 2
    share = d.pivot_table(index="kib", columns=["carveout_pct", "x_in_fill", "touches", "fill_passes"],
                          values="value")  # the mean of the two runs where both measured a variant
    for once in (share[(0, 0, 1, 1)], share[(0, 1, 1, 1)].dropna()):
        assert (once.loc[:128] >= 0.98).all() and (once.loc[256:] == 0).all()
        assert 0.2 < once.loc[160:240].mean() < 0.8 and (once.loc[160:256].diff().dropna() < 0.1).all()
    driver, largest = share[(-1, 0, 1, 1)].dropna().loc[160:240], share[(0, 0, 1, 1)].loc[160:240]
    assert (driver <= largest).all() and driver.sum() < 0.8 * largest.sum()
    for twice in ((0, 0, 2, 1), (0, 1, 2, 1), (0, 0, 2, 2)):
        assert (share[twice].dropna() == 1).all(), twice
    assert share[(0, 0, 2, 2)].dropna().index.max() == 1024
    hit_fills = share[(0, 0, 1, 2)].dropna()
    assert hit_fills.loc[96] < 0.5 * share[(0, 0, 1, 1)].loc[96] and (hit_fills.loc[128:] < 0.05).all()
    assert kept(np.array([128 << 10]), 216 << 10)[0] < 0.6


def test_among_lines_l1_has_hit_a_hit_line_leaves_by_recency():
    """reports/data/h200/checks/l1_survival (the H200, 2026-12-05): with each new line loaded twice (hit,
    as the line under test was), the line read twice or three times leaves L1 as a once-read line leaves
    among once-read ones (the H100 runs): all 64 trials keep it through 128 KiB, then 0.94, 0.78, 0.78,
    0.56, 0.34, 0.28 at 160-240 KiB, none from 256 KiB. A line read once among hit lines is gone by
    128 KiB. Two classes, recency within each: what the model's exp(-fills / L1) does not draw."""
    d = _survival("h200/checks/l1_survival", {"touches": None, "fill_touches": None})
    assert d.device.eq("NVIDIA H200").all()
    share = d.pivot_table(index="kib", columns=["touches", "fill_touches"], values="value")
    assert (share[(2, 1)] == 1).all() and share.index.max() == 1024  # among once-read lines: kept
    for hit in (share[(2, 2)], share[(3, 2)]):
        assert (hit.loc[:128] == 1).all() and (hit.loc[256:] == 0).all()
        assert 0.4 < hit.loc[160:240].mean() < 0.8 and (hit.loc[128:256].diff().dropna() <= 0).all()
    once = share[(1, 2)]
    assert once.loc[64] < 0.9 and (once.loc[128:] < 0.05).all()
    assert kept(np.array([128 << 10]), 216 << 10)[0] < 0.6
