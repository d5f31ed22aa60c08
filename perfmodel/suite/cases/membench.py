"""Memory-access microbenchmarks (kernels/membench.cu): strided global and shared accesses."""

from __future__ import annotations

import numpy as np

from ...errors import PerfModelError
from ...memory import Access, Launch
from ..registry import KernelCase, Setup, cdiv, f32, register

VEC = {4: 1, 8: 2, 16: 4}  # floats per access of each width


def _global_launch(p) -> Launch:
    return Launch(block=(256, 1, 1), grid=(cdiv(p["n"], 256), 1, 1), params=dict(p),
                  defs={"i": "bx*bdx + tx"})


def _global_load_setup(p, rng) -> Setup:
    w, s, o, n = p["width"], p["stride"], p["offset"], p["n"]
    floats = (o + (n - 1) * s * w + w) // 4 + 1
    buf = f32(rng, floats)
    view = buf.view(np.uint8)[o:o + ((n - 1) * s + 1) * w].view(np.float32).reshape(-1, VEC[w])
    expected = view[:: s][:n].astype(np.float64).sum(axis=1).astype(np.float32)
    return Setup({"in": buf}, {"out": expected},
                 ["in", "out", np.int32(s), np.int32(o), np.int32(n)])


def _global_store_setup(p, rng) -> Setup:
    w, s, o, n = p["width"], p["stride"], p["offset"], p["n"]
    src = f32(rng, n)
    nbytes = o + (n - 1) * s * w + w
    out = np.full(cdiv(nbytes, 4), np.nan, dtype=np.float32)
    lanes = out.view(np.uint8)[o:].view(np.float32)  # offsets are multiples of 4 bytes
    first = np.arange(n) * s * VEC[w]
    lanes[first[:, None] + np.arange(VEC[w])] = src[:, None] + np.arange(VEC[w], dtype=np.float32)
    return Setup({"in": src}, {"out": out}, ["in", "out", np.int32(s), np.int32(o), np.int32(n)],
                 rtol=0, dense=False)


register(KernelCase(
    name="mem.global_load", study="coalescing", source="membench.cu",
    defaults={"width": 4, "stride": 1, "offset": 0, "n": 32768},
    entry=lambda p: f"gload_{p['width']}", launch=_global_launch,
    accesses=lambda p: [
        Access("in load", "global", "i*stride", elem_bytes=p["width"], base_bytes=p["offset"],
               cond="i < n", array="in"),
        Access("out store", "global", "i", store=True, cond="i < n", array="out")],
    setup=_global_load_setup,
    description="out[i] = sum(in_T[i*stride]) from a base offset: sectors per request vs stride/width"))

register(KernelCase(
    name="mem.global_store", study="coalescing", source="membench.cu",
    defaults={"width": 4, "stride": 1, "offset": 0, "n": 32768},
    entry=lambda p: f"gstore_{p['width']}", launch=_global_launch,
    accesses=lambda p: [
        Access("in load", "global", "i", cond="i < n", array="in"),
        Access("out store", "global", "i*stride", elem_bytes=p["width"], base_bytes=p["offset"],
               store=True, cond="i < n", array="out")],
    setup=_global_store_setup,
    description="out_T[i*stride] = in[i]: store sectors per request vs stride/width"))

SHARED_BLOCK, SHARED_GRID, SHARED_REPS = 64, 264, 4


def _shared_launch(p) -> Launch:
    size = (SHARED_BLOCK // 32) * 32 * p["stride"]
    return Launch(block=(SHARED_BLOCK, 1, 1), grid=(SHARED_GRID, 1, 1),
                  loops={"r": SHARED_REPS, "it": cdiv(size, SHARED_BLOCK)},
                  params={**p, "size": size},
                  defs={"lane_slot": "(tx/32)*32*stride + (tx%32)*stride", "j": "tx + it*bdx"})


def _shared_dynamic(p) -> int:
    return (SHARED_BLOCK // 32) * 32 * p["stride"] * p["width"]


def _shared_load_setup(p, rng) -> Setup:
    s, v = p["stride"], VEC[p["width"]]
    tid = np.arange(SHARED_BLOCK)
    slot = (tid // 32) * 32 * s + (tid % 32) * s
    one = (slot[:, None] + np.arange(v)).astype(np.float32).sum(axis=1) * SHARED_REPS
    expected = np.tile(one, SHARED_GRID).astype(np.float32)
    return Setup({}, {"out": expected}, ["out", np.int32(s), np.int32(SHARED_REPS), np.int32(0)])


def _shared_store_setup(p, rng) -> Setup:
    v = VEC[p["width"]]
    lane = np.arange(SHARED_BLOCK) % 32
    last = (SHARED_REPS - 1 + lane)[:, None] + np.arange(v)
    expected = np.tile(last.astype(np.float32).sum(axis=1), SHARED_GRID).astype(np.float32)
    return Setup({}, {"out": expected}, ["out", np.int32(p["stride"]), np.int32(SHARED_REPS), np.int32(0)])


register(KernelCase(
    name="mem.shared_load", study="banks", source="membench.cu",
    defaults={"width": 4, "stride": 1},
    entry=lambda p: f"sload_{p['width']}", launch=_shared_launch, dynamic_smem=_shared_dynamic,
    accesses=lambda p: [
        Access("init store", "shared", "j", elem_bytes=p["width"], store=True, cond="j < size",
               loops=("it",), array="s"),
        Access("strided load", "shared", "lane_slot", elem_bytes=p["width"], loops=("r",), array="s"),
        Access("out store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=_shared_load_setup,
    description="lane l reads s[l*stride] (width 4/8/16 B): wavefronts vs stride"))

register(KernelCase(
    name="mem.shared_store", study="banks", source="membench.cu",
    defaults={"width": 4, "stride": 1},
    entry=lambda p: f"sstore_{p['width']}", launch=_shared_launch, dynamic_smem=_shared_dynamic,
    accesses=lambda p: [
        Access("strided store", "shared", "lane_slot", elem_bytes=p["width"], store=True,
               loops=("r",), array="s"),
        Access("read back", "shared", "lane_slot", elem_bytes=p["width"], array="s"),
        Access("out store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=_shared_store_setup,
    description="lane l writes s[l*stride] (width 4/8/16 B): wavefronts vs stride"))


def _tile_setup(p, rng) -> Setup:
    t = p["tile"]
    ty, tx = np.mgrid[0:t, 0:t]
    val = (tx + 3 * ty).astype(np.float32)
    read = val.T if p["col"] else val
    expected = np.tile((read * SHARED_REPS).ravel(), SHARED_GRID).astype(np.float32)
    return Setup({}, {"out": expected}, ["out", np.int32(SHARED_REPS), np.int32(0)])


register(KernelCase(
    name="mem.shared_tile", study="banks", source="membench.cu",
    defaults={"tile": 32, "pad": 0, "col": 1},
    entry=lambda p: f"stile_{'col' if p['col'] else 'row'}_{p['tile']}_{p['pad']}",
    launch=lambda p: Launch(block=(p["tile"], p["tile"], 1), grid=(SHARED_GRID, 1, 1),
                            loops={"r": SHARED_REPS}, params=dict(p)),
    accesses=lambda p: [
        Access("row store", "shared", "ty*(tile+pad) + tx", store=True, array="tile"),
        Access("col read" if p["col"] else "row read", "shared",
               "tx*(tile+pad) + ty" if p["col"] else "ty*(tile+pad) + tx", loops=("r",), array="tile"),
        Access("out store", "global", "(bx*tile + ty)*tile + tx", store=True, array="out")],
    setup=_tile_setup,
    description="tile[T][T+pad] written by row, read by row or by column"))

PATTERNS = ("0", "lane % 16", "lane % 8", "lane / 2", "lane / 8", "lane ^ 1", "(lane % 4) * 8", "(lane % 16) * 2")


def _pattern(mode: int) -> str:
    """The word a lane reads in pattern `mode` (membench.cu's spattern switch)."""
    if not 0 <= mode < len(PATTERNS):
        raise PerfModelError(f"mem.shared_pattern: mode = {mode}; membench.cu's patterns are 0..{len(PATTERNS) - 1}: "
                             + ", ".join(f"{i}: {e}" for i, e in enumerate(PATTERNS)))
    return PATTERNS[mode]


def _pattern_setup(p, rng) -> Setup:
    v = VEC[p["width"]]
    lane = np.arange(SHARED_BLOCK) % 32
    idx = (np.arange(SHARED_BLOCK) // 32) * 32 + _pattern_values(p["mode"], lane)
    one = (idx[:, None] + np.arange(v)).astype(np.float32).sum(axis=1) * SHARED_REPS
    return Setup({}, {"out": np.tile(one, SHARED_GRID).astype(np.float32)},
                 ["out", np.int32(p["mode"]), np.int32(SHARED_REPS), np.int32(0)])


def _pattern_values(mode: int, lane: np.ndarray) -> np.ndarray:
    from ...memory.expr import Expr

    return np.broadcast_to(Expr(_pattern(mode)).evaluate({"lane": lane}), lane.shape)


register(KernelCase(
    name="mem.shared_pattern", study="banks", source="membench.cu", defaults={"width": 4, "mode": 0},
    entry=lambda p: f"spattern_{p['width']}",
    launch=lambda p: Launch(block=(SHARED_BLOCK, 1, 1), grid=(SHARED_GRID, 1, 1),
                            loops={"r": SHARED_REPS, "it": 1}, params=dict(p)),
    dynamic_smem=lambda p: 64 * p["width"],
    accesses=lambda p: [
        Access("init store", "shared", "tx", elem_bytes=p["width"], store=True, array="s"),
        Access(f"read s[{_pattern(p['mode'])}]", "shared", f"(tx/32)*32 + ({_pattern(p['mode'])})",
               elem_bytes=p["width"], loops=("r",), array="s"),
        Access("out store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=_pattern_setup,
    description="broadcasts and permutations within a warp: the per-width wavefront rules"))


def _carveout_setup(p, rng) -> Setup:
    words = p["bytes"] // 4
    one = ((np.arange(p["threads"]) + 1) % words).astype(np.float32)
    args = ["out"] + ([] if p["static"] else [np.int32(words)])
    return Setup({}, {"out": np.tile(one, SHARED_GRID)}, args, rtol=0)


register(KernelCase(
    name="mem.carveout", study="occupancy", source="membench.cu",
    defaults={"threads": 256, "bytes": 2048, "static": 1},
    entry=lambda p: f"smem_static_{p['bytes']}" if p["static"] else "smem_dynamic",
    dynamic_smem=lambda p: 0 if p["static"] else p["bytes"],
    launch=lambda p: Launch(block=(p["threads"], 1, 1), grid=(SHARED_GRID, 1, 1),
                            loops={"j": -(-p["bytes"] // 4 // p["threads"])}, params=dict(p)),
    accesses=lambda p: [Access("s store", "shared", "tx + j*bdx", store=True, cond=f"tx + j*bdx < {p['bytes'] // 4}",
                               loops=("j",), array="s"),
                        Access("s load", "shared", f"(tx + 1) % {p['bytes'] // 4}", array="s"),
                        Access("out store", "global", "bx*bdx + tx", store=True, array="out")],
    setup=_carveout_setup,
    description="static or dynamic shared memory per block: the carveout the driver picks"))
