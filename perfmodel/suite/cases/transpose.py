"""FP32 transpose variants (kernels/transpose.cu), correct for any rows, cols."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from ...errors import PerfModelError
from ...memory import Access, Launch
from ..registry import KernelCase, Setup, cdiv, f32, register

SIZE = {"rows": 4096, "cols": 4096}


def _setup(p, rng) -> Setup:
    a = f32(rng, p["rows"], p["cols"])
    return Setup({"in": a}, {"out": np.ascontiguousarray(a.T)},
                 ["in", "out", np.int32(p["rows"]), np.int32(p["cols"])], rtol=0)


def _bytes(p) -> tuple[int, int]:
    return 4 * p["rows"] * p["cols"], 4 * p["rows"] * p["cols"]


NAIVE_BLOCK_ROWS = 8  # transpose.naive's 32 x 8 threads; transpose.naive_rows varies it


def _naive_launch(p) -> Launch:
    rows_per_block = p.get("block_rows", NAIVE_BLOCK_ROWS)
    return Launch(block=(32, rows_per_block, 1), grid=(cdiv(p["cols"], 32), cdiv(p["rows"], rows_per_block), 1),
                  params=dict(p), defs={"x": "bx*32 + tx", "y": f"by*{rows_per_block} + ty"})


def _naive_accesses(p) -> list[Access]:
    return [Access("in load", "global", "y*cols + x", cond="x < cols and y < rows", array="in"),
            Access("out store", "global", "x*rows + y", store=True, cond="x < cols and y < rows", array="out")]


register(KernelCase(
    name="transpose.naive", study="transpose", source="transpose.cu", defaults=dict(SIZE),
    entry=lambda p: "transpose_naive", launch=_naive_launch, accesses=_naive_accesses,
    setup=_setup, compulsory_bytes=_bytes, model="stream",
    description="one element per thread; stores rows floats apart"))

register(KernelCase(
    name="transpose.naive_rows", study="transpose", source="transpose.cu",
    defaults={**SIZE, "block_rows": NAIVE_BLOCK_ROWS},
    entry=lambda p: "transpose_naive", launch=_naive_launch, accesses=_naive_accesses,
    setup=_setup, compulsory_bytes=_bytes, model="stream",
    description="the naive transpose with 32 x BLOCK_ROWS threads: how many consecutive output floats "
                "(of one column) one block writes"))


def _smem_launch(p) -> Launch:
    t = p["tile"]
    return Launch(block=(t, t, 1), grid=(cdiv(p["cols"], t), cdiv(p["rows"], t), 1), params=dict(p),
                  defs={"x": "bx*tile + tx", "y": "by*tile + ty", "ox": "by*tile + tx", "oy": "bx*tile + ty"})


register(KernelCase(
    name="transpose.smem", study="transpose", source="transpose.cu",
    static_smem=lambda p: 4 * p["tile"] * (p["tile"] + p["pad"]),  # tile[TILE][TILE + PAD]
    defaults={**SIZE, "tile": 32, "pad": 1},
    entry=lambda p: f"transpose_smem_{p['tile']}_{p['pad']}", launch=_smem_launch,
    accesses=lambda p: [
        Access("in load", "global", "y*cols + x", cond="x < cols and y < rows", array="in"),
        Access("tile[ty][tx] store", "shared", "ty*(tile + pad) + tx", store=True,
               cond="x < cols and y < rows", array="tile"),
        Access("tile[tx][ty] read", "shared", "tx*(tile + pad) + ty", cond="ox < rows and oy < cols",
               array="tile"),
        Access("out store", "global", "oy*rows + ox", store=True, cond="ox < rows and oy < cols",
               array="out")],
    setup=_setup, compulsory_bytes=_bytes, model="stream", sync_after_loads=True,
    description="TILE x TILE threads through tile[TILE][TILE+pad]"))


ROWS = register(KernelCase(
    name="transpose.rows", study="transpose", source="transpose.cu",
    defaults={**SIZE, "pad": 1},
    static_smem=lambda p: 4 * 32 * (32 + p["pad"]),  # tile[32][32 + PAD]
    entry=lambda p: f"transpose_rows_32_{p['pad']}",
    launch=lambda p: Launch(block=(32, 8, 1), grid=(cdiv(p["cols"], 32), cdiv(p["rows"], 32), 1),
                            loops={"j": 4}, params=dict(p),
                            defs={"x": "bx*32 + tx", "y": "by*32 + ty + j*8", "ox": "by*32 + tx",
                                  "oy": "bx*32 + ty + j*8"}),
    accesses=lambda p: [
        Access("in load", "global", "y*cols + x", cond="x < cols and y < rows", loops=("j",), array="in"),
        Access("tile store", "shared", "(ty + j*8)*(32 + pad) + tx", store=True,
               cond="x < cols and y < rows", loops=("j",), array="tile"),
        Access("tile read", "shared", "tx*(32 + pad) + ty + j*8", cond="ox < rows and oy < cols",
               loops=("j",), array="tile"),
        Access("out store", "global", "oy*rows + ox", store=True, cond="ox < rows and oy < cols",
               loops=("j",), array="out")],
    setup=_setup, compulsory_bytes=_bytes, model="stream", sync_after_loads=True,
    description="32 x 8 threads, 4 elements per thread, tile[32][32+pad]"))


CAPPED_ON = "h200"  # the device whose shared memory per SM the cap divides (the plans that measure it)


def _capping_smem(p) -> int:
    """Dynamic shared memory (unused by the kernel) that leaves room for `blocks_per_sm` blocks."""
    from ...devices import device

    b = p["blocks_per_sm"]
    if not 1 <= b <= 8:
        raise PerfModelError(f"transpose.rows_capped: blocks_per_sm = {b}; 1 to 8 (8 of 256 threads fill an SM)")
    dev = device(CAPPED_ON)
    return (dev.smem_per_sm_bytes // b - dev.reserved_smem_per_block_bytes - ROWS.static_smem(p)) // 128 * 128


register(dataclasses.replace(
    ROWS, name="transpose.rows_capped", defaults={**ROWS.defaults, "blocks_per_sm": 8},
    dynamic_smem=_capping_smem,
    description="transpose.rows with unused dynamic shared memory that caps its resident blocks per SM "
                "(the same addresses in the same order, fewer blocks in flight)"))


def _swapped_launch(p) -> Launch:
    plain = ROWS.launch(p)
    swap = {"bx": "by", "by": "bx"}
    defs = {k: "".join(swap.get(t, t) for t in re.split(r"(\w+)", v)) for k, v in plain.defs.items()}
    return Launch(block=plain.block, grid=(plain.grid[1], plain.grid[0], 1), loops=plain.loops, params=plain.params,
                  defs=defs)


register(dataclasses.replace(
    ROWS, name="transpose.rows_swapped",
    entry=lambda p: f"transpose_rows_swapped_32_{p['pad']}",  # pad 1 only compiled: bind() says so
    launch=_swapped_launch,
    description="transpose.rows (pad 1) with blockIdx.x walking the input's tile rows: consecutive blocks "
                "write neighbouring tiles of the same output rows"))
