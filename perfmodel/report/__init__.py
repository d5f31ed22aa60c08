"""perfmodel report: every study's table, figures and page, and reports/index.html, rebuilt from
the recorded measurements of a device plus fresh predictions."""

from __future__ import annotations

import html
import time
from pathlib import Path

import pandas as pd

from ..ceilings import ceilings
from ..devices import device as lookup
from ..measurements import DATA_DIR, ROOT, load, run_to_run
from ..validate import compare, summary
from . import figures, gaps, studies

REPORTS = ROOT / "reports"


def write_gzipped(table: pd.DataFrame, folder: Path, name: str) -> None:
    """`table` as folder/name.csv.gz (mtime 0: the same bytes for the same rows, so regenerating leaves git
    nothing to commit), replacing a plain name.csv: the tree travels to the GPU, under 64 MiB."""
    table.to_csv(folder / f"{name}.csv.gz", index=False, compression={"method": "gzip", "mtime": 0})
    (folder / f"{name}.csv").unlink(missing_ok=True)


def written(device: str = "h200", out: Path | None = None) -> pd.DataFrame:
    """The per-case tables a build wrote, one frame (for studies that re-predict recorded rows): the suite's,
    set "suite", and each measured held-out set's, set its name; `predicted_now` and `rel_error_now` are
    today's model for both (the suite's `predicted` and `rel_error`)."""
    from ..holdout import sets

    folder = (out or REPORTS) / lookup(device).key
    if not (folder / "comparison.csv.gz").exists():
        raise SystemExit(f"no report tables under {folder}: build them first (`perfmodel report`)")
    tables = [pd.read_csv(folder / "comparison.csv.gz").assign(set="suite", predicted_now=lambda t: t.predicted,
                                                                         rel_error_now=lambda t: t.rel_error)]
    tables += [pd.read_csv(f).assign(set=name) for name in sets() if (f := folder / f"{name}.csv.gz").exists()]
    return pd.concat(tables, ignore_index=True)


def build(device: str = "h200", out: Path | None = None, progress: bool = True) -> Path:
    """Write reports/<device>/ (CSV, PNG, Markdown per study) and reports/index.html."""
    t0 = time.time()
    dev = lookup(device)
    out = out or REPORTS
    folder = out / dev.key
    folder.mkdir(parents=True, exist_ok=True)
    data = load(dev.key)
    if not len(data):
        raise SystemExit(f"no recorded measurements under {DATA_DIR / dev.key}: run `perfmodel validate` "
                         "on a GPU first")
    table = compare(dev.key, data, progress=progress)
    write_gzipped(table, folder, "comparison")  # every row (the study pages' CSVs hold them split by study)
    summ = summary(table)
    summ.to_csv(folder / "summary.csv", index=False)
    ceil = ceilings(dev)
    pages = []
    from .run import study_rows

    for name, fn in studies.STUDIES.items():
        if progress:
            print(f"  report: {name}", flush=True)
        page = fn(dev, data, table, ceil, folder)
        (folder / f"{name}.md").write_text(page.markdown())
        study_rows(table, name).to_csv(folder / f"{name}.csv", index=False)
        pages.append(page)
    shown = table.kind.isin(["counter", "counter-l1", "counter-stage", "time"])
    figures.scatter(table[shown], folder / "scatter_all.png", f"All predictions vs {dev.name} measurements")
    misses = "<h2>Where the model misses, and why</h2>" + gaps.table(table, COUNTER_ROWS)
    from ..holdout import sets
    from .sharing import sharing_section

    held = [_holdout(name, dev.key, folder) for name in sets()]
    sharing = sharing_section([t for _, t in held], table, dev.key, folder)
    _index(dev, data, summ, pages, out, folder, _headline(table), _counter_table(table),
           "".join(h for h, _ in held) + sharing + _noise(data) + misses)
    if progress:
        print(f"reports written to {folder} and {out / 'index.html'} in {time.time() - t0:.0f}s")
    return out / "index.html"


def _provenance(data: pd.DataFrame) -> str:
    cols = ["run_id", "device", "driver", "cuda", "pycuda", "sm_clock_mhz", "commit", "utc"]
    runs = data[cols].drop_duplicates("run_id")
    return runs.to_html(index=False, border=0)


def _headline(table: pd.DataFrame) -> str:
    """The time model over every timed case, beside the naive datasheet roofline."""
    t = table[table.kind == "time"]
    if not len(t):
        return ""
    err = t.rel_error.abs()
    naive = ((t.baseline - t.measured) / t.measured).abs().mean()
    return (f"Time: MAPE {100 * err.mean():.1f} % over {len(t)} timed cases (naive datasheet roofline "
            f"{100 * naive:.0f} %); {100 * (err <= 0.10).mean():.0f} % within 10 %, "
            f"{(err > 0.25).sum()} past 25 %, worst {100 * t.rel_error.iloc[err.argmax()]:+.0f} % "
            f"({t.case_id.iloc[err.argmax()]}).")


# the counters the models issue names, in its order: (compared row, what it is)
COUNTER_ROWS = [
    ("global_load_requests", "global load requests"), ("global_load_sectors", "global load sectors"),
    ("global_store_requests", "global store requests"), ("global_store_sectors", "global store sectors"),
    ("smem_load_wavefronts", "shared load wavefronts (per instruction)"),
    ("smem_store_wavefronts", "shared store wavefronts (per instruction)"),
    ("smem_load_stage_wavefronts", "shared load wavefronts in the L1 data stage (with global traffic's extra)"),
    ("smem_store_stage_wavefronts", "shared store wavefronts in the L1 data stage (with global traffic's extra)"),
    ("l2_requested_read_sectors", "L2 read sectors the L1s request (xbar)"),
    ("l2_read_sectors", "L2 read sectors the L2 slices count (merged: a bound)"),
    ("l2_write_sectors", "L2 write sectors"), ("dram_read_bytes", "DRAM read bytes"),
    ("dram_write_bytes", "DRAM write bytes, with what stays dirty in L2"),
    ("dram_write_bytes_in_kernel", "DRAM write bytes before the kernel ends (ncu's count)"),
    ("theoretical_occupancy_pct", "theoretical occupancy"), ("blocks_per_sm", "blocks per SM (driver)"),
]


def _counter_table(table: pd.DataFrame) -> str:
    """Within 5 % of the measurement, per counter the models issue names (tiny DRAM counts left out)."""
    rows = []
    for metric, label in COUNTER_ROWS:
        t = table[(table.metric == metric) & (table.kind != "counter-noise")]
        if len(t):
            within = (t.rel_error.abs() <= 0.05).sum()
            rows.append(f"<tr><td>{html.escape(label)}</td><td>{within}/{len(t)}</td>"
                        f"<td>{100 * t.rel_error.abs().median():.2f} %</td></tr>")
    return ("<table><tr><th>counter</th><th>within 5 %</th><th>median |error|</th></tr>"
            + "".join(rows) + "</table>")


def _holdout(name: str, device: str, folder: Path) -> tuple[str, pd.DataFrame]:
    """A held-out set: predictions frozen before its run, beside what it measured (and today's model) -
    its section, and its table."""
    from ..holdout import HOLDOUT_DIR, compare_holdout, frozen

    t = compare_holdout(name, device)
    if not len(t):
        return "", t
    write_gzipped(t, folder, name)  # forty sets: 6 MB plain, 0.6 gzipped
    header, preds = frozen(name, device)
    runs = load(device, HOLDOUT_DIR / name).drop_duplicates("run_id")
    failed = sorted(set(preds) - set(t.case_id))
    timed = t[t.kind == "time"]
    figures.scatter(timed.assign(kind="time (frozen)"), folder / f"{name}_time.png",
                    f"{name}: frozen predicted vs measured time")
    rows = []
    for kind in ("time", "counter-l1", "counter", "counter-writeback", "occupancy", "counter-stage"):
        g = t[t.kind == kind]
        if len(g):
            rows.append(f"<tr><td>{kind}</td><td>{len(g)}</td><td>{(g.rel_error.abs() <= 0.05).sum()}</td>"
                        f"<td>{100 * g.rel_error.abs().mean():.1f} %</td><td>{100 * g.rel_error.abs().max():.0f} %</td>"
                        f"<td>{(g.rel_error_now.abs() <= 0.05).sum()}</td>"
                        f"<td>{100 * g.rel_error_now.abs().mean():.1f} %</td></tr>")
    naive = ((timed.baseline - timed.measured) / timed.measured).abs().mean()
    worst = timed.iloc[timed.rel_error.abs().argmax()] if len(timed) else None
    plan = header.get("plan", "")
    text = (f"{len(preds)} cases {_chosen(plan)} ({html.escape(plan)}); the model's "
            f"predictions frozen at commit {html.escape(header.get('commit', '?'))} ({header.get('utc', '?')}) "
            f"before run {', '.join(runs.run_id)} measured them (commit {', '.join(runs.commit)}). "
            + (f"Time: MAPE {100 * timed.rel_error.abs().mean():.1f} % over {len(timed)} cases (naive datasheet "
               f"roofline {100 * naive:.0f} %), {100 * (timed.rel_error.abs() <= 0.10).mean():.0f} % within 10 %, "
               f"worst {100 * worst.rel_error:+.0f} % ({html.escape(worst.case_id)}). " if worst is not None else "")
            + (f"Not measured (the launch failed): {html.escape(', '.join(failed))}." if failed else ""))
    return (f"<h2>Held out ({html.escape(name)}): predicted before measured</h2><p>" + text
            + "</p><table><tr><th>kind</th><th>rows</th>"
            "<th>frozen: within 5 %</th><th>MAPE</th><th>largest</th><th>model now: within 5 %</th><th>MAPE</th>"
            "</tr>" + "".join(rows)
            + f"</table><p>Per case: <a href='{folder.name}/{name}.csv.gz'>{name}.csv.gz</a>.</p>"
            f"<p><img src='{folder.name}/{name}_time.png' width='380' alt='held-out times'></p>"), t


def _chosen(plan: str) -> str:
    """How a held-out plan's cases were picked, from its first line: drawn at random, or by hand."""
    path = Path(__file__).resolve().parents[2] / plan  # plans are recorded relative to the repository
    first = path.read_text().splitlines()[0] if path.is_file() else ""
    return "chosen by hand to test a rule" if "chosen by hand" in first else "drawn at random shapes"


def _noise(data: pd.DataFrame) -> str:
    """The same case measured in several runs: how far apart, the floor under any model error."""
    r = run_to_run(data)
    if not len(r):
        return ""
    rows = "".join(f"<tr><td>{html.escape(x.quantity)}</td><td>{x.cases}</td><td>{100 * x.median_spread:.2f} %</td>"
                   f"<td>{100 * x.p90_spread:.2f} %</td><td>{100 * x.max_spread:.1f} %</td></tr>"
                   for x in r.itertuples())
    return ("<h2>Run to run</h2><p>The same case in different recorded runs, (max - min) / median:</p><table>"
            "<tr><th>measured</th><th>cases</th><th>median</th><th>90th percentile</th><th>largest</th></tr>"
            + rows + "</table>")


def _index(dev, data, summ: pd.DataFrame, pages, out: Path, folder: Path, headline: str, counters: str,
           sections: str) -> None:
    rel = folder.relative_to(out)
    rows = []
    for p in pages:
        s = summ[summ.study == p.study] if p.study else summ.iloc[0:0]
        acc = "; ".join(f"{r.kind}: {r.within_5pct}/{r.rows} within 5 %"
                        + (f", MAPE {100 * r.mape:.1f} %" if r.kind == "time" else "") for r in s.itertuples())
        img = f'<img src="{rel}/{p.figures[0][1]}" width="320" alt="{html.escape(p.figures[0][0])}">' \
            if p.figures else ""
        rows.append(f"<tr><td><a href='{rel}/{p.name}.md'>{html.escape(p.title)}</a><br>"
                    f"<small>{html.escape(p.headline)}</small></td><td>{html.escape(acc)}</td><td>{img}</td></tr>")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>perfmodel: {html.escape(dev.name)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:auto}} td{{vertical-align:top;padding:6px}}
table{{border-collapse:collapse}} tr{{border-bottom:1px solid #ddd}}</style></head><body>
<h1>perfmodel on {html.escape(dev.name)}</h1>
<p>Every prediction of the analytical model beside the recorded measurement: Nsight Compute counters,
CUDA-event times and the driver's occupancy API. Rebuild with <code>perfmodel report</code>.</p>
<p><b>{html.escape(headline)}</b> Per case: <a href="{rel}/comparison.csv.gz">comparison.csv.gz</a>.</p>
<p><img src="{rel}/scatter_all.png" width="420" alt="all predictions against measurements"></p>
<h2>Counters</h2>{counters}
<p><small>Kinds in the tables: <i>counter-l1</i> exact L1 counts; <i>counter-merged</i> the L2 slices'
read count, which is lower than what the L1s request where SMs ask for the same sectors at once, and
L2 writes where a warp's consecutive stores share lines that L1 may combine and no law is measured for
its run of stores (the prediction: sent one store at a time; the lower bound, all combined, is in the
prediction's notes - coarsened matmul's runs of 2, 4 and 8 stores follow the warp-seams law instead);
<i>counter-writeback</i> DRAM writes during the kernel, as ncu counts them (lines left dirty in L2 leave
later; ncu's own setup leaves ~2.4 MB dirty that the kernel pushes out, measured on a read stream that
writes nothing and added to the prediction here; the <i>dram_write_bytes</i> rows add what the next flush
writes back); <i>counter-noise</i> DRAM counts under 1 MiB, and write-back totals under 16 MiB (each
profiled kernel adds 0.1-0.9 MB that no output explains); <i>counter-stage</i> the pipes the time model
uses (shared wavefronts in the L1 data stage among them); <i>time-ceiling</i> the probes that define a
ceiling (shown, not counted).</small></p>
{sections}
<h2>Studies</h2>
<table><tr><th>study</th><th>accuracy</th><th>figure</th></tr>{''.join(rows)}</table>
<h2>Accuracy by study</h2>{summ.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0)}
<h2>Provenance of the data</h2>{_provenance(data)}
</body></html>
"""
    (out / "index.html").write_text(page)


__all__ = ["build"]
