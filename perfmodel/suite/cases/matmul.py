"""FP32 matmul variants (kernels/matmul.cu), all correct for any m, n, k."""

from __future__ import annotations

import numpy as np

from ...memory import Access, Launch
from ..registry import KernelCase, Setup, cdiv, f32, register

SIZE = {"m": 1024, "n": 1024, "k": 1024}


def _flops(p) -> float:
    return 2.0 * p["m"] * p["n"] * p["k"]


def _tile_flops(p) -> float:
    """The tiled kernels multiply whole tiles, zeros past a ragged edge included: every thread of the
    grid runs every phase (ncu's FFMA count)."""
    t, c = p["tile"], p.get("coarse", 1)
    return 2.0 * cdiv(p["m"], t) * t * cdiv(p["n"], t * c) * t * c * cdiv(p["k"], t) * t


def _compulsory(p) -> tuple[int, int]:
    return 4 * (p["m"] * p["k"] + p["k"] * p["n"]), 4 * p["m"] * p["n"]


def _setup(colmajor_b: bool):
    def setup(p, rng) -> Setup:
        m, n, k = p["m"], p["n"], p["k"]
        a, b = f32(rng, m, k), f32(rng, k, n)
        b_dev = np.ascontiguousarray(b.T) if colmajor_b else b
        return Setup({"A": a, "B": b_dev},
                     lambda: {"C": (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)},
                     ["A", "B", "C", np.int32(m), np.int32(n), np.int32(k)], rtol=1e-4,
                     outputs={"C": ((m, n), np.float32)})
    return setup


def _c_store(loops: tuple[str, ...] = ()) -> Access:
    return Access("C store", "global", "row*n + col", store=True, cond="row < m and col < n",
                  loops=loops, array="C")


def _naive_launch(p) -> Launch:
    return Launch(block=(16, 16, 1), grid=(cdiv(p["n"], 16), cdiv(p["m"], 16), 1),
                  loops={"kk": p["k"]}, params=dict(p),
                  defs={"row": "by*16 + ty", "col": "bx*16 + tx"})


def _naive_accesses(colmajor: bool):
    def accesses(p) -> list[Access]:
        guard = "row < m and col < n"
        b_index = "col*k + kk" if colmajor else "kk*n + col"
        bypass = p.get("bypass", 0)  # matmul.naive_bypass: 1 reads A past L1 (ld.global.cg), 2 B
        return [Access("A load", "global", "row*k + kk", cond=guard, loops=("kk",), array="A",
                       l1_cached=bypass != 1),
                Access("B load", "global", b_index, cond=guard, loops=("kk",), array="B",
                       l1_cached=bypass != 2),
                _c_store()]
    return accesses


for _name, _colmajor, _desc in (("naive", False, "one thread per output, A and B row-major"),
                                ("naive_colmajor_b", True, "B column-major: B[col*k + kk], uncoalesced")):
    register(KernelCase(
        name=f"matmul.{_name}", study="matmul", source="matmul.cu", defaults=dict(SIZE),
        entry=lambda p, _n=_name: f"matmul_{_n}", launch=_naive_launch,
        accesses=_naive_accesses(_colmajor), flops=_flops, setup=_setup(_colmajor),
        compulsory_bytes=_compulsory, description=_desc, model="matmul"))

register(KernelCase(
    name="matmul.naive_unrolled", study="matmul", source="matmul.cu", defaults={**SIZE, "unroll": 1},
    entry=lambda p: f"matmul_naive_unroll{p['unroll']}", launch=_naive_launch, accesses=_naive_accesses(False),
    flops=_flops, setup=_setup(False), compulsory_bytes=_compulsory, model="matmul",
    description="the naive kernel with its k loop unrolled `unroll` times (1, 4; matmul.naive: nvcc's 16)"))

register(KernelCase(
    name="matmul.naive_bypass", study="matmul", source="matmul.cu", defaults={**SIZE, "bypass": 1},
    entry=lambda p: f"matmul_naive_bypass{p['bypass']}", launch=_naive_launch, accesses=_naive_accesses(False),
    flops=_flops, setup=_setup(False), compulsory_bytes=_compulsory, model="matmul",
    description="the naive kernel reading A (bypass 1) or B (bypass 2) past L1 with ld.global.cg (0: neither)"))

register(KernelCase(
    name="matmul.naive_smem", study="matmul", source="matmul.cu", defaults={**SIZE, "smem": 0},
    entry=lambda p: "matmul_naive_bypass0", launch=_naive_launch, accesses=_naive_accesses(False),
    dynamic_smem=lambda p: p["smem"], flops=_flops, setup=_setup(False), compulsory_bytes=_compulsory,
    model="matmul", description="the naive kernel with `smem` bytes of shared memory a block it leaves unused: "
                                "the carveout grows, L1 shrinks"))


def _tiled_launch(p, coarse: int = 1) -> Launch:
    t = p["tile"]
    return Launch(block=(t, t, 1), grid=(cdiv(p["n"], t * coarse), cdiv(p["m"], t), 1),
                  loops={"ph": cdiv(p["k"], t), "kk": t, "kq": t // 4, "c": coarse}, params=dict(p),
                  defs={"row": "by*tile + ty", "col": f"bx*tile*{coarse} + c*tile + tx",
                        "bcol": "bx*tile + ty"})


def _as_read(loops: tuple[str, ...]) -> Access:
    """nvcc turns the unrolled As[ty][kk] reads of a 16-byte-aligned row into LDS.128 (seen in SASS)."""
    return Access("As[ty][kk..kk+3] read (LDS.128)", "shared", "ty*tile + 4*kq", width_bytes=16, loops=loops,
                  array="As")


def _tiled_accesses(p) -> list[Access]:
    t4 = p["tile"] ** 2 * 4
    return [
        Access("A load", "global", "row*k + ph*tile + tx", cond="row < m and ph*tile + tx < k",
               loops=("ph",), array="A"),
        Access("B load", "global", "(ph*tile + ty)*n + col", cond="ph*tile + ty < k and col < n",
               loops=("ph",), array="B"),
        Access("As store", "shared", "ty*tile + tx", store=True, loops=("ph",), array="As"),
        Access("Bs store", "shared", "ty*tile + tx", store=True, loops=("ph",), base_bytes=t4, array="Bs"),
        _as_read(("ph", "kq")),
        Access("Bs[kk][tx] read", "shared", "kk*tile + tx", loops=("ph", "kk"), base_bytes=t4, array="Bs"),
        _c_store()]


register(KernelCase(
    name="matmul.tiled", study="matmul", source="matmul.cu", defaults={**SIZE, "tile": 32},
    static_smem=lambda p: 2 * 4 * p["tile"] ** 2,  # As[T][T], Bs[T][T]
    entry=lambda p: f"matmul_tiled_{p['tile']}", launch=_tiled_launch, accesses=_tiled_accesses,
    flops=_tile_flops, setup=_setup(False), compulsory_bytes=_compulsory, model="matmul",
    barrier_phases=lambda p: cdiv(p["k"], p["tile"]), description="shared-memory tiling, TILE x TILE threads"))


def _corner_accesses(p) -> list[Access]:
    t4 = p["tile"] ** 2 * 4
    return [
        Access("A load", "global", "row*k + ph*tile + tx", cond="row < m and ph*tile + tx < k",
               loops=("ph",), array="A"),
        Access("B load (column-major)", "global", "bcol*k + ph*tile + tx",
               cond="bcol < n and ph*tile + tx < k", loops=("ph",), array="B"),
        Access("As store", "shared", "ty*tile + tx", store=True, loops=("ph",), array="As"),
        Access("Bs[ty][tx] store", "shared", "ty*(tile + pad) + tx", store=True, loops=("ph",),
               base_bytes=t4, array="Bs"),
        _as_read(("ph", "kq")),
        # with pad 0 the Bs row is 16-byte aligned too and nvcc vectorises it (LDS.128, seen in SASS)
        Access("Bs[tx][kk..kk+3] read (LDS.128)", "shared", "tx*tile + 4*kq", width_bytes=16,
               loops=("ph", "kq"), base_bytes=t4, array="Bs") if p["pad"] == 0 else
        Access("Bs[tx][kk] read", "shared", "tx*(tile + pad) + kk", loops=("ph", "kk"), base_bytes=t4,
               array="Bs"),
        _c_store()]


register(KernelCase(
    name="matmul.corner_turning", study="matmul", source="matmul.cu",
    static_smem=lambda p: 4 * p["tile"] * (2 * p["tile"] + p["pad"]),  # As[T][T], Bs[T][T + PAD]
    defaults={**SIZE, "tile": 32, "pad": 0},
    entry=lambda p: f"matmul_corner_turning_{p['tile']}_{p['pad']}", launch=_tiled_launch,
    accesses=_corner_accesses, flops=_tile_flops, setup=_setup(True), compulsory_bytes=_compulsory,
    model="matmul", barrier_phases=lambda p: cdiv(p["k"], p["tile"]),
    description="B column-major, loaded coalesced and turned in shared memory"))


def _coarse_accesses(p) -> list[Access]:
    t4 = p["tile"] ** 2 * 4
    return [
        Access("A load", "global", "row*k + ph*tile + tx", cond="row < m and ph*tile + tx < k",
               loops=("ph",), array="A"),
        Access("As store", "shared", "ty*tile + tx", store=True, loops=("ph",), array="As"),
        Access("B load", "global", "(ph*tile + ty)*n + col", cond="ph*tile + ty < k and col < n",
               loops=("ph", "c"), array="B"),
        Access("Bs store", "shared", "ty*tile + tx", store=True, loops=("ph", "c"), base_bytes=t4,
               array="Bs"),
        _as_read(("ph", "c", "kq")),
        Access("Bs[kk][tx] read", "shared", "kk*tile + tx", loops=("ph", "c", "kk"), base_bytes=t4,
               array="Bs"),
        _c_store(("c",))]


register(KernelCase(
    name="matmul.coarsened", study="matmul", source="matmul.cu",
    static_smem=lambda p: 2 * 4 * p["tile"] ** 2,  # As[T][T], Bs[T][T]
    defaults={**SIZE, "tile": 32, "coarse": 4},
    entry=lambda p: f"matmul_coarsened_{p['tile']}_{p['coarse']}",
    launch=lambda p: _tiled_launch(p, p["coarse"]), accesses=_coarse_accesses, flops=_tile_flops,
    setup=_setup(False), compulsory_bytes=_compulsory, model="matmul",
    barrier_phases=lambda p: cdiv(p["k"], p["tile"]) * p["coarse"],
    description="thread coarsening: COARSE output tiles per block share one A tile"))
