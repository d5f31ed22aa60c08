"""The matmul page's section on COARSE 4 and 8's own B curves (perfmodel.coarse_curve): every recorded
family's loss against its group footprint beside the curves the model reads, and a paragraph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..b_curve import FAMILY
from ..coarse_curve import OWN, _curve, coarse_points
from ..devices import DeviceSpec
from ..measurements import param
from . import figures
from .page import Page, b_band_rows


def coarse_curve_section(dev: DeviceSpec, table: pd.DataFrame, folder: Path, page: Page) -> str:
    """A figure and a paragraph; empty where no curve is recorded for the device."""
    pts = coarse_points(dev.key).copy()
    if pts.empty:
        return ""
    pitched = coarse_points(dev.key, pitched=True)
    pts = pd.concat([pts, pitched], ignore_index=True)
    pts["mib"] = pts.group_bytes / 2**20
    pts["family"] = [f"COARSE {c}, m={m}, k={k}" + (", off the line" if share else "")
                     + (" (the model's)" if (m, k) == FAMILY else "")
                     for c, m, k, share in zip(pts.coarse, pts.m, pts.k, pts.share, strict=True)]
    overlays = []
    for coarse, style in zip(OWN, ("k--", "k-"), strict=True):
        _, xs, ys = _curve(dev.key, coarse)
        if xs:
            overlays.append((np.array(xs) / 2**20, np.array(ys), style, f"model, COARSE {coarse}"))
    page.figures.append(("COARSE 4 and 8's own B curves", figures.groups(
        pts, "mib", "loss", "family", folder / "matmul_coarse_curve.png",
        "COARSE 4 and 8: share of B lost per re-read (median over allocations)",
        "B and one group's A strips (MiB)", "share lost per re-read", overlays=tuple(overlays))))
    band = b_band_rows(table, "matmul.coarsened", 16 << 20, dev.l2_bytes)
    band = band[param(band, "coarse").isin(OWN)]
    at24 = pts[(pts.coarse == 8) & (pts.share == 0) & (pts.m == FAMILY[0])
               & pts.b_bytes.between(23.5 * 2**20, 24.5 * 2**20)]
    return (" COARSE 4 and 8's own B curves (figure 'COARSE 4 and 8's own B curves'; experiments/b_curve.sh,"
            f" b_coarse_specs.txt): m = k = {FAMILY[0]} with B from {pts.b_bytes.min() / 2**20:.0f} to"
            f" {pts.b_bytes.max() / 2**20:.0f} MiB, four allocations a size under ncu (the median counts)."
            " COARSE 8 - one block an SM, all in step - loses B well inside one L2 partition"
            + (f" ({at24.loss.max():.2f} of it at 24 MiB)" if len(at24) else "")
            + "; at one B a larger k loses more. Between two groups' reads of one B slice L2 takes in all of B and"
            " the A strips of one group's block rows: over that footprint (models.dram.group_bytes) the other"
            " families lie near the calibration's curve, which the model reads up to where it has lost all of B"
            " (past that the schedule replay, which knows A's reuse). The suite's"
            f" {len(band)} COARSE 4 and 8 rows with B from 16 MiB to the whole L2:"
            f" {100 * band.rel_error.abs().mean():.1f} % off on average, {int((band.rel_error.abs() <= 0.05).sum())}"
            " within 5 %. Not TILE 32, COARSE 1 or 2: over the same footprint their curves missed the suite's"
            " and held-out shapes by 10-42 %, the replay by 5-14 % - more of their lines split between two"
            " blocks."
            + (f" Off the line (n one more: {len(pitched)} shapes, b_coarse_pitch_specs.txt) COARSE 8 loses less"
               " than aligned from its onset until both have lost all of B, COARSE 4 about as much; read in"
               " proportion to the share of the rows off the line, either left fewer held-out rows within 5 %,"
               " so the model reads the aligned curves." if len(pitched) else ""))
