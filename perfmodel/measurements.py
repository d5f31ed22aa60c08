"""Measurements: the tidy table (one row per case x metric x statistic) and its provenance.

Rows are written by the runner on the GPU and read back here for comparison and reports.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT / "reports" / "data"
COLUMNS = ("run_id", "study", "case", "case_id", "params", "metric", "unit", "stat", "value", "source",
           "device", "driver", "cuda", "pycuda", "sm_clock_mhz", "commit", "utc")


@dataclass(frozen=True)
class Provenance:
    run_id: str
    device: str
    driver: str
    cuda: str
    pycuda: str
    sm_clock_mhz: str
    commit: str
    utc: str


@dataclass(frozen=True)
class Measurement:
    """One measured value of one case."""

    study: str
    case: str
    case_id: str
    params: str  # JSON
    metric: str
    unit: str
    stat: str
    value: float
    source: str  # events | ncu | driver | compiler | clock64 | check


def git_commit() -> str:
    if os.environ.get("PERFMODEL_COMMIT"):
        return os.environ["PERFMODEL_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("PERFMODEL_COMMIT", "unknown")


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Recorder:
    """Appends rows to a CSV, flushing each batch; `done` lists case_ids already recorded."""

    def __init__(self, path: Path, provenance: Provenance) -> None:
        self.path, self.prov = Path(path), provenance
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        self.done: set[tuple[str, str]] = set()
        if not fresh:
            with self.path.open() as f:
                for row in csv.DictReader(f):
                    self.done.add((row["source"], row["case_id"]))
        self._file = self.path.open("a", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS)
        if fresh:
            self._writer.writeheader()

    def write(self, rows: Iterable[Measurement]) -> None:
        prov = asdict(self.prov)
        for m in rows:
            self._writer.writerow({**prov, **asdict(m)})
            self.done.add((m.source, m.case_id))
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def load(device: str = "h200", data_dir: Path | None = None) -> pd.DataFrame:
    """Every recorded measurement of a device (the run tables under reports/data/<device>/, plain or
    gzip-compressed CSV)."""
    import pandas as pd

    folder = (data_dir or DATA_DIR) / device
    files = sorted([*folder.glob("*.csv"), *folder.glob("*.csv.gz")])
    frames = [pd.read_csv(f, dtype={"commit": str, "run_id": str}) for f in files if f.stat().st_size]
    frames = [f for f in frames if set(COLUMNS) <= set(f.columns)]
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    return pd.concat(frames, ignore_index=True)


def param(frame: pd.DataFrame, key: str) -> pd.Series:
    """Each row's parameter `key` (None where its case has none), parsed from the params JSON."""
    return frame.params.map(lambda s: json.loads(s).get(key))


READ_FLUSH = "events-read-flush"
# warm launches timed behind a spinning warp (suite.gpu.Spinner): earlier warm runs found the GPU
# idle at the start event and timed the host's launch latency too (probe.launch: 8-15 us, 2.6-2.9 us so)
BUSY_WARM = "events-busy-warm"
PREFERRED_SOURCES = (BUSY_WARM, READ_FLUSH)


def median_times(data: pd.DataFrame) -> pd.Series:
    """case_id -> CUDA-event time in seconds: the median over recorded runs of each run's median,
    from the preferred runs where a case has them - after a reading flush (a flush by writing leaves
    dirty lines the kernel must write back first: +2..8 us on small kernels that read,
    flush_check.py), or, for warm launches, behind a spinning warp."""
    t = data[(data.metric == "time_s") & (data.stat == "median")]
    out = t.groupby("case_id").value.median()
    for source in reversed(PREFERRED_SOURCES):
        better = t[t.source == source].groupby("case_id").value.median()
        out.loc[better.index] = better
    return out


WRITEBACK_SOURCE = "ncu-writeback"  # the write-back pass (perfmodel.suite.profile.WRITEBACK)
# runs before the flush wrote nothing (suite.gpu.FLUSH_KERNEL) flushed with read_f4, whose 1 MiB sink
# stayed dirty; their rows carry no flush_sink_bytes
READ_F4_SINK_BYTES = 1056 * 256 * 4


def written_back(data: pd.DataFrame) -> pd.DataFrame:
    """case_id -> the write-back pass's DRAM bytes: in_kernel_bytes (written while it ran), after_bytes
    (by the flush after it), read_bytes, and written_bytes (the two writes, less what the flush before it
    left dirty). Per case the median over its runs that flushed twice before the kernel (they record the
    flush's sink; runs at the same footprint move ~5 %: 17.3 and 18.2 MB for a 2048² row transpose), else
    its newest run (the first runs flushed once)."""
    import pandas as pd

    cols = ["in_kernel_bytes", "after_bytes", "read_bytes", "written_bytes"]
    need = ["dram__bytes_write.sum", "dram__bytes_write_after.sum", "dram__bytes_read.sum"]
    per_run = data[data.source == WRITEBACK_SOURCE].pivot_table(
        index=["case_id", "run_id"], columns="metric", values="value", aggfunc="last")
    if not set(need) <= set(per_run.columns):
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame({c: per_run[m] for c, m in zip(cols, need, strict=False)}).dropna()
    sink = per_run.get("flush_sink_bytes", pd.Series(float("nan"), index=per_run.index)).reindex(out.index)
    out["written_bytes"] = out.in_kernel_bytes + out.after_bytes - sink.fillna(READ_F4_SINK_BYTES)
    twice = sink.notna()
    any_twice = twice.groupby(level="case_id").transform("any")
    runs = out[twice | ~any_twice].sort_index(level="run_id").groupby(level="case_id")
    median, newest = runs.median(), runs.last()
    once = ~any_twice.groupby(level="case_id").first().reindex(median.index)
    return median.where(~once, newest, axis=0)[cols]


# (what, metric, source, smallest median counted): quantities recorded in more than one run
REPEATED = [("time (CUDA events, after the reading flush)", "time_s", READ_FLUSH, 0.0),
            ("DRAM read bytes (ncu)", "dram__bytes_read.sum", "ncu", 1e6),
            ("DRAM write bytes during the kernel (ncu), 16 MB and more", "dram__bytes_write.sum", "ncu", 16e6),
            ("L2 read sectors the slices count (ncu)", "lts__t_sectors_srcunit_tex_op_read.sum", "ncu", 1e4)]


def run_to_run(data: pd.DataFrame) -> pd.DataFrame:
    """How much the same case's measurement moves between recorded runs: (max - min) / median of its
    per-run values, over the cases measured in two runs or more - the floor under any model error."""
    import pandas as pd

    rows = []
    for what, metric, source, floor in REPEATED:
        t = data[(data.metric == metric) & (data.source == source) & data.stat.isin(["median", "value"])]
        per_run = t.groupby(["case_id", "run_id"]).value.median().groupby("case_id")
        g = per_run.agg(["count", "min", "max", "median"])
        g = g[(g["count"] >= 2) & (g["median"] > floor)]
        spread = (g["max"] - g["min"]) / g["median"]
        if len(spread):
            rows.append({"quantity": what, "cases": len(spread), "median_spread": spread.median(),
                         "p90_spread": spread.quantile(0.9), "max_spread": spread.max()})
    return pd.DataFrame(rows)
