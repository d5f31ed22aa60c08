"""Could the B-band replay predict? perfmodel.l2replay over a schedule borrowed from another recorded
launch of the same kernel (the one with the most blocks; its steady part repeated where the grid is
larger), against ncu: on the 40 recorded shapes (each with another shape's schedule) and on the
held-out sets' tiled and coarsened matmuls with B of 20-64 MiB that were never placed. Offline:

    python3 experiments/study_b_replay.py
"""

from __future__ import annotations

import glob
import json

import pandas as pd

from perfmodel import predict
from perfmodel.l2replay import replay_source, rule_read_bytes
from perfmodel.measurements import load
from perfmodel.placement import recorded
from perfmodel.suite.plan import case_id


def main() -> None:
    recs = [r for r in recorded() if r.case in ("matmul.tiled", "matmul.coarsened")]
    data = load()
    ncu = data[data.source.eq("ncu") & data.metric.eq("dram__bytes_read.sum")].groupby("case_id").value.median()

    def errors(cases) -> pd.DataFrame:
        rows = []
        for case, p, measured in cases:
            if replay_source(case, p) is None:
                continue
            got = predict(case, "h200", **p).dram_read_bytes  # the model replays in the band
            rows.append(dict(case_id=case_id(case, p), replay=got / measured - 1,
                             rule=rule_read_bytes(case, p) / measured - 1))
            print(f"  {rows[-1]['case_id']}: replay {100 * rows[-1]['replay']:+.0f} %, "
                  f"rule {100 * rows[-1]['rule']:+.0f} %", flush=True)
        return pd.DataFrame(rows)

    def summary(name: str, t: pd.DataFrame) -> None:
        print(f"{name}: {len(t)} cases, mean |error| replay {100 * t.replay.abs().mean():.0f} % "
              f"({int((t.replay.abs() <= 0.1).sum())} within 10 %), rule {100 * t.rule.abs().mean():.0f} % "
              f"({int((t.rule.abs() <= 0.1).sum())})")

    placed = [(r.case, r.params, ncu[case_id(r.case, r.params)])
              for r in recs if 4 * r.params["k"] * r.params["n"] >= 20 << 20]
    print("recorded shapes, each with another shape's schedule:")
    summary("recorded", errors(placed))
    held = []
    for f in sorted(glob.glob("reports/h200/h200_holdout*.csv")):
        d = pd.read_csv(f)
        d = d[d.metric.eq("dram_read_bytes") & d.case.isin(["matmul.tiled", "matmul.coarsened"])]
        for r in d.itertuples():
            p = json.loads(r.params)
            if 20 << 20 <= 4 * p["k"] * p["n"] <= 64 << 20:
                held.append((r.case, p, r.measured))
    print("held out, never placed:")
    summary("held out", errors(held))


if __name__ == "__main__":
    main()
