"""How much of B a band matmul loses between the block rows that re-read it, measured on the kernel itself
(experiments/b_curve.sh): TILE 16 at m = k = 1920 - a shape family in no suite or held-out set - with B
from 23 to 56 MiB, a few allocations a size under ncu (their median: where the arrays lie moves the count,
perfmodel.allocation). A point's loss is what its DRAM reads say of B's re-reads: (reads - A) / B - 1 over
the streams - 1 re-reads (models.dram.matmul_operands).

Measured 2026-12-02 (cards GPU-e6adbd78, GPU-c9770d01): TILE 16 loses B along one curve whatever m and k -
five families (m, k = 1024-3072) within ~0.05 of it up to 42 MiB - rising from ~5 % at 30 MiB to ~55 % at
44, then jumping towards all of it between 43 and 49 MiB where each family jumps at its own size. The read
stream at 4/3 of B (the rule before) has the onset right but jumps at 37-38 MiB: +45..+69 % at 37-45 MiB.
Where B's pitch (4n bytes) puts a block's 64-byte row segment across a 128-byte line (`straddle_share`), more
is lost: 1.5-1.7x at 32-34 MiB with 15/32 of the segments across, ~1.3x with 1/4 - linear in the share
between the two measured curves (b_curve_pitch: shares 0, 1/4 and 15/32 at m = k = 1920): the aligned
curve times their ratio at B, in proportion to the share.

Not modelled: where the jump comes. Swept at 41 MiB with a quarter of B's segments across a line (JUMP),
k = 2560 (n = 4200: 4.0 block rows in flight, 1056 resident blocks over 262.5 a row) loses 0.77 of B where
k = 1536-3328 lose 0.42-0.58, more the more block rows the grid has (m = 1024-4096: 0.67-0.85); held-out set
35's three shapes at 40.7-41.2 MiB (pitch off the line, 3.6-4.1 rows in flight) lost 0.79-0.80, the model
0.43-0.47. Not the rows in flight alone: aligned, 3, 3.5, 4, 4.5 and 5 rows in flight at 41 MiB lose
0.42-0.49 (ROWS).

Nor B and the rows in flight together (2026-12-02, m = 1536, three allocations a shape, cards GPU-4c919a5b,
GPU-512e915e, GPU-93dfdd23): at 45 MiB TILE 16 either keeps to the curve (0.55-0.60 lost) or has jumped
(0.73-0.83), and which is a property of the shape, not of the allocation - in B_K, n = 4192-4608 (3.67-4.03
rows in flight) jumped and n = 4720-5120 (3.30-3.58) did not, but in WINDOW n = 4560 and 4336 (3.70 and
3.90 rows) kept to it at 45 MiB, n = 4336 even at 48 (0.60, the curve 0.94); in FINE every k from 2512
to 2608 at n = 4608 jumped, and every n from 4544 to 4672 at k = 2560 except n = 4560 (0.63). The same
shapes under ncu's six-metric replay (b_curve_l2) came out higher (n = 4560 and 4336: 0.64-0.77): the
state is bistable, and the curve, which jumps past 45.5 MiB, is the lower branch."""

from __future__ import annotations

import functools
import json

import numpy as np
import pandas as pd

from .allocation import allocations
from .devices import device as lookup
from .memory.coalescing import straddle_share

FAMILY = (1920, 1920)  # m, k of the calibration shapes
CURVES = "b_curve"  # aligned pitch: the curve at share 0 (and TILE 32 and COARSE, recorded beside it)
PITCH = "b_curve_pitch"  # the same family with B's pitch off the line: the curve at the widest share
SHAPES = "b_curve_shapes"  # other m and k, aligned: checks, not read by the model
JUMP = "b_curve_jump"  # k and m swept at 39-43.5 MiB (experiments/b_jump_specs.txt): where the loss jumps, not read
ROWS = "b_curve_rows"  # 3-5 block rows in flight at 41 and 43.5 MiB, aligned (experiments/b_rows_specs.txt): not read
# m = 1536, aligned, not read: k at 42 and 45 MiB (B_K); rows in flight x B at 42-48 MiB (WINDOW,
# experiments/b_window_specs.txt); k and n in steps of 8 and 16 about the suite's 1536 x 4608 x 2560 (FINE,
# experiments/b_pitch_fine_specs.txt)
B_K, WINDOW, FINE = "b_curve_k", "b_curve_window", "b_curve_pitch_fine"
SWEPT_TILE = 16
RAMP_BYTES = (30 << 20, 42 << 20)  # where the families lie on one curve once scaled by k
JUMPED_BYTES = 46 << 20  # by where each family has jumped towards all of B (at its own size, 43-49 MiB)
JUMP_FROM_BYTES, JUMP_TO_BYTES = 40 << 20, 47 << 20  # where a shape's jump may come (JUMP, held-out set 35)


def points(device: str = "h200", folder: str = CURVES) -> pd.DataFrame:
    """One row per recorded shape: case, tile, coarse, m, n, k, share (`straddle_share`), b_bytes, group_bytes
    (`models.dram.group_bytes`), streams (`models.dram.matmul_operands`), allocations, read_bytes (their
    median), spread ((max - min) / median) and loss (B's per re-read)."""
    from .models.dram import b_loss_from_reads, group_bytes, matmul_operands
    from .suite.registry import get

    dev = lookup(device)
    a = allocations(dev.key, folder)
    rows = []
    for (case, params), g in a.groupby(["case", "params"], sort=False):
        p = json.loads(params)
        launch = get(case).launch(p)
        a_bytes, b_bytes, streams = matmul_operands(dev, launch, p)
        read = float(g.read_bytes.median())
        tile = p.get("tile", launch.block[0])  # the naive kernel: its block's width
        rows.append(dict(case=case, tile=tile, coarse=p.get("coarse", 1), m=p["m"], n=p["n"], k=p["k"],
                         share=straddle_share(tile, p["n"]), b_bytes=b_bytes,
                         group_bytes=group_bytes(dev, launch, p), streams=streams, allocations=len(g),
                         read_bytes=read, spread=(g.read_bytes.max() - g.read_bytes.min()) / read,
                         loss=b_loss_from_reads(read, a_bytes, b_bytes, streams)))
    cols = ["case", "tile", "coarse", "m", "n", "k", "share", "b_bytes", "group_bytes", "streams", "allocations",
            "read_bytes", "spread", "loss"]
    return pd.DataFrame(rows, columns=cols).sort_values(["case", "tile", "coarse", "share", "b_bytes"],
                                                        ignore_index=True)


def folders_points(device: str, *folders: str) -> pd.DataFrame:
    """`points` over the recorded folders, each row with its folder."""
    return pd.concat([points(device, f).assign(folder=f) for f in folders], ignore_index=True)


def tile16_points(device: str, *folders: str) -> pd.DataFrame:
    """`folders_points` of TILE 16."""
    pts = folders_points(device, *folders)
    return pts[(pts.case == "matmul.tiled") & (pts.tile == SWEPT_TILE)]


@functools.cache
def _curves(device_key: str) -> tuple[tuple[float, tuple[float, ...], tuple[float, ...]], ...]:
    """TILE 16's calibration curves, (share, B bytes, loss): the aligned family (CURVES) at share 0 and the
    PITCH family of the widest share; PITCH's other shares check the line between them (tests)."""
    out = []
    for folder in (CURVES, PITCH):
        pts = tile16_points(device_key, folder)
        pts = pts[(pts.m == FAMILY[0]) & (pts.k == FAMILY[1])]
        pts = pts[pts.share == (0.0 if folder == CURVES else pts.share.max())]
        if pts.empty:
            return ()
        out.append(monotone_curve(pts))
    return tuple(out)


def monotone_curve(pts: pd.DataFrame, x: str = "b_bytes") -> tuple[float, tuple[float, ...], tuple[float, ...]]:
    """One family's (share, x, loss) in order of x: B lost can only grow with B, so each loss is at least the
    one before (the allocations scatter the points) and at most 1 (all of B)."""
    pts = pts.sort_values(x, kind="stable")
    return (float(pts.share.max()) if len(pts) else 0.0, tuple(pts[x].astype(float)),
            tuple(np.maximum.accumulate(pts.loss.clip(0, 1))))


@functools.cache
def k_exponent(device_key: str) -> float:
    """How the loss scales with k at one B size, (k / 1920)^exponent: least squares of log(loss over the
    curve) on log(k / 1920) through 0, over the SHAPES families' points in the ramp (0 where none)."""
    pts = tile16_points(device_key, SHAPES)
    return fit_k_exponent(pts[pts.b_bytes.between(*RAMP_BYTES)], functools.partial(_curve_loss, device_key))


def fit_k_exponent(pts: pd.DataFrame, curve_loss) -> float:
    """The e of (k / 1920)^e: least squares of log(loss over `curve_loss(share, b_bytes)`, the m = k = 1920
    curve's) on log(k / 1920) through 0, over the points where both lose something (0 where none)."""
    ref = np.array([curve_loss(s, b) or np.nan for s, b in zip(pts.share, pts.b_bytes, strict=True)])
    ok = (pts.loss.to_numpy() > 0) & (ref > 0)
    x, y = np.log(pts.k.to_numpy()[ok] / FAMILY[1]), np.log(pts.loss.to_numpy()[ok] / ref[ok])
    return float((x * y).sum() / (x * x).sum()) if (x * x).sum() else 0.0


def _curve_loss(device_key: str, share: float, b_bytes: float) -> float | None:
    """The m = k = 1920 curves at B: the aligned one times how much more the widest measured share loses
    there (the two curves' ratio), in proportion to the share; below the measured sizes none (the first
    point, 23 MiB, loses 0.1 %); None where not measured or past them."""
    return read_curves(_curves(device_key), share, b_bytes)


def read_curves(curves: tuple[tuple[float, *Curve], ...], share: float, b_bytes: float) -> float | None:
    """The loss at B of an aligned curve and the widest share's (share, B, loss each, as `monotone_curve`
    gives them), `between_pitches`; None where none is recorded or past the aligned curve's sizes."""
    if not curves or b_bytes > curves[0][1][-1]:
        return None
    return between_pitches(curves[0][1:], curves[-1], share, b_bytes)


Curve = tuple[tuple[float, ...], tuple[float, ...]]  # (x, loss)


def between_pitches(aligned: Curve, widest: tuple[float, *Curve] | None, share: float, at: float) -> float:
    """A loss curve at `at` (its x: B or a group's bytes) for `share` of B's row segments across a line: the
    aligned curve (x, loss) times how much the widest measured share's curve (share, x, loss) loses more or
    less there (their ratio), in proportion to the share; below the aligned curve's first point none."""
    (x0, y0) = aligned
    loss = float(np.interp(at, x0, y0, left=0.0))
    if share and widest and widest[0]:
        wide, x1, y1 = widest
        ratio = np.array(y1) / np.maximum(np.interp(x1, x0, y0), 1e-3)
        loss = min(1.0, loss * (1 + min(1.0, share / wide) * (float(np.interp(at, x1, ratio)) - 1)))
    return loss


def loss_at(device: str, share: float, b_bytes: float, k: int = FAMILY[1]) -> float | None:
    """TILE 16's share of B lost per re-read at B's size, `share` of its B row segments across a line, k
    rows: the curves (`_curve_loss`) times (k / 1920)^k_exponent up to the ramp's end, fading to 1 by where
    the families have all jumped - at one B, k rows mean 4 k n = B: k / 1920 times the calibration's block
    rows in flight (resident blocks over n / 16 a row), which share each B slice while L2 holds it."""
    key = lookup(device).key
    if (loss := _curve_loss(key, share, b_bytes)) is None:
        return None
    if k != FAMILY[1]:
        weight = float(np.clip((JUMPED_BYTES - b_bytes) / (JUMPED_BYTES - RAMP_BYTES[1]), 0.0, 1.0))
        loss *= (k / FAMILY[1]) ** (k_exponent(key) * weight)
    return min(1.0, loss)


def tile16_loss(device: str, n: int, k: int, b_bytes: float) -> tuple[float, str] | None:
    """`loss_at` for B's pitch (n floats a row) and k, and where it comes from."""
    share = straddle_share(SWEPT_TILE, n)
    if (loss := loss_at(device, share, b_bytes, k)) is None:
        return None
    return loss, (f"TILE 16's own measured loss at {b_bytes / 2**20:.0f} MiB"
                  + (f", {100 * share:.0f} % of its B row segments across a line" if share else "")
                  + (f", scaled to k = {k}" if k != FAMILY[1] else "")
                  + f" (perfmodel.b_curve, m = k = {FAMILY[0]})"
                  + ("; caution: from 40 to 47 MiB TILE 16 may have jumped towards losing all of B - two states, which"
                     " one set by its shape (not by B and the rows in flight alone) in a way the model does not"
                     " know; held out, the model up to 40 % short"
                     if JUMP_FROM_BYTES <= b_bytes <= JUMP_TO_BYTES else ""))
