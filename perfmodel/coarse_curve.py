"""How much of B COARSE 4 and 8 lose between the groups of blocks that re-read it, measured on the kernels
themselves (experiments/b_curve.sh and b_coarse_specs.txt: m = k = 1920 - a family in no suite or held-out
set - with B from 14 to 56 MiB, four allocations a size under ncu, their median).

Measured 2026-12-02 (cards GPU-e6adbd78, GPU-349b81cf): COARSE 8 - one block an SM, the SMs in step - loses
B well inside one L2 partition: ~3 % at 16 MiB, ~40 % at 24, all of it (and some of A) from 30; COARSE 4 from
~20 MiB, half at 31, all at 40. At one B, families with a larger k lose more (COARSE 8 at 24.4 MiB: k = 1536,
1920, 2560 lose 0.25, 0.43, 0.74): between two groups' reads of a B slice L2 takes in all of B and the A
strips of one group's block rows, which grow with k and with fewer blocks a row. Over that footprint
(`models.dram.group_bytes`) the three COARSE 8 families and the two COARSE 4 ones lie on one curve each,
which the model reads. Measured with B's pitch on the line; a COARSE C block's row segment crosses a line
at one end in C, so the pitch is left out.

At one B the loss also rises with m - the groups that re-read B (b_curve_coarse_rows, m from 768 to 5120 at
k = 2048, card GPU-1cf4cd8e): COARSE 4 at 26 MiB 0.19-0.20 up to m = 1024, 0.24 at 1536-2048, 0.26-0.28 past;
COARSE 8 at 22 MiB 0.17 at m = 768, 0.28-0.31 from 2560 - as if the first re-reads were spared (a fit of
1 - c / (streams - 1): c = 1.3 and 0.47). Read into the curve and the prediction, that moved the held-out
band rows from 5.3 to 5.0 % off for COARSE 4 and from 4.3 to 4.7 % for COARSE 8, with fewer of them within
5 % (24 to 21, 24 to 22): not taken. Off the line (a quarter of B's segments across) COARSE 8 loses less
than aligned there (0.12-0.24 against 0.17-0.31), COARSE 4 about as much.

Off the line, measured (2026-12-03, PITCH: m = k = 1920 with n one more, 31 of 32 rows' segments across a
line, four allocations a size, card GPU-f6a51f5f): COARSE 8 loses less than aligned from its onset to where
both have lost all of B - 0.47/0.69/0.81 against 0.65/0.80/0.98 at 28/30/32 MiB of footprint; COARSE 4 the
same within ~0.03 past 24 MiB (0.7-0.9x below, where little is lost). Read as TILE 16 reads its pitch (the
aligned curve times the two curves' ratio in proportion to the share, b_curve.between_pitches), COARSE 8's
29 held-out band rows off the line (sets measured before) came 4.2 % off on average, bias -0.4 % (aligned
curve: 4.7 %, +3.8 %), but 19 within 5 % where 20 were, and set 37's 1432 x 3860 x 2292 from -6.2 to -8.5 %;
COARSE 4's 38 went from 5.3 to 6.0 % (24 to 23 within 5 %). Neither taken: fewer rows within 5 %,
as with the correction above. The suite's COARSE 8 at m = k = 1920, n = 3845 (plan h200_warp_seams, the
family's own m and k) lost what the off-line curve loses (0.69 of B a re-read; the aligned curve 0.81).

Not TILE 32, COARSE 1 or 2: their curves over the same footprint missed the suite's and held-out sets'
shapes by 10-42 % (the schedule replay, perfmodel.l2replay, by 5-14 %) - more of their lines are split
between two blocks, and where a block row's segments straddle lines the loss grows with it."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from .b_curve import CURVES, FAMILY, folders_points, monotone_curve
from .devices import DeviceSpec
from .memory import Launch

FOLDER = "b_curve_coarse"  # COARSE 8 below 24 MiB and COARSE 4, each at three or two families
PITCH = "b_curve_coarse_pitch"  # the m = k = 1920 family with n one more: B's pitch off the line
ROWS = "b_curve_coarse_rows"  # m swept at one B (experiments/b_coarse_rows_specs.txt): a check, not read
OWN = (4, 8)  # the coarsenings that read their own curve
CASE = "matmul.coarsened"


def coarse_points(device: str, pitched: bool = False) -> pd.DataFrame:
    """`points` of COARSE 4 and 8 over both folders (the aligned families), each row with its folder; or
    (`pitched`) the PITCH family's, off the line."""
    pts = folders_points(device, PITCH) if pitched else folders_points(device, CURVES, FOLDER)
    pts = pts[(pts.case == CASE) & pts.coarse.isin(OWN)]
    return pts[pts.share > 0] if pitched else pts[pts.share == 0]


@functools.cache
def _curve(device_key: str, coarse: int, pitched: bool = False) -> tuple[float, tuple[float, ...], tuple[float, ...]]:
    """(share, group bytes, loss) of the m = k = 1920 family, by footprint; a loss at least the one before
    (the allocations scatter the points), at most 1 (all of B). Pitched: the off-line family (none where
    not recorded)."""
    pts = coarse_points(device_key, pitched)
    return monotone_curve(pts[(pts.coarse == coarse) & (pts.m == FAMILY[0]) & (pts.k == FAMILY[1])], "group_bytes")


def coarse_loss(dev: DeviceSpec, launch: Launch, params: dict[str, int]) -> tuple[float, str] | None:
    """COARSE 4 or 8's share of B lost per re-read at its group footprint, and where it comes from; None for
    other kernels, where none is recorded, and from where the curve has lost all of B."""
    from .models.dram import group_bytes

    if params.get("tile") != 32 or params.get("coarse") not in OWN:
        return None
    _, xs, ys = _curve(dev.key, params["coarse"])
    footprint = group_bytes(dev, launch, params)
    loss = float(np.interp(footprint, xs, ys, left=0.0)) if xs else 1.0  # aligned, whatever B's pitch (module note)
    if loss >= 1.0:  # all of B lost, and A in part: the schedule replay knows A's reuse (perfmodel.l2replay)
        return None
    return loss, (f"COARSE {params['coarse']}'s own measured loss at {footprint / 2**20:.0f} MiB of B and one group's "
                  f"A strips (perfmodel.coarse_curve, m = k = {FAMILY[0]})")
