"""L2's retention, read off the probes under ncu: what a buffer read again and again loses between
passes (one reader, shared, split lines; per pass count and per run), and what a store stream cycling
over its lines loses between visits (checks/store_footprints)."""

from __future__ import annotations

import functools
import json

import numpy as np
import pandas as pd

from ..devices import DeviceSpec
from ..measurements import load, written_back
from .base import RETENTION_PASSES, Ceiling, _ncu_read_curve


def _lost_per_pass(passes: int, p: dict, read: float) -> tuple[float, float] | None:
    """A retention probe's launch as a curve point (buffer bytes, share lost per pass after the first),
    if it ran `passes` passes with readers changing (mult = 1, the same reader each pass, is a control)."""
    size = 4 * p["n"]
    if p.get("passes", 1) != passes or p.get("mult", 0) == 1:
        return None
    return size, min(max((read / size - 1) / (passes - 1), 0.0), 1.0)


def _allocation_draws(device_key: str, case: str) -> pd.DataFrame:
    """`case`'s launches in the allocation sweeps (perfmodel.allocation: the same launch behind pads of
    0-130 MiB), one draw per allocation: case_id (tagged with its call), params and value
    (its two launches' mean DRAM reads)."""
    from ..allocation import allocations

    a = allocations(device_key)
    a = a[a.case == case]
    return pd.DataFrame({"case_id": a.case_id + "@" + a.call, "params": a.params, "value": a.read_bytes})


def _l2_retention(data, case: str = "probe.l2_read", key: str = "l2_retention",
                  what: str = "a re-read buffer", draws: pd.DataFrame | None = None) -> dict[str, object]:
    """`case` over buffers of several sizes, several passes each, under ncu: the share of the buffer
    read from DRAM again on each pass after the first, by the buffer's size - one curve per pass
    count, the main one at RETENTION_PASSES (probe.l2_read_shared: its launches with readers changing,
    mult != 1; mult = 1 is the stream again, a control). `draws`: the same launches in other allocations,
    each a y of its own at its size (where the arrays lie moves a band size's count by up to 10 %)."""
    by_passes: dict[int, tuple] = {}
    used: list[str] = []
    for n in sorted({json.loads(q).get("passes", 1) for q in data[data.case == case].params} - {1}):
        curve, cases = _ncu_read_curve(data, case, functools.partial(_lost_per_pass, n), draws)
        if len(curve) >= 2:  # a count at one size is no curve (20 passes: the L2 bandwidth probe at 32 MiB)
            by_passes[n], used = curve, used + cases
    curve = by_passes.pop(RETENTION_PASSES, ())
    if len(curve) < 4:
        return {}
    pooled = sum("@" in c for c in used)
    used = sorted({c.split("@")[0] for c in used})
    half = float(np.interp(0.5, [y for _, y in curve], [x for x, _ in curve]))
    return {key: curve, f"{key}_passes": tuple(sorted(by_passes.items())), f"{key}_probe": Ceiling(
        f"L2 retention: footprint of {what} that loses half of it between passes ({RETENTION_PASSES} passes)",
        half, "B", f"measured: {case} under ncu at {len(curve)} sizes, "
        f"{int(curve[0][0]) >> 20}-{int(curve[-1][0]) >> 20} MiB"
        + (f"; also at {', '.join(str(n) for n in sorted(by_passes))} passes" if by_passes else "")
        + (f"; pooled with {pooled} allocations of the same launches (perfmodel.allocation)" if pooled else ""),
        tuple(sorted(used)))}


STORE_FOOTPRINTS = "store_footprints"  # reports/data/<device>/checks/: probe.store_lines cycling over its lines


def _line_writes(case, p: dict) -> int:
    """probe.store_lines' (request, line) writes: every warp, every pass, `lines` lines a request."""
    launch = case.launch(p)
    return launch.blocks * launch.warps_per_block * p["passes"] * p["lines"]


def _l2_store_loss(dev: DeviceSpec) -> dict[str, object]:
    """probe.store_lines writing whole sectors over footprints of 8-256 MiB of lines, many visits each,
    in the write-back pass (checks/store_footprints): every dirty line reaches DRAM once, during the
    kernel or in the flush after it, so the write-backs beyond the first writes are the revisits L2 had
    lost - their share of the revisits, by the bytes of the lines cycled over."""
    from ..measurements import DATA_DIR
    from ..suite.registry import get

    data = load(STORE_FOOTPRINTS, DATA_DIR / dev.key / "checks")
    wb = written_back(data)
    sel = data[(data.case == "probe.store_lines") & data.case_id.isin(wb.index)].drop_duplicates("case_id")
    pts, cases = [], []
    for cid, params in zip(sel.case_id, sel.params, strict=True):
        p = json.loads(params)
        if p["lines"] != 4:  # one whole sector of each of 4 lines a request
            continue
        writes = _line_writes(get("probe.store_lines"), p)
        first = min(p["footprint_lines"], writes)
        if writes <= first:
            continue
        lost = (wb.written_bytes[cid] / 32 - first) / (writes - first)
        pts.append((128.0 * p["footprint_lines"], min(max(float(lost), 0.0), 1.0)))
        cases.append(cid)
    if len(pts) < 4:
        return {}
    curve = tuple(sorted(pts))
    half = float(np.interp(0.5, [y for _, y in curve], [x for x, _ in curve]))
    return {"l2_store_loss_curve": curve, "l2_store_loss_probe": Ceiling(
        "L2 store loss: bytes of lines a store stream cycles over that lose half its revisits", half, "B",
        f"measured: probe.store_lines in the write-back pass at {len(curve)} footprints, "
        f"{int(curve[0][0]) >> 20}-{int(curve[-1][0]) >> 20} MiB of lines (checks/{STORE_FOOTPRINTS})",
        tuple(sorted(cases)))}


def retention_by_run(data, case: str) -> dict[str, tuple[tuple[float, float], ...]]:
    """`case`'s retention curve at RETENTION_PASSES (readers changing where it has mult), one per run:
    run id -> ((footprint bytes, share lost per pass), ...): probes compared within one run (the split
    readers beside the shared ones), and each sweep's own curve drawn beside the merged one."""
    lost = functools.partial(_lost_per_pass, RETENTION_PASSES)
    runs = data[data.case == case].run_id.unique()
    return {run: curve for run in sorted(runs) if (curve := _ncu_read_curve(data[data.run_id == run], case, lost)[0])}
