"""The transpose study: the variants' time and counters, the naive kernel's DRAM fills, and what
sectors written in part by two blocks cost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..ceilings import Ceilings
from ..devices import DeviceSpec
from ..measurements import param
from ..store_order import off_sector_share, shared_sectors
from . import figures
from .page import Page, time_page
from .store_order import store_order_section


def _rate(c) -> str:
    return f"{c.value / 1e9:.0f} G/s" if c else "unmeasured"


def transpose_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                    ceil: Ceilings, folder: Path) -> Page:
    rows = table[table.case.eq("transpose.naive_rows") & table.metric.eq("dram_read_bytes")
                 & table.kind.isin(["counter", "counter-ceiling"])].copy()
    rows["block_rows"], rows["size"] = param(rows, "block_rows"), param(rows, "rows")
    rows = rows[param(rows, "cols") == rows["size"]]  # the square sweep
    rows["footprint_mib"] = 8 * rows["size"] ** 2 / 2**20
    rows["excess_pct"] = 100 * (rows.measured / (4.0 * rows["size"] ** 2) - 1)  # past the input
    model_rows = table[table.case.isin(["transpose.naive", "transpose.naive_rows"])
                       & table.metric.eq("dram_read_bytes") & table.kind.eq("counter")]
    counted = model_rows.rel_error.abs()

    def excess(sel) -> str:
        e = rows.excess_pct[sel].round(1)
        if not len(e):
            return "not measured"
        return f"{e.min()} %" if e.min() == e.max() else f"{e.min()}-{e.max()} %"

    smallest, fits = rows["size"].min(), 8 * rows["size"] ** 2 < dev.l2_bytes
    partition_mib = dev.l2_partition_bytes / 2**20
    page = time_page("transpose", "transpose", "Transpose variants", table, folder,
                      "Counters match. The shared-memory versions load, wait at a barrier, then work in "
                      "shared memory: one DRAM latency per wave is exposed, and a block's shorter phase hides "
                      "only behind the other B - 1 resident blocks (max(load, work) + the shorter / (B - 1); "
                      "with B = 2 the blocks run in step and nothing hides; a form chosen among three on these "
                      "cases). The naive kernel is bound by L2 write requests: one per (store, line), 32 per "
                      f"warp store, at the rate probe.store_lines measures ({_rate(ceil.l2_write_requests_per_s)} "
                      f"when L2 holds the line, {_rate(ceil.l2_write_fill_requests_per_s)} for the first write "
                      f"of a whole sector, {_rate(ceil.l2_write_rmw_requests_per_s)} for a sector written in "
                      "part that must be read from DRAM first); first writes cost fills once the arrays "
                      f"outgrow one L2 partition ({partition_mib:.0f} MiB: measured, the time steps up by "
                      "1984², not at the whole L2); with 32 x 1 threads per block it is bound by block "
                      "launches. Counters match, the naive kernel's DRAM bytes through a measured curve: L2 "
                      "fills from DRAM some of the sectors it writes in 4-byte pieces and writes them back twice "
                      "(ncu's lts__d_sectors_fill_device is exactly its DRAM reads past the input) - "
                      f"{excess(rows['size'] == smallest)} at {smallest}², "
                      f"{excess(fits & (rows['size'] > smallest))} above that where both arrays fit in L2, "
                      f"{excess(~fits)} past L2, most at 2 and 4 block rows (below). The model takes the share "
                      "measured at 32 x 8 threads, by the bytes the kernel moves (Ceilings.l2_piece_fills; those "
                      "cases' DRAM reads are shown, not counted), where L2's write requests bound the kernel - "
                      "32 x 1 blocks, bound by their launches, fill little, as do the piece-writing probes the "
                      f"crossbar bounds: every other naive transpose's DRAM reads within {100 * counted.max():.1f} % "
                      f"({len(counted)} cases; the held-out draws below test it out of sample). Why L2 fills them "
                      "is not found: only sectors L2 holds no data of are filled - with the output read or "
                      "written into L2 first the fills vanish at 2048² (checks/fills_check.csv) - and neither "
                      "capacity nor the completion of sectors, 64-byte pairs or lines explains how many. Blocks "
                      "of fewer than 8 rows write their sectors in part, yet cost no read-modify-write: the "
                      "blocks beside them complete the sectors.")
    if len(rows):
        curve = pd.DataFrame([{"block_rows": "model (the 32 x 8 curve)", "footprint_mib": x / 2**20,
                               "excess_pct": 100 * y} for x, y in ceil.l2_piece_fills])
        page.figures.append(("naive transpose block shapes", figures.lines(
            pd.concat([rows[["block_rows", "footprint_mib", "excess_pct"]].astype({"block_rows": str}), curve]),
            "footprint_mib", [("excess_pct", "o-", "DRAM reads")], folder / "transpose_naive_rows.png",
            "Naive transpose, 32 x block_rows threads: DRAM reads past the input (ncu)",
            "arrays read and written (MiB)", "DRAM reads past the input, over the output (%)", group="block_rows",
            logx=True, marks=[(partition_mib, "one L2 partition"), (dev.l2_bytes / 2**20, "L2")])))
    page.text += _partial_sectors(table, folder, page) + _fill_map(table, folder, page) + _capped(table, folder, page)
    page.text += _partial_law(data, table, ceil, dev.l2_bytes, folder, page)
    timed = table[table.kind.eq("time") & table.case.str.startswith("transpose.rows")]
    fast = timed[padded_fast(timed) & (param(timed, "rows") % 8 != 0)]
    page.text += store_order_section(dev.key, ceil, dev.sm_count, fast.rel_error, folder, page)
    page.text += _swapped(table) + _replacement_law(dev, table, folder, page) + _xbar(data, table)
    t = table[(table.study == "transpose") & (table.kind == "time")]
    page.figures.append(("transpose bars", figures.bars(
        [c.replace("transpose.", "") for c in t.case_id], {"predicted": list(t.predicted * 1e6),
                                                           "measured": list(t.measured * 1e6),
                                                           "naive roofline": list(t.baseline * 1e6)},
        folder / "transpose_bars.png", "Transpose: time", "µs")))
    return page


def blocks_per_sm(t: pd.DataFrame) -> pd.Series:
    """The row transposes' blocks per SM: the cap where a case sets one, else 8 (256 threads, by warps)."""
    return param(t, "blocks_per_sm").fillna(8)


def padded_fast(t: pd.DataFrame) -> pd.Series:
    """The padded row transpose at 6-8 blocks per SM (plain or capped): the kernel that loses far more
    of its shared sectors than the others."""
    return t.case.isin(["transpose.rows", "transpose.rows_capped"]) & param(t, "pad").eq(1) & (blocks_per_sm(t) >= 6)


def reads_and_time(table: pd.DataFrame, cases: list[str]) -> pd.DataFrame:
    """One row per case of `cases` with both its DRAM reads (ncu) and its time: predicted, measured and
    relative error of each, columns (value, metric); case, case_id and params beside them."""
    t = table[table.case.isin(cases) & table.kind.isin(["counter", "time"])
              & table.metric.isin(["dram_read_bytes", "time_s"])]
    if not len(t):
        return pd.DataFrame()
    return t.pivot_table(index=["case", "case_id", "params"], columns="metric",
                         values=["predicted", "measured", "rel_error"]).dropna().reset_index()


def fills_per_row_start(table: pd.DataFrame) -> pd.DataFrame:
    """Per ragged transpose (output rows off a sector; row and shared-memory kernels): the DRAM reads
    past the input (ncu), in sectors, per tile boundary inside an output row where a row starts off a
    sector - the sectors two blocks each write in part, `cols / TILE` blocks apart - beside the model's
    time error and whether the model reads more than the input (`modelled`: it predicts fills)."""
    wide = reads_and_time(table, ["transpose.rows", "transpose.smem"])
    if not len(wide):
        return pd.DataFrame()
    rows, cols = param(wide, "rows"), param(wide, "cols")
    tile = param(wide, "tile").fillna(32).astype(int)
    inputs = 4.0 * rows * cols
    shared = shared_sectors(rows, cols, tile)
    kernel = np.where(wide.case == "transpose.rows", "row transpose, pad " + param(wide, "pad").astype(str),
                      "shared-memory transpose, TILE " + tile.astype(str))
    out = pd.DataFrame({"kernel": kernel, "case_id": wide.case_id, "array_mib": inputs / 2**20,
                        "blocks_apart": np.ceil(cols / tile).astype(int),
                        "fills_pct": 100 * (wide["measured"]["dram_read_bytes"] - inputs) / 32 / shared,
                        "time_error_pct": 100 * wide["rel_error"]["time_s"],
                        "dram_error_pct": 100 * wide["rel_error"]["dram_read_bytes"],
                        "extra_s_per_fill": (wide["measured"]["time_s"] - wide["predicted"]["time_s"])
                        / ((wide["measured"]["dram_read_bytes"] - inputs) / 32)})
    out["modelled"] = (wide["predicted"]["dram_read_bytes"] > inputs * 1.001).to_numpy()
    return out[(shared > 0).to_numpy()].reset_index(drop=True)


def _fill_map(table: pd.DataFrame, folder: Path, page: Page) -> str:
    """How many of the shared partial sectors DRAM read-modify-writes, by kernel, array size and the
    blocks between the two writers (plan h200_rmw_map crosses the last two), and what it costs."""
    f = fills_per_row_start(table)
    if not len(f):
        return ""
    page.figures.append(("fills per off-sector row start", figures.groups(
        f, "array_mib", "fills_pct", "kernel", folder / "transpose_fills.png",
        "Ragged transposes: shared partial sectors DRAM fills (ncu)",
        "one array (MiB); labels: blocks between the two writers", "DRAM fills per shared partial sector (%)",
        label="blocks_apart", logx=True)))
    page.figures.append(("time error against fills", figures.groups(
        f, "fills_pct", "time_error_pct", "kernel", folder / "transpose_fills_time.png",
        "Ragged transposes: time error against the fills", "DRAM fills per shared partial "
        "sector (%)", "model vs measured time (%)")))
    padded = f[f.kernel.eq("row transpose, pad 1")]
    others = f[~f.kernel.eq("row transpose, pad 1")]
    heavy = padded[(padded.fills_pct > 5) & ~padded.modelled]
    cost = (f" (~{1e12 * heavy.extra_s_per_fill.median():.0f} ps of kernel time each, median, where the model "
            "predicts none)") if len(heavy) else ""
    return (f" How many of those shared sectors DRAM read-modify-writes (figure below, {len(f)} ragged "
            f"transposes): the padded row transpose, the one kernel here that runs near DRAM's limit, "
            f"{padded.fills_pct.min():.1f}-{padded.fills_pct.max():.1f} %, more the larger its arrays and the "
            f"more blocks between the two writers (h200_rmw_map crosses the two); the unpadded one, whose "
            f"stores trickle out behind 32-way conflicts, and the shared-memory transposes at the same shapes "
            f"{others.fills_pct.min():.1f}-{others.fills_pct.max():.1f} %. The padded kernel's time error "
            f"follows its fills{cost}: {padded.time_error_pct.min():+.0f} to {padded.time_error_pct.max():+.0f} "
            "% against the others' "
            f"{others.time_error_pct.min():+.0f} to {others.time_error_pct.max():+.0f} %. The share depends on "
            "how the kernel's stores are timed, which the access description does not say: the model takes "
            "the order blocks write in from a recorded launch (below).")


def _partial_sectors(table: pd.DataFrame, folder: Path, page: Page) -> str:
    """Sectors written in part that a later block completes: the padded row transpose into rows that
    start off a sector (time against the share of such rows) beside probe.split_store (a shifted copy
    whose neighbouring segments are stored `dist` warps apart)."""
    rows = table[table.case.eq("transpose.rows") & table.kind.eq("time")].copy()
    rows = rows[(param(rows, "cols") == 8556) & (param(rows, "pad") == 1)]
    if len(rows):
        rows["off_share"] = off_sector_share(param(rows, "rows"))
        rows["measured_us"], rows["predicted_us"] = 1e6 * rows.measured, 1e6 * rows.predicted
        page.figures.append(("ragged row transposes", figures.lines(
            rows, "off_share", [("measured_us", "o-", "measured"), ("predicted_us", "x--", "model")],
            folder / "transpose_ragged_rows.png", "Padded row transpose 3000-3008 x 8556 (98 MiB each way)",
            "share of output rows that start off a sector", "time (µs)")))
    split = table[table.case.eq("probe.split_store") & table.kind.eq("time")].copy()
    if len(split):
        split = split[param(split, "n") == param(split, "n").max()]
        split["dist"], split["offset"] = param(split, "dist"), param(split, "offset")
        split["measured_us"], split["predicted_us"] = 1e6 * split.measured, 1e6 * split.predicted
        page.figures.append(("shifted copies", figures.lines(
            split[split.offset.isin([0, 4])], "dist", [("measured_us", "o-", "measured"),
                                                      ("predicted_us", "x--", "model")],
            folder / "split_store.png", "probe.split_store, 256 MiB: a copy stored 0 or 4 bytes off sectors",
            "warps between the two writers of a shared sector", "time (µs)", group="offset", logx=True)))
    return (" Sectors written in part cost the row transpose dearly past L2: into 3001-3007-float rows "
            "(each row's 128-byte pieces start 4-28 bytes off a sector, the partial sector completed by "
            "the next block row, ~270 blocks later) it runs up to 44 % slower than into 3000- or "
            "3008-float rows at the same DRAM bytes, growing with the share of rows that start off a "
            "sector (below; h200_ragged_rows, h200_partial). A copy stored 4, 16 or 28 bytes off runs as "
            "fast as an aligned one while the next warp completes the shared sector at once; with the second "
            "writer further away (probe.split_store, h200_split and h200_split_sweep: 2-256 MiB of traffic "
            "between) L2 loses a share of the shared sectors first that depends on that distance alone - the "
            "same at 128, 256 and 512 MiB a buffer - and fills both pieces of each lost one from DRAM; "
            "each fill costs the copy 120 ps at 2 MiB, 18 ps at 256 (below). The model fits both at 128 "
            "and 512 MiB (ceilings.partial_law), judges each sector a block writes by the distance to its "
            "last writer, and adds the fills' time to the memory system's terms: the copy's 256 MiB launches, "
            "out of sample, within 14 % (the rest is their scattered store order), the wide transposes of "
            "held-out set 22 (4-20 MiB between) DRAM reads 23 of 24 within 5 %. Nearer (figure below), the "
            "tiled transposes' shared sectors lose more than the law: 2 MiB apart the calm kernels "
            "(shared-memory, unpadded, capped at 2-4 blocks per SM) 0.6-1.6x the law, 0.25-1 MiB apart 1.5-7x "
            "(a few tenths of a percent); the padded row transpose at 6-8 blocks per SM 1.2-4.6x at 2 MiB and "
            "up to 40x nearer - at launch order's distance; by the order its blocks write in, the padded "
            "kernel follows the law (below). The model leaves out losses under 1 % of a block's sectors (their "
            "fills are a fraction of a percent of the bytes).")


def partial_law_points(data: pd.DataFrame, table: pd.DataFrame, l2_bytes: float,
                       pairs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The loss law's evidence: probe.split_store's shared sectors lost by the bytes between their
    writers (the sizes that calibrate the law filled, the others hollow; `pairs`: its
    ceilings.split_store_pairs where already read), and the suite's tiled transposes into rows off a
    sector: DRAM reads past the input over 2 x their shared output sectors, the next block row (grid x
    blocks of 8 x TILE^2 bytes) away."""
    from ..ceilings import PARTIAL_CALIBRATION_N, split_store_pairs
    from ..measurements import median_times

    if pairs is None:
        pairs = split_store_pairs(data, median_times(data), l2_bytes)
    split = pd.DataFrame({"mib": pairs.between_bytes / 2**20, "lost": pairs.lost, "group": "probe.split_store",
                          "open": ~pairs.n.isin(PARTIAL_CALIBRATION_N)}) if len(pairs) else pd.DataFrame()
    t = table[table.case.isin(["transpose.rows", "transpose.rows_capped", "transpose.smem"])
              & table.metric.eq("dram_read_bytes") & table.kind.eq("counter")]
    rows, cols, tile = param(t, "rows"), param(t, "cols"), param(t, "tile").fillna(32)
    shared = shared_sectors(rows, cols, tile)
    fast = padded_fast(t)
    tr = pd.DataFrame({"mib": np.ceil(cols / tile) * 8 * tile**2 / 2**20,
                       "lost": (t.measured - 4.0 * rows * cols) / 32 / (2 * shared),
                       "group": np.where(fast, "padded row transpose, 6-8 blocks per SM", "other tiled transposes"),
                       "open": False})[(shared > 2000).to_numpy()]
    return pd.concat([split, tr], ignore_index=True)


def _partial_law(data: pd.DataFrame, table: pd.DataFrame, ceil, l2_bytes: float, folder: Path, page: Page) -> str:
    from ..ceilings import PARTIAL_CALIBRATION_N, split_store_pairs, written_back_shares
    from ..measurements import median_times

    law = ceil.partial_law
    pairs = split_store_pairs(data, median_times(data), l2_bytes)
    points = partial_law_points(data, table, l2_bytes, pairs)
    points = points[points.mib >= 0.1] if len(points) else points
    if law is None or not len(points):
        return ""
    back = written_back_shares(pairs)
    back = back[back.between_bytes >= 0.1 * 2**20]
    points = pd.concat([points, pd.DataFrame({
        "mib": back.between_bytes / 2**20, "lost": back.written_back,
        "group": "probe.split_store: written back before the second writer",
        "open": ~back.n.isin(PARTIAL_CALIBRATION_N)})], ignore_index=True)
    x = np.geomspace(0.1, 300, 200)
    page.figures.append(("partial-sector law", figures.partial_loss(
        points, [(x, [law.lost(v * 2**20) for v in x], "lost: law fitted on the filled split_store points"),
                 (x, [law.written_back(v * 2**20) for v in x], "written back: law fitted on the filled points")],
        folder / "partial_law.png", "Sectors two writers share: lost, or written back, before the second writes")))
    return ""


def capped_fills(table: pd.DataFrame) -> pd.DataFrame:
    """transpose.rows_capped (plan h200_capped) by blocks per SM: measured and predicted time into
    rows that start on a sector (aligned) and off one (ragged, the same columns), the ragged kernel's
    DRAM fills (ncu reads past the input, in sectors) and the time they add over the aligned kernel."""
    wide = reads_and_time(table, ["transpose.rows_capped"])
    if not len(wide):
        return pd.DataFrame()
    rows, cols, bps = param(wide, "rows"), param(wide, "cols"), param(wide, "blocks_per_sm")
    out = pd.DataFrame({"rows": rows, "cols": cols, "blocks_per_sm": bps,
                        "measured_us": 1e6 * wide["measured"]["time_s"].to_numpy(),
                        "predicted_us": 1e6 * wide["predicted"]["time_s"].to_numpy(),
                        "fills": (wide["measured"]["dram_read_bytes"].to_numpy() - 4.0 * rows * cols) / 32,
                        "shared": shared_sectors(rows, cols)})
    out["fills_pct"] = 100 * out.fills / out.shared.where(out.shared > 0)
    aligned = out[out.shared.eq(0)].set_index(["rows", "cols", "blocks_per_sm"]).measured_us
    key = pd.MultiIndex.from_arrays([out.rows - out.rows % 8, out.cols, out.blocks_per_sm])  # 3001 -> 3000
    out["extra_s_per_fill"] = 1e-6 * (out.measured_us - aligned.reindex(key).to_numpy()) / out.fills
    return out.sort_values(["rows", "cols", "blocks_per_sm"]).reset_index(drop=True)


def _capped(table: pd.DataFrame, folder: Path, page: Page) -> str:
    """The row transpose with its blocks per SM capped: the streaming rule against occupancy, and
    the ragged kernel's fills and their cost against the blocks in flight."""
    f = capped_fills(table)
    if not len(f):
        return ""
    wide = f[f.cols.eq(f.cols.max()) & f.rows.isin([f.rows.min(), 3001])].copy()
    wide["kernel"] = np.where(wide.shared.eq(0), "rows start on a sector", "7 of 8 rows start off one")
    page.figures.append(("capped row transposes", figures.lines(
        wide, "blocks_per_sm", [("measured_us", "o-", "measured"), ("predicted_us", "x--", "model")],
        folder / "transpose_capped.png", f"Row transpose {int(wide.rows.min())}/3001 x {int(wide.cols.max())}, "
        "blocks per SM capped by unused shared memory", "blocks per SM", "time (µs)", group="kernel")))
    ragged = f[f.shared > 0]
    low, high = ragged[ragged.blocks_per_sm <= 4], ragged[ragged.blocks_per_sm >= 8]
    aligned = f[f.shared.eq(0)]
    err = 100 * (aligned.predicted_us / aligned.measured_us - 1)
    cost = ragged.extra_s_per_fill.dropna()
    return (f" Capped by unused shared memory at 2-8 blocks per SM (transpose.rows_capped, h200_capped: the "
            f"same addresses in the same order), the aligned kernel runs {aligned.measured_us.min():.0f}-"
            f"{aligned.measured_us.max():.0f} µs: the phase rule holds below 8 blocks, streaming only at 8 "
            f"with the L1 beside a small carveout (model {err.min():+.0f} to {err.max():+.0f} %; at 8 blocks "
            "behind 28 KiB of L1 it ran 12 % slower than uncapped, which the model does not have). The ragged "
            f"kernel fills {low.fills_pct.min():.1f}-{low.fills_pct.max():.1f} % of its shared partial "
            f"sectors at 2-4 blocks per SM - as the unpadded and shared-memory transposes do - and "
            f"{high.fills_pct.min():.1f}-{high.fills_pct.max():.1f} % at 8: the share follows the blocks in "
            f"flight. Each fill costs {1e12 * cost.min():.0f}-{1e12 * cost.max():.0f} ps of kernel time over "
            "the aligned kernel at every cap, latency-bound or not - so the loss is not a load waiting on a "
            "victim's fill (which would cost a latency-bound kernel most), and not modelled.")


def swapped_pairs(table: pd.DataFrame) -> pd.DataFrame:
    """transpose.rows_swapped (plan h200_swapped: the next block completes a shared partial sector)
    beside transpose.rows pad 1 at the same shape: measured and predicted time, and DRAM reads past
    the input per block (ncu; output fills, or input sectors two blocks read in part)."""
    wide = reads_and_time(table, ["transpose.rows", "transpose.rows_swapped"])
    if not len(wide) or not wide.case.eq("transpose.rows_swapped").any():
        return pd.DataFrame()
    wide = wide[(param(wide, "pad") == 1).to_numpy()].reset_index(drop=True)
    rows, cols = param(wide, "rows"), param(wide, "cols")
    blocks = np.ceil(rows / 32) * np.ceil(cols / 32)
    out = pd.DataFrame({"case": wide.case, "rows": rows, "cols": cols,
                        "measured_us": 1e6 * wide["measured"]["time_s"].to_numpy(),
                        "predicted_us": 1e6 * wide["predicted"]["time_s"].to_numpy(),
                        "extra_reads_per_block": (wide["measured"]["dram_read_bytes"].to_numpy()
                                                  - 4.0 * rows * cols) / 32 / blocks})
    swapped = out[out.case.eq("transpose.rows_swapped")][["rows", "cols"]]
    return out.merge(swapped, on=["rows", "cols"]).sort_values(["rows", "cols", "case"]).reset_index(drop=True)


def _swapped(table: pd.DataFrame) -> str:
    """What swapping the grid does to the ragged row transpose (the next block completes the sector)."""
    f = swapped_pairs(table)
    if not len(f):
        return ""
    plain = f[f.case.eq("transpose.rows")].set_index(["rows", "cols"])
    swap = f[f.case.eq("transpose.rows_swapped")].set_index(["rows", "cols"])
    both = swap.join(plain, rsuffix="_plain", how="inner")
    pairs = "; ".join(f"{r} x {c}: {b.measured_us_plain:.0f} -> {b.measured_us:.0f} µs (model "
                      f"{100 * (b.predicted_us / b.measured_us - 1):+.0f} %)" for (r, c), b in both.iterrows()
                      if r % 8)
    return (" With blockIdx.x walking the input's tile rows (transpose.rows_swapped, h200_swapped) the block that "
            f"completes a shared partial sector is the next one, and the ragged kernel's loss shrinks or goes: "
            f"{pairs}. "
            f"The swapped kernels' DRAM reads past the input ({swap.extra_reads_per_block.min():.2f}-"
            f"{swap.extra_reads_per_block.max():.2f} sectors a block) are input sectors two blocks read in part, "
            "now a tile column apart (below). A ragged transpose should order its blocks along the output rows; the "
            "model spreads the swapped kernel's store order as the plain one's (above), so it loses their shared "
            "sectors as the law says at those distances and is slow where they are many.")


def partial_refills(l2_bytes: float, table: pd.DataFrame) -> pd.DataFrame:
    """Row and shared-memory transposes (plain, capped, swapped): the DRAM reads past the input (ncu,
    in sectors; `fast`: the padded row transpose at 6-8 blocks per SM) against what an L2 that
    replaces lines at random would lose of the sectors two blocks each touch in part before the second
    comes - the traffic between the two blocks over the L2's size, per shared sector: output rows that
    start off a sector, completed a tile row of blocks later (the next block, swapped), and input rows
    read in part by the next block (a tile column of blocks later, swapped)."""
    kernels = ["transpose.rows", "transpose.rows_capped", "transpose.rows_swapped", "transpose.smem"]
    t = table[table.case.isin(kernels) & table.metric.eq("dram_read_bytes") & table.kind.eq("counter")]
    if not len(t):
        return pd.DataFrame()
    rows, cols = param(t, "rows"), param(t, "cols")
    tile, pad = param(t, "tile").fillna(32), param(t, "pad")
    swapped = t.case.eq("transpose.rows_swapped").to_numpy()
    grid_x, grid_y = np.ceil(cols / tile), np.ceil(rows / tile)
    block_bytes = 8.0 * tile**2  # a tile read and written
    out_apart = np.where(swapped, 1, grid_x) * block_bytes / l2_bytes
    in_apart = np.where(swapped, grid_y, 1) * block_bytes / l2_bytes
    # input rows (`cols` floats) read in part by two blocks: the transposed shape's output boundaries
    law = (shared_sectors(rows, cols, tile) * np.minimum(out_apart, 1)
           + shared_sectors(cols, rows, tile) * np.minimum(in_apart, 1))
    name = np.where(t.case.eq("transpose.smem"), "shared-memory TILE " + tile.astype(int).astype(str),
                    t.case.str.replace("transpose.", "", regex=False))
    fast = padded_fast(t)
    out = pd.DataFrame({"kernel": np.where(fast, "padded row transpose, >= 6 blocks per SM", name + ", pad " +
                                           pad.astype(int).astype(str)),
                        "case_id": t.case_id, "array_mib": 4.0 * rows * cols / 2**20, "law_sectors": law,
                        "measured_sectors": (t.measured - 4.0 * rows * cols) / 32, "fast": fast.to_numpy()})
    out["ratio"] = out.measured_sectors / out.law_sectors
    return out[out.law_sectors > 2000].reset_index(drop=True)


def _replacement_law(dev, table: pd.DataFrame, folder: Path, page: Page) -> str:
    """How far a random-replacement L2 explains the ragged transposes' extra DRAM reads."""
    f = partial_refills(dev.l2_bytes, table)
    if not len(f):
        return ""
    page.figures.append(("partial sectors against random replacement", figures.groups(
        f, "array_mib", "ratio", "kernel", folder / "transpose_refills.png",
        "Ragged transposes: DRAM reads past the input over a random-replacement L2's losses",
        "one array (MiB)", "measured / (traffic between the two blocks / L2 size, per shared sector)",
        logx=True)))
    fast, calm = f[f.fast], f[~f.fast]
    q = calm.ratio.quantile([0.1, 0.5, 0.9])
    share = 32 * calm.measured_sectors / (calm.array_mib * 2**20 + 32 * calm.measured_sectors)
    return (f" What the other ragged transposes read past their input ({len(calm)} cases, figure below) is what an "
            "L2 that replaced lines at random would lose of the sectors two blocks each touch in part: the "
            "traffic between the two blocks over the L2's size, per shared sector - output sectors a tile row "
            "of blocks apart, input sectors a tile column apart where the grid is swapped - measured over that "
            f"{q[0.5]:.2f}x at the median, {q[0.1]:.2f}-{q[0.9]:.2f}x for 8 in 10, with nothing fitted; the "
            f"padded row transpose at 6-8 blocks per SM loses {fast.ratio.min():.1f}-{fast.ratio.max():.1f}x "
            "that. The model uses the split_store law (above), not this rule: these sectors' bytes are at most "
            f"{100 * share.max():.1f} % of those kernels' DRAM reads.")


XBAR_STALL = "l1tex__m_l1tex2xbar_req_cycles_stalled"  # cycles an L1 has a request the crossbar refuses


def xbar_stalls(data: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Row transposes profiled for the L1-to-crossbar request stall (plans h200_fabric, h200_fabric2):
    its share of the cycles on the average and the busiest SM (ncu), measured and predicted time, and
    the group: `ragged` (padded, 8 blocks per SM by warps, rows off a sector by other than half of
    one), `capped` (the same at 6-8 blocks behind unused shared memory), `other`."""
    ncu = data[data.source.eq("ncu") & data.metric.str.startswith(XBAR_STALL)
               & data.case.str.startswith("transpose.rows")]
    timed = table[table.kind.eq("time")].set_index("case_id")
    if not len(ncu) or not len(timed):
        return pd.DataFrame()
    wide = ncu.pivot_table(index="case_id", columns="metric", values="value", aggfunc="median")
    wide = wide[wide.index.isin(timed.index)]
    t = timed.loc[wide.index].reset_index()
    # padded, at 6-8 blocks per SM, into rows more than half of which start off a sector (not 3004's half)
    off = (off_sector_share(param(t, "rows")) > 0.5) & param(t, "pad").eq(1).to_numpy() & (blocks_per_sm(t) >= 6)
    group = np.where(off & t.case.eq("transpose.rows"), "ragged",
                     np.where(off & t.case.eq("transpose.rows_capped"), "capped", "other"))
    out = pd.DataFrame({"case_id": t.case_id, "group": group,
                        "stall_avg_pct": wide[f"{XBAR_STALL}.avg.pct_of_peak_sustained_elapsed"].to_numpy(),
                        "stall_max_pct": wide[f"{XBAR_STALL}.max.pct_of_peak_sustained_elapsed"].to_numpy(),
                        "measured_us": 1e6 * t.measured.to_numpy(), "predicted_us": 1e6 * t.predicted.to_numpy()})
    out["error"] = out.predicted_us / out.measured_us - 1
    return out.sort_values("stall_avg_pct", ascending=False).reset_index(drop=True)


def _xbar(data: pd.DataFrame, table: pd.DataFrame) -> str:
    """Where the padded row transposes' L1s find the crossbar refusing their requests, and whether
    that is what they lose."""
    f = xbar_stalls(data, table)
    if not len(f):
        return ""
    g = {k: f[f.group == k] for k in ("ragged", "capped", "other")}

    def span(s: pd.Series, scale: float = 1.0, fmt: str = ".1f") -> str:
        return f"{scale * s.min():{fmt}}…{scale * s.max():{fmt}}" if len(s) else "none"

    return (f" The crossbar, measured (h200_fabric, h200_fabric2: {len(f)} row transposes): the "
            f"{len(g['ragged'])} padded kernels into rows off a sector at 8 blocks per SM find it refusing their "
            f"L1s' requests {span(g['ragged'].stall_avg_pct)} % of the cycles (up to "
            f"{g['ragged'].stall_max_pct.max():.0f} % on one SM) and run {span(g['ragged'].error, 100, '+.0f')} % "
            f"against the model; the {len(g['other'])} others - aligned, half a sector off, swapped, unpadded, "
            f"2-4 blocks per SM - at most {g['other'].stall_avg_pct.max():.1f} %. But the same kernels capped at "
            f"6-8 blocks behind unused shared memory lose as much ({span(g['capped'].error, 100, '+.0f')} %) "
            f"stalling {span(g['capped'].stall_avg_pct, 1, '.2f')} %: L2's push-back goes with these fills, it is "
            "not what they cost. Why each of their fills costs them about twice what it costs the copy the "
            "loss law was fitted on is not found.")
