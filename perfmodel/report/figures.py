"""Figures of the reports (matplotlib, Agg backend, PNG)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..ceilings import Ceilings  # noqa: E402
from ..models.base import Prediction  # noqa: E402


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def scatter(table: pd.DataFrame, path: Path, title: str) -> str:
    """Predicted against measured, log-log, y = x and a +-10 % band."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
    t = table[(table.measured > 0) & (table.predicted > 0)]
    for kind, g in t.groupby("kind"):
        ax.scatter(g.measured, g.predicted, s=12, alpha=0.7, label=f"{kind} ({len(g)})")
    if len(t):
        lo, hi = min(t.measured.min(), t.predicted.min()), max(t.measured.max(), t.predicted.max())
        x = np.geomspace(lo, hi, 50)
        ax.plot(x, x, "k-", lw=1)
        ax.fill_between(x, 0.9 * x, 1.1 * x, color="grey", alpha=0.2, label="±10 %")
    ax.set(xscale="log", yscale="log", xlabel="measured", ylabel="predicted", title=title)
    ax.legend(fontsize=7)
    return _save(fig, path)


def roofline_points(pred: Prediction, label: str, measured_s: float = float("nan")) -> list[dict]:
    """A prediction's dots on the hierarchical roofline: one per level with a finite arithmetic
    intensity, at the FLOP rate the predicted (and, where given, the measured) time attains."""
    return [dict(label=label, level=level, ai=ai, measured_flops=pred.flops / measured_s,
                 predicted_flops=pred.flops / pred.time_s)
            for level, ai in pred.arithmetic_intensity.items() if np.isfinite(ai) and ai > 0]


def roofline(ceil: Ceilings, points: pd.DataFrame, path: Path, device: str) -> str:
    """Hierarchical roofline: DRAM, L2, shared diagonals and FP32/FP64 flats; one dot per level."""
    fig, ax = plt.subplots(figsize=(8, 5.5))
    span = (min(1 / 64, points.ai.min() / 2), max(1024, points.ai.max() * 2)) if len(points) else (1 / 64, 1024)
    ai = np.geomspace(*span, 200)
    for c, style in ((ceil.dram_bytes_per_s, "C0-"), (ceil.l2_bytes_per_s, "C1-"), (ceil.smem_bytes_per_s, "C2-")):
        ax.plot(ai, np.minimum(ai * c.value, ceil.fp32_flops_per_s.value), style, lw=1.5,
                label=f"{c.name}: {c.value / 1e12:.2f} TB/s ({c.source.split(':')[0]})")
    for c, style in ((ceil.fp32_flops_per_s, "k-"), (ceil.fp64_flops_per_s, "k--")):
        ax.axhline(c.value, ls=style[1:], color="k", lw=1,
                   label=f"{c.name}: {c.value / 1e12:.1f} TFLOP/s ({c.source.split(':')[0]})")
    markers = {"dram": "o", "l2": "s", "l1": "^"}
    measured = bool(len(points)) and bool(np.isfinite(points.measured_flops).any())
    for i, (case, g) in enumerate(points.groupby("label")):
        for _, r in g.iterrows():
            if np.isfinite(r.measured_flops):
                ax.scatter(r.ai, r.measured_flops, marker=markers[r.level], color=f"C{(i + 3) % 10}", s=30,
                           edgecolor="k", lw=0.4)
            ax.scatter(r.ai, r.predicted_flops, marker=markers[r.level], facecolor="none",
                       edgecolor=f"C{(i + 3) % 10}", s=40)
        at = g.measured_flops.iloc[0] if np.isfinite(g.measured_flops.iloc[0]) else g.predicted_flops.iloc[0]
        ax.annotate(case, (g.ai.iloc[0], at), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)", ylabel="FLOP/s")
    ax.set_title(f"Hierarchical roofline, {device} ({'filled: measured; open: ' if measured else 'open: '}"
                 "predicted; o DRAM, s L2, ^ L1)", fontsize=9)
    low = np.nanmin(points[["measured_flops", "predicted_flops"]].to_numpy()) if len(points) else 1e10
    ax.set_xlim(*span)
    ax.set_ylim(min(1e10, low / 2), 2 * ceil.fp32_flops_per_s.value)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def sweep(table: pd.DataFrame, x: str, terms: list[str], path: Path, title: str) -> str:
    """Left: predicted time (labelled with the bound) and the `terms` columns (s), log; right: the bytes
    L1, L2 and DRAM move (global_bytes, l2_bytes, dram_bytes)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    t = table.sort_values(x)
    left.plot(t[x], t.time_s * 1e6, "k-o", label="predicted time")
    for xv, yv, b in zip(t[x], t.time_s * 1e6, t.bound, strict=True):
        left.annotate(b, (xv, yv), fontsize=7, xytext=(0, 5), textcoords="offset points", ha="center")
    for c in terms:
        left.plot(t[x], t[c] * 1e6, "--", label=c.removeprefix("term_").removesuffix("_s"))
    left.set(yscale="log", xlabel=x, ylabel="µs", title=f"{title}: time (labels: bound)")
    for col, style, label in (("global_bytes", "-o", "L1 (requested by the SMs)"), ("l2_bytes", "-s", "L2"),
                              ("dram_bytes", "-^", "DRAM")):
        right.plot(t[x], t[col], style, label=label)
    right.set(yscale="log", xlabel=x, ylabel="bytes", title=f"{title}: bytes per level")
    for ax in (left, right):
        ax.legend(fontsize=7)
        if t[x].min() > 0 and t[x].max() / t[x].min() >= 16:
            ax.set_xscale("log", base=2)
    return _save(fig, path)


def lines(df: pd.DataFrame, x: str, ys: list[tuple[str, str, str]], path: Path, title: str, xlabel: str,
          ylabel: str, group: str | None = None, logx: bool = False, logy: bool = False,
          marks: list[tuple[float, str]] | None = None, levels: list[tuple[float, str]] | None = None) -> str:
    """ys: (column, style, label). One line per group value when `group` is given; `marks` are
    vertical lines at x values, `levels` horizontal ones at y values."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups = df.groupby(group) if group else [("", df)]
    for i, (g, d) in enumerate(groups):
        d = d.sort_values(x)
        for col, style, label in ys:
            ax.plot(d[x], d[col], style, color=f"C{i}", label=f"{label} {group}={g}" if group else label)
    for value, label in marks or []:
        ax.axvline(value, color="grey", ls=":", lw=1)
        ax.annotate(label, (value, ax.get_ylim()[1]), fontsize=7, rotation=90, va="top", ha="right")
    for value, label in levels or []:
        ax.axhline(value, color="grey", ls="--", lw=1)
        ax.annotate(label, (0.01, value), xycoords=("axes fraction", "data"), fontsize=7, va="bottom", ha="left")
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.legend(fontsize=7)
    return _save(fig, path)


def bars(labels: list[str], series: dict[str, list[float]], path: Path, title: str, ylabel: str) -> str:
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(labels)), 4.5))
    width = 0.8 / len(series)
    x = np.arange(len(labels))
    for i, (name, values) in enumerate(series.items()):
        ax.bar(x + i * width, values, width, label=name)
    ax.set_xticks(x + 0.4 - width / 2, labels, rotation=60, ha="right", fontsize=7)
    ax.set(title=title, ylabel=ylabel)
    ax.legend(fontsize=7)
    return _save(fig, path)


def timeline(events: pd.DataFrame, path: Path, title: str) -> str:
    """Per-stream H2D / kernel / D2H spans of one run (stat = streamI.stage)."""
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.35 * events.streams.nunique() * 4))
    y = 0
    for s, g in events.groupby("streams"):
        times = {r.stat: r.value * 1e3 for _, r in g.iterrows()}
        n = int(s)
        for i in range(n):
            t = [times.get(f"stream{i}.{k}", np.nan) for k in ("h2d_start", "kernel_start", "d2h_start", "d2h_end")]
            for (a, b), color in zip(((t[0], t[1]), (t[1], t[2]), (t[2], t[3])), ("C0", "C2", "C1"), strict=True):
                ax.barh(y, b - a, left=a, color=color, height=0.8)
            y += 1
        ax.axhline(y - 0.5, color="k", lw=0.5)
        ax.annotate(f"{n} stream(s)", (0, y - 1), fontsize=7)
    ax.set(xlabel="ms since the first copy", yticks=[], title=title + " (blue H2D, green kernel, orange D2H)")
    return _save(fig, path)


def retention(curve: tuple[tuple[float, float], ...], points: pd.DataFrame, model: pd.DataFrame, path: Path,
              title: str, probes: tuple[tuple[tuple[tuple[float, float], ...], str, str], ...] = ()) -> str:
    """Share of a re-read working set L2 has lost by the next read, against the set's size: the
    measured cyclic stream (and `probes`: other measured curves, (curve, style, label)), the measured
    matmuls (one marker per variant) and the model's lines (`model`: mib, lost and optionally swept)."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for c, style, label in ((curve, "k-o", "probe.l2_read (measured: retention curve)"), *probes):
        if c:
            x, y = zip(*c, strict=True)
            ax.plot(np.array(x) / 2**20, y, style, ms=4, label=label)
    for i, (variant, g) in enumerate(points.groupby("variant")):
        ax.scatter(g.mib, g.lost, marker="osd^v<>"[i % 7], s=28, label=f"matmul B, {variant} (measured)")
    ax.plot(model.mib, model.lost, "r--", lw=1.5, label="model for matmul B: linear share (no replay)")
    if "swept" in model:
        ax.plot(model.mib, model.swept, "b:", lw=1.8, label="model for TILE 16's B, pitch on the line (its own "
                "measured curve where recorded, else the stream at 4/3 of B)")
    ax.set(xlabel="working set re-read (MiB)", ylabel="share lost between reads", title=title, ylim=(-0.05, 1.1))
    ax.legend(fontsize=7)
    return _save(fig, path)


def proportional(df: pd.DataFrame, x: str, y: str, flag: str, path: Path, title: str, xlabel: str, ylabel: str,
                 flagged: str) -> str:
    """Points that one rate should fit: log-log, each labelled, the line through the median ratio of
    the unflagged ones; flagged points drawn apart (open markers)."""
    fig, ax = plt.subplots(figsize=(7, 5))
    plain, marked = df[~df[flag]], df[df[flag]]
    ax.scatter(plain[x], plain[y], s=18, color="C0", label=f"counted as sent ({len(plain)})")
    ax.scatter(marked[x], marked[y], s=30, facecolor="none", edgecolor="C3", label=flagged)
    for _, r in df.iterrows():
        ax.annotate(r.label, (r[x], r[y]), fontsize=5.5, xytext=(3, -3), textcoords="offset points")
    if len(plain):
        ratio = float((plain[y] / plain[x]).median())
        xs = np.geomspace(df[x].min() / 1.5, df[x].max() * 1.5, 20)
        ax.plot(xs, ratio * xs, "k-", lw=0.8, label=f"one rate: {1 / ratio / 1e9:.0f} G/s busy")
        ax.fill_between(xs, 0.96 * ratio * xs, 1.04 * ratio * xs, color="grey", alpha=0.2, label="±4 %")
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(fontsize=7)
    return _save(fig, path)


def groups(df: pd.DataFrame, x: str, y: str, group: str, path: Path, title: str, xlabel: str, ylabel: str,
           label: str | None = None, logx: bool = False,
           overlays: tuple[tuple[np.ndarray, np.ndarray, str, str], ...] = (), legend_outside: bool = False) -> str:
    """Points, one marker and colour per `group` value; each point annotated with its `label` column;
    `overlays`: lines drawn over them, (x, y, style, label); `legend_outside`: the legend (a long one)
    beside the axes, not over the points."""
    fig, ax = plt.subplots(figsize=(11, 4.5) if legend_outside else (7, 4.5))
    for i, (g, d) in enumerate(df.groupby(group)):
        ax.scatter(d[x], d[y], s=26, marker="osd^v<>"[i % 7], color=f"C{i}", label=f"{g} ({len(d)})")
        for _, r in d.iterrows() if label else ():
            ax.annotate(str(r[label]), (r[x], r[y]), fontsize=5.5, xytext=(3, 2), textcoords="offset points")
    for xs, ys, style, name in overlays:
        ax.plot(xs, ys, style, lw=1.5, label=name)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if logx:
        ax.set_xscale("log", base=2)
    ax.legend(fontsize=7, **({"loc": "upper left", "bbox_to_anchor": (1.01, 1)} if legend_outside else {}))
    return _save(fig, path)


def partial_loss(points: pd.DataFrame, laws: list[tuple[np.ndarray, np.ndarray, str]], path: Path,
                 title: str) -> str:
    """Share of shared sectors lost (or written back) against the bytes between their writers
    (log-log): measured points (columns mib, lost, group; `open` draws a point hollow) and the fitted
    laws' lines (x, y, label), the first solid."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (g, d) in enumerate(points.groupby("group", sort=False)):
        hollow = d.get("open", pd.Series(False, index=d.index)).astype(bool)
        for sel, face in ((~hollow, f"C{i}"), (hollow, "none")):
            if sel.any():
                ax.scatter(d.mib[sel], d.lost[sel], s=28, marker="osd^v<>"[i % 7], facecolor=face,
                           edgecolor=f"C{i}", label=f"{g} ({int(sel.sum())})")
    for (x, y, label), style in zip(laws, ("k-", "k--", "k:"), strict=False):
        ax.plot(x, y, style, lw=1.2, label=label)
    ax.set(xscale="log", yscale="log", xlabel="traffic between the two writers (MiB)",
           ylabel="share of shared sectors", title=title, ylim=(1e-3, 1.5))
    ax.legend(fontsize=7)
    return _save(fig, path)


def ranges(labels: list[str], low: list[float], high: list[float], points: dict[str, list[float]], path: Path,
           title: str, ylabel: str) -> str:
    """A vertical bar from low to high per label, with named point series over it."""
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(labels)), 4.5))
    x = np.arange(len(labels))
    ax.bar(x, np.subtract(high, low), 0.5, bottom=low, color="#cfd8e3", label="range measured")
    for (name, values), marker in zip(points.items(), "o^sx", strict=False):
        ax.plot(x, values, marker, label=name)
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    ax.set(title=title, ylabel=ylabel)
    ax.legend(fontsize=7)
    return _save(fig, path)
