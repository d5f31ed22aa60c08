"""One study end to end: measure live (--live, on a GPU) or take the recorded data, predict,
compare, and write that study's page, figures and CSV. Each experiments/study_*.py calls this."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..ceilings import ceilings
from ..devices import device as lookup
from ..measurements import load
from ..validate import compare, summary
from . import REPORTS, studies

if TYPE_CHECKING:
    import pandas as pd

# study page -> registry studies whose cases it measures (and whether it needs the extra runs)
SOURCES = {"occupancy": (None, False), "coalescing": (("coalescing",), False), "banks": (("banks",), False),
           "latency": ((), True), "ceilings": (("ceilings",), True), "matmul": (("matmul",), False),
           "transpose": (("transpose",), False), "stencil": (("stencil",), False), "streams": ((), True),
           "latency_hiding": (("ceilings",), False)}


def study_rows(table: pd.DataFrame, study: str) -> pd.DataFrame:
    """A study page's rows of the comparison table: its studies' rows; occupancy's: every case's
    occupancy rows; latency and streams compare extras, not suite cases: none (comparison.csv.gz holds all)."""
    wanted = SOURCES[study][0]
    if wanted is None:
        return table[table.kind == "occupancy"]
    if study == "latency_hiding":
        return table[table.case == "probe.read"]
    return table[table.study.isin(wanted)]


def _live(study: str, device: str, plan: str, ncu: bool) -> None:
    from ..suite import campaign
    from ..suite.importer import import_run
    from ..suite.plan import load_plan
    from ..suite.registry import get

    wanted, extras = SOURCES[study]
    cases = [pc for pc in load_plan(plan) if wanted is None or get(pc.name).study in wanted]
    sub = Path(tempfile.mkdtemp(prefix=f"perfmodel-{study}-"))
    sub_plan = sub / "plan.toml"
    lines = []
    for pc in cases:
        params = ", ".join(f"{k} = {v}" for k, v in pc.params.items())
        lines += ["[[case]]", f'name = "{pc.name}"', f"params = {{ {params} }}",
                  f"time = {str(pc.time).lower()}", f"ncu = {str(pc.ncu).lower()}", ""]
    sub_plan.write_text("\n".join(lines))
    campaign.run(str(sub_plan), sub / "out", ncu=ncu, extras=extras)
    import_run(sub / "out", device)


def main(study: str) -> None:
    ap = argparse.ArgumentParser(description=f"The {study} study: predict, measure or load, compare, report.")
    ap.add_argument("--live", action="store_true", help="measure now on the local GPU (PyCUDA) and record it")
    ap.add_argument("--device", default="h200")
    ap.add_argument("--plan", default="experiments/plans/h200.toml")
    ap.add_argument("--ncu", action="store_true", help="with --live: also collect Nsight Compute counters")
    a = ap.parse_args()
    dev = lookup(a.device)
    if a.live:
        _live(study, dev.key, a.plan, a.ncu)
    data = load(dev.key)
    table = compare(dev.key, data, progress=False)
    folder = REPORTS / dev.key
    folder.mkdir(parents=True, exist_ok=True)
    page = studies.STUDIES[study](dev, data, table, ceilings(dev), folder)
    (folder / f"{study}.md").write_text(page.markdown())
    rows = study_rows(table, study)
    rows.to_csv(folder / f"{study}.csv", index=False)
    print(page.headline)
    if len(rows):
        print(summary(rows).to_string(index=False))
    print(f"page: {folder / (study + '.md')}")
