"""Ceiling and latency probes (kernels/probes.cu). Their byte and FLOP counts are their models."""

from __future__ import annotations

import math

import numpy as np

from ...errors import PerfModelError
from ...memory import Access, Launch
from ...memory.expr import parse
from ...round_replay import POOL_TILES
from ..registry import KernelCase, Setup, cdiv, f32, register

BLOCK = 256
GRID_PER_SM = 8  # persistent grid: 8 blocks of 256 threads per SM (full occupancy on the H200)
SMS = 132


def _grid(p) -> int:
    return p.get("blocks", SMS * GRID_PER_SM)


def _stream_launch(p, per_thread: int = 1) -> Launch:
    threads = _grid(p) * BLOCK
    return Launch(block=(BLOCK, 1, 1), grid=(_grid(p), 1, 1),
                  loops={"it": cdiv(p["n"] // per_thread, threads)}, params=dict(p),
                  defs={"i": "bx*bdx + tx + it*gdx*bdx"})


def _vec(p) -> int:
    return 4 if p["vec"] else 1


def _copy_setup(p, rng) -> Setup:
    a = f32(rng, p["n"])
    return Setup({"in": a}, {"out": a}, ["in", "out", np.uint64(p["n"] // _vec(p))], rtol=0)


def per_thread_sums(a: np.ndarray, threads: int, vec: int) -> np.ndarray:
    """What each thread of a grid-stride loop over `vec`-wide elements adds up (float64)."""
    items = a.reshape(-1, vec).astype(np.float64).sum(axis=1)
    items = np.pad(items, (0, -len(items) % threads))
    return items.reshape(-1, threads).sum(axis=0)


def _read_setup(p, rng) -> Setup:
    a = f32(rng, p["n"])
    expected = per_thread_sums(a, _grid(p) * BLOCK, _vec(p)).astype(np.float32)
    return Setup({"in": a}, {"out": expected}, ["in", "out", np.uint64(p["n"] // _vec(p))], rtol=1e-4)


def _stream_accesses(store: bool):
    def accesses(p) -> list[Access]:
        v = _vec(p)
        n = p["n"] // v
        acc = [Access("in load", "global", "i", elem_bytes=4 * v, cond=f"i < {n}", loops=("it",), array="in")]
        if store:
            acc.append(Access("out store", "global", "i", elem_bytes=4 * v, store=True, cond=f"i < {n}",
                              loops=("it",), array="out"))
        else:
            acc.append(Access("partial store", "global", "bx*bdx + tx", store=True, array="out"))
        return acc
    return accesses


def _with_passes(launch: Launch, passes: int) -> Launch:
    return Launch(launch.block, launch.grid, {**launch.loops, "pass": passes}, launch.params, launch.defs)


N_BIG = 1 << 27  # 512 MiB of floats: 8.9x the H200's L2

register(KernelCase(
    name="probe.copy", study="ceilings", source="probes.cu", defaults={"n": N_BIG, "vec": 1},
    entry=lambda p: "copy_f4" if p["vec"] else "copy_f1",
    launch=lambda p: _stream_launch(p, _vec(p)), accesses=_stream_accesses(True), setup=_copy_setup,
    compulsory_bytes=lambda p: (4 * p["n"], 4 * p["n"]), model="stream",
    description="DRAM copy (grid-stride; vec=1: float4)"))

register(KernelCase(
    name="probe.read", study="ceilings", source="probes.cu",
    defaults={"n": N_BIG, "vec": 1, "blocks": SMS * GRID_PER_SM, "smem_per_block": 0},
    entry=lambda p: "read_f4" if p["vec"] else "read_f1",
    launch=lambda p: _stream_launch(p, _vec(p)), accesses=_stream_accesses(False), setup=_read_setup,
    dynamic_smem=lambda p: p["smem_per_block"],
    compulsory_bytes=lambda p: (4 * p["n"], 4 * _grid(p) * BLOCK), model="stream",
    loads_in_flight=lambda p: 4 if p["vec"] else 1,  # read_f4 unrolls 4 loads; read_f1 has one
    description="DRAM read-only stream; smem_per_block caps resident blocks (latency hiding)"))


def _l2_setup(p, rng) -> Setup:
    a = f32(rng, p["n"])
    expected = (per_thread_sums(a, _grid(p) * BLOCK, 4) * p["passes"]).astype(np.float32)
    return Setup({"in": a}, {"out": expected}, ["in", "out", np.uint64(p["n"] // 4), np.int32(p["passes"])],
                 rtol=1e-4)


register(KernelCase(
    name="probe.l2_read", study="ceilings", source="probes.cu",
    defaults={"n": 8 << 20, "passes": 20},
    entry=lambda p: "read_l2",
    launch=lambda p: _with_passes(_stream_launch({**p, "vec": 1}, 4), p["passes"]),
    accesses=lambda p: [Access("ld.global.cg", "global", "i", elem_bytes=16, cond=f"i < {p['n'] // 4}",
                               loops=("pass", "it"), array="in", l1_cached=False),
                        Access("partial store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=_l2_setup, compulsory_bytes=lambda p: (4 * p["n"], 4 * _grid(p) * BLOCK), model="l2",
    description="passes over a 32 MiB buffer with ld.global.cg: L2 bandwidth"))


def _coprime_mult(p) -> int:
    grid = _grid(p)
    if math.gcd(p["mult"], grid) != 1:
        raise PerfModelError(f"probe.l2_read_shared: mult = {p['mult']} must be coprime to the grid "
                             f"({grid} blocks), or some blocks would read nothing")
    return grid


def _readers(p) -> np.ndarray:
    """Which block of read_l2 each block stands in for on each pass: b * mult^pass mod grid, (passes, grid)."""
    grid = _coprime_mult(p)
    v = np.arange(grid, dtype=np.int64)
    out = []
    for _ in range(p["passes"]):
        out.append(v)
        v = v * p["mult"] % grid
    return np.array(out)


def _shared_launch(p) -> Launch:
    _coprime_mult(p)
    return _with_passes(_stream_launch({**p, "vec": 1}, 4), p["passes"])


def _readers_setup(starts=None):
    """The shared-reader probes' data and expected sums: each block adds, on each pass, what its role
    block's threads read in read_l2 from their first float4 (`starts(grid)`: (role, thread) -> float4
    index; None: read_l2's own threads)."""
    def setup(p, rng) -> Setup:
        a = f32(rng, p["n"])
        flat = per_thread_sums(a, _grid(p) * BLOCK, 4)  # by read_l2's thread, i.e. by first float4
        per_role = flat[starts(_grid(p))] if starts else flat.reshape(_grid(p), BLOCK)
        expected = per_role[_readers(p)].sum(axis=0).reshape(-1).astype(np.float32)
        return Setup({"in": a}, {"out": expected}, ["in", "out", np.uint64(p["n"] // 4), np.int32(p["passes"]),
                                                    np.int32(p["mult"])], rtol=1e-4)
    return setup


register(KernelCase(
    name="probe.l2_read_shared", study="ceilings", source="probes.cu",
    defaults={"n": 8 << 20, "passes": 4, "mult": 653},
    entry=lambda p: "read_l2_shared",
    launch=_shared_launch,
    accesses=lambda p: [Access("ld.global.cg", "global", "i", elem_bytes=16, cond=f"i < {p['n'] // 4}",
                               loops=("pass", "it"), array="in", l1_cached=False),
                        Access("partial store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=_readers_setup(), compulsory_bytes=lambda p: (4 * p["n"], 4 * _grid(p) * BLOCK), model="l2",
    rereaders=lambda p: "shared" if p["mult"] != 1 else "one",
    description="probe.l2_read with each line read by another block (another SM) on every pass, as "
                "matmul's B by every block row: L2 retention of shared data"))


# read_l2_split's float4 index: pair (2u, 2u+1) covers read_l2's two windows, the even block the low
# half of each line (4 float4s of 8), the odd one the high half (blocks as their pass-0 roles)
SPLIT_INDEX = "(bx - bx % 2)*bdx + (tx // 4)*8 + (bx % 2)*4 + tx % 4 + it*gdx*bdx"


def split_starts(grid: int) -> np.ndarray:
    """read_l2_split's first float4 per (role block, thread): SPLIT_INDEX at it = 0."""
    env = {"bx": np.arange(grid)[:, None], "tx": np.arange(BLOCK)[None, :], "bdx": BLOCK, "gdx": grid, "it": 0}
    return parse(SPLIT_INDEX).evaluate(env)


register(KernelCase(
    name="probe.l2_read_split", study="ceilings", source="probes.cu",
    defaults={"n": 8 << 20, "passes": 4, "mult": 653},
    entry=lambda p: "read_l2_split",
    launch=_shared_launch,  # 1056 blocks: whole pairs
    accesses=lambda p: [Access("ld.global.cg, half lines", "global", SPLIT_INDEX, elem_bytes=16,
                               cond=f"{SPLIT_INDEX} < {p['n'] // 4}", loops=("pass", "it"), array="in",
                               l1_cached=False),
                        Access("partial store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=_readers_setup(split_starts), compulsory_bytes=lambda p: (4 * p["n"], 4 * _grid(p) * BLOCK), model="l2",
    # mult = 1: the same two blocks read a line's halves every pass, lost as the stream loses it (+3..+8 %)
    rereaders=lambda p: "split" if p["mult"] != 1 else "one",
    description="probe.l2_read_shared with every line's two halves read by two blocks (two SMs), as "
                "TILE 16's blocks share B's lines: L2 retention of split lines"))


def _smem_setup(p, rng) -> Setup:
    tid = np.arange(BLOCK)
    idx = (tid[:, None] + 32 * np.arange(p["iters"])[None, :]) & 1023
    per_thread = (4.0 * idx + 6.0).sum(axis=1)
    expected = np.tile(per_thread, SMS * GRID_PER_SM).astype(np.float32)
    return Setup({}, {"out": expected}, ["out", np.int32(p["iters"]), np.int32(0)], rtol=1e-3)


register(KernelCase(
    name="probe.smem_bw", study="ceilings", source="probes.cu", defaults={"iters": 4096},
    entry=lambda p: "smem_bw",
    launch=lambda p: Launch(block=(BLOCK, 1, 1), grid=(SMS * GRID_PER_SM, 1, 1),
                            loops={"it": p["iters"], "j": 1024 // BLOCK}, params=dict(p)),
    accesses=lambda p: [Access("init store", "shared", "tx + 256*j", elem_bytes=16, store=True, loops=("j",),
                               array="s"),
                        Access("float4 read", "shared", "(tx + 32*it) % 1024", elem_bytes=16, loops=("it",),
                               array="s"),
                        Access("out store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=_smem_setup, model="smem", description="conflict-free 16-byte shared-memory reads"))


def _chains_setup(dtype: type, rtol: float):
    """x <- a x + b, `iters` times, on 8 chains per thread started at tid + c; the output is their sum."""
    def setup(p, rng) -> Setup:
        a, b, n = np.float64(0.999), np.float64(0.001), p["iters"]
        x0 = np.arange(BLOCK)[:, None] + np.arange(8)[None, :]
        xn = a**n * x0 + b * (1 - a**n) / (1 - a)
        expected = np.tile(xn.sum(axis=1), SMS * GRID_PER_SM).astype(dtype)
        return Setup({}, {"out": expected}, ["out", np.int32(n), dtype(a), dtype(b)], rtol=rtol)
    return setup


for _name, _entry, _dtype, _width, _precision, _iters, _rtol in (
        ("probe.fma", "fma_peak", np.float32, 4, "fp32", 1 << 16, 2e-3),
        ("probe.dfma", "dfma_peak", np.float64, 8, "fp64", 1 << 14, 1e-9)):
    register(KernelCase(
        name=_name, study="ceilings", source="probes.cu", defaults={"iters": _iters},
        entry=lambda p, _e=_entry: _e,
        launch=lambda p: Launch(block=(BLOCK, 1, 1), grid=(SMS * GRID_PER_SM, 1, 1), params=dict(p)),
        accesses=lambda p, _w=_width: [
            Access("out store", "global", "bx*bdx + tx", store=True, elem_bytes=_w, array="out")],
        flops=lambda p: (2.0 * 8 * p["iters"] + 8) * SMS * GRID_PER_SM * BLOCK,  # the chains, then their sum
        precision=_precision, setup=_chains_setup(_dtype, _rtol), model=_precision,
        description=f"8 independent {_precision.upper()} FMA chains per thread"))


def _scatter_setup(p, rng) -> Setup:
    i = np.arange(p["n"])
    j = (i // BLOCK) * BLOCK + (i % 32) * 8 + (i % BLOCK) // 32
    out = np.empty(p["n"], dtype=np.float32)
    out[j] = (i & 0xFFFF).astype(np.float32) * np.float32(0.5)
    return Setup({}, {"out": out}, ["out", np.uint64(p["n"])], rtol=0)


register(KernelCase(
    name="probe.scatter_store", study="ceilings", source="probes.cu", defaults={"n": 1 << 26},
    entry=lambda p: "scatter_store",
    launch=lambda p: Launch(block=(BLOCK, 1, 1), grid=(cdiv(p["n"], BLOCK), 1, 1), params=dict(p)),
    accesses=lambda p: [Access("scattered store", "global", "bx*bdx + (tx % 32)*8 + tx / 32", store=True,
                               cond=f"bx*bdx + tx < {p['n']}", array="out")],
    setup=_scatter_setup, compulsory_bytes=lambda p: (0, 4 * p["n"]), model="stream",
    description="4-byte stores, one per sector per warp, sectors completed by the block's 8 warps "
                "(measured: L1 combines them into full lines before L2; bound by the block launch rate)"))


def _store_lines_setup(p, rng) -> Setup:
    lines, foot, passes, stride = p["lines"], p["footprint_lines"], p["passes"], p.get("stride", 1)
    w = np.arange(_grid(p) * BLOCK // 32)

    def expected() -> dict[str, np.ndarray]:
        out = np.full(foot * 32, np.nan, dtype=np.float32)
        lane = np.arange(32)
        per_line = 32 // lines
        for q in range(passes):
            line = (((q * len(w) + w[:, None]) * lines) % foot + lane[None, :] // per_line) * stride % foot
            j = (line * 32 + lane[None, :] % per_line).ravel()
            out[j] = (j & 0xFFFF).astype(np.float32)
        return {"out": out}

    args = ["out", np.int32(lines), np.int64(foot), np.int32(passes)] + ([np.int64(stride)] if "stride" in p else [])
    return Setup({}, expected, args, rtol=0, outputs={"out": ((foot * 32,), np.float32)}, dense=False)


def _store_lines_accesses(p) -> list[Access]:
    warps, lines = _grid(p) * BLOCK // 32, p["lines"]
    per_line = 32 // lines
    line = f"((rep*{warps} + bx*{BLOCK // 32} + tx/32)*{lines}) % {p['footprint_lines']} + (tx%32)/{per_line}"
    if "stride" in p:  # probe.store_scatter: the line permuted
        line = f"(({line})*{p['stride']}) % {p['footprint_lines']}"
    return [Access("partial-line store", "global", f"({line})*32 + (tx%32)%{per_line}", store=True,
                   loops=("rep",), array="out")]


def _store_lines_launch(p, name: str = "probe.store_lines") -> Launch:
    if p["lines"] not in (1, 2, 4, 8, 16, 32) or p["footprint_lines"] < 1:
        raise PerfModelError(f"{name}: lines = {p['lines']} must divide a warp's 32 lanes (1, 2, 4, 8, 16 or 32) "
                             f"and footprint_lines = {p['footprint_lines']} be at least 1")
    return Launch(block=(BLOCK, 1, 1), grid=(_grid(p), 1, 1), loops={"rep": p["passes"]}, params=dict(p))


def _store_lines_bytes(p) -> tuple[int, int]:
    """Whole sectors to DRAM: one per line written (lines of 4+ lanes: their sector), each line once."""
    return (0, 32 * max(1, 4 // p["lines"])
            * min(p["footprint_lines"], _grid(p) * BLOCK // 32 * p["lines"] * p["passes"]))


def _store_scatter_launch(p) -> Launch:
    foot, stride = p["footprint_lines"], p["stride"]
    if foot < 1 or foot & (foot - 1) or stride % 2 == 0:
        raise PerfModelError(f"probe.store_scatter: footprint_lines = {foot} must be a power of two and stride = "
                             f"{stride} odd (a permutation of the lines)")
    return _store_lines_launch(p, "probe.store_scatter")


register(KernelCase(
    name="probe.store_lines", study="ceilings", source="probes.cu",
    defaults={"lines": 32, "footprint_lines": 1 << 16, "passes": 64},
    entry=lambda p: "store_lines",
    launch=_store_lines_launch, accesses=_store_lines_accesses, setup=_store_lines_setup,
    compulsory_bytes=_store_lines_bytes, model="stream",
    description="stores touching `lines` 128-byte lines per warp instruction (32/lines lanes each): "
                "the L2's rate for partially written lines, L2-resident or not"))

register(KernelCase(
    name="probe.store_scatter", study="ceilings", source="probes.cu",
    defaults={"lines": 32, "footprint_lines": 1 << 24, "passes": 63, "stride": 257},
    entry=lambda p: "store_lines_scattered",
    launch=_store_scatter_launch, accesses=_store_lines_accesses, setup=_store_lines_setup,
    compulsory_bytes=_store_lines_bytes, model="stream",
    description="probe.store_lines with its lines permuted `stride` lines apart: partial sectors whose "
                "read-modify-writes land in scattered DRAM rows"))


def _dist_log2(name: str, p, unit: int) -> int:
    """log2 of a probe's writer distance `dist`, a power of two, where n (below 2^32) is a multiple of
    256 and of `unit` x dist; a PerfModelError naming the violated limit otherwise."""
    n, dist = p["n"], p["dist"]
    step = max(256, unit * dist)
    if not dist or dist & (dist - 1) or n >= 1 << 32 or n % step:
        raise PerfModelError(f"{name}: dist = {dist} must be a power of two and n = {n} a multiple of "
                             f"max(256, {unit} x dist) = {step} below 2^32")
    return dist.bit_length() - 1


def _split_store_setup(p, rng) -> Setup:
    n, off = p["n"], p["offset"]
    a = f32(rng, n)
    out = np.full(n + cdiv(off, 4), np.nan, dtype=np.float32)
    out.view(np.uint8)[off:off + 4 * n].view(np.float32)[:] = a  # offsets are multiples of 4 bytes
    args = ["in", "out", np.int32(off), np.uint32(n), np.int32(_dist_log2("probe.split_store", p, 32))]
    return Setup({"in": a}, {"out": out}, args, rtol=0, dense=False)


def _split_store_launch(p) -> Launch:
    _dist_log2("probe.split_store", p, 32)  # W = n / 32 segments, a multiple of dist
    if p["offset"] % 4:
        raise PerfModelError(f"probe.split_store: offset = {p['offset']} bytes must be a multiple of 4")
    segments, dist = p["n"] // 32, p["dist"]
    return Launch(block=(BLOCK, 1, 1), grid=(p["n"] // BLOCK, 1, 1), params=dict(p),
                  defs={"g": f"bx*{BLOCK // 32} + tx/32",
                        "j": f"((g % {dist})*{segments // dist} + g/{dist})*32 + tx%32"})


register(KernelCase(
    name="probe.split_store", study="ceilings", source="probes.cu",
    defaults={"n": 1 << 26, "offset": 4, "dist": 1},
    entry=lambda p: "split_store", launch=_split_store_launch,
    accesses=lambda p: [Access("in load", "global", "j", array="in"),
                        Access("shifted store", "global", "j", base_bytes=p["offset"], store=True, array="out")],
    setup=_split_store_setup, compulsory_bytes=lambda p: (4 * p["n"], 4 * p["n"]), model="stream",
    description="a copy shifted by `offset` bytes whose neighbouring 128-byte segments are stored by warps "
                "`dist` (a power of two) apart: what a sector written in part costs when another warp completes "
                "it later"))


def _spread_log2(name: str, p) -> int:
    """log2 of probe.piece_spread's `spread` (lines apart), a power of two dividing the n / 256 columns."""
    spread = p.get("spread", 1)
    if not spread or spread & (spread - 1) or (p["n"] // 256) % spread:
        raise PerfModelError(f"{name}: spread = {spread} must be a power of two dividing n / 256 = {p['n'] // 256}")
    return spread.bit_length() - 1


def _piece_setup(p, rng, name: str = "probe.piece_store") -> Setup:
    dist_log2 = _dist_log2(name, p, 256)  # before indexing: a PerfModelError naming the limit
    a = f32(rng, p["n"])
    i = np.arange(p["n"])
    g, d, s = i // 32, p["dist"], p.get("spread", 1)
    column, lane = (g // (8 * d)) * d + g % d, i % 32
    line = ((column // s) * 8 + lane // 4) * s + column % s
    j = (line * 4 + lane % 4) * 8 + (g // d) % 8
    out = np.empty(p["n"], dtype=np.float32)
    out[j] = a
    args = ["in", "out", np.uint32(p["n"]), np.int32(dist_log2)]
    if "spread" in p:  # probe.piece_spread's kernel takes the spread too
        args.append(np.int32(_spread_log2(name, p)))
    return Setup({"in": a}, {"out": out}, args, rtol=0)


def _piece_launch(p, name: str = "probe.piece_store") -> Launch:
    """Warp g writes word (g / dist) % 8 of 32 sectors in 8 lines `spread` lines apart, as in kernels/probes.cu."""
    _dist_log2(name, p, 256)
    d, s = p["dist"], 1 << _spread_log2(name, p)
    column = f"((g / {8 * d})*{d} + g % {d})"
    return Launch(block=(BLOCK, 1, 1), grid=(p["n"] // BLOCK, 1, 1), params=dict(p),
                  defs={"g": f"bx*{BLOCK // 32} + tx/32",
                        "j": f"((({column} / {s})*8 + (tx % 32)/4)*{s*4} + ({column} % {s})*4 + tx % 4)*8 "
                             f"+ (g / {d}) % 8"})


def _piece_accesses(p) -> list[Access]:
    return [Access("in load", "global", "bx*bdx + tx", array="in"),
            Access("4-byte piece store", "global", "j", store=True, array="out")]


register(KernelCase(
    name="probe.piece_store", study="ceilings", source="probes.cu", defaults={"n": 1 << 26, "dist": 1},
    entry=lambda p: "piece_store", launch=_piece_launch, accesses=_piece_accesses,
    setup=_piece_setup, compulsory_bytes=lambda p: (4 * p["n"], 4 * p["n"]), model="stream",
    description="a copy whose output sectors are written in 4-byte pieces by 8 warps `dist` apart (a naive "
                "transpose's column stores, in a stream): what L2 fills of sectors completed in pieces"))

register(KernelCase(
    name="probe.piece_spread", study="ceilings", source="probes.cu",
    defaults={"n": 1 << 26, "dist": 1, "spread": 256},
    entry=lambda p: "piece_spread", launch=lambda p: _piece_launch(p, "probe.piece_spread"),
    accesses=_piece_accesses, setup=lambda p, rng: _piece_setup(p, rng, "probe.piece_spread"),
    compulsory_bytes=lambda p: (4 * p["n"], 4 * p["n"]), model="stream",
    description="probe.piece_store with the 8 lines a warp writes `spread` lines apart (a naive transpose's "
                "column stores land a row apart): does L1 still combine a block's pieces, does L2 fill them"))


def _resident_loads(p, rng, offsets: np.ndarray, size: int, knob: int) -> Setup:
    """A probe whose lane l adds in[offsets[l] + 32*(it % 8)] for it < iters (L1 hits after the
    first touch); `knob` is the kernel's shape argument (stride or distance)."""
    a = f32(rng, size)
    per_lane = a[offsets[:, None] + 32 * (np.arange(p["iters"])[None, :] % 8)].astype(np.float64).sum(axis=1)
    expected = np.tile(per_lane, _grid(p) * BLOCK // 32).astype(np.float32)
    return Setup({"in": a}, {"out": expected}, ["in", "out", np.int32(knob), np.int32(p["iters"]), np.int32(0)],
                 rtol=1e-3)


def _resident_launch(p) -> Launch:
    return Launch(block=(BLOCK, 1, 1), grid=(_grid(p), 1, 1), loops={"it": p["iters"]}, params=dict(p))


register(KernelCase(
    name="probe.load_lines", study="ceilings", source="probes.cu", defaults={"stride": 1, "iters": 4096},
    entry=lambda p: "load_lines", launch=_resident_launch,
    accesses=lambda p: [Access("L1-resident load", "global", f"(tx%32)*{p['stride']} + 32*(it%8)", loops=("it",),
                               array="in"),
                        Access("sum store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=lambda p, rng: _resident_loads(p, rng, np.arange(32) * p["stride"], 32 * p["stride"] + 256, p["stride"]),
    compulsory_bytes=lambda p: (4 * (32 * p["stride"] + 256), 4 * _grid(p) * BLOCK),
    model="stream",
    description="loads that hit L1, lanes `stride` words apart: the L1 data stage's rate per access pattern"))


register(KernelCase(
    name="probe.pair_lines", study="ceilings", source="probes.cu", defaults={"dist": 32, "iters": 1024},
    entry=lambda p: "pair_lines", launch=_resident_launch,
    accesses=lambda p: [Access("two-line load", "global",
                               f"(tx%32 < 16) * (tx%32) + (tx%32 >= 16) * ({p['dist']} + tx%32) + 32*(it%8)",
                               loops=("it",), array="in"),
                        Access("sum store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=lambda p, rng: _resident_loads(p, rng, np.where(np.arange(32) < 16, 0, p["dist"]) + np.arange(32),
                                         p["dist"] + 288, p["dist"]),
    compulsory_bytes=lambda p: (min(4 * (p["dist"] + 288), 2 * 8 * 128), 4 * _grid(p) * BLOCK),  # 8 x 2 lines
    model="stream", description="two lines per warp load, `dist` words apart (L1 hits): when the tag stage "
                                "needs two passes"))


def _blocks_setup(p, rng) -> Setup:
    b = np.arange(p["blocks"])
    return Setup({}, {"out": (b & 0xFFFF).astype(np.float32)}, ["out"], rtol=0)


register(KernelCase(
    name="probe.blocks", study="ceilings", source="probes.cu", defaults={"blocks": 1 << 18},
    entry=lambda p: "blocks_only",
    launch=lambda p: Launch(block=(BLOCK, 1, 1), grid=(p["blocks"], 1, 1), params=dict(p)),
    accesses=lambda p: [Access("one store per block", "global", "bx", store=True, cond="tx == 0", array="out")],
    setup=_blocks_setup, compulsory_bytes=lambda p: (0, 4 * p["blocks"]), model="stream",
    description="blocks of 256 threads that only store one word: the rate blocks launch and retire"))


register(KernelCase(
    name="probe.launch", study="ceilings", source="probes.cu", defaults={"threads": 32},
    entry=lambda p: "empty_kernel",
    launch=lambda p: Launch(block=(p["threads"], 1, 1), grid=(1, 1, 1), params=dict(p)),
    accesses=lambda p: [],
    setup=lambda p, rng: Setup({}, {"out": np.full(1, np.nan, dtype=np.float32)}, ["out"], rtol=0, dense=False),
    model="launch", description="an empty kernel: the cost of one launch as CUDA events see it"))


ONE_BLOCK_SMEM = 116 << 10  # dynamic shared memory that leaves room for one 32 x 32 block per SM


def _round_blocks(p) -> int:
    return SMS * p["blocks_per_sm"] * p.get("waves", 1)


def _pool_bytes(p) -> int:
    """The pool tiles the blocks touch: block b reads tiles b .. b + rounds - 1 (mod the pool), and
    with two loads a round those half a pool further too."""
    reach = min(POOL_TILES, _round_blocks(p) + p["rounds"] - 1)
    if p.get("loads", 1) == 2:
        reach = min(POOL_TILES, POOL_TILES // 2 + reach if reach >= POOL_TILES // 2 else 2 * reach)
    return reach * 4096


def _rounds_setup(p, rng) -> Setup:
    blocks, loads = _round_blocks(p), p.get("loads", 1)
    pool = f32(rng, POOL_TILES, 32, 32)

    def expected() -> dict[str, np.ndarray]:
        b = np.arange(blocks)
        counts = np.stack([np.bincount((i + np.arange(p["rounds"])) % POOL_TILES, minlength=POOL_TILES)
                           for i in b]).astype(np.float64)
        tiles = pool.astype(np.float64)
        if p["work"] == 0:
            return {"out": np.roll(np.einsum("bt,tij->bij", counts, tiles), -1, axis=2).astype(np.float32).ravel()}
        if loads == 2:  # round r multiplies tile t + POOL/2 by tile t, t = (b + r) mod POOL
            products = np.einsum("tik,tkj->tij", np.roll(tiles, -POOL_TILES // 2, axis=0), tiles)
            return {"out": np.einsum("bt,tij->bij", counts, products).astype(np.float32).ravel()}
        summed = np.einsum("bt,tij->bij", counts, tiles)
        return {"out": np.einsum("bik,bkj->bij", tiles[b % POOL_TILES], summed).astype(np.float32).ravel()}

    return Setup({"in": pool.ravel()}, expected, ["in", "out", np.int32(p["rounds"]), np.int32(POOL_TILES)],
                 rtol=1e-4, outputs={"out": ((blocks * 1024,), np.float32)})


def _rounds_accesses(p) -> list[Access]:
    each_round = ("r",) if p.get("loads", 1) == 2 else ()  # the A tile: loaded every round, or once
    a_tile = f"((bx + r + {POOL_TILES // 2}) % {POOL_TILES})" if each_round else f"(bx % {POOL_TILES})"
    acc = [Access("A tile load", "global", f"{a_tile}*1024 + ty*32 + tx", loops=each_round, array="in"),
           Access("B tile load", "global", f"((bx + r) % {POOL_TILES})*1024 + ty*32 + tx", loops=("r",),
                  array="in"),
           Access("As store", "shared", "ty*32 + tx", store=True, loops=each_round, array="As"),
           Access("Bs store", "shared", "ty*32 + tx", store=True, loops=("r",), base_bytes=4096, array="Bs")]
    if p["work"] == 0:
        acc.append(Access("Bs[ty][tx+1] read", "shared", "ty*32 + (tx + 1) % 32", loops=("r",), base_bytes=4096,
                          array="Bs"))
    else:  # as matmul_tiled_32: As rows as LDS.128, Bs[kk][tx]
        acc += [Access("As[ty][kk..kk+3] read (LDS.128)", "shared", "ty*32 + 4*kq", width_bytes=16,
                       loops=("r", "kq"), array="As"),
                Access("Bs[kk][tx] read", "shared", "kk*32 + tx", loops=("r", "kk"), base_bytes=4096, array="Bs")]
    return acc + [Access("out store", "global", "bx*1024 + ty*32 + tx", store=True, array="out")]


def _rounds_entry(name: str):
    def entry(p) -> str:
        work, bps, loads = p["work"], p["blocks_per_sm"], p.get("loads", 1)
        if work not in (0, 32) or bps not in (1, 2) or loads not in (1, 2) or (loads == 2 and work == 0):
            raise PerfModelError(f"{name}: work is 0 or 32 (got {work}), blocks_per_sm 1 or 2 (got {bps}), loads "
                                 f"1 or 2 (got {loads}; 2 with work 32): kernels/probes.cu compiles those")
        return f"barrier_rounds_{work}" + ("_2" if loads == 2 else "")
    return entry


for _name, _defaults, _what in (
        ("probe.barrier_rounds", {"rounds": 4096, "work": 32, "blocks_per_sm": 1},
         "one wave of 32 x 32 blocks (1 or 2 per SM) reading L2-resident tiles: what a round costs beyond its work"),
        ("probe.barrier_waves", {"rounds": 512, "work": 32, "blocks_per_sm": 2, "waves": 8, "loads": 1},
         "`waves` waves of them, later blocks starting as earlier ones end, one tile a round or two (loads 2, "
         "COARSE 1's rounds): whether blocks sharing an SM hide each other's rounds")):
    register(KernelCase(
        name=_name, study="ceilings", source="probes.cu", defaults=_defaults,
        entry=_rounds_entry(_name),
        launch=lambda p: Launch(block=(32, 32, 1), grid=(_round_blocks(p), 1, 1),
                                loops={"r": p["rounds"], "kk": 32, "kq": 8}, params=dict(p)),
        accesses=_rounds_accesses, setup=_rounds_setup,
        flops=lambda p: _round_blocks(p) * 1024 * p["rounds"] * (2 * p["work"] or 1),
        static_smem=lambda p: 2 * 4096,
        dynamic_smem=lambda p: ONE_BLOCK_SMEM if p["blocks_per_sm"] == 1 else 0,
        compulsory_bytes=lambda p: (_pool_bytes(p), _round_blocks(p) * 4096), model="stream",
        barrier_phases=lambda p: p["rounds"],
        description=f"tiled matmul's load -> barrier -> compute -> barrier rounds, {_what}"))
