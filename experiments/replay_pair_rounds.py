"""Replay the two-block matmuls' times under other round laws (FINDINGS: "Two blocks an SM: the round at the
launch's own waves"). Every timed matmul at two blocks an SM with a barrier term, in the report's tables
(suite and held out), predicted four ways:

- now: the model as it is;
- curve: past 8 waves the round falls as the H100's did (the H200's 8-wave round times the H100's round at
  the launch's waves over its 8-wave round; reports/data/h100/checks/waves_curve, 1-32 waves, and
  waves_tail, 64 and 128);
- dram: plus, on the rounds that load after their barrier, the DRAM latency's excess over L2's
  (probe.chase_cg) times the share of the loads DRAM serves (the prediction's DRAM reads over its L2 reads);
- both.

Once the H200's own curve is recorded (plan h200_waves_curve), "now" reads it and "curve" is moot.

    PYTHONPATH=. python3 experiments/replay_pair_rounds.py [--csv OUT.csv]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import perfmodel.models as models
from perfmodel.devices import device
from perfmodel.report import written
from perfmodel.report.matmul import _matmul_barriers
from perfmodel.sass import functions
from perfmodel.suite.registry import get

TILES = dict(zip(models.ROUND_PAIRS[2], (1, 2), strict=True))  # the two-block round's key -> its tiles a round


def timed_matmuls() -> pd.DataFrame:
    """The report's timed matmul rows, suite and every held-out set."""
    d = written("h200")
    return d[(d.kind == "time") & d.case.str.startswith("matmul.")].reset_index(drop=True)


def h100_curve() -> dict[tuple[int, int], float]:
    """(tiles, waves) -> the H100's two-block round beyond the work (1-32 waves from waves_curve, 64 and 128
    from waves_tail)."""
    dev = device("h200")
    curve, tail = (models.checked_pair_rounds(dev, check) for check in ("waves_curve", "waves_tail"))
    if curve is None or tail is None:
        raise SystemExit("replay_pair_rounds: needs the H100's probe.barrier_waves under "
                         "reports/data/h100/checks/waves_curve and waves_tail")
    return {**{k: v for k, v in tail.items() if k[1] > 32}, **curve}


def falling_past_8(h100: dict[tuple[int, int], float]):
    """A `_pair_round_s` that past 8 waves scales the H200's 8-wave round by the H100's fall."""
    law = models._pair_round_s

    def round_s(dev, key: str, waves: float | None) -> float | None:
        here = law(dev, key, waves)
        if waves is None or waves <= 8 or here is None:
            return here
        tiles = TILES[key]
        counts = sorted(w for t, w in h100 if t == tiles)
        at = float(np.interp(math.log2(waves), [math.log2(w) for w in counts], [h100[(tiles, w)] for w in counts]))
        return law(dev, key, 8) * at / h100[(tiles, 8)]

    return round_s


def predict_all(rows: pd.DataFrame) -> pd.DataFrame:
    """Each two-block row's prediction (the report's `_matmul_barriers`): time, barrier rounds, the hoisted
    share, the DRAM share (slow: ~1 s a launch where the L2 replays are not cached yet; progress by set)."""
    out, sets, sass = [], rows.set.unique(), functions("h200")
    for i, name in enumerate(sets, 1):
        print(f"\r{name} ({i}/{len(sets)} sets)", end=" " * 8, file=sys.stderr, flush=True)
        for r, params, p, barrier in _matmul_barriers(device("h200"), rows[rows.set == name], 2):
            case = get(r.case)
            fn = sass.get(case.entry(case.bind(**params)))
            out.append(dict(row=r.name, set=r.set, case_id=r.case_id, waves=p.waves, measured_s=r.measured,
                            time_s=p.time_s, rounds=barrier.work, hoisted=fn.hoisted_share if fn else 0.0,
                            dram_share=p.dram_read_bytes / p.l2_read_bytes if p.l2_read_bytes else 0.0))
    print(file=sys.stderr)
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", type=Path, help="write every launch's four predictions here")
    a = ap.parse_args()
    rows = timed_matmuls()
    excess_s = models.dram_latency_excess_s(device("h200"))
    now = predict_all(rows)
    law = models._pair_round_s
    models._pair_round_s = falling_past_8(h100_curve())
    models._predict.cache_clear()
    try:
        curve = predict_all(rows.loc[now.row])
    finally:
        models._pair_round_s = law
        models._predict.cache_clear()
    x = now.rename(columns={"time_s": "now_s"}).assign(curve_s=curve.time_s.to_numpy())
    dram_s = x.rounds * (1 - x.hoisted) * x.dram_share * excess_s
    x["dram_s"], x["both_s"] = x.now_s + dram_s, x.curve_s + dram_s
    print(f"{len(x)} two-block matmul launches ({(x.set == 'suite').sum()} suite); DRAM latency - L2's "
          f"{excess_s * 1e9:.0f} ns (probe.chase_cg)")
    print(f"{'variant':8s} {'MAPE %':>7s} {'bias %':>7s} {'worst %':>8s}")
    for v in ("now", "curve", "dram", "both"):
        e = 100 * (x[f"{v}_s"] / x.measured_s - 1)
        x[f"{v}_err_pct"] = e
        print(f"{v:8s} {e.abs().mean():7.2f} {e.mean():+7.2f} {e.abs().max():8.2f}")
    errs = [f"{v}_err_pct" for v in ("now", "curve", "dram", "both")]
    share = pd.cut(x.dram_share, [0, 0.01, 0.02, 0.05, 0.1, 1], include_lowest=True)
    print("\nmean error (%) by the share of loads DRAM serves\n", x.groupby(share, observed=True)[errs].mean().round(2))
    waves = pd.cut(x.waves, [0, 2, 8, 20, 64, 1e4])
    print("\nmean error (%) by waves\n", x.groupby(waves, observed=True)[errs].mean().round(2))
    if a.csv:
        x.to_csv(a.csv, index=False)


if __name__ == "__main__":
    main()
