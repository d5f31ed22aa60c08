"""Could the B-band replay predict? perfmodel.l2replay over a schedule borrowed from another recorded
launch of the same kernel (the one with the most blocks; its steady part repeated where the grid is
larger), against ncu: on the 40 recorded shapes (each with another shape's schedule) and on the
held-out sets' tiled and coarsened matmuls with B of 20-64 MiB that were never placed. Offline:

    python3 experiments/study_b_replay.py
"""

from __future__ import annotations

import pandas as pd

from perfmodel.coresidency import recorded
from perfmodel.l2replay import REPLAYED, band_errors, held_out_band
from perfmodel.measurements import load
from perfmodel.suite.plan import case_id


def summary(name: str, t: pd.DataFrame) -> None:
    for r in t.itertuples():
        print(f"  {r.case_id}: replay {100 * r.replay:+.0f} %, rule {100 * r.rule:+.0f} %")
    print(f"{name}: {len(t)} cases, mean |error| replay {100 * t.replay.abs().mean():.0f} % "
          f"({int((t.replay.abs() <= 0.1).sum())} within 10 %), rule {100 * t.rule.abs().mean():.0f} % "
          f"({int((t.rule.abs() <= 0.1).sum())})")


def main() -> None:
    data = load()
    ncu = data[data.source.eq("ncu") & data.metric.eq("dram__bytes_read.sum")].groupby("case_id").value.median()
    placed = [(r.case, r.params, ncu[case_id(r.case, r.params)]) for r in recorded("h200")
              if r.case in REPLAYED and 4 * r.params["k"] * r.params["n"] >= 20 << 20]
    print("recorded shapes, each with another shape's schedule:")
    summary("recorded", band_errors(placed))
    print("held out, never placed:")
    summary("held out", band_errors(held_out_band()))


if __name__ == "__main__":
    main()
