"""probe.barrier_waves at 1-32 waves on an H100 (reports/data/h100/checks/waves_curve; 1-128 on another
card, waves_tail; no H200 was lent that session): the H200's SM, its tiles L2-resident. A check of the
form of the model's two-block round by waves (`models._pair_round_s`: linear in log(waves) between the
H200's recorded 1- and 8-wave rounds, held past them), not of the H200's numbers; nothing here feeds the
model."""

from __future__ import annotations

import pytest

from perfmodel.devices import device
from perfmodel.models import checked_pair_rounds, round_exposed_s

WAVES = (1, 2, 4, 8, 16, 32)


def _rounds(check: str) -> dict[tuple[int, int], float]:
    """(tiles a round, waves) -> the H100's round beyond the work the model counts on the H200's SM (s)."""
    rounds = checked_pair_rounds(device("h200"), check)
    assert rounds is not None, f"reports/data/h100/checks/{check} is not recorded"
    return rounds


@pytest.fixture(scope="module")
def h100_rounds() -> dict[tuple[int, int], float]:
    return _rounds("waves_curve")


def _law(tiles: int, waves: float) -> float:
    return round_exposed_s(device("h200"), 2, 32, tiles, waves)


def test_the_round_falls_with_the_waves_on_another_card(h100_rounds):
    """147/133/93/72/62/58 ns with one tile, 278/210/167/144/133/128 with two: one wave of blocks started
    together exposes about twice the 8-wave round, and it still falls past 8 waves."""
    for tiles in (1, 2):
        r = [h100_rounds[(tiles, w)] for w in WAVES]
        assert all(a > b for a, b in zip(r, r[1:], strict=False)), (tiles, r)
        assert 1.8 < r[0] / r[3] < 2.2, (tiles, r)


def test_its_1_and_8_wave_rounds_are_the_h200s(h100_rounds):
    """The two wave counts the H200 recorded (suite run 20261130T034321Z): within 5 % on the H100 (one
    wave, one tile: 147 against 141 ns; the others within 2 ns)."""
    for tiles in (1, 2):
        for w in (1, 8):
            assert abs(h100_rounds[(tiles, w)] / _law(tiles, w) - 1) < 0.05, (tiles, w, h100_rounds[(tiles, w)])


def test_the_law_between_and_past_them_is_off_by_the_curves_bend(h100_rounds):
    """Known gaps of the law's form, kept to fail once the H200's own curve (plan h200_waves_curve) feeds
    it: at 2 and 4 waves the log-linear round is within 15 % of the H100's (one tile -12/+2 %, two
    +11/+13 %); past 8 waves, where the law holds the 8-wave round, it is 8-24 % above the H100's."""
    for tiles in (1, 2):
        for w in (2, 4):
            assert abs(_law(tiles, w) / h100_rounds[(tiles, w)] - 1) < 0.15, (tiles, w)
        for w in (16, 32):
            assert 0.05 < _law(tiles, w) / h100_rounds[(tiles, w)] - 1 < 0.30, (tiles, w)


def test_past_32_waves_it_keeps_falling_on_a_second_card(h100_rounds):
    """Plan h100_waves_tail (card GPU-da6ba270): its 1-, 8- and 32-wave rounds within 5 % of the first
    card's; 64 and 128 waves 50/46 ns with one tile, 120/115 with two (the guess written in the plan - under
    5 ns a doubling past 32 - was wrong from 32 to 64: 8-10 ns). The law holds the 8-wave round there (72
    and 144 ns): 20-60 % above, where the suite's TILE 32 matmuls at 4096-8192 run 62-250 waves."""
    tail = _rounds("waves_tail")
    for tiles in (1, 2):
        for w in (1, 8, 32):
            assert abs(tail[(tiles, w)] / h100_rounds[(tiles, w)] - 1) < 0.05, (tiles, w)
        r = [tail[(tiles, w)] for w in (32, 64, 128)]
        assert r[0] > r[1] > r[2], (tiles, r)
        assert 0.2 < _law(tiles, 128) / r[2] - 1 < 0.6, (tiles, r)
