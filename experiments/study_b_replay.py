"""Could the B-band replay predict? perfmodel.l2replay over a schedule borrowed from another recorded
launch of the same kernel (the one with the most blocks; its steady part repeated where the grid is
larger), against ncu: on the 40 recorded shapes (each with another shape's schedule) and on the
held-out sets' tiled and coarsened matmuls with B of 20-64 MiB that were never placed. Offline:

    python3 experiments/study_b_replay.py
"""

from __future__ import annotations

import glob
import json

import numpy as np
import pandas as pd

from perfmodel import predict
from perfmodel.coresidency import Placement
from perfmodel.l2replay import replay
from perfmodel.measurements import load
from perfmodel.placement import recorded
from perfmodel.suite.plan import case_id
from perfmodel.suite.registry import get


def borrowed(src: Placement, grid: tuple[int, int, int], resident: int) -> Placement:
    """`src`'s schedule in units of its median block time, cut or extended to `grid`'s blocks: past the
    first `resident` blocks its steady part repeats, shifted by its own span."""
    blocks = grid[0] * grid[1]
    t = float(np.median(src.end_ns - src.start_ns))
    start = (src.start_ns - src.start_ns.min()) / t
    took = (src.end_ns - src.start_ns) / t
    steady = np.arange(resident, len(start))
    if blocks > len(start) and len(steady) > 1:
        span = start[steady[-1]] - start[steady[0]] + start[steady[-1]] - start[steady[-2]]
        extra = np.arange(blocks - len(start))
        pick = steady[extra % len(steady)]
        start = np.concatenate([start, start[pick] + span * (1 + extra // len(steady))])
        took = np.concatenate([took, took[pick]])
        sm = np.concatenate([src.sm, src.sm[pick]])
    else:
        sm = src.sm
    return Placement(sm[:blocks], start[:blocks], start[:blocks] + took[:blocks], grid)


def kind(case: str, p: dict[str, int]) -> tuple:
    return case, p["tile"], p.get("coarse", 1)


def main() -> None:
    recs = [r for r in recorded() if r.case in ("matmul.tiled", "matmul.coarsened")]
    largest: dict[tuple, object] = {}
    for r in recs:
        k = kind(r.case, r.params)
        if k not in largest or len(r.launches[0].sm) > len(largest[k].launches[0].sm):
            largest[k] = r
    data = load()
    ncu = data[data.source.eq("ncu") & data.metric.eq("dram__bytes_read.sum")].groupby("case_id").value.median()

    def errors(cases) -> pd.DataFrame:
        rows = []
        for case, p, measured, rule in cases:
            k = kind(case, p)
            others = [o for o in recs if kind(o.case, o.params) == k and o.params != p]
            if not others:
                continue
            src = max(others, key=lambda o: len(o.launches[0].sm))
            pr = predict(case, "h200", **p)
            grid = get(case).launch(get(case).bind(**p)).grid
            pl = borrowed(src.launches[0], grid, pr.occupancy.blocks_per_sm * 132)
            rows.append(dict(case_id=case_id(case, p), replay=replay(p, pl).dram_read_bytes / measured - 1,
                             rule=rule))
            print(f"  {rows[-1]['case_id']}: replay {100 * rows[-1]['replay']:+.0f} %, rule {100 * rule:+.0f} %",
                  flush=True)
        return pd.DataFrame(rows)

    def summary(name: str, t: pd.DataFrame) -> None:
        print(f"{name}: {len(t)} cases, mean |error| replay {100 * t.replay.abs().mean():.0f} % "
              f"({int((t.replay.abs() <= 0.1).sum())} within 10 %), rule {100 * t.rule.abs().mean():.0f} % "
              f"({int((t.rule.abs() <= 0.1).sum())})")

    placed = [(r.case, r.params, ncu[case_id(r.case, r.params)],
               predict(r.case, "h200", **r.params).dram_read_bytes / ncu[case_id(r.case, r.params)] - 1)
              for r in recs if 4 * r.params["k"] * r.params["n"] >= 20 << 20]
    print("recorded shapes, each with another shape's schedule:")
    summary("recorded", errors(placed))
    held = []
    for f in sorted(glob.glob("reports/h200/h200_holdout*.csv")):
        d = pd.read_csv(f)
        d = d[d.metric.eq("dram_read_bytes") & d.case.isin(["matmul.tiled", "matmul.coarsened"])]
        for r in d.itertuples():
            p = json.loads(r.params)
            if 20 << 20 <= 4 * p["k"] * p["n"] <= 64 << 20 and kind(r.case, p) in largest:
                held.append((r.case, p, r.measured, r.rel_error_now))
    print("held out, never placed:")
    summary("held out", errors(held))


if __name__ == "__main__":
    main()
