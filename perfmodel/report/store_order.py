"""The transpose page's store-order section: the stamped row transposes' write order (experiments/
store_order.py) against the sectors two blocks share that L2 loses first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from ..models.written import lost_at
from ..store_order import (
    CALIBRATION,
    TILE_BLOCK_BYTES,
    lost_at_tickets,
    measured_lost,
    partner_distance,
    recorded,
    store_spread,
)
from . import figures
from .page import Page


def order_table(device_key: str, lost: Callable[[float], float], sms: int) -> pd.DataFrame:
    """Per recorded stamped launch with shared sectors: the measured lost share and the law's at launch
    order, at the tickets' order and at the model's recorded spread (`lost`: the law, bytes -> share)."""
    spread = store_spread(device_key)
    rows = []
    for s in recorded(device_key):
        if s.rows % 8 == 0:
            continue  # rows on a sector: nothing shared
        d = partner_distance(s)
        model = lost_at(lost, d, TILE_BLOCK_BYTES, spread.blocks(s.blocks_per_sm, sms))[0] if spread else np.nan
        rows.append({"launch": s.name, "shape": f"{'swapped ' if s.swapped else ''}{s.rows} x {s.cols}",
                     "swapped": s.swapped, "blocks_per_sm": s.blocks_per_sm,
                     "calibration": s.name.startswith(CALIBRATION),
                     "measured": measured_lost(s), "launch_order": lost(d * TILE_BLOCK_BYTES),
                     "tickets": lost_at_tickets(s, lost), "model": model})
    return pd.DataFrame(rows)


def store_order_section(device_key: str, ceil, sms: int, fast_errors: pd.Series, folder: Path, page: Page) -> str:
    """`fast_errors`: the model's time errors on the padded row transposes into rows off a sector at
    6-8 blocks per SM (report.transpose.padded_fast)."""
    law = ceil.partial_law
    t = order_table(device_key, law.lost, sms) if law else pd.DataFrame()
    if not len(t):
        return ""
    long = pd.concat([t.assign(ratio=t[k] / t.measured, by=name) for k, name in
                      (("launch_order", "law at launch order"), ("tickets", "law at the tickets' order"),
                       ("model", "law over the model's spread"))])
    long = long[~long.swapped]
    page.figures.append(("store order", figures.groups(
        long, "blocks_per_sm", "ratio", "by", folder / "store_order.png",
        "Padded row transposes: the law's lost share over the measured (ncu)", "blocks per SM",
        "law / measured", label="shape")))
    plain = t[~t.swapped]
    eight, held = plain[plain.blocks_per_sm == 8], plain[~plain.calibration]
    swapped = t[t.swapped]

    def span(s: pd.Series) -> str:
        return f"{s.min():.2f}-{s.max():.2f}x"

    return (" In what order the blocks write (experiments/store_order.py: stamped twins of the row "
            "transpose take a ticket as their stores begin, under ncu): at 2 blocks per SM the next block "
            "row writes within a few dozen tickets of its launch distance (268 blocks at 8556 columns); at 8 "
            "the order spreads over hundreds of blocks - far more into rows off a sector than into aligned "
            "ones - and the far pairs lose most. The split_store law at the tickets' distances gives the "
            f"padded kernels' lost share within {span(plain.tickets / plain.measured)} (figure below), where "
            f"launch order gives {span(eight.launch_order / eight.measured)} at 8 blocks per SM. The model "
            f"draws the spread from the {CALIBRATION.split('_')[1]} launches (per blocks per SM, in resident "
            "blocks) for every kernel that stores after a barrier; on the other shapes it gives "
            f"{span(held.model / held.measured)} of the measured share, and the suite's padded row transposes "
            f"at 6-8 blocks per SM come to {100 * fast_errors.min():+.0f}…{100 * fast_errors.max():+.0f} % "
            "(each fill costs what the law says at the wider distances; these kernels pay more, and stay "
            "fast). Not explained: the swapped grid's tickets lie as far apart, and it loses "
            f"{span(swapped.measured / swapped.tickets)} of what the law says at them - what lies between two "
            "writers (there the same output rows) matters as well as how much.")
