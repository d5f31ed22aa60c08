"""How much of B the naive matmul loses between the block rows that re-read it, measured on the kernel itself
(experiments/b_naive_specs.txt, checks/b_curve_naive: four allocations a shape under ncu, their median).

Measured 2026-12-03 (card GPU-ef7f4e8f): at m = k = 1920 the naive kernel keeps B up to ~24 MiB, then loses
it steadily - 0.11 of it per re-read at 32 MiB, 0.42 at 45, 0.52 at 56 - where the linear share between one
L2 partition and the whole L2 (models.dram.reread_miss) says about half that at 32 MiB and 1.6x as much at
56. With B's pitch off the line (n + 12: 3/8 of a block's 64-byte row segments across a 128-byte line) it
loses a little more, read in proportion to the share as TILE 16's pitch is (b_curve.between_pitches). At
m = 1024, k = 2816 it loses 0.8-0.9x as much at one B: as TILE 16's larger k does, the curve is
scaled by (k / 1920)^exponent, fitted on that family alone (below k = 1920 not measured: extrapolated).
The held-out shapes it was then read for (measured before): set 44's 851 x 2908 x 2910 from -36 % to
+5.6 %; set 39's 1430 x 2636 x 2545 from -14 % to +21 % - that run's count lies 14-33 % under all four
allocations of the same shape measured here."""

from __future__ import annotations

import functools

import pandas as pd

from .b_curve import FAMILY, fit_k_exponent, monotone_curve, points, read_curves
from .devices import DeviceSpec
from .memory import Launch
from .memory.coalescing import straddle_share

FOLDER = "b_curve_naive"
CASE = "matmul.naive"
WIDE = (1024, 2816)  # m, k of the family the k exponent is fitted on
ESTABLISHED_BYTES = 32 << 20  # from where the loss is large enough for its ratio to mean something


def naive_points(device: str) -> pd.DataFrame:
    """`points` of the naive kernel in FOLDER (empty where not recorded)."""
    pts = points(device, FOLDER)
    return pts[pts.case == CASE]


@functools.cache
def _curves(device_key: str) -> tuple[tuple[float, tuple[float, ...], tuple[float, ...]], ...]:
    """(share, B bytes, loss) of the m = k = 1920 family aligned and at the widest share measured off the
    line, a loss at least the one before (the allocations scatter the points); () where not recorded."""
    pts = naive_points(device_key)
    pts = pts[(pts.m == FAMILY[0]) & (pts.k == FAMILY[1])]
    out = []
    for sel in (pts[pts.share == 0], pts[pts.share == pts.share.max()]):
        if sel.empty or (out and sel.share.iloc[0] == 0):
            return ()
        out.append(monotone_curve(sel))
    return tuple(out)


@functools.cache
def k_exponent(device_key: str) -> float:
    """(k / 1920)^exponent, `b_curve.fit_k_exponent` over the WIDE family's points past ESTABLISHED_BYTES."""
    pts = naive_points(device_key)
    curves = _curves(device_key)
    return fit_k_exponent(pts[(pts.m == WIDE[0]) & (pts.k == WIDE[1]) & (pts.b_bytes > ESTABLISHED_BYTES)],
                          lambda share, b_bytes: read_curves(curves, share, b_bytes))


def naive_loss(dev: DeviceSpec, launch: Launch, params: dict[str, int]) -> tuple[float, str] | None:
    """The naive kernel's share of B lost per re-read at its B, pitch and k, and where it comes from; None
    where no curve is recorded or past its sizes (the linear share there)."""
    b_bytes = 4.0 * params["n"] * params["k"]
    share = straddle_share(launch.block[0], params["n"])
    if (loss := read_curves(_curves(dev.key), share, b_bytes)) is None:
        return None
    loss = min(1.0, loss * (params["k"] / FAMILY[1]) ** k_exponent(dev.key))
    return loss, (f"the naive kernel's own measured loss at {b_bytes / 2**20:.0f} MiB"
                  + (f", {100 * share:.0f} % of its B row segments across a line" if share else "")
                  + (f", scaled to k = {params['k']}" if params["k"] != FAMILY[1] else "")
                  + f" (perfmodel.naive_curve, m = k = {FAMILY[0]})")
