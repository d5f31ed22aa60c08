"""The matmul page's section on the naive kernel's L1 misses against k mod 16 (perfmodel.naive_k): the
sweep's requested sectors against k beside the model's, and a paragraph."""

from __future__ import annotations

from pathlib import Path

from ..devices import DeviceSpec
from ..naive_k import (
    BYPASS,
    PITCH,
    ROWS,
    SMEM,
    UNROLLED,
    against_model,
    b_share,
    blocks_a_row,
    excess_beside_step,
    excess_share,
    pitch_gain,
    rows_meet,
    sweep,
    unroll,
)
from . import figures
from .page import Page

GROUPS = ((5, 13), (3, 11), (1, 2, 6, 9, 10), (0, 4, 7, 8, 12, 14, 15))  # by how much more they miss
GRID = (1024, 1024, 1001, 29)  # m, n, first k and k step of the sweep's wide grid
MODELLED = 3  # the model at every 3rd grid point (1.7 s a prediction; 87 k apart, so every residue)


def _per_thousand(sectors, k, m: int, n: int):
    """Requested sectors per thousand multiply-adds (m n k of them)."""
    return sectors / k * 1e3 / (m * n)


def _at(swept, m: int, n: int):
    """A sweep's shapes at m x n."""
    return swept[(swept.m == m) & (swept.n == n)]


def _model_line(modelled, m: int, n: int) -> tuple:
    """`against_model`'s predictions as a figure overlay, per thousand multiply-adds."""
    return (modelled.k.to_numpy(), _per_thousand(modelled.predicted_sectors.to_numpy(), modelled.k.to_numpy(), m, n),
            "k-", "model")


def naive_k_section(dev: DeviceSpec, folder: Path, page: Page) -> str:
    """A figure and a paragraph; empty where no sweep is recorded for the device."""
    s = sweep(dev.key)
    m, n, first, step = GRID
    grid = s[(s.m == m) & (s.n == n) & (s.k >= first) & ((s.k - first) % step == 0)]
    grid = grid.groupby(["case", "unroll", "m", "n", "k", "residue"], as_index=False).requested_sectors.mean()
    if len(grid) < 2 * MODELLED:
        return ""
    grid = grid.assign(y=_per_thousand(grid.requested_sectors, grid.k, m, n),
                       group=[next(", ".join(map(str, g)) for g in GROUPS if r in g) for r in grid.residue])
    modelled = against_model(dev.key, grid.iloc[::MODELLED])
    step_k = unroll(dev.key)
    page.figures.append(("naive kernel: L1 misses against k", figures.groups(
        grid.assign(group="k mod 16 = " + grid.group), "k", "y", "group", folder / "matmul_naive_k.png",
        f"naive matmul, m = n = {m}: sectors the L1s request from L2", "k",
        "sectors per thousand multiply-adds",
        overlays=(_model_line(modelled, m, n),))))
    worst = modelled[modelled.residue.isin(GROUPS[0])]
    alone = worst.ratio * [1 + excess_share(dev, {"m": m, "n": n, "k": int(k)}) for k in worst.k]
    unrolled = (_pitch(dev, folder, page) + _rows(dev, folder, page) + _unrolled(dev, folder, page, m, n)
                + _bypass(dev, folder, page, m, n) + _smem(dev, folder, page, m, n))
    return (f" The naive kernel's L1 misses against k (figure 'naive kernel: L1 misses against k'; specs"
            f" experiments/naive_k_specs.txt, {len(s)} shapes under ncu, one allocation each): nvcc unrolls its k"
            f" loop {step_k} times, and A's rows, k floats apart, start at k mod {step_k} in their sectors. The"
            " model counts each block's own sectors once and adds each residue's excess, a line in k fitted on"
            " this sweep (naive_k.residue_lines): the L1s request"
            f" {100 * (modelled.ratio.min() - 1):+.1f}…{100 * (modelled.ratio.max() - 1):+.1f} % against the model at"
            f" the {len(modelled)} modelled grid points, where at 5 and 13 mod 16 the per-block count alone is"
            f" {100 * (alone.min() - 1):.0f}-{100 * (alone.max() - 1):.0f} % short, growing with k. ncu's L1"
            " set-conflict counter does not follow the residue, and which lines L1 drops early is not found"
            " (perfmodel.naive_k)." + unrolled)


def _pitch(dev: DeviceSpec, folder: Path, page: Page, m: int = 1024, k: int = 2805) -> str:
    """The excess against B's pitch at one k, a figure and a sentence; empty where unrecorded."""
    swept = sweep(dev.key, PITCH)
    swept = swept[(swept.m == m) & (swept.k == k)]
    s = swept[swept.n < swept.n.min() + 32]
    if s.empty:
        return ""
    wide = against_model(dev.key, swept[swept.n >= 3000])  # many blocks a row: none of the excess
    modelled = against_model(dev.key, s).sort_values("n")
    share = modelled.n.map(lambda n: b_share({"m": m, "n": int(n), "k": k}))
    page.figures.append(("naive kernel: L1 misses against B's pitch", figures.groups(
        modelled.assign(y=_per_thousand(modelled.requested_sectors, k, m, modelled.n),
                        group=share.map(lambda x: f"{100 * x:.0f} % of B's row segments across a line")),
        "n", "y", "group", folder / "matmul_naive_pitch.png",
        f"naive matmul, m = {m}, k = {k} ({k % unroll(dev.key)} mod {unroll(dev.key)}): every n", "n",
        "sectors per thousand multiply-adds",
        overlays=((modelled.n.to_numpy(), _per_thousand(modelled.predicted_sectors, k, m, modelled.n).to_numpy(),
                   "k-", "model"),))))
    meet = modelled.n.map(lambda n: rows_meet(dev, {"m": m, "n": int(n), "k": k})).to_numpy(bool)
    near, far = modelled[~meet], modelled[meet]
    rows = blocks_a_row({"m": m, "n": int(far.n.min()), "k": k}) if len(far) else 0
    return (f" Where B's pitch puts its row segments across a line the excess is larger (figure 'naive kernel: L1"
            f" misses against B's pitch'; specs experiments/naive_pitch_specs.txt, every n from {s.n.min()} to"
            f" {s.n.max()} at m = {m}, k = {k}): the model takes 1 + {pitch_gain(dev.key):.1f} x their share"
            " (naive_k.pitch_gain, from in-step k beside) and meets the sweep within"
            f" {100 * (near.ratio - 1).abs().max():.1f} % up to n = {near.n.max()}; past it"
            f" ({rows} blocks a row, blocks on one SM reading the same B columns) the L1s request"
            f" {100 * (far.ratio.min() - 1):.0f}-{100 * (far.ratio.max() - 1):.0f} % more than the model - and at"
            f" n = {wide.n.min()}-{wide.n.max()} none of the excess, the model {100 * (1 / wide.ratio.max() - 1):.0f}-"
            f"{100 * (1 / wide.ratio.min() - 1):.0f} % over: not modelled.")


def _rows(dev: DeviceSpec, folder: Path, page: Page) -> str:
    """The excess against m by the grid's blocks a row, a figure and a sentence; empty where unrecorded."""
    t = excess_beside_step(dev.key, ROWS)
    t = t[t.model > 0]
    if t.empty:
        return ""
    t = t.assign(gain=t.measured / t.model,
                 group=[f"{b:3d} blocks a row" + (f" (divides the {dev.sm_count} SMs)" if meet else "")
                        for b, meet in zip(t.blocks_a_row, t.meet, strict=True)])
    ms = sorted(t.m.unique())
    page.figures.append(("naive kernel: the excess against m, by blocks a row", figures.groups(
        t, "m", "gain", "group", folder / "matmul_naive_rows.png",
        f"naive matmul, k = {t.k.iloc[0]}: the L1s' excess over the in-step k beside it", "m",
        "measured excess over the model's", overlays=((ms, [1.0] * len(ms), "k-", "model"),))))
    meet, apart = t[t.meet], t[~t.meet]

    def span(g) -> str:
        return f"{g.gain.min():.2f}-{g.gain.max():.2f}x"

    return (f" Against m (figure 'naive kernel: the excess against m, by blocks a row'; specs"
            f" experiments/naive_rows_specs.txt, m = {ms[0]}-{ms[-1]}, B's row segments on the line, k ="
            f" {t.k.iloc[0]} beside the in-step k below it): where the blocks a row divide the SMs"
            f" ({', '.join(map(str, sorted(meet.blocks_a_row.unique())))}: each SM's blocks read one B strip) the"
            f" excess grows with m, {span(meet[meet.m == ms[0]])} the model's at m = {ms[0]} and"
            f" {span(meet[meet.m == ms[-1]])} at {ms[-1]}; where they do not"
            f" ({', '.join(map(str, sorted(apart.blocks_a_row.unique())))}) {span(apart[apart.m > ms[0]])} past"
            f" m = {ms[0]}, the least at {apart.groupby('blocks_a_row').gain.mean().idxmin()} blocks a row. The"
            " in-step k itself is on the model at every one of these shapes (tests/test_naive_k.py); the excess's"
            " dependence on the grid is not modelled.")


def _unrolled(dev: DeviceSpec, folder: Path, page: Page, m: int, n: int) -> str:
    """The loop unrolled 1, 4 and 16 times at the same k, a figure and a sentence; empty where unrecorded."""
    s = _at(sweep(dev.key, UNROLLED), m, n)
    if s.empty:
        return ""
    s = s.assign(y=_per_thousand(s.requested_sectors, s.k, m, n),
                 group="unrolled " + s.unroll.astype(str).str.rjust(2) + " times")
    ks = sorted(s.k.unique())
    modelled = against_model(dev.key, s[(s.unroll == 1) & s.k.isin(ks[::13])])
    page.figures.append(("naive kernel: L1 misses against k, by unroll", figures.groups(
        s, "k", "y", "group", folder / "matmul_naive_unroll.png",
        f"naive matmul, m = n = {m}: the k loop unrolled 1, 4 and 16 (nvcc's) times", "k",
        "sectors per thousand multiply-adds",
        overlays=(_model_line(modelled, m, n),))))
    once, four = s[s.unroll == 1], s[s.unroll == 4]
    by4 = four.y.groupby(four.k % 4).median()
    return (f" The same kernel with its loop unrolled once and 4 times (matmul.naive_unrolled; figure 'naive kernel:"
            f" L1 misses against k, by unroll'; specs experiments/naive_unroll_specs.txt, k = {min(ks)}-{max(ks)}):"
            f" unrolled once no k stands out ({once.y.min():.1f}-{once.y.max():.1f} sectors per thousand"
            f" multiply-adds), {100 * (1 - modelled.ratio.mean()):.0f} % under the model's per-block count - L1"
            " shares more between blocks than the model gives it; unrolled 4 times k = 1 mod 4 requests"
            f" {100 * (by4[1] / by4.drop(1).median() - 1):.0f} % more than the other k. The burst of loads a trip"
            " decides both how much L1 shares and at which k it loses lines.")


def _bypass(dev: DeviceSpec, folder: Path, page: Page, m: int, n: int) -> str:
    """A or B read past L1 beside the kernel itself at the same k, a figure and a sentence; empty where
    unrecorded."""
    swept = sweep(dev.key, BYPASS)
    s = _at(swept, m, n)
    if s.empty:
        return ""
    name = {0: "both through L1 (matmul.naive)", 1: "A past L1 (bypass 1)", 2: "B past L1 (bypass 2)"}
    per = s.requested_sectors / s.k
    s = s.assign(y=per / per.groupby(s.bypass).transform("median"), group=s.bypass.map(name))
    page.figures.append(("naive kernel: L1 misses against k, A or B past L1", figures.groups(
        s, "k", "y", "group", folder / "matmul_naive_bypass.png",
        f"naive matmul, m = n = {m}: A or B read with ld.global.cg", "k",
        "requested sectors over the kernel's median over k")))
    ks = sorted(s.k.unique())
    modelled = against_model(dev.key, s[s.bypass.gt(0) & s.k.isin(ks[1::12])])
    spread = {b: 100 * (g.max() - g.min()) for b, g in s.y.groupby(s.bypass)}
    other = swept[swept.bypass.gt(0) & (swept.m != m)]
    other = against_model(dev.key, other[other.k == other.k.min()]).set_index("bypass")
    elsewhere = "".join(f", at {r.m} x {r.n} x {r.k} {100 * (r.ratio - 1):+.1f} % with {'AB'[b - 1]} past L1"
                        for b, r in other.iterrows())
    return (" With A or B read past L1 (matmul.naive_bypass, ld.global.cg; figure 'naive kernel: L1 misses against"
            f" k, A or B past L1'; specs experiments/naive_bypass_specs.txt, k = {min(ks)}-{max(ks)}) the residue"
            f" is gone: the requested sectors vary {spread[1]:.1f} % (A past L1) and {spread[2]:.1f} % (B past L1)"
            f" over the {len(ks)} k where the kernel itself varies {spread[0]:.0f} %, and the model's per-block count"
            f" holds them within {100 * (modelled.ratio - 1).abs().max():.1f} % at {len(modelled)} of those k"
            f"{elsewhere}. Neither array's misses alone follow k mod 16; the excess comes where A's and B's"
            " lines share L1.")


def _smem(dev: DeviceSpec, folder: Path, page: Page, m: int, n: int) -> str:
    """The kernel with L1 shrunk by shared memory it leaves unused, a figure and a sentence; empty where
    unrecorded."""
    s = _at(sweep(dev.key, SMEM), m, n)
    if s.empty:
        return ""
    l1_kib = {x: (dev.l1_bytes_per_sm - _carveout(dev, x)) // 1024 for x in sorted(s.smem.unique())}
    s = s.assign(y=_per_thousand(s.requested_sectors, s.k, m, n),
                 group=s.smem.map(lambda x: f"L1 {l1_kib[x]:3d} KiB ({x // 1024} KiB unused shared a block)"))
    first = s[s.residue.isin([0, 5, 8, 13])].groupby(["smem", "residue"]).k.transform("min")
    modelled = against_model(dev.key, s[s.k.eq(first.reindex(s.index))])  # the first k of residues 0, 5, 8, 13
    page.figures.append(("naive kernel: L1 misses against k, by L1 size", figures.groups(
        s, "k", "y", "group", folder / "matmul_naive_smem.png",
        f"naive matmul, m = n = {m}: L1 shrunk by unused shared memory", "k",
        "sectors per thousand multiply-adds",
        overlays=tuple(_model_line(g, m, n)[:2] + (mark, f"model, L1 {l1_kib[x]} KiB")
                       for (x, g), mark in zip(modelled.groupby("smem"), ("kx", "k+", "k*"), strict=False)))))
    mid, small = sorted(l1_kib)[1], max(l1_kib)
    at = modelled[modelled.smem.eq(mid)].astype({"residue": int}).set_index("residue").ratio
    low = modelled[modelled.smem.eq(small)].ratio
    return (f" And it is L1's capacity (matmul.naive_smem: the kernel launched with shared memory it leaves unused;"
            f" figure 'naive kernel: L1 misses against k, by L1 size'; specs experiments/naive_smem_specs.txt): with"
            f" L1 at {l1_kib[mid]} KiB k = 0 and 8 mod 16 still request within"
            f" {100 * (at[[0, 8]] - 1).abs().max():.0f} % of the model's count while 5 and 13 request"
            f" {100 * (at[[5, 13]].min() - 1):.0f}-{100 * (at[[5, 13]].max() - 1):.0f} % more; at {l1_kib[small]} KiB"
            f" every k requests {low.min():.1f}-{low.max():.1f}x the count. The model's window rule misses how a"
            " small L1 loses A's and B's lines.")


def _carveout(dev: DeviceSpec, smem: int) -> int:
    """The carveout the driver picks for the naive kernel's launch with `smem` bytes a block."""
    from ..models import predict

    return predict("matmul.naive_smem", dev.key, m=1024, n=1024, k=1024, smem=int(smem)).occupancy.carveout_bytes
