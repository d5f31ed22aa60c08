"""A report page (title, sentences, figures, tables) and the helpers every study's page uses."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..measurements import param
from . import figures


@dataclass
class Page:
    name: str
    study: str
    title: str
    headline: str = ""
    text: str = ""
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)

    def markdown(self) -> str:
        parts = [f"# {self.title}\n", self.headline + "\n", self.text + "\n"]
        for alt, f in self.figures:
            parts.append(f"![{alt}]({f})\n")
        for caption, df in self.tables:
            parts.append(f"\n## {caption}\n\n" + markdown_table(df) + "\n")
        return "\n".join(parts)


def markdown_table(df: pd.DataFrame) -> str:
    def cell(v: object) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |\n|" + "---|" * len(df.columns)
    body = "\n".join("| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False))
    return head + "\n" + body


def short_case_id(case_id: str) -> str:
    """A matmul case id as a figure's label: "tiled  k=2048,m=2048,n=4096,tile=32"."""
    return re.sub(r"matmul\.|\[|\]", " ", case_id).strip()


def b_band_rows(table: pd.DataFrame, case: str, from_bytes: float, to_bytes: float) -> pd.DataFrame:
    """A matmul case's DRAM-read counter rows with B (k x n floats) from `from_bytes` to `to_bytes`."""
    rows = table[(table.case == case) & (table.metric == "dram_read_bytes") & (table.kind == "counter")]
    return rows[(4 * param(rows, "k") * param(rows, "n")).between(from_bytes, to_bytes)]


def accuracy(table: pd.DataFrame, study: str) -> str:
    t = table[table.study == study]
    parts = []
    for kind, g in t.groupby("kind"):
        err = g.rel_error.abs().replace(np.inf, np.nan)
        parts.append(f"{kind}: {(g.rel_error == 0).sum()} exact, {(err <= 0.05).sum()}/{len(g)} within 5 %"
                     + (f", MAPE {100 * err.mean():.1f} %" if kind == "time" else ""))
    return "; ".join(parts)


def time_page(name: str, study: str, title: str, table: pd.DataFrame, folder: Path, text: str) -> Page:
    t = table[(table.study == study) & (table.kind == "time")]
    page = Page(name, study, title, headline=accuracy(table, study), text=text)
    f = figures.scatter(t, folder / f"{name}_time.png", f"{title}: time")
    page.figures = [(f"{name} time", f)]
    page.tables = [("Time: model, measurement, naive roofline", t[["case_id", "predicted", "measured", "rel_error",
                                                                 "baseline"]]),
                   ("Counters", table[(table.study == study) & table.kind.str.startswith("counter")]
                    [["case_id", "metric", "predicted", "measured", "rel_error"]])]
    return page
