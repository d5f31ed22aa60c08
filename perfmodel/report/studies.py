"""One function per study: pick its rows, draw its figures, write two or three sentences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..ceilings import Ceilings, in_flight_curve
from ..devices import DeviceSpec
from ..measurements import param
from ..memory.coalescing import LINE_BYTES
from ..models import predict
from ..models.overlap import staircase_level, streams_time
from ..occupancy import curves
from ..validate import l2_input_busy
from . import figures
from .matmul import matmul_study
from .page import Page, accuracy, time_page
from .transpose import transpose_study


def occupancy_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                    ceil: Ceilings, folder: Path) -> Page:
    page = Page("occupancy", "", "Occupancy: model vs driver vs Nsight Compute")
    occ = table[table.kind == "occupancy"]
    exact = (occ.rel_error == 0)
    drv = occ[occ.metric == "blocks_per_sm"]
    page.headline = (f"{int((drv.rel_error == 0).sum())}/{len(drv)} launch configurations give the driver's "
                     f"cuOccupancyMaxActiveBlocksPerMultiprocessor exactly; {int(exact.sum())}/{len(occ)} "
                     "occupancy rows (driver, ncu limits, theoretical occupancy) match.")
    miss = occ[~exact]
    page.text = ("The model is cuda_occupancy.h's arithmetic (tested against the header on 12,000 random "
                 "configurations). Blocks per SM and theoretical occupancy agree everywhere. ncu reports the "
                 "shared-memory limit at the carveout the driver configured, not at the maximum. The "
                 "driver's choice, read off 50 probe launches (64-1024 threads, 1-9 KiB, static and dynamic): "
                 "for blocks of up to 512 threads, room for twice the blocks the other limits allow "
                 "(capped by the block slots, and at 132 KiB unless one set of blocks needs more); for "
                 f"1024-thread blocks, just enough. {len(miss)} rows differ.")
    c = curves(dev, 256, 32, static_smem_bytes=8192)
    names = []
    for key, d in c.items():
        names.append(figures.lines(d.assign(pct=100 * d.occupancy), key, [("pct", "-", "occupancy %")],
                                   folder / f"occupancy_{key}.png", f"Occupancy vs {key} (256 threads, 32 regs, "
                                   "8 KiB static smem)", key, "occupancy (%)"))
    page.figures = [(f"occupancy vs {k}", n) for k, n in zip(c, names, strict=True)]
    page.tables = [("Rows that differ", miss[["case_id", "metric", "predicted", "measured"]].head(40)),
                   ("Driver occupancy API (first 40)", drv[["case_id", "predicted", "measured"]].head(40))]
    return page


def coalescing_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                     ceil: Ceilings, folder: Path) -> Page:
    page = Page("coalescing", "coalescing", "Global-memory coalescing: requests and sectors")
    t = table[(table.case == "mem.global_load") & table.metric.isin(["global_load_sectors",
                                                                       "global_load_requests"])]
    w = t.pivot_table(index=["case_id", "params"], columns="metric", values=["predicted", "measured"]).reset_index()
    w.columns = ["_".join(x for x in c if x) for c in w.columns]
    w["stride"], w["width"], w["offset"] = param(w, "stride"), param(w, "width"), param(w, "offset")
    w["pred_spr"] = w.predicted_global_load_sectors / w.predicted_global_load_requests
    w["meas_spr"] = w.measured_global_load_sectors / w.measured_global_load_requests
    w["efficiency_pct"] = 100 * w.width * 32 / (32 * w.meas_spr)
    w0 = w[w.offset == 0]
    f = figures.lines(w0, "stride", [("pred_spr", "-", "predicted"), ("meas_spr", "o", "ncu")],
                      folder / "coalescing_sectors.png", "Sectors per request vs stride (offset 0)",
                      "stride (elements)", "sectors per request", group="width", logx=True)
    page.figures = [("sectors per request vs stride", f)]
    page.headline = accuracy(table, "coalescing")
    page.text = ("Requests are one per warp instruction; sectors are the distinct 32-byte sectors the lanes "
                 "touch. Efficiency falls from 100 % at stride 1 to 4/128 = 3.1 % at 4-byte stride >= 8. "
                 "DRAM reads are counted in 64-byte sector pairs (a lone sector still costs 64 bytes), "
                 "a rule these microbenchmarks revealed; DRAM writes of small kernels stay in L2 past "
                 "the kernel's end (write-back), so ncu sees them later or never.")
    page.tables = [("Sectors per request and efficiency (offset 0)",
                    w0[["width", "stride", "pred_spr", "meas_spr", "efficiency_pct"]].sort_values(["width", "stride"]))]
    return page


def banks_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                ceil: Ceilings, folder: Path) -> Page:
    page = Page("banks", "banks", "Shared-memory bank conflicts: wavefronts")
    figs = []
    for case, metric in (("mem.shared_load", "smem_load_wavefronts"), ("mem.shared_store", "smem_store_wavefronts")):
        t = table[(table.case == case) & (table.metric == metric)].copy()
        t["stride"], t["width"] = param(t, "stride"), param(t, "width")
        inst = 264 * 2 * 4  # blocks x warps x repetitions of the strided instruction
        t["pred"], t["meas"] = t.predicted / inst, t.measured / inst
        figs.append((f"{case} wavefronts", figures.lines(
            t, "stride", [("pred", "-", "predicted"), ("meas", "o", "ncu")], folder / f"banks_{case}.png",
            f"{case}: wavefronts per instruction (incl. init) vs stride", "stride (elements)",
            "wavefronts / instruction", group="width")))
    tiles = table[(table.case == "mem.shared_tile") & (table.metric == "smem_load_wavefronts")].copy()
    labels = [c.replace("mem.shared_tile", "") for c in tiles.case_id]
    figs.append(("tile padding", figures.bars(labels, {"predicted": list(tiles.predicted),
                                                       "ncu": list(tiles.measured)}, folder / "banks_tiles.png",
                                              "tile[T][T+pad] read by row/column: load wavefronts", "wavefronts")))
    real = table[table.study.isin(["matmul", "transpose", "stencil"])]
    inst = real[real.metric.isin(["smem_load_wavefronts", "smem_store_wavefronts"])]
    stage = real[real.metric.isin(["smem_load_stage_wavefronts", "smem_store_stage_wavefronts"])]
    if len(stage):
        piv = stage.pivot_table(index="case_id", columns="metric", values="rel_error")
        piv = piv.loc[piv.index.str.startswith(("matmul.tiled[k=1024", "matmul.corner", "matmul.coarsened[coarse=4",
                                                "transpose.smem[cols=4096", "transpose.rows[cols=4096",
                                                "stencil.temporal[nx=4096"))]
        figs.append(("data-stage excess", figures.bars(
            [c.split("[")[0] + "\n" + c.split("[")[1][:-1] for c in piv.index],
            {col.replace("smem_", "").replace("_stage_wavefronts", ""): list(100 * (1 / (1 + piv[col]) - 1))
             for col in piv.columns},
            folder / "banks_stage_excess.png",
            "shared wavefronts: L1 data stage over per-instruction count", "extra wavefronts (%)")))
    page.figures = figs
    page.headline = accuracy(table, "banks")
    excess = 100 * (1 / (1 + stage.rel_error) - 1) if len(stage) else stage.rel_error
    page.text = ("Every microbenchmark matches ncu exactly once three rules are in the model: lanes are served "
                 "as a whole warp (<= 4 B), half-warps (8 B) or quarter-warps (16 B); neighbouring groups "
                 "share wavefronts only when their banks are disjoint or all their lanes read one address; "
                 "and nvcc turns unrolled row reads into LDS.128 (read off the SASS). In the real kernels "
                 f"ncu's per-instruction count (smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_*) "
                 f"equals the model in {(inst.rel_error.abs() <= 0.01).sum()} of {len(inst)} rows (within 1 %). "
                 f"The L1 data stage's own count (l1tex__data_pipe_lsu_wavefronts_mem_shared_op_*) is "
                 f"{excess.min():.0f}..{excess.max():+.0f} % above it: passes the addresses do not "
                 "explain, largest in kernels whose global loads and stores share the stage with the "
                 "shared accesses (ncu reports them as bank conflicts). They are shown, not modelled.")
    pat = table[(table.case == "mem.shared_pattern") & (table.metric == "smem_load_wavefronts")]
    page.tables = [("Broadcast and permutation patterns", pat[["case_id", "predicted", "measured"]]),
                   ("Real kernels' shared wavefronts", table[(table.study.isin(["matmul", "transpose", "stencil"]))
                                                            & table.metric.str.startswith("smem")]
                    [["case_id", "metric", "predicted", "measured", "rel_error"]].head(60))]
    return page


def latency_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                  ceil: Ceilings, folder: Path) -> Page:
    page = Page("latency", "", "Latency staircase (pointer chase)")
    lat = data[data.metric == "cycles_per_load"].copy()
    lat["bytes"] = param(lat, "bytes")
    lat["op"] = lat.case.str.replace("probe.chase_", "")
    chase = lat[lat.op.isin(["ca", "cg", "cv"])].copy()
    levels = {k: getattr(ceil, f"latency_{k}_s") for k in ("l1", "l2", "dram")}
    if all(levels.values()):
        chase["model"] = [levels[staircase_level(b, op, dev.l1_bytes_per_sm, dev.l2_bytes)].value * dev.sm_clock_hz
                          for b, op in zip(chase.bytes, chase.op, strict=True)]
    f = figures.lines(chase, "bytes", [("value", "o", "measured")]
                      + ([("model", "-", "staircase model")] if "model" in chase else []),
                      folder / "latency_staircase.png", f"Pointer chase on {dev.name}", "working set (bytes)",
                      "cycles per load", group="op", logx=True,
                      marks=[(dev.l1_bytes_per_sm, "L1 256 KiB"), (dev.l2_bytes, "L2 60 MiB")])
    page.figures = [("latency staircase", f)]
    rows = [(k, c.value * 1e9, c.value * dev.sm_clock_hz, c.source) for k, c in levels.items() if c]
    smem = lat[lat.op == "shared"]
    page.headline = ", ".join(f"{k.upper()} {ns:.0f} ns ({cyc:.0f} cycles)" for k, ns, cyc, _ in rows) + \
        (f", shared {smem.value.iloc[0]:.0f} cycles" if len(smem) else "")
    page.text = ("The model: a chase is served by L1 (ld.ca only) up to the L1 size, by L2 up to the L2 size, "
                 "by DRAM beyond, each at its plateau latency. "
                 "One thread follows a random cyclic walk, one 128-byte line per step. ld.ca hits L1 up to "
                 "~192 KiB (the rest of the 256 KiB is the shared-memory carveout), ld.cg and ld.cv go to L2. "
                 "L2 hits cost ~288 cycles up to 24 MiB and 430-530 cycles from 32 to 57 MiB: the far "
                 "half of the partitioned L2. Beyond 64 MiB every load goes to DRAM (~670 cycles, rising "
                 "slowly with TLB misses at 1 GiB).")
    page.tables = [("Plateaus", pd.DataFrame(rows, columns=["level", "ns", "cycles", "source"])),
                   ("All points", chase.pivot_table(index="bytes", columns="op", values="value").reset_index())]
    return page


def ceilings_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                   ceil: Ceilings, folder: Path) -> Page:
    page = Page("ceilings", "ceilings", "Ceilings and the hierarchical roofline")
    pts = []
    for _, r in table[(table.kind == "time") & (table.study.isin(["matmul", "stencil", "transpose", "ceilings"]))
                      ].iterrows():
        pred = predict(r.case, dev, **json.loads(r.params))
        if pred.flops:
            label = r.case_id.split("[")[0] + f"[{json.loads(r.params).get('m', '')}]"
            pts += figures.roofline_points(pred, label, r.measured)
    points = pd.DataFrame(pts).drop_duplicates(["label", "level"])
    f = figures.roofline(ceil, points, folder / "roofline.png", dev.name)
    page.figures = [("hierarchical roofline", f)]
    cs = pd.DataFrame([(c.name, c.value, c.unit, c.source) for c in ceil.all()],
                      columns=["ceiling", "value", "unit", "source"])
    memcpy = ceil.memcpy_bytes_per_s
    share = f" ({100 * ceil.dram_bytes_per_s.value / memcpy.value:.0f} % of cuMemcpyDtoD)" if memcpy else ""
    page.headline = (f"DRAM copy {ceil.dram_bytes_per_s.value / 1e12:.2f} TB/s{share}, L2 "
                     f"{ceil.l2_bytes_per_s.value / 1e12:.2f} TB/s, shared {ceil.smem_bytes_per_s.value / 1e12:.1f}"
                     f" TB/s, FP32 {ceil.fp32_flops_per_s.value / 1e12:.1f} TFLOP/s "
                     f"({100 * ceil.fp32_flops_per_s.value / dev.fp32_flops_per_s:.0f} % of the datasheet).")
    sweep = table[table.case.isin(["probe.read", "probe.copy"]) & table.kind.isin(["time", "time-ceiling"])
                  & table.params.str.contains('"vec":1') & ~table.params.str.contains('"smem_per_block":[1-9]')].copy()
    if len(sweep) > 4:
        sweep["mib"] = 4 * param(sweep, "n") / 2**20
        sweep["stream"] = sweep.case.str.replace("probe.", "", regex=False)
        page.figures.append(("stream size sweep", figures.lines(
            sweep, "mib", [("measured", "o", "measured"), ("predicted", "-", "model")], folder / "stream_sizes.png",
            "float4 streams: time vs array size", "MiB per array", "s", group="stream", logx=True, logy=True)))
    if ceil.l2_retention:
        page.figures.append(("L2 retention", _retention_figure(dev, table, data, ceil, folder)))
    busy = l2_input_busy(dev, data)
    if len(busy):
        busy["label"] = busy.case_id.str.replace("probe.", "", regex=False).str.replace("transpose.", "t.", regex=False)
        page.figures.append(("crossbar into L2", figures.proportional(
            busy, "transfers", "busy_s", "combined", folder / "l2_input.png",
            "The crossbar into L2: ncu's busy time vs the model's transfers", "transfers (model)",
            "busy time of lts__xbar2lts (s, ncu)", "L1 combines part (model: measured share)")))
    if ceil.store_combining:
        page.figures.append(("L1 store combining", _combining_figure(data, ceil.store_combining, folder)))
    drift = _barrier_phase(dev, folder, page)
    page.text = ("Measured ceilings replace the datasheet where recorded; the source column says which is which. "
                 "A DRAM stream pays a start-up and drain once (the intercept of the float4 read stream's time "
                 "against bytes, beyond the launch): a 1 MiB read takes 4 µs where its bytes alone take 0.2 µs. "
                 "Copies of 2-64 MiB per array run 8-15 % faster than the model: up to ~20 MB of their writes "
                 "are still in L2 when they end (see the write-back counters) and cost no DRAM time inside "
                 "the kernel. What L2 keeps of a working set read again (probe.l2_read, 4 passes over 16-128 "
                 "MiB) is a measured curve too; matmul's B, re-read by each group of blocks, loses more of itself "
                 "and by variant (figure): the model's line between one L2 partition and the whole L2 is a middle "
                 "road, off by up to 83 % there (the matmul page replays recorded schedules through the two L2 "
                 "partitions: half the error). TILE 16 loses B along a curve of its own, measured at m = k = 1920 "
                 "(perfmodel.b_curve; dotted: the model's line for it, pitch on the line, k = 1920). "
                 "What the crossbar carries into the L2 slices - a transfer per "
                 "written sector, one more per line a store writes a sector of in part, one per read request - "
                 "is what ncu's lts__xbar2lts counter is busy with (figure: one rate over every profiled store "
                 "kernel, h200_l2_units); sectors written in 4-byte pieces, four to a line, fill that port while "
                 "L2's tag stage idles." + drift)
    page.tables = [("Ceilings", cs), ("Probe times", table[(table.study == "ceilings") & (table.kind == "time")]
                                      [["case_id", "predicted", "measured", "rel_error", "baseline"]])]
    return page


def _combining_figure(data, law, folder: Path) -> str:
    """The share of combinable store sectors L1 combined against the launch's waves: the law (read off
    plan h200_combine) and every recorded launch of its probes, those it was read off and the others."""
    from ..models.combining import CALIBRATION, observed

    ncu = data[data.source.eq("ncu")]
    rows = []
    for pattern, case, fixed, _ in CALIBRATION:
        for params in {r for r in ncu[ncu.case.eq(case)].params}:
            p = json.loads(params)
            if {k: p.get(k) for k in fixed} == fixed and (point := observed(ncu, pattern, case, p)):
                rows.append({"waves": point[0], "measured": point[1], "law": law.share(pattern, point[0]),
                             "pattern": pattern})
    return figures.lines(pd.DataFrame(rows), "waves", [("law", "-", "law"), ("measured", "o", "ncu")],
                         folder / "store_combining.png", "L1 store combining by launch length "
                         "(models.combining)", "waves (blocks / resident blocks)",
                         "share of the combinable sectors combined", group="pattern", logx=True)


def _retention_figure(dev, table, data, ceil, folder: Path) -> str:
    """The measured share of B each matmul group lost before the next re-read it, beside the cyclic
    stream's retention curve, the shared and split readers' curves of each run that swept them
    (at least 10 sizes) and the model's line."""
    from ..ceilings import retention_by_run
    from ..models.dram import b_loss_from_reads, matmul_operands, reread_miss, swept_loss
    from ..suite.registry import get

    rows = table[table.case.str.startswith(("matmul.tiled", "matmul.corner", "matmul.coarsened"))
                 & (table.metric == "dram_read_bytes") & table.kind.isin(["counter", "counter-noise"])]
    pts = []
    for r in rows.itertuples():
        p = get(r.case).bind(**json.loads(r.params))
        a, b, streams = matmul_operands(dev, get(r.case).launch(p), p)
        if streams > 2 and 8 << 20 <= b <= 96 << 20:
            lost = b_loss_from_reads(r.measured, a, b, streams)
            variant = r.case.split(".")[1] + (f" {p['coarse']}" if "coarse" in p else f" {p['tile']}")
            variant += ", B's rows off the 128-byte lines" if 4 * p["n"] % LINE_BYTES else ""
            pts.append(dict(mib=b / 2**20, lost=lost, variant=variant))
    mib = np.linspace(8, 96, 89)
    model = pd.DataFrame(dict(mib=mib, lost=[reread_miss(dev, m * 2**20) for m in mib],
                              swept=[(swept_loss(dev, {"n": 4096, "k": 1920}, m * 2**20, ceil.l2_loss) or (np.nan,))[0]
                                     for m in mib]))
    probes = []
    for case, color, marker, who in (("probe.l2_read_shared", "g", "s", "another SM each pass"),
                                     ("probe.l2_read_split", "m", "^", "two SMs a line's halves")):
        swept = [(run, c) for run, c in retention_by_run(data, case).items() if len(c) >= 10]
        for i, (run, c) in enumerate(swept):
            probes.append((c, f"{color}{'-:'[i % 2]}{marker}",
                           f"{case.removeprefix('probe.')}: {who} (measured, run {run[:13]})"))
    return figures.retention(ceil.l2_retention, pd.DataFrame(pts, columns=["mib", "lost", "variant"]), model,
                             folder / "l2_retention.png", "What L2 keeps of a re-read working set", tuple(probes))


def _barrier_phase(dev, folder: Path, page: Page) -> str:
    """The barrier probes' two blocks an SM drifting apart: one SM's rounds against its clock, and the
    L1 hits their own recorded clocks replay to beside ncu's on the same launches (figures); a sentence."""
    from ..round_replay import POOL_TILES, TILE_BYTES, TRACED_CASES, l1_tile_hits, ncu_hit_shares, recorded_traces

    traces = [recorded_traces(dev.key, case, p, run="under-ncu") for case, p in TRACED_CASES]
    if not all(traces):
        return ""
    rows, replayed, labels = [], [], []
    for (case, p), (trace,) in zip(TRACED_CASES, traces, strict=True):
        occ = predict(case, dev, **p).occupancy
        tiles = int((dev.l1_bytes_per_sm - occ.carveout_bytes) // TILE_BYTES)
        replayed.append(l1_tile_hits(trace, POOL_TILES, p.get("loads", 1), tiles))
        labels.append(case.removeprefix("probe.barrier_") + " " + ",".join(f"{k}={v}" for k, v in p.items()
                                                                        if k != "blocks_per_sm"))
        if case == "probe.barrier_rounds" and p["rounds"] == 1024:
            for b in trace.blocks_by_sm()[0]:
                rows += [{"kcycles": c / 1e3, "round": i * trace.stride, "block": f"WORK {p['work']}, block {b}"}
                         for i, c in enumerate(trace.clock[b])]
    page.figures.append(("barrier probes: two blocks on one SM", figures.lines(
        pd.DataFrame(rows), "kcycles", [("round", "-", "")], folder / "barrier_phase.png",
        "Two blocks on one SM, 1024 barrier rounds: one runs ahead",
        "SM clock (thousand cycles)", "round reached", group="block")))
    ncu = ncu_hit_shares(dev.key)
    page.figures.append(("barrier probes: L1 hits replayed", figures.bars(
        labels, {"ncu, that launch": ncu, "its round clocks replayed through L1": replayed},
        folder / "barrier_phase_hits.png", "Share of the tile loads L1 served, two blocks per SM",
        "share of load sectors")))
    ratio = np.array(replayed) / np.array(ncu)
    return (" Two 32 x 32 blocks on an SM (the barrier probes) read one 512-tile pool ~80-140 tiles apart, and do"
            " not stay in step: the warp schedulers favour one, which ends its rounds 1.4x (no FMA) to 1.65x"
            " (matmul's 32-FMA round) sooner (figure), drifting through its partner's recent tiles. Their round"
            " clocks, recorded (experiments/barrier_phase.py), replayed through an L1 of what the carveout"
            f" leaves find {ratio.min():.2f}-{ratio.max():.2f}x the hits ncu counted on the same launches"
            " (figure); the model subtracts the hits of three other launches' clocks replayed so.")




def stencil_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                  ceil: Ceilings, folder: Path) -> Page:
    err = table[(table.case == "stencil.temporal") & (table.kind == "time")].rel_error
    within = f"within {100 * err.min():+.0f}..{100 * err.max():+.0f} %" if len(err) else "not timed"
    page = time_page("stencil", "stencil", "Wave-equation stencil: naive vs temporal blocking", table, folder,
                      "The naive step is DRAM-bound and the model is within a few percent at large scenes. "
                      "Temporal blocking cuts DRAM traffic by STEPS but pays the halo ((T+2S)^2/T^2), "
                      "redundant updates and integer index arithmetic: it is bound by instruction issue. The "
                      "model counts the warp instructions from the SASS around the exact shared/global "
                      "instruction counts (within 8 % of ncu's smsp__inst_executed) at four per SM per cycle, "
                      "plus the load phase and the barrier latency; two 1024-thread blocks per SM run their "
                      f"phases in step and hide nothing of each other ({within}).")
    t = table[(table.case == "stencil.temporal") & (table.kind == "time")].copy()
    t["steps"], t["ppt"], t["nx"] = param(t, "steps"), param(t, "ppt"), param(t, "nx")
    t = t[t.nx == t.nx.max()]
    t["pred_step"], t["meas_step"] = t.predicted / t.steps, t.measured / t.steps
    naive = table[(table.case == "stencil.naive") & (table.kind == "time")]
    naive_big = naive[param(naive, "nx") == t.nx.max()]
    if len(naive_big):
        t["naive_step"] = float(naive_big.measured.iloc[0])
    page.figures.append(("steps sweep", figures.lines(
        t, "steps", [("pred_step", "-", "predicted"), ("meas_step", "o", "measured")]
        + ([("naive_step", ":", "naive (measured)")] if len(naive_big) else []), folder / "stencil_steps.png",
        "Time per step vs steps per launch", "steps per launch", "s per step", group="ppt")))
    if len(naive_big):
        best = t.meas_step.min()
        page.headline += f"; best temporal blocking {float(naive_big.measured.iloc[0]) / best:.2f}x the naive step"
    for ppt, g in t.groupby("ppt"):
        model_best, measured_best = (int(g.loc[g[c].idxmin(), "steps"]) for c in ("pred_step", "meas_step"))
        page.headline += f"; optimum steps per launch ({ppt} px/thread): model {model_best}, measured {measured_best}"
    return page


def streams_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                  ceil: Ceilings, folder: Path) -> Page:
    page = Page("streams", "", "Streams: copy/compute overlap")
    ev = data[(data.case == "streams.vadd") & (data.metric == "event_s")].copy()
    ev = ev[ev.run_id == ev.run_id.max()]  # one run's timeline
    ev["streams"] = param(ev, "streams")
    tot = data[(data.case == "streams.vadd") & (data.metric == "time_s") & (data.stat == "median")].copy()
    tot["streams"] = param(tot, "streams")
    tot = tot.groupby("streams", as_index=False).value.median()  # median over recorded runs
    if not len(tot):
        page.headline = "no recorded streams run"
        return page
    one = {r.stat.split(".")[1]: r.value for r in ev[ev.streams == 1].itertuples()}
    h2d, kern, d2h = (one["kernel_start"] - one["h2d_start"], one["d2h_start"] - one["kernel_start"],
                      one["d2h_end"] - one["d2h_start"])
    tot["predicted"] = [streams_time(h2d, kern, d2h, int(s)) for s in tot.streams]
    f1 = figures.lines(tot, "streams", [("predicted", "-", "pipeline model"), ("value", "o", "measured")],
                       folder / "streams_total.png", "Total time vs streams", "streams", "s")
    f2 = figures.timeline(ev, folder / "streams_timeline.png", "Per-stream events")
    page.figures = [("total vs streams", f1), ("timeline", f2)]
    err = (tot.predicted - tot.value) / tot.value
    page.headline = (f"pipeline model from the 1-stream stage times: MAPE {100 * err.abs().mean():.1f} % over "
                     f"{len(tot)} stream counts")
    page.text = (f"One stream: H2D {h2d * 1e3:.2f} ms, kernel {kern * 1e3:.2f} ms, D2H {d2h * 1e3:.2f} ms. "
                 "S streams approach the slowest stage plus one chunk of the others.")
    page.tables = [("Total time", tot[["streams", "predicted", "value"]].rename(columns={"value": "measured"}))]
    return page


def latency_hiding_study(dev: DeviceSpec, data: pd.DataFrame, table: pd.DataFrame,
                         ceil: Ceilings, folder: Path) -> Page:
    page = Page("latency_hiding", "", "Latency hiding: bandwidth vs occupancy")
    t = table[(table.case == "probe.read") & (table.kind == "time")].copy()
    t = t[param(t, "smem_per_block") > 0]
    if not len(t):
        page.headline = "no recorded occupancy sweep"
        return page
    t["warps"] = 8 * param(t, "blocks") / dev.sm_count
    t["vec"] = param(t, "vec").map({0: "float, 1 load in flight", 1: "float4, 4 loads in flight"})
    nbytes = 4 * param(t, "n")
    t["measured_bw"], t["predicted_bw"] = nbytes / t.measured, nbytes / t.predicted
    f = figures.lines(t, "warps", [("measured_bw", "o", "measured"), ("predicted_bw", "-", "model")],
                      folder / "latency_hiding.png", "Read bandwidth vs resident warps per SM", "warps per SM",
                      "bytes/s", group="vec")
    page.figures = [("bandwidth vs occupancy", f)]
    if ceil.loaded_latency:
        curves = [("read, 128-byte chase", ceil.loaded_latency, 1.0),
                  ("read, 512-byte chase", ceil.loaded_latency_wide, 1.0),
                  ("copy, 128-byte chase", ceil.loaded_latency_copy, 0.5)]
        ll = pd.DataFrame([(name, n / 2**20, lat * 1e9) for name, curve, share in curves if curve
                           for n, lat in in_flight_curve(curve, share)],
                          columns=["stream", "in_flight_mib", "latency_ns"])
        page.figures.append(("loaded latency", figures.lines(
            ll, "in_flight_mib", [("latency_ns", "o-", "pointer chase")], folder / "loaded_latency.png",
            "DRAM latency vs the stream's read bytes in flight (rate x latency)", "MiB in flight",
            "ns per dependent load", group="stream")))
    err = t.rel_error.abs()
    page.headline = (f"time MAPE {100 * err.mean():.1f} % over {len(t)} occupancy levels; "
                     f"peak {t.measured_bw.max() / 1e12:.2f} TB/s")
    lat = ceil.latency_dram_s
    page.text = ("The model caps bandwidth with Little's law: resident warps x loads in flight x bytes per "
                 f"load / DRAM latency ({lat.value * 1e9:.0f} ns, unloaded, from the pointer chase)" if lat else "")
    page.text += (". The latency is the one measured under load (probe.chase_loaded: a warp chasing whole "
                  "128-byte lines, or 512 bytes, while other blocks stream scalar or 16-byte reads, or copy), "
                  "looked up at the kernel's own bytes in flight: a stream with N bytes in flight at rate X "
                  "saw latency L = N / X. It stays near 370 ns up to ~1 MiB in flight (2.3 TB/s), then grows "
                  "steeply as the stream nears the DRAM ceiling (600 ns at 2.6 MiB, 4.4 TB/s); past the "
                  "heaviest stream DRAM is saturated and latency = in flight / the best rate. The float4 "
                  "stream with one block per SM (2 MiB in flight) sits on that steep part: before the "
                  "16-byte stream was measured, the curve held flat and the model was 25 % fast there.")
    page.tables = [("Sweep", t[["case_id", "warps", "measured", "predicted", "measured_bw", "predicted_bw"]])]
    return page


STUDIES = {
    "occupancy": occupancy_study, "coalescing": coalescing_study, "banks": banks_study,
    "latency": latency_study, "ceilings": ceilings_study, "matmul": matmul_study,
    "transpose": transpose_study, "stencil": stencil_study, "streams": streams_study,
    "latency_hiding": latency_hiding_study,
}
