"""A matmul family's time error against the share of its global loads that DRAM serves (FINDINGS.md,
"COARSE 8's barrier rounds wait on DRAM"): every recorded launch, suite and held out, from the report's
tables, with the barrier round's cost the times need.

    python experiments/coarse8_rounds.py [--case matmul.tiled --where tile=32] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.report import written

BINS = [0.0, 0.03, 0.06, 0.10, 1.0]


def launches(case: str = "matmul.coarsened", where: dict[str, int] | None = None) -> pd.DataFrame:
    """One row per recorded launch of `case` whose parameters match `where` (default COARSE 8): measured and
    predicted time, the DRAM share of the loads, the barrier rounds the model adds."""
    where = {"coarse": 8} if where is None else where
    t = written("h200")
    t = t[(t.kind == "time") & (t.case == case)]
    t = t[t.params.map(lambda s: all(json.loads(s).get(k) == v for k, v in where.items()))]
    t = t.drop_duplicates(["set", "params"])
    rows = []
    for i, r in enumerate(t.itertuples(), 1):
        p = perfmodel.predict(r.case, "h200", **json.loads(r.params))
        barrier = next((b for b in p.breakdown if b.name == "barrier"), None)
        rounds = barrier.work if barrier else np.nan
        rows.append({"set": r.set, "params": r.params, "measured_s": r.measured, "predicted_s": p.time_s,
                     "dram_share": p.dram_read_bytes / p.global_load_bytes, "rounds": rounds,
                     "round_s": barrier.time_s / rounds if barrier else np.nan})
        print(f"\r{i}/{len(t)} launches", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    out = pd.DataFrame(rows)
    out["rel_error"] = out.predicted_s / out.measured_s - 1
    out["needed_round_s"] = out.round_s + (out.measured_s - out.predicted_s) / out.rounds
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="matmul.coarsened")
    ap.add_argument("--where", nargs="*", default=["coarse=8"], metavar="KEY=VALUE", help="parameters to match")
    ap.add_argument("--csv", type=Path, help="write every launch's row here")
    args = ap.parse_args()
    t = launches(args.case, {k: int(v) for k, v in (w.split("=") for w in args.where)})
    if args.csv:
        t.to_csv(args.csv, index=False)
    t["share"] = pd.cut(t.dram_share, BINS)
    table = t.groupby("share", observed=True).agg(
        launches=("rel_error", "size"), mean_error=("rel_error", "mean"), min_error=("rel_error", "min"),
        max_error=("rel_error", "max"), needed_round_ns=("needed_round_s", lambda v: v.median() * 1e9))
    print(table.round(3).to_string())
    err_slope = np.polyfit(t.dram_share, t.rel_error, 1)[0]
    print(f"{len(t)} launches ({(t.set == 'suite').sum()} suite); r(share, error) = "
          f"{np.corrcoef(t.dram_share, t.rel_error)[0, 1]:.2f}, {err_slope:.3f} in error per unit share")
    rounds = t.dropna(subset=["rounds"])
    if len(rounds) > 2:
        slope, at = np.polyfit(rounds.dram_share, rounds.needed_round_s * 1e9, 1)
        spread = np.std(rounds.needed_round_s * 1e9 - (at + slope * rounds.dram_share))
        print(f"round cost the times need: {at:.0f} + {slope:.0f} ns x share, sd {spread:.0f} ns "
              f"(the model's median {rounds.round_s.median() * 1e9:.0f} ns)")


if __name__ == "__main__":
    main()
