"""The perfmodel command line: devices, occupancy, smem, global, cases, predict, validate, report."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

import numpy as np

from .errors import PerfModelError
from .units import format_bytes, format_si, parse_size


def _dims(text: str) -> tuple[int, int, int]:
    try:
        parts = [int(p) for p in text.lower().split("x")]
    except ValueError:
        raise PerfModelError(f"block {text!r}: expected X, XxY or XxYxZ (e.g. 32x32)") from None
    if not 1 <= len(parts) <= 3 or min(parts) < 1:
        raise PerfModelError(f"block {text!r}: expected 1 to 3 positive sizes")
    return tuple(parts + [1] * (3 - len(parts)))  # type: ignore[return-value]


def _defines(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items or []:
        name, _, value = item.partition("=")
        if not name.isidentifier() or not value.lstrip("-").isdigit():
            raise PerfModelError(f"--define {item!r}: expected NAME=INTEGER")
        out[name] = int(value)
    return out


def cmd_devices(a: argparse.Namespace) -> None:
    from . import devices

    rows = [(d.key, d.name, d.compute_capability, d.sm_count, d.max_threads_per_sm, format_bytes(d.smem_per_sm_bytes),
             format_bytes(d.l2_bytes), format_si(d.dram_bandwidth_bytes_per_s, "B/s"),
             format_si(d.fp32_flops_per_s, "FLOP/s")) for d in devices()]
    if a.json:
        print(json.dumps([asdict(d) for d in devices()], default=str, indent=1))
        return
    head = ("key", "name", "cc", "SMs", "thr/SM", "smem/SM", "L2", "DRAM", "FP32")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)))


def cmd_occupancy(a: argparse.Namespace) -> None:
    from . import device, occupancy

    dev = device(a.device)
    occ = occupancy(dev, a.threads, a.regs, parse_size(a.smem), parse_size(a.dynamic_smem), a.carveout, a.opt_in)
    if a.plot:
        _plot_occupancy(dev, occ, a.plot)
    if a.json:
        print(json.dumps(occ.as_dict(), indent=1))
        return
    lim = lambda v: "unlimited" if v is None else str(v)  # noqa: E731
    print(f"{dev.name} (compute capability {dev.compute_capability}, {dev.sm_count} SMs)\n"
          f"  physical limits per SM: {dev.max_warps_per_sm} warps, {dev.max_blocks_per_sm} blocks, "
          f"{dev.registers_per_sm} registers, {format_bytes(dev.smem_per_sm_bytes)} shared memory\n"
          f"  per block: {occ.threads_per_block} threads = {occ.warps_per_block} warps, "
          f"{occ.registers_per_block} registers allocated, {format_bytes(occ.smem_per_block_bytes)} shared "
          f"memory allocated (incl. {dev.reserved_smem_per_block_bytes} B reserved by the driver)\n"
          f"  blocks per SM limited by: warps {occ.block_limit_warps}, registers {lim(occ.block_limit_registers)}, "
          f"shared memory {lim(occ.block_limit_shared_memory)}, block slots {occ.block_limit_blocks}\n"
          f"  => {occ.blocks_per_sm} blocks, {occ.warps_per_sm} warps, occupancy {100 * occ.occupancy:.1f} % "
          f"(limited by {', '.join(occ.limiters)})\n"
          f"  shared-memory carveout: {format_bytes(occ.carveout_bytes)} chosen by the driver "
          f"(the calculator assumes {format_bytes(occ.smem_per_sm_bytes)})")
    if a.plot:
        print(f"  graphs written to {a.plot}")


def _plot_occupancy(dev, occ, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .occupancy import curves

    c = curves(dev, occ.threads_per_block, occ.registers_per_thread, occ.static_smem_bytes,
               occ.dynamic_smem_bytes, occ.carveout, occ.opt_in)
    current = {"threads_per_block": occ.threads_per_block, "registers_per_thread": occ.registers_per_thread,
               "smem_per_block_bytes": occ.static_smem_bytes + occ.dynamic_smem_bytes}
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for ax, (key, d) in zip(axes, c.items(), strict=True):
        ax.step(d[key], 100 * d.occupancy, where="post")
        ax.axvline(current[key], color="r", ls="--", label="this launch")
        ax.set(xlabel=key, ylabel="occupancy (%)", ylim=(0, 105), title=f"{dev.name}: vs {key}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _access_rows(a: argparse.Namespace, space: str):
    from .memory import Access, Launch, addresses, analyse

    block = _dims(a.block)
    grid = _dims(a.grid)
    width = a.width or a.elem
    acc = Access("cli", space, a.index, elem_bytes=a.elem, width_bytes=width, store=a.store, cond=a.cond or "")
    launch = Launch(block=block, grid=grid, params=_defines(a.define))
    total = analyse(acc, launch)
    rows = addresses(acc, launch)
    return acc, launch, total, rows


def cmd_smem(a: argparse.Namespace) -> None:
    from .memory import shared_access

    acc, launch, total, rows = _access_rows(a, "shared")
    per = shared_access(rows, acc.width, acc.store)
    if a.json:
        print(json.dumps({"wavefronts": total.wavefronts, "ideal_wavefronts": total.ideal_wavefronts,
                          "instructions": total.requests, "per_warp_wavefronts": per.wavefronts_per_row.tolist(),
                          "per_warp_ways": per.ways_per_row.tolist()}))
        return
    print(f"shared {'store' if acc.store else 'load'} of {acc.width} B per lane, index {a.index!r}, "
          f"block {'x'.join(map(str, launch.block))}")
    for w, (wf, ways) in enumerate(zip(per.wavefronts_per_row, per.ways_per_row, strict=True)):
        words = rows[w][rows[w] >= 0] // 4
        kind = "no bank conflict" if ways <= 1 else f"{ways}-way bank conflict"
        print(f"  warp {w:2d}: {wf} wavefront(s), {kind}; words {words[:8].tolist()}{' ...' if len(words) > 8 else ''}")
    print(f"total over the grid: {total.wavefronts} wavefronts for {total.requests} instructions "
          f"(ideal {total.ideal_wavefronts}, {total.wavefronts - total.ideal_wavefronts} extra)")


def cmd_global(a: argparse.Namespace) -> None:
    from .memory import global_access

    acc, launch, total, rows = _access_rows(a, "global")
    per = global_access(rows, acc.width, acc.store)
    if a.json:
        print(json.dumps({"requests": total.requests, "sectors": total.sectors, "lines": total.lines,
                          "bytes_requested": total.bytes_requested, "bytes_moved": total.bytes_moved,
                          "efficiency": total.efficiency, "per_warp_sectors": per.sectors_per_row.tolist()}))
        return
    print(f"global {'store' if acc.store else 'load'} of {acc.width} B per lane, index {a.index!r}, "
          f"block {'x'.join(map(str, launch.block))}")
    for w, s in enumerate(per.sectors_per_row):
        print(f"  warp {w:2d}: {s} sector(s), {per.lines_per_row[w]} line(s)")
    spr = total.sectors / max(total.requests, 1)
    print(f"total: {total.requests} requests, {total.sectors} sectors ({spr:.3g} sectors per request), "
          f"{100 * total.efficiency:.1f} % efficient ({total.bytes_requested} B requested, "
          f"{total.bytes_moved} B moved)")


def cmd_cases(a: argparse.Namespace) -> None:
    from .suite.registry import REGISTRY, _load

    _load()
    for name, c in sorted(REGISTRY.items()):
        defaults = ", ".join(f"{k}={v}" for k, v in c.defaults.items())
        print(f"{name:26s} {defaults}\n{'':26s} {c.description}")


def _case_params(extra: list[str]) -> dict[str, int]:
    """--name value (or --name=value) pairs after the case: its parameters."""
    params: dict[str, int] = {}
    it = iter(extra)
    for flag in it:
        if not flag.startswith("--"):
            raise PerfModelError(f"unexpected argument {flag!r}: case parameters are --name value")
        flag, eq, inline = flag.partition("=")
        value = inline if eq else next(it, None)
        if value is None or not value.lstrip("-").isdigit():
            got = "nothing" if value is None else repr(value)
            raise PerfModelError(f"parameter {flag} needs an integer value, got {got}")
        name = flag[2:].replace("-", "_")
        if name in params:
            raise PerfModelError(f"parameter {flag} given twice ({params[name]} and {value})")
        params[name] = int(value)
    return params


def cmd_predict(a: argparse.Namespace, extra: list[str]) -> None:
    from . import predict
    from .models import naive_roofline_time

    params = _case_params(extra)
    p = predict(a.case, a.device, **params)
    plotted = _plot_roofline(p, a.device, a.plot) if a.plot else None
    if a.json:
        d = p.as_dict()
        print(json.dumps(d, default=lambda o: o.tolist() if isinstance(o, np.ndarray) else str(o), indent=1))
        if plotted:
            print(f"roofline written to {plotted}", file=sys.stderr)
        return
    print(f"{p.case} on {p.device} with {', '.join(f'{k}={v}' for k, v in p.params.items())}")
    print(f"  FLOPs {p.flops:.4g}; global loads {format_bytes(p.global_load_bytes)} "
          f"({p.global_load_requests} requests, {p.global_load_sectors} sectors), stores "
          f"{format_bytes(p.global_store_bytes)}")
    print(f"  L2 {format_bytes(p.l2_bytes)}, DRAM read {format_bytes(p.dram_read_bytes)}, write "
          f"{format_bytes(p.dram_write_bytes)} ({format_bytes(p.dram_write_bytes_in_kernel)} before the kernel "
          f"ends); shared wavefronts {p.smem_wavefronts}"
          + (f"; warp instructions {p.warp_instructions:.4g} (from the SASS)" if p.warp_instructions else ""))
    ai = p.arithmetic_intensity
    print("  arithmetic intensity: " + ", ".join(f"{k} {v:.3g} FLOP/B" for k, v in ai.items()))
    o = p.occupancy
    print(f"  occupancy {100 * o.occupancy:.0f} % ({o.blocks_per_sm} blocks/SM, limited by "
          f"{', '.join(o.limiters)}); {p.blocks} blocks = {p.waves:.2f} waves of {p.resident_blocks}")
    print("  time breakdown:")
    width = max((len(t.name) for t in p.breakdown), default=0)
    for t in sorted(p.breakdown, key=lambda t: -t.time_s):
        print(f"    {t.name:{width}s} {t.time_s * 1e6:10.2f} µs  ({t.note})")
    print(f"  => {p.bound}-bound, predicted {p.time_s * 1e6:.2f} µs "
          f"(naive roofline: {naive_roofline_time(a.case, a.device, **params) * 1e6:.2f} µs)")
    for n in p.notes:
        print(f"  note: {n}")
    if plotted:
        print(f"  roofline written to {plotted}")
    if a.measured:
        _print_measured(p, a.device)


def _print_measured(p, device: str) -> None:
    """The case's recorded measurements (suite and held out) beside today's prediction, with their runs."""
    from .recorded import measured, nearest

    print("  (reading the recorded runs, suite and held out)", file=sys.stderr, flush=True)
    got = measured(p.case, device, p.params)
    if not len(got.rows):
        near = nearest(p.case, device, p.params)
        print(f"  measured: nothing recorded of {got.case_id} on {device}"
              + (f"; nearest recorded: {', '.join(near)}" if near else ""))
        return
    for name, rows in got.rows.groupby("source_set", sort=False):
        runs = got.runs[got.runs.source_set == name]
        r = runs.iloc[-1]
        print(f"  measured ({name}; {len(runs)} run(s) on {r.device}, driver {r.driver}, CUDA {r.cuda}, SM clock "
              f"{r.sm_clock_mhz}, latest {r.run_id} at commit {r.commit}): ncu medians, CUDA-event time")
        print(f"    {'metric':30s} {'kind':18s} {'predicted':>14s} {'measured':>14s} {'error':>8s}")
        for row in rows.itertuples():
            err = f"{100 * row.rel_error:+7.1f} %" if np.isfinite(row.rel_error) else "     n/a"
            print(f"    {row.metric:30s} {row.kind:18s} {row.predicted:14.6g} {row.measured:14.6g} {err}")


def _plot_roofline(p, device: str, path: str) -> str:
    """The case's predicted dots (DRAM, L2, L1) on the device's hierarchical roofline, its measured
    ceilings where recorded (datasheet values otherwise, labelled so)."""
    from pathlib import Path

    import pandas as pd

    from .ceilings import ceilings
    from .report import figures

    points = figures.roofline_points(p, f"{p.case} ({p.bound}-bound)")
    if not points:
        raise PerfModelError(f"{p.case} does no floating-point work (FLOPs = {p.flops}): it has no point on a "
                             "roofline (without --plot, perfmodel predict prints its bytes per level and its bound)")
    out = Path(path)
    figures.roofline(ceilings(device), pd.DataFrame(points), out, p.device)
    return str(out)


def cmd_sweep(a: argparse.Namespace, extra: list[str]) -> None:
    from pathlib import Path

    from . import sweep

    if "=" not in a.vary:
        raise PerfModelError(f"--vary {a.vary!r}: give NAME=VALUES, e.g. coarse=1,2,4,8 or m=1024:8192:x2")
    name, text = a.vary.split("=", 1)
    table = sweep.sweep(a.case, a.device, name, sweep.parse_values(text), **_case_params(extra))
    if a.csv:
        print(table.to_csv(index=False), end="")
    else:
        show = table[[name, "time_s", "bound", "global_bytes", "l2_bytes", "dram_bytes", "ai_dram_flop_per_byte",
                      "occupancy", "waves"]].assign(
            time_s=table.time_s * 1e6, **{c: table[c].map(format_bytes) for c in ("global_bytes", "l2_bytes",
                                                                                  "dram_bytes")})
        show.columns = [name, "time_us", "bound", "L1_requested", "L2", "DRAM", "AI_dram_FLOP/B", "occupancy", "waves"]
        print(show.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if a.plot:
        print(f"figure written to {Path(a.plot).parent / sweep.plot(table, name, a.case, Path(a.plot))}",
              file=sys.stderr if a.csv else sys.stdout)


def cmd_report(a: argparse.Namespace) -> None:
    from .report import build

    build(a.device)


def cmd_validate(a: argparse.Namespace) -> None:
    """Measure on the live GPU, record the data under reports/data/<device>/, rebuild the reports."""
    import tempfile
    from pathlib import Path

    from .measurements import DATA_DIR
    from .report import build
    from .suite import campaign, gpu
    from .suite.importer import import_run

    key = a.device
    if key == "auto":
        from .devices import device as lookup

        name = gpu.device_properties()["name"]
        try:
            key = lookup(name).key
        except PerfModelError:
            key = name.lower().replace("nvidia ", "").replace(" ", "-")
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="perfmodel-run-"))
    campaign.run(a.cases, out, ncu=a.ncu, extras=True)
    dest = import_run(out, key)
    print(f"recorded under {dest}")
    if (DATA_DIR / key).exists():
        build(key)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="perfmodel", description="Analytical CUDA performance model, "
                                 "validated against Nsight Compute on an H200.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("devices", help="list the built-in devices")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("occupancy", help="occupancy of a launch, as NVIDIA's calculator",
                       description="Blocks per SM, the limiting resource and the occupancy of one launch.")
    p.add_argument("--device", default="H200", help="device name or alias (perfmodel devices)")
    p.add_argument("--threads", type=int, required=True, help="threads per block")
    p.add_argument("--regs", type=int, required=True, help="registers per thread")
    p.add_argument("--smem", default="0", help="static shared memory per block (16KiB, 48K, 1024)")
    p.add_argument("--dynamic-smem", default="0", help="dynamic shared memory per block")
    p.add_argument("--carveout", type=int, help="preferred shared-memory carveout, percent of the maximum")
    p.add_argument("--opt-in", action="store_true", help="kernel raised its dynamic limit to the opt-in max")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="PNG", help="write the three occupancy graphs")
    for name, helptext in (("smem", "shared-memory bank conflicts of an index expression"),
                           ("global", "global-memory coalescing of an index expression")):
        p = sub.add_parser(name, help=helptext, description=helptext + ". Names: tx ty tz bx by bz "
                           "(or threadIdx.x ...), bdx.. gdx.., and --define constants.")
        p.add_argument("--block", required=True, help="block shape, e.g. 256 or 32x32")
        p.add_argument("--grid", default="1", help="grid shape (default 1)")
        p.add_argument("--index", required=True, help='element index, e.g. "ty*33 + tx"')
        p.add_argument("--cond", help='predicate for active lanes, e.g. "tx < 20"')
        p.add_argument("--elem", type=int, default=4, help="element size in bytes (default 4)")
        p.add_argument("--width", type=int, help="bytes per lane access (default: --elem)")
        p.add_argument("--store", action="store_true")
        p.add_argument("--define", action="append", help="NAME=VALUE constant (repeatable)")
        p.add_argument("--json", action="store_true")
    sub.add_parser("cases", help="list the kernel registry's cases and parameters")
    p = sub.add_parser("predict", help="predict a registry case: bytes per level, bound, time", allow_abbrev=False,
                       description="e.g. perfmodel predict matmul.coarsened --m 4096 --n 4096 --k 4096 "
                       "--tile 32 --coarse 4. Parameters are those `perfmodel cases` lists.")
    p.add_argument("case")
    p.add_argument("--device", default="H200")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="PNG", help="draw the case on the device's hierarchical roofline")
    p.add_argument("--measured", action="store_true",
                   help="print the case's recorded measurements (suite and held out) beside the prediction")
    p = sub.add_parser("sweep", help="predict a registry case over the values of one parameter", allow_abbrev=False,
                       description="e.g. perfmodel sweep matmul.coarsened --vary coarse=1,2,4,8 --m 4096 --n 4096 "
                       "--k 4096 --plot coarse.png. Values: a list (1,2,4,8) or start:stop:step, stop included, "
                       "step xK to multiply (1024:8192:x2).")
    p.add_argument("case")
    p.add_argument("--vary", required=True, metavar="NAME=VALUES", help="the parameter swept and its values")
    p.add_argument("--device", default="H200")
    p.add_argument("--csv", action="store_true", help="every column (each time term too) as CSV")
    p.add_argument("--plot", metavar="PNG", help="draw time (its largest terms, the bound) and bytes per level")
    p = sub.add_parser("report", help="rebuild every report from the recorded data (offline)")
    p.add_argument("--device", default="h200")
    p = sub.add_parser("validate", help="measure on the live GPU (PyCUDA), record, compare")
    p.add_argument("--device", default="auto")
    p.add_argument("--cases", default="experiments/plans/h200.toml", help="TOML plan of cases")
    p.add_argument("--ncu", action="store_true", help="also collect Nsight Compute counters")
    p.add_argument("--out", help="working folder for the raw run (default: a temporary folder; resume by "
                   "passing the same folder again)")
    args, extra = ap.parse_known_args(argv)
    try:
        if args.cmd in ("predict", "sweep"):
            globals()[f"cmd_{args.cmd}"](args, extra)
        elif extra:
            ap.error(f"unrecognized arguments: {' '.join(extra)}")
        else:
            globals()[f"cmd_{args.cmd}"](args)
    except PerfModelError as exc:
        print(f"perfmodel: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
