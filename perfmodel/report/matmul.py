"""The matmul page: DRAM reuse by variant and size, B between one L2 partition and the whole L2 (the
sections it draws from b_curve, coarse_curve, naive_k, allocation), L1 sharing over the recorded placement,
and the barrier rounds at one and two blocks an SM."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..ceilings import ROUND_CHAIN_FMAS, Ceilings
from ..devices import DeviceSpec
from ..measurements import param
from ..models import Prediction, Term, checked_pair_rounds, predict, recorded_pair_rounds, round_exposed_s
from . import figures
from .allocation import allocation_section
from .b_curve import b_curve_section
from .coarse_curve import coarse_curve_section
from .naive_k import naive_k_section
from .page import Page, short_case_id, time_page


def _placement(table: pd.DataFrame, folder: Path, page: Page) -> str:
    """The L1-requested sectors of the recorded launches against ncu's: the model, which shares L1 as
    each launch's recorded placement met, beside the pooled start-spread law alone (a figure), and a
    one-line summary."""
    from ..placement import pooled_law_sectors

    t = table[table.metric.eq("l2_requested_read_sectors")].set_index("case_id")
    law = {cid: v for cid, v in pooled_law_sectors().items() if cid in t.index}
    if not law:
        return "none recorded"
    labels = [cid.removeprefix("matmul.") for cid in law]
    page.figures.append(("L1 sharing, recorded placements", figures.bars(
        labels, {"pooled start-spread law / ncu": [v / t.measured[c] for c, v in law.items()],
                 "model (its own recorded placement) / ncu": [t.predicted[c] / t.measured[c] for c in law]},
        folder / "matmul_placement.png", "L1-requested sectors over ncu's: shared by co-resident blocks as "
        "the pooled law spreads their starts, and as each launch's recorded placement met", "predicted / measured")))
    model = [t.rel_error[c] for c in law]
    off = [v / t.measured[c] - 1 for c, v in law.items()]
    return (f"{len(law)} recorded shapes (figure below): with its own placement the model puts every one within "
            f"{100 * max(map(abs, model)):.1f} % of ncu ({sum(abs(e) <= 0.05 for e in model)} within 5 %); the "
            f"pooled law alone {100 * min(off):+.0f}…{100 * max(off):+.0f} % ({sum(abs(e) <= 0.05 for e in off)})")


def _b_replay(data, folder: Path, page: Page) -> str:
    """The B band's DRAM reads replayed through the two L2 partitions over each recorded schedule, beside
    the model's rule, against ncu (a figure), and a summary."""
    from ..l2replay import against_ncu, band_errors, held_out_band

    t = against_ncu(data)
    if t.empty:
        return ""
    rep = t.dram_read_bytes / t.ncu_dram_read_bytes
    rule = t.rule_read_bytes / t.ncu_dram_read_bytes
    borrowed = t.model_dram_read_bytes / t.ncu_dram_read_bytes
    labels = [short_case_id(c) for c in t.case_id]
    page.figures.append(("B band replayed", figures.bars(
        labels, {"linear share / ncu": list(rule),
                 "model (TILE 16, COARSE 4 and 8: own curves; others: another shape's schedule replayed) / ncu":
                 list(borrowed),
                 "own recorded schedule replayed / ncu": list(rep)},
        folder / "matmul_b_replay.png", "DRAM reads of tiled and coarsened matmuls with B of 20-64 MiB over ncu's: "
        "the model's linear share, and each launch's recorded schedule replayed", "predicted / measured")))
    held = band_errors(held_out_band())
    far = t[t.tile.eq(16) & t.b_mib.between(44, 49)].dropna(subset=["ncu_far_hit_sectors"])
    times = far.far_hit_sectors.sum() / max(far.ncu_far_hit_sectors.sum(), 1)
    return (f" Why TILE 16 loses more of B than TILE 32, COARSE 8 more than both (figure 'B band replayed'): the"
            " order the scheduler ran"
            f" the blocks in. Replaying each of {len(t)} recorded launches (each block's SM, start and end) through"
            " two 30 MiB partitions - an SM's read looks up its own partition, a miss on a line homed in the other"
            " crosses to it, only a miss at home reads DRAM; least recently used out of sets lines hash to -"
            f" puts the DRAM reads {100 * (rep - 1).abs().mean():.0f} % off on average (the rule:"
            f" {100 * (rule - 1).abs().mean():.0f} %), {int(((rep - 1).abs() <= 0.1).sum())} within 10 % (the rule:"
            f" {int(((rule - 1).abs() <= 0.1).sum())}), and the partition counters ncu recorded (misses in the own"
            " partition, fabric crossings) within 31 % past 28 MiB (perfmodel.l2replay). It misses where the"
            f" H200 loses lines the replay keeps: TILE 16 with B of 45-48 MiB finds {times:.1f}x"
            " ncu's home hits after crossing. The model replays the schedule recorded at another shape of the"
            " same kernel (the largest) - for TILE 32, COARSE 1 and 2; TILE 16 (perfmodel.b_curve) and COARSE 4"
            " and 8 (perfmodel.coarse_curve) it reads off their own measured curves, below:"
            f" {100 * (borrowed - 1).abs().mean():.0f} % off on these, "
            f"{100 * held.replay.abs().mean():.0f} % on the held-out sets' {len(held)} never placed where the linear"
            f" share is {100 * held.rule.abs().mean():.0f} % (experiments/study_b_replay.py).")


MATMUL_SIZES = r"k=\d+,m=\d+,n=\d+,?"  # a matmul case id's sizes: what is left names its variant


def matmul_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                 ceil: Ceilings, folder: Path) -> Page:
    page = time_page("matmul", "matmul", "Matrix multiplication variants", table, folder,
                      "Global loads follow the textbook exactly (2mnk/TILE, (mnk/TILE)(1 + 1/C)); shared wavefronts "
                      "expose the corner-turning conflict (32-way at TILE 32 without padding, 8-way at 16). Up to 2048 "
                      "the whole problem sits in L2 and DRAM reads are compulsory; at 4096 B is streamed again for "
                      "every group of max(SMs, blocks per row) consecutive blocks (blocks launched together share it in"
                      " L2; later residency slots run staggered). Time is the L1 data stage for every kernel here: "
                      "global loads go through the same 32 banks as shared memory (wavefronts = the most distinct words"
                      " one bank delivers; exact against ncu's data-stage counter where loads hit), shared and global "
                      "wavefronts share the pipe, plus, for the tiled kernels, one L2 latency per load-barrier round "
                      "that hides behind the other B - 1 resident blocks, or, with one or two blocks per SM, the "
                      "round's cost the barrier-round probes measured beyond its work (" + _round_costs(dev) + "). The "
                      "naive kernels' 16x16 blocks put two rows in a warp: at k = 1024 their A loads conflict 2-way and"
                      " the column-major B loads 16-way (18 wavefronts per step, measured 18). At k = 1000 the same "
                      "kernel is bound by L1's tag stage instead: 16 lines 31.25 lines apart land in 4 hashed tag banks"
                      " like random throws, 6.1 passes rather than 4 (ncu: 7.6 per step with A's two lines, model"
                      " 7.4).")
    page.text += (" The L1s of the naive kernel and of TILE 16 on grids wider than the SMs request up to 30 %"
                  " fewer sectors than their blocks' distinct ones: blocks of one grid row meet on an SM and"
                  " share A's lines. Where a launch's placement was recorded (each block's SM, start and end), the"
                  " model lets a block's loads hit the lines of every block still running on its SM that shares"
                  " its rows or columns, a line surviving the SM's fills since that block started as in an L1"
                  " that replaces at random (exp(-fills / L1 beside the carveout); nothing fitted): "
                  f"{_placement(table, folder, page)}. TILE 16's blocks start T/8 apart on an SM (TILE 32's two T/2),"
                  " about one SM count of blocks apart, and its L1 holds about that long, so the share hangs on how"
                  " their starts spread: elsewhere the model takes the spread pooled over the recorded launches (the"
                  " j-th latest co-resident block j/B of a block's time and j SM counts of blocks back, give or take"
                  " that slot's spread, the two offsets paired - a block fewer back started more recently - for"
                  " kernels with barriers; one spread, the offsets independent, for the naive matmul;"
                  " coresidency.law), which brings TILE 16's +10…+30 % to -6…+8 % (held out).")
    page.text += _b_replay(data, folder, page)
    page.text += allocation_section(dev, table, folder, page)
    page.text += b_curve_section(dev, table, folder, page)
    page.text += coarse_curve_section(dev, table, folder, page)
    page.text += naive_k_section(dev, folder, page)
    d = table[(table.metric == "dram_read_bytes") & (table.case.isin(["matmul.tiled", "matmul.coarsened"]))].copy()
    d["m"] = param(d, "m")
    d["variant"] = d.case_id.str.replace(MATMUL_SIZES, "", regex=True)
    page.figures.append(("DRAM reads vs size", figures.lines(
        d, "m", [("predicted", "-", "predicted"), ("measured", "o", "ncu")], folder / "matmul_dram.png",
        "DRAM bytes read vs matrix size", "m = n = k", "bytes", group="variant", logx=True, logy=True)))
    l2 = table[table.study.eq("matmul") & table.metric.isin(["l2_requested_read_sectors", "l2_read_sectors"])]
    w = l2.pivot_table(index="case_id", columns="metric", values=["predicted", "measured"], aggfunc="first")
    if ("measured", "l2_requested_read_sectors") in w.columns:
        w = w.dropna()
        model = w[("predicted", "l2_read_sectors")]
        w = pd.DataFrame({"L1s request (xbar) / model": w[("measured", "l2_requested_read_sectors")] / model,
                          "L2 slices count (lts) / model": w[("measured", "l2_read_sectors")] / model})
        w.index = [re.sub(r"k=\d+,|n=\d+,?|matmul\.", "", i).replace(",]", "]") for i in w.index]
        page.figures.append(("L2 reads at both ends", figures.bars(
            list(w.index), {k: list(w[k]) for k in w.columns}, folder / "matmul_l2_reads.png",
            "L2 read sectors measured over the model: what the L1s request, what the L2 slices count",
            "measured / model")))
    c = table[(table.case == "matmul.coarsened") & (table.kind == "time")].copy()
    c["coarse"], c["m"] = param(c, "coarse"), param(c, "m")
    page.figures.append(("coarsening sweep", figures.lines(
        c[c.m >= 2048], "coarse", [("predicted", "-", "predicted"), ("measured", "o", "measured")],
        folder / "matmul_coarsening.png", "Coarsening sweep", "COARSE_FACTOR", "s", group="m", logy=True)))
    if (r := measured_rounds(dev)) is not None and (rounds := _rounds_alone(dev, table)) is not None:
        page.figures.append(("rounds alone on an SM", figures.lines(
            rounds, "footprint_mib", [("exposed_ns", "o", "measured")], folder / "matmul_rounds_alone.png",
            "One block per SM: a round's time beyond the model's work", "A + B (MiB)", "ns per round",
            group="variant", logx=True,
            levels=[(r.chain_s * 1e9, f"probe.barrier_rounds, {ROUND_CHAIN_FMAS}-FMA chain (the model where"
                                      " loads wait for the barrier)"),
                    (r.idle_s * 1e9, "probe.barrier_rounds, no chain (the model where the next load is"
                                     " hoisted, plus DRAM's share)")])))
    if (paired := _rounds_paired(dev, table)) is not None:
        page.figures.append(("rounds two an SM by waves", _pair_rounds_figure(dev, data, paired, folder)))
        many = paired[paired.waves > 16].round_ns
        if len(many):
            page.text += (f" Past 16 waves the two-block matmuls' measured times imply {many.min():.0f}-"
                          f"{many.max():.0f} ns a round (figure 'rounds two an SM by waves'), where the model holds"
                          f" the probe's last recorded round and an H100's probe keeps falling: the term is a few"
                          f" % of their time, so that excess is as much the other terms' error as the round's.")
    return page


def _rounds_paired(dev: DeviceSpec, table: pd.DataFrame) -> pd.DataFrame | None:
    """Matmul cases with two blocks per SM whose barrier term is at least 5 % of their measured time: the
    two-tile round their times imply at their waves - the law's round there scaled by (measured time less
    the model's without the term) / the term (hoisted and one-tile rounds so brought to two tiles)."""
    rows = []
    for r, _, pred, barrier in _matmul_barriers(dev, table, 2):
        if barrier.time_s < 0.05 * r.measured:
            continue
        law = round_exposed_s(dev, 2, ROUND_CHAIN_FMAS, 2, pred.waves)
        variant = re.sub(r",?tile=32", "", _variant(r.case_id)).replace("[]", "")
        rows.append({"variant": f"{variant} (from its measured time)", "waves": pred.waves,
                     "round_ns": 1e9 * law * (r.measured - pred.time_s + barrier.time_s) / barrier.time_s})
    return pd.DataFrame(rows) if rows else None


def _pair_rounds_figure(dev: DeviceSpec, data: pd.DataFrame, paired: pd.DataFrame, folder: Path) -> str:
    """The two-block round against the waves: the law's lines, the probe's rounds on this device and
    on an H100 (check data, not read by the model), and what the matmuls' measured times imply."""
    waves = np.geomspace(0.5, 512, 80)
    overlays = [(waves, [1e9 * round_exposed_s(dev, 2, ROUND_CHAIN_FMAS, tiles, w) for w in waves], style,
                 f"model: {tiles} tile{'s' * (tiles > 1)} a round (linear in log(waves), held past the ends)")
                for tiles, style in ((1, "C7--"), (2, "k-"))]
    cards = [(recorded_pair_rounds(dev, data), f"probe.barrier_waves on the {dev.name}", "D")]
    for check in ("waves_curve", "waves_tail"):
        if (rounds := checked_pair_rounds(dev, check)) is not None:
            cards.append((rounds, f"the same on an H100 ({check}; not read by the model)", "x"))
    for rounds, label, marker in cards:
        for tiles, colour in ((1, "C7"), (2, "k")):
            w = sorted(k for t, k in rounds if t == tiles)
            overlays.append((np.array(w), [1e9 * rounds[(tiles, k)] for k in w], colour + marker,
                             f"{label}, {tiles} tile{'s' * (tiles > 1)}"))
    return figures.groups(paired, "waves", "round_ns", "variant", folder / "matmul_rounds_paired.png",
                          "Two blocks per SM: the barrier round beyond the work, by waves",
                          "waves (blocks / (2 x SMs))", "ns per round", logx=True, overlays=tuple(overlays),
                          legend_outside=True)


@dataclass(frozen=True)
class MeasuredRounds:
    """The barrier rounds the matmul page quotes and draws (s): alone on an SM with matmul's chain and
    without it (the idle round), two an SM over many waves with one tile a round and with two, and the
    same two in one wave of blocks started together."""

    chain_s: float
    idle_s: float
    pair_s: float
    pair_two_tiles_s: float
    pair_one_wave_s: float
    pair_two_tiles_one_wave_s: float


def measured_rounds(dev: DeviceSpec) -> MeasuredRounds | None:
    """The rounds from the device's recorded probes (through round_exposed_s); None where any is missing."""
    r = (round_exposed_s(dev, 1, ROUND_CHAIN_FMAS, 1), round_exposed_s(dev, 1, 0, 1),
         round_exposed_s(dev, 2, ROUND_CHAIN_FMAS, 1), round_exposed_s(dev, 2, ROUND_CHAIN_FMAS, 2),
         round_exposed_s(dev, 2, ROUND_CHAIN_FMAS, 1, 1), round_exposed_s(dev, 2, ROUND_CHAIN_FMAS, 2, 1))
    return None if None in r else MeasuredRounds(*r)


def _round_costs(dev: DeviceSpec) -> str:
    """The measured rounds in the matmul prose."""
    if (r := measured_rounds(dev)) is None:
        return f"not recorded on {dev.name}"

    def ns(s: float) -> str:
        return f"{s * 1e9:.0f} ns"

    return (f"alone: {ns(r.chain_s)} with matmul's {ROUND_CHAIN_FMAS}-FMA chain, {ns(r.idle_s)} where the compiler"
            f" issues the next load inside the work (SASS), plus DRAM's latency over L2's for the sweeps DRAM"
            f" serves; two over many waves: {ns(r.pair_s)} a round of both with one tile loaded,"
            f" {ns(r.pair_two_tiles_s)} with two, and in one wave of blocks started together"
            f" {ns(r.pair_one_wave_s)} and {ns(r.pair_two_tiles_one_wave_s)} - a launch pays the round at its"
            f" own waves, linear in log(waves) between the wave counts measured and held past them")


def _rounds_alone(dev: DeviceSpec, table: pd.DataFrame) -> pd.DataFrame | None:
    """Matmul cases with one block per SM: what each round took beyond the model's work (measured
    time less the model's time without its barrier term, over the busiest SM's rounds)."""
    rows = [{"variant": _variant(r.case_id), "footprint_mib": 4 * p["k"] * (p["m"] + p["n"]) / 2**20,
             "exposed_ns": 1e9 * (r.measured - pred.time_s + barrier.time_s) / barrier.work}
            for r, p, pred, barrier in _matmul_barriers(dev, table, 1)]
    return pd.DataFrame(rows) if rows else None


def _matmul_barriers(dev: DeviceSpec, table: pd.DataFrame,
                     blocks_per_sm: int) -> Iterator[tuple[pd.Series, dict, Prediction, Term]]:
    """The timed matmul rows the model runs at `blocks_per_sm` with a barrier term: (row, its parameters,
    its prediction, the term)."""
    for _, r in table[(table.kind == "time") & table.case.str.startswith("matmul.")].iterrows():
        p = json.loads(r.params)
        pred = predict(r.case, dev, **p)
        barrier = next((b for b in pred.breakdown if b.name == "barrier"), None)
        if pred.occupancy.blocks_per_sm == blocks_per_sm and barrier is not None:
            yield r, p, pred, barrier


def _variant(case_id: str) -> str:
    """A matmul case id without its sizes or the case family: 'tiled[tile=32]'."""
    return re.sub(MATMUL_SIZES, "", case_id).replace("matmul.", "")
