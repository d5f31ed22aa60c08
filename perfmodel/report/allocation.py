"""The matmul page's section on where the arrays lie: band shapes allocated ten times (perfmodel.allocation)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..allocation import PLACED_BY_PAGES, against_model
from ..devices import DeviceSpec
from . import figures
from .page import Page, short_case_id


def allocation_section(dev: DeviceSpec, table: pd.DataFrame, folder: Path, page: Page) -> str:
    """A figure (each shape's range over its allocations, the model and the suite's median, over the
    allocations' median) and a paragraph; empty where no sweep is recorded."""
    s = against_model(dev.key)
    if s.empty:
        return ""
    suite = table[table.metric.eq("dram_read_bytes")].set_index("case_id").measured
    med = s.median_bytes.to_numpy()
    labels = [short_case_id(c) for c in s.case_id]
    page.figures.append(("B band: where the arrays lie", figures.ranges(
        labels, list(s.low_bytes / med), list(s.high_bytes / med),
        {"model": list(s.predicted_bytes / med),
         "suite (median over runs)": list(np.array([suite.get(c, np.nan) for c in s.case_id]) / med)},
        folder / "matmul_allocations.png", "Band matmuls and the read stream: DRAM reads over 10+ allocations each",
        "DRAM reads / the allocations' median")))
    stream = s[~s.case.isin(PLACED_BY_PAGES)]
    s = s[s.case.isin(PLACED_BY_PAGES)]
    wide = s[s.spread > 0.15]
    widest = s.loc[s.spread.idxmax()]
    return (f" Where the arrays lie (figure 'B band: where the arrays lie'; experiments/address_sweep.sh): the"
            f" band shapes that miss 5 % in the suite, each allocated ten times (or more) behind pads of 0-130 MiB and"
            " launched twice per allocation under ncu. The two launches agree (within"
            f" {100 * s.launch_gap.median():.0f} % at the median); the allocations do not: {len(wide)} of {len(s)}"
            f" shapes spread over 15 %, {widest.case_id} over {100 * widest.spread:.0f} % ({widest.low_bytes / 1e6:.0f}"
            f"-{widest.high_bytes / 1e6:.0f} MB) - L2 places lines by physical address, so how much of a"
            " B between one partition and the whole L2 survives depends on the pages it got, and one run's count is"
            f" one draw. The model lies within 5 % of the range at {int(s.inside.sum())} of {len(s)}; at the others"
            " it misses every allocation (its own error, perfmodel.allocation)."
            + (f" The read stream beside them (probe.l2_read, {len(stream)} sizes) spreads at most"
               f" {100 * stream.spread.max():.0f} %." if len(stream) else ""))
