"""Would a steeper L1 survival law predict TILE 16's sharing better? The model keeps a line with
exp(-fills / L1) (`models.placed.kept`: random replacement); an L1 of W-way sets, hashed, least recently
used out, keeps it while fewer than W of the fills land in its set: Q(W, W fills / L1), the Poisson
tail (W = 1 is the exponential; W large the step of a fully associative LRU, which the pointer chase
says the H200's L1 is near - tests/test_l1_policy.py). Offline, on the regenerated report's tables:
each TILE 16 tiled or corner-turning held-out row of L2 reads the L1s request, and every suite row of
it in the matmul and stencil families, predicted again with the law swapped (~5 min a law):

    python3 experiments/study_l1_survival.py 2 16
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
from scipy.special import gammaincc

import perfmodel.models.placed as placed
from perfmodel.models import _predict, predict
from perfmodel.report import written

METRIC = "l2_requested_read_sectors"
K_BINS = [0, 1300, 2500, 10**6]


def rows() -> pd.DataFrame:
    """Suite rows (matmul and stencil) and held-out TILE 16 rows, with the model's prediction as it is."""
    t = written("h200").rename(columns={"set": "source"})
    t["model"] = t.predicted_now
    t = t[t.metric.eq(METRIC) & t.case.str.startswith(("matmul.", "stencil."))].drop_duplicates(["source", "case_id"])
    t = t.assign(tile=t.params.map(lambda s: json.loads(s).get("tile", 0)))
    tile16 = t.tile.eq(16) & t.case.isin(["matmul.tiled", "matmul.corner_turning"])
    return t[tile16 | t.source.eq("suite")].copy()


def swapped(t: pd.DataFrame, ways: float) -> pd.Series:
    """Each row's L2 requested read sectors with `kept` = Q(ways, ways x)."""
    placed.kept = lambda fills, l1: gammaincc(ways, ways * np.asarray(fills, float) / l1)
    _predict.cache_clear()  # predictions are memoised: the law before's would come back
    shapes = t.drop_duplicates("case_id")
    got = {}
    for i, (cid, case, params) in enumerate(shapes[["case_id", "case", "params"]].itertuples(index=False)):
        got[cid] = predict(case, "h200", **json.loads(params)).l2_read_bytes / 32
        if i % 50 == 0:
            print(f"  W = {ways:g}: {i} of {len(shapes)} shapes", flush=True)
    return t.case_id.map(got)


def table(t: pd.DataFrame, col: str) -> str:
    err = 100 * (t[col] / t.measured - 1)
    g = t.assign(err=err, group=t.case + np.where(t.tile > 0, " TILE " + t.tile.astype(str), ""),
                 set=np.where(t.source.eq("suite"), "suite", "held out"))
    out = g.groupby(["group", "set"]).err.agg(rows="size", within_5pct=lambda e: int((e.abs() <= 5).sum()),
                                              mean_abs_pct=lambda e: e.abs().mean(), bias_pct="mean")
    return out.round(2).to_string()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ways", type=float, nargs="+", help="W of each law to try")
    a = ap.parse_args()
    t = rows()
    print(f"{len(t)} rows, {t.case_id.nunique()} shapes\nthe model (exp):\n{table(t, 'model')}")
    held = t[t.source.ne("suite")]
    wide = held.params.map(lambda s: (json.loads(s)["n"] + 15) // 16 > 132)
    kbin = pd.cut(held.params.map(lambda s: json.loads(s)["k"]), K_BINS)
    for w in a.ways:
        t[f"w{w:g}"] = swapped(t, w)
        print(f"Q({w:g}, {w:g} x):\n{table(t, f'w{w:g}')}")
        h = t.loc[held.index]
        print("held out, mean error by grid width (past 132 blocks a row) and k:")
        print((100 * (h[["model", f"w{w:g}"]].div(h.measured, axis=0) - 1)).groupby([wide, kbin], observed=True)
              .mean().round(1).to_string())
        s = t[t.source.eq("suite")]
        moved = s[((s[[f"w{w:g}", "model"]].div(s.measured, axis=0) - 1).abs() > 0.05).any(axis=1)]
        for r in moved.itertuples():
            print(f"  suite {r.case_id}: model {100 * (r.model / r.measured - 1):+.1f} %, "
                  f"Q {100 * (getattr(r, f'w{w:g}') / r.measured - 1):+.1f} %")


if __name__ == "__main__":
    main()
