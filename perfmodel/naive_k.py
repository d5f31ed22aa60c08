"""The naive matmul's L1 misses against k (checks/naive_k and naive_unroll; a known gap).

At held-out naive shapes with k = 1501, 2323, 2545, 2677 and 2803 the model predicted 11-39 % fewer L2 sectors
than the L1s requested; it counts each block's own sectors of A and B once (its L1 keeps them while the
block runs). The
sweep (experiments/naive_k_specs.txt) - every k at 2300-2340, 2665-2689 and 2790-2820 at m = n = 1024, every
29th k from 1001 to 4090, and the held-out shapes' m and n around their k - shows the excess following k
modulo 16, the times nvcc unrolls the k loop (the SASS issues 16 A and 16 B loads a trip): A's rows start k
floats apart, so k sets where each row's burst of loads falls in its sectors. k = 5 and 13 mod 16 miss the
most, then 3 and 11, then 1, 2, 6, 9 and 10; the residues 0, 4, 7, 8, 12, 14 and 15 lie on the model at
m = n = 1024 (at 1092 x 1049, 7 runs 8-12 % above it and 4 5 %). The excess grows with k (k = 5 mod 16 at
m = n = 1024: +6 % at 1349, +40 % at 3669) and with the shape (k = 2805 at 1092 x 1049: +76 %, at
1024 x 1024: +31 %). ncu's set-conflict counter does not follow it.

The same kernel with its loop unrolled once or 4 times (matmul.naive_unrolled, experiments/
naive_unroll_specs.txt, another card) settles the cause: unrolled once, no k stands out, and every k
requests 11-13 % less than the model's per-block count (L1 shares more between blocks); unrolled 4 times, the
excess follows k mod 4 (k = 1 mod 4 most). With A or B read past L1 (matmul.naive_bypass, ld.global.cg,
experiments/naive_bypass_specs.txt, the same 16-times unrolled loop) the residue is gone: at m = n = 1024 the
requested sectors vary 2.3 % (A past L1) and 0.5 % (B past L1) over k = 2300-2339, where the kernel itself
varies 22 %, and the model's per-block count holds both within 3.5 % (B's misses with A past L1 run 9-13 %
above it at 1092 x 1049). Neither array's misses follow k mod 16 alone: the excess comes where A's and B's
lines share L1. And it is L1's capacity: launched with 12 KiB of shared memory a block it leaves unused
(matmul.naive_smem, experiments/naive_smem_specs.txt; L1 124 KiB where it had 224) k = 0 and 8 mod 16 still
request within 3 % of the model's count while 5 and 13 request 49-58 % more (20 % at 224 KiB), and at 24 KiB
a block (L1 28 KiB) every k requests 2.1-3.6x the count - the model's window rule (models.l1.
l1_windowed_sectors) gives it only 1-18 % more.

What the model takes (2026-12-03): each residue's excess over the in-step residues at m = n = 1024 is a
line in k (`residue_lines`: k = 5 mod 16 from +4 % at 1349 to +37 % at 3669, rms 1.6 % about it), and
where B's row segments cross a line the excess is 1 + c x their share as large (`pitch_gain`: the naive_pitch
sweep, experiments/naive_pitch_specs.txt - every n from 1024 to 1055 at m = 1024, k = 2805 - gives c = 2.1
from its own in-step k = 2800 beside). Held out (46 sets measured before), the naive kernel's L2 reads
within 5 % went from 67 to 82 of 90 (set 47, 24 naive shapes frozen after: 23 of 24).

Not modelled: how the excess depends on the grid. The naive_rows sweep (experiments/naive_rows_specs.txt, k = 2805
beside 2800, B's row segments on the line, m = 512-3072, `excess_beside_step`) finds it growing with m where the
blocks a row divide the SMs (33, 44, 66, 132: each SM's blocks read one B strip) - 0.26-1.09x the line at m = 512,
1.9-2.2x at 3072, the model 11-28 % short at m = 2048-3072 - and 0.4-0.7x (m = 512) and 0.6-1.1x (m = 1024-3072) the
line where they do not (64, 65, 131 blocks a row; the least at 131); at n = 3000-4101 (188-257 blocks a row, m =
1024) there is almost none (2 %), the model 25-50 % over. The in-step k = 2800 stays within 3.5 % of the per-block
count at 33 of those 34 shapes. With A or B read past L1 (naive_grid_bypass, m = 512-3072 at 65 and 66 blocks a row)
k = 2805 requests 0-2 % more a k than 2800, where the kernel itself requests 16-56 % more: the growth, like the
residue, needs both arrays in L1. A small L1's losses (naive_smem) are not modelled either."""

from __future__ import annotations

import functools
import json

import numpy as np
import pandas as pd

from .allocation import launch_counts
from .devices import DeviceSpec
from .devices import device as lookup
from .memory.coalescing import SECTOR_BYTES, straddle_share
from .sass import functions

FOLDER = "naive_k"  # matmul.naive over k
UNROLLED = "naive_unroll"  # matmul.naive_unrolled (unroll 1 and 4) beside matmul.naive
BYPASS = "naive_bypass"  # matmul.naive_bypass (A or B past L1) beside matmul.naive
SMEM = "naive_smem"  # matmul.naive_smem: the kernel with L1 at 224, 124 and 28 KiB
PITCH = "naive_pitch"  # matmul.naive over B's pitch (n), m and k at residues 0, 3 and 5
ROWS = "naive_rows"  # matmul.naive over the grid's blocks a row and m, k = 2800 beside 2805
GRID_BYPASS = "naive_grid_bypass"  # matmul.naive_bypass and naive_unrolled at some of ROWS's shapes
REQUESTED = "l1tex__m_xbar2l1tex_read_sectors.sum"  # the L2 read sectors the L1s request (l2_requested_read_sectors)


def unroll(device_key: str = "h200", kernel: str = "matmul_naive", check: str | None = None) -> int:
    """How many k a naive kernel's main loop takes a trip: its recorded SASS's largest loop's global loads
    over the two (A and B) each k issues (`check`: the listing recorded beside that checks folder)."""
    loops = [r for r in functions(device_key, check)[kernel].regions if r.depth > 0]
    return max(r.kinds.get("global_ld", 0) for r in loops) // 2


def sweep(device: str = "h200", folder: str = FOLDER) -> pd.DataFrame:
    """One row per swept launch pair: case, unroll (matmul.naive's: `unroll`), bypass (matmul.naive_bypass's
    array read past L1: 1 A, 2 B; else 0), smem (matmul.naive_smem's unused shared memory a block, bytes;
    else 0), m, n, k, residue (k modulo 16, the default kernel's unroll) and requested_sectors (the mean of
    its two launches); empty where not recorded."""
    counts = launch_counts(device, folder, REQUESTED)
    cols = ["case", "unroll", "bypass", "smem", "m", "n", "k", "residue", "requested_sectors"]
    if counts.empty:
        return pd.DataFrame(columns=cols)
    params = pd.json_normalize(counts.params.map(json.loads).tolist())
    default = unroll(lookup(device).key)

    def given(name: str, otherwise: int) -> pd.Series:
        return params.get(name, pd.Series(index=params.index, dtype=float)).fillna(otherwise).astype(int)

    out = pd.DataFrame({"case": counts.case, "m": params.m, "n": params.n, "k": params.k,
                        "unroll": given("unroll", default), "bypass": given("bypass", 0), "smem": given("smem", 0),
                        "requested_sectors": (counts["first"] + counts["second"]) / 2})
    out["residue"] = out.k % default
    return out[cols]


def excess_beside_step(device: str = "h200", folder: str = ROWS) -> pd.DataFrame:
    """A sweep's off-step k against the in-step k (0 mod the unroll) just below it at the same m and n: m, n, k,
    blocks_a_row, meet (a grid row divides the SMs: an SM's blocks read one B strip), measured (the requested
    sectors a k over the in-step shape's, less 1) and model (`excess_share`)."""
    s, dev = sweep(device, folder), lookup(device)
    s = s[s.case == "matmul.naive"]
    step = s[s.residue == 0].set_index(["m", "n", "k"]).requested_sectors
    rows = []
    for r in s[s.residue != 0].itertuples():
        k0 = r.k - r.residue
        if (r.m, r.n, k0) in step.index:
            p = {"m": int(r.m), "n": int(r.n), "k": int(r.k)}
            rows.append(dict(m=p["m"], n=p["n"], k=p["k"], blocks_a_row=blocks_a_row(p), meet=rows_meet(dev, p),
                             measured=r.requested_sectors / r.k / (step[(r.m, r.n, k0)] / k0) - 1,
                             model=excess_share(dev, p)))
    return pd.DataFrame(rows, columns=["m", "n", "k", "blocks_a_row", "meet", "measured", "model"])


def against_model(device: str, shapes: pd.DataFrame) -> pd.DataFrame:
    """`shapes` (rows of `sweep`) with the model's requested sectors and measured over predicted."""
    from . import predict
    from .suite.registry import get

    pred = [predict(r.case, device, m=int(r.m), n=int(r.n), k=int(r.k),
                    **{p: int(getattr(r, p)) for p in ("unroll", "bypass", "smem") if p in get(r.case).defaults}
                    ).l2_read_bytes / SECTOR_BYTES for r in shapes.itertuples()]
    return shapes.assign(predicted_sectors=pred, ratio=shapes.requested_sectors.to_numpy() / pred)


@functools.cache
def residue_lines(device_key: str) -> dict[int, tuple[float, float, int, int]]:
    """Per k mod the loop's unroll: the sweep's excess of requested sectors over the in-step residues' at
    m = n = 1024 as a line in k, (a, b) of a + b k, and the k it was swept from and to. In step: the lower half
    of the residues by their median over a line through all the sweep's sectors a k; their sectors a k, a line
    in k, are the base each point's excess is taken over. {} where the sweep is not recorded."""
    s = sweep(device_key)
    s = s[(s.case == "matmul.naive") & (s.m == 1024) & (s.n == 1024)]
    if s.empty:
        return {}
    k, per = s.k.to_numpy(float), (s.requested_sectors / s.k).to_numpy()
    rest = per - np.polyval(np.polyfit(k, per, 1), k)
    by = pd.Series(rest).groupby(s.residue.to_numpy()).median().sort_values()
    step = s.residue.isin(by.index[: len(by) // 2]).to_numpy()
    excess = per / np.polyval(np.polyfit(k[step], per[step], 1), k) - 1
    out = {}
    for r, g in s.groupby("residue"):
        b, a = np.polyfit(g.k.to_numpy(float), excess[s.residue.to_numpy() == r], 1)
        out[int(r)] = (float(a), float(b), int(g.k.min()), int(g.k.max()))
    return out


def blocks_a_row(params: dict[str, int]) -> int:
    """The naive kernel's blocks in one grid row."""
    from .suite.registry import get

    return get("matmul.naive").launch(params).grid[0]


def rows_meet(dev: DeviceSpec, params: dict[str, int]) -> bool:
    """Whether a grid row divides the SMs: blocks a row apart start on one SM and read the same B columns."""
    return dev.sm_count % blocks_a_row(params) == 0


def b_share(params: dict[str, int]) -> float:
    """The share of the naive kernel's B row segments (its block's width of floats) across a 128-byte line."""
    from .suite.registry import get

    return straddle_share(get("matmul.naive").launch(params).block[0], params["n"])


def _line(lines: dict[int, tuple[float, float, int, int]], k: int, step: int) -> float:
    """A residue's line (`residue_lines`) at k, held past the largest k swept."""
    a, b, _, high = lines[k % step]
    return a + b * min(k, high)


@functools.cache
def pitch_gain(device_key: str) -> float:
    """How much more of the excess the L1s request where B's row segments cross a 128-byte line: c of
    1 + c x `straddle_share`, least squares through 0 over the PITCH sweep at m = 1024 - at each n swept at
    k = 2800 (0 mod 16: its sectors a k, less that residue's line, the per-block count) an off-step k a few
    on gives that n's excess over its line's. 0 where not recorded."""
    lines, s = residue_lines(device_key), sweep(device_key, PITCH)
    s = s[(s.case == "matmul.naive") & (s.m == 1024)]
    if not lines or s.empty:
        return 0.0
    step = unroll(device_key)
    x, y = [], []
    for n, g in s.groupby("n"):
        base = g[g.residue == 0]
        if base.empty:
            continue
        k0 = int(base.k.iloc[0])
        per = float(base.requested_sectors.iloc[0]) / k0 / (1 + _line(lines, k0, step))
        for r in g[(g.k > k0) & (g.k < k0 + step)].itertuples():
            if (line := _line(lines, int(r.k), step)) > 0.05:
                x.append(b_share({"m": 1024, "n": int(n), "k": int(r.k)}))
                y.append((r.requested_sectors / r.k / per - 1) / line - 1)
    x, y = np.array(x), np.array(y)
    return float((x * y).sum() / (x * x).sum()) if (x * x).sum() else 0.0


def excess(dev: DeviceSpec, case: str, params: dict[str, int]) -> tuple[float, str] | None:
    """The share of L2 sectors the naive kernel's L1s request beyond the per-block count at this k mod the
    loop's unroll: the sweep's line for the residue (`residue_lines`) at k, held past the largest k swept,
    times 1 + `pitch_gain` x the share of B's row segments across a line; None for other kernels, where
    not recorded, and where under half a percent."""
    if case != "matmul.naive" or not (lines := residue_lines(dev.key)):
        return None
    step = unroll(dev.key)
    k, r = params["k"], params["k"] % step
    share = b_share(params)
    gain = 1 + pitch_gain(dev.key) * share
    if (extra := _line(lines, k, step) * gain) < 0.005:
        return None
    swept = f"k = {lines[r][2]}-{lines[r][3]}"
    return extra, (f"k = {k} is {r} mod {step}, the times nvcc unrolls the k loop: the L1s request {100 * extra:.0f} %"
                   f" more L2 sectors than the per-block count, as the recorded sweep at such k did (m = n = 1024,"
                   f" {swept}" + (f"; x{gain:.2f}: {100 * share:.0f} % of B's row segments cross a line" if share
                                  else "") + "; perfmodel.naive_k)")


def excess_share(dev: DeviceSpec, params: dict[str, int]) -> float:
    """The share `excess` adds to the naive kernel's L2 reads at these parameters; 0 where it adds none."""
    return (excess(dev, "matmul.naive", params) or (0.0,))[0]
