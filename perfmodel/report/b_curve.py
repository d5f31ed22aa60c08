"""The matmul page's section on TILE 16's own B curve (perfmodel.b_curve): every recorded family's loss
against B's size beside the model's lines, and a paragraph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..b_curve import (
    B_K,
    CURVES,
    FAMILY,
    FINE,
    JUMP,
    PITCH,
    SHAPES,
    SWEPT_TILE,
    WINDOW,
    k_exponent,
    loss_at,
    tile16_points,
)
from ..devices import DeviceSpec
from ..measurements import param
from ..models import case_occupancy
from ..suite.registry import get
from . import figures
from .page import Page, b_band_rows

RAMP_MIB = (30, 42)  # where the families lie on one curve (past it each jumps at its own size)
BAND_FROM_BYTES = 20 << 20  # the suite rows counted: B from 20 MiB to the whole L2 (tests/test_recorded_dram.py)


def b_curve_section(dev: DeviceSpec, table: pd.DataFrame, folder: Path, page: Page) -> str:
    """A figure and a paragraph; empty where no curve is recorded for the device."""
    pts = tile16_points(dev.key, CURVES, PITCH, SHAPES, JUMP).copy()
    if pts.empty or loss_at(dev.key, 0.0, float(pts.b_bytes.min())) is None:
        return ""
    pts["mib"] = pts.b_bytes / 2**20
    pts["model"] = [loss_at(dev.key, s, b, k) for s, b, k in zip(pts.share, pts.b_bytes, pts.k, strict=True)]
    pts["family"] = ["k and m swept at 39-43.5 MiB" if f == JUMP else
                     f"m={m}, k={k}" + (f", {32 * s:.0f}/32 across" if s else "")
                     + (" (the model's)" if (m, k) == FAMILY and (f == CURVES or s == pts.share.max()) else "")
                     for m, k, s, f in zip(pts.m, pts.k, pts.share, pts.folder, strict=True)]
    mib = np.linspace(pts.mib.min(), pts.mib.max(), 120)
    shares = sorted(pts.share.unique())
    styles = ("k-", "k:", "k--", "k-.")
    overlays = tuple((mib, np.array([loss_at(dev.key, s, m * 2**20) for m in mib], dtype=float), styles[i % 4],
                      f"model, {32 * s:.0f}/32 of the segments across a line") for i, s in enumerate(shares))
    page.figures.append(("TILE 16's own B curve", figures.groups(
        pts, "mib", "loss", "family", folder / "matmul_b_curve.png",
        "TILE 16: share of B lost per re-read (median over allocations)", "B (MiB)", "share lost per re-read",
        overlays=overlays)))
    jump = pts[(pts.folder == JUMP) & pts.mib.between(40.5, 41.5) & (pts.share > 0)]
    lockstep = jump[(jump.k == 2560) & (jump.m == 2048)]
    checks = pts[~pts.family.str.endswith("(the model's)") & pts.mib.between(*RAMP_MIB) & (pts.folder != JUMP)]
    off = (checks.model - checks.loss).abs()
    band = b_band_rows(table, "matmul.tiled", BAND_FROM_BYTES, dev.l2_bytes)
    band = band[param(band, "tile").eq(SWEPT_TILE)]
    return (f" TILE 16's own B curve (figure 'TILE 16's own B curve'; experiments/b_curve.sh): TILE 16 at m = k ="
            f" {FAMILY[0]}, a shape in no suite or held-out set, with B from {pts.mib.min():.0f} to"
            f" {pts.mib.max():.0f} MiB, each size allocated a few times under ncu (the median counts). The larger"
            f" k, the less lost at one B: the model scales the curve by (k / {FAMILY[1]})^{k_exponent(dev.key):.2f},"
            " fitted on four other aligned families. B's pitch moves it: where a block's 64-byte row segment"
            " crosses a 128-byte line more is lost, in proportion to the share crossing (the model scales the"
            " aligned curve by the widest measured share's ratio). The other families and pitches lie within"
            f" {off.median():.3f} of the model's share lost at the median, {off.max():.2f} at worst, from"
            f" {RAMP_MIB[0]} to {RAMP_MIB[1]} MiB; past that each family jumps towards all of B at its own size"
            " (40-49 MiB). The model reads this curve for TILE 16's B"
            f" (models.dram.swept_loss): the suite's {len(band)} TILE 16 rows with B in the band"
            f" {100 * band.rel_error.abs().mean():.0f} % off on average, {int((band.rel_error.abs() <= 0.05).sum())}"
            " within 5 %."
            + (f" Where the jump comes is not modelled: at 41 MiB (B's pitch a quarter off) k = 2560 - 4.0 block"
               f" rows in flight - loses {lockstep.loss.iloc[0]:.2f} of B where other k between"
               f" {jump.k.min()} and {jump.k.max()} lose {jump[jump.k != 2560].loss.min():.2f}-"
               f"{jump[jump.k != 2560].loss.max():.2f} (the model {lockstep.model.iloc[0]:.2f}), the more the more"
               f" block rows the grid has ({jump[jump.k == 2560].loss.min():.2f}-{jump[jump.k == 2560].loss.max():.2f}"
               " at m = 1024-4096); with B's pitch on the line 3-5 rows in flight lose alike (b_curve_rows)."
               if len(lockstep) else "") + _branches(dev))


def _branches(dev: DeviceSpec) -> str:
    """A sentence on the two states at 45 MiB (b_curve.B_K, WINDOW, FINE: m = 1536); empty where unrecorded."""
    at45 = tile16_points(dev.key, B_K, WINDOW)
    at45 = at45[(at45.m == 1536) & (at45.b_bytes / 2**20).between(44.5, 45.5)]
    fine = tile16_points(dev.key, FINE)
    if at45.empty or fine.empty:
        return ""
    at45 = at45.groupby(["n", "k"], as_index=False).loss.median()  # the sweeps share 1536 x 5120 x 2304
    jumped, kept = at45[at45.loss > 0.7], at45[at45.loss < 0.61]
    occ, _ = case_occupancy(dev, get("matmul.tiled"), get("matmul.tiled").bind(m=1536, tile=SWEPT_TILE))
    rows = occ.blocks_per_sm * dev.sm_count / (kept.n / SWEPT_TILE)  # resident blocks over a row's
    at_4608 = fine[fine.n == 4608]
    return (" Nor by B and the rows in flight together (m = 1536; b_curve_k, b_curve_window, b_curve_pitch_fine):"
            f" at 45 MiB {len(jumped)} shapes had jumped ({jumped.loss.min():.2f}-{jumped.loss.max():.2f} lost) and"
            f" {len(kept)} kept to the curve ({kept.loss.min():.2f}-{kept.loss.max():.2f}; the model"
            f" {loss_at(dev.key, 0.0, 45 * 2**20, 2560):.2f}), among them n = 4336 and 4560 between jumped shapes in"
            f" rows in flight ({rows.min():.2f}-{rows.max():.2f} kept); at n = 4608 every k from {at_4608.k.min()} to"
            f" {at_4608.k.max()} jumped ({at_4608.loss.min():.2f}-{at_4608.loss.max():.2f}) - two states, the same at"
            " every allocation, which one a property of the shape the model does not know.")
