"""Where a matmul's arrays lie in physical memory, and how much of B L2 keeps: experiments/address_sweep.sh
allocates each band shape ten times (behind pads of 0-130 MiB) and counts DRAM reads of two launches per
allocation under ncu. The two launches of one allocation agree; allocations do not - TILE 32 at 3072^3 read
681-963 MB over 30 allocations on three H200 cards (2026-12-02). L2 places lines by their physical address,
so a B between one L2 partition and the whole L2 keeps more or less of itself depending on the pages it got:
for such shapes one run's count is one draw, and a model that cannot know the pages predicts the spread's
middle at best."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pandas as pd

from .devices import DeviceSpec
from .devices import device as lookup
from .measurements import DATA_DIR
from .suite.plan import case_id
from .suite.profile import launch_values

FOLDER = "address"  # reports/data/<device>/checks/address/<UTC of the call>/
DRAM_READS = "dram__bytes_read.sum"


def card_uuid(nvidia_smi_csv: Path) -> str:
    """The card a device call ran on, from the nvidia-smi query it saved."""
    return re.search(r"GPU-[0-9a-f-]+", nvidia_smi_csv.read_text()).group(0)


def allocations(device: str = "h200", folder: str = FOLDER) -> pd.DataFrame:
    """One row per allocation: call, card, case, case_id, params (JSON), pad_mib, first_bytes and
    second_bytes (ncu's dram__bytes_read.sum of its two launches), read_bytes (their mean).
    `folder`: the checks folder the sweeps lie in (address; b_curve: experiments/b_curve.sh)."""
    out = launch_counts(device, folder, DRAM_READS).rename(columns={"first": "first_bytes", "second": "second_bytes"})
    out["read_bytes"] = (out.first_bytes + out.second_bytes) / 2
    return out


def launch_counts(device: str, folder: str, metric: str) -> pd.DataFrame:
    """One row per allocation of an experiments/address_sweep.sh folder: call, card, case, case_id, params
    (JSON), pad_mib, first and second (ncu's `metric` on its two launches, in ncu's base unit)."""
    rows = []
    for call in sorted((DATA_DIR / lookup(device).key / "checks" / folder).glob("*T*Z")):
        card = card_uuid(call / "card.csv")
        counts = [v for f in sorted(call.glob("ncu-*.csv*"), key=lambda p: int(p.name.split("-")[1].split(".")[0]))
                  for v in launch_values(f, metric)]
        lines = [line for line in (call / "addresses.txt").read_text().splitlines() if line.strip()]
        if len(counts) != 2 * len(lines):
            raise ValueError(f"{call}: {len(counts)} launches counted for {len(lines)} allocations of two")
        for j, line in enumerate(lines):
            f = dict(kv.split("=", 1) for kv in line.split())
            params = {k: int(v) for k, v in (kv.split("=") for kv in f["params"].split(","))}
            rows.append({"call": call.name, "card": card, "case": f["case"], "case_id": case_id(f["case"], params),
                         "params": json.dumps(params, sort_keys=True), "pad_mib": int(f["pad_mib"]),
                         "first": counts[2 * j], "second": counts[2 * j + 1]})
    return pd.DataFrame(rows, columns=["call", "card", "case", "case_id", "params", "pad_mib", "first", "second"])


def spread(device: str = "h200") -> pd.DataFrame:
    """Per case: the allocations' lowest, median and highest DRAM reads, their spread ((max - min) / median)
    and the largest gap between one allocation's two launches (as a share of their mean)."""
    a = allocations(device)
    a["launch_gap"] = (a.first_bytes - a.second_bytes).abs() / a.read_bytes
    g = a.groupby(["case_id", "case", "params"], sort=False)
    out = g.agg(allocations=("read_bytes", "size"), low_bytes=("read_bytes", "min"),
                median_bytes=("read_bytes", "median"), high_bytes=("read_bytes", "max"),
                launch_gap=("launch_gap", "max")).reset_index()
    out["spread"] = (out.high_bytes - out.low_bytes) / out.median_bytes
    return out


PLACED_BY_PAGES = ("matmul.tiled", "matmul.coarsened")  # the kernels the sweep measured


def against_model(device: str = "h200") -> pd.DataFrame:
    """`spread` with the model's DRAM reads beside: predicted_bytes, error (over the allocations' median) and
    inside (within 5 % of the allocations' range)."""
    from .models import predict

    s = spread(device)
    s["predicted_bytes"] = [predict(r.case, device, **json.loads(r.params)).dram_read_bytes for r in s.itertuples()]
    s["error"] = s.predicted_bytes / s.median_bytes - 1
    s["inside"] = s.predicted_bytes.between(0.95 * s.low_bytes, 1.05 * s.high_bytes)
    return s


@functools.cache
def _recorded_spread(device_key: str) -> dict[str, float]:
    s = spread(device_key)
    s = s[s.case.isin(PLACED_BY_PAGES)]
    return dict(zip(s.case_id, s.spread, strict=True))


def caution(dev: DeviceSpec, case: str, params: dict[str, int]) -> str | None:
    """A note for a prediction whose DRAM reads hang on the pages its arrays got: a tiled or coarsened matmul
    whose B (k x n floats) lies between one L2 partition and the whole L2, where the device's address sweep is
    recorded."""
    if case not in PLACED_BY_PAGES or not dev.l2_partition_bytes <= 4 * params["k"] * params["n"] <= dev.l2_bytes:
        return None
    measured = _recorded_spread(dev.key)
    if not measured:
        return None
    own = measured.get(case_id(case, params))
    where = (f"this shape's allocations read {100 * own:.0f} % apart" if own is not None else
             f"allocations of band shapes read up to {100 * max(measured.values()):.0f} % apart")
    return (f"B between one L2 partition and the whole L2: DRAM reads depend on the physical pages the arrays get - "
            f"{where} (perfmodel.allocation)")
