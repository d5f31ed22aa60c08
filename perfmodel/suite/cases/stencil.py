"""2-D wave equation with damping, walls and a source (kernels/stencil.cu): naive and temporal
blocking. The scene is a double slit: a wall with two gaps, a source on its left."""

from __future__ import annotations

import numpy as np

from ...memory import Access, Launch
from ..registry import KernelCase, Setup, cdiv, f32, register

FLOPS_PER_CELL = 10  # 4 adds + 1 mul + 1 sub (laplacian), 2u - prev (2), c2*lap + (FMA: 2), damp* (1)
OMEGA, AMPLITUDE, SPONGE = 0.3, 0.5, 24


def scene(nx: int, ny: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(c2, damp, source index): courant number squared 0.25, a sponge layer, a slit wall."""
    c2 = np.full((ny, nx), 0.25, dtype=np.float32)
    damp = np.ones((ny, nx), dtype=np.float32)
    y, x = np.mgrid[0:ny, 0:nx]
    edge = np.minimum(np.minimum(x, nx - 1 - x), np.minimum(y, ny - 1 - y))
    sponge = edge < SPONGE
    damp[sponge] = (1.0 - 0.05 * ((SPONGE - edge[sponge]) / SPONGE) ** 2).astype(np.float32)
    wall_x, gap, half = nx // 3, max(ny // 16, 2), max(ny // 64, 1)
    wall = (x >= wall_x) & (x < wall_x + 2)
    for centre in (ny // 2 - gap, ny // 2 + gap):
        wall &= ~((y >= centre - half) & (y <= centre + half))
    c2[wall], damp[wall] = 0.0, 0.0
    return c2, damp, (ny // 2) * nx + nx // 6


def source_value(t: int) -> np.float32:
    return np.float32(AMPLITUDE * np.sin(np.float32(OMEGA) * np.float32(t), dtype=np.float32))


def step(u: np.ndarray, prev: np.ndarray, c2: np.ndarray, damp: np.ndarray, src: int,
         value: np.float32) -> np.ndarray:
    """One time step in float32, in the kernel's order of operations (numpy reference)."""
    p = np.pad(u, 1)
    lap = p[1:-1, :-2] + p[1:-1, 2:] + p[:-2, 1:-1] + p[2:, 1:-1] - np.float32(4) * u
    nxt = damp * (np.float32(2) * u - prev + c2 * lap)
    nxt.ravel()[src] += value
    return nxt.astype(np.float32)


def _state(p, rng):
    c2, damp, src = scene(p["nx"], p["ny"])
    return f32(rng, p["ny"], p["nx"]), f32(rng, p["ny"], p["nx"]), c2, damp, src


def _naive_setup(p, rng) -> Setup:
    u, prev, c2, damp, src = _state(p, rng)
    value = source_value(0)
    return Setup({"u": u, "prev": prev, "c2": c2, "damp": damp},
                 lambda: {"next": step(u, prev, c2, damp, src, value)},
                 ["u", "prev", "c2", "damp", "next", np.int32(p["nx"]), np.int32(p["ny"]), np.int32(src),
                  value], rtol=1e-5, outputs={"next": (u.shape, np.float32)})


def _temporal_setup(p, rng) -> Setup:
    u, prev, c2, damp, src = _state(p, rng)
    values = np.array([source_value(t) for t in range(p["steps"])], dtype=np.float32)

    def reference() -> dict[str, np.ndarray]:
        cur, old = u, prev
        for t in range(p["steps"]):
            cur, old = step(cur, old, c2, damp, src, values[t]), cur
        return {"u_out": cur, "prev_out": old}

    return Setup({"u": u, "prev": prev, "c2": c2, "damp": damp, "src_values": values}, reference,
                 ["u", "prev", "c2", "damp", "u_out", "prev_out", np.int32(p["nx"]), np.int32(p["ny"]),
                  np.int32(src), "src_values"], rtol=1e-5,
                 outputs={"u_out": (u.shape, np.float32), "prev_out": (u.shape, np.float32)})


def _cells(p) -> int:
    return p["nx"] * p["ny"]


register(KernelCase(
    name="stencil.naive", study="stencil", source="stencil.cu", defaults={"nx": 8192, "ny": 8192},
    entry=lambda p: "wave_naive",
    launch=lambda p: Launch(block=(32, 8, 1), grid=(cdiv(p["nx"], 32), cdiv(p["ny"], 8), 1), params=dict(p),
                            defs={"x": "bx*32 + tx", "y": "by*8 + ty", "i": "y*nx + x",
                                  "inside": "x < nx and y < ny"}),
    accesses=lambda p: [
        Access("u centre", "global", "i", cond="inside", array="u"),
        Access("u west", "global", "i - 1", cond="inside and x > 0", array="u"),
        Access("u east", "global", "i + 1", cond="inside and x < nx - 1", array="u"),
        Access("u north", "global", "i - nx", cond="inside and y > 0", array="u"),
        Access("u south", "global", "i + nx", cond="inside and y < ny - 1", array="u"),
        Access("prev", "global", "i", cond="inside", array="prev"),
        Access("c2", "global", "i", cond="inside", array="c2"),
        Access("damp", "global", "i", cond="inside", array="damp"),
        Access("next store", "global", "i", store=True, cond="inside", array="next")],
    flops=lambda p: FLOPS_PER_CELL * _cells(p), setup=_naive_setup,
    compulsory_bytes=lambda p: (16 * _cells(p), 4 * _cells(p)), model="stencil",
    description="one time step per launch; neighbours re-read through L1/L2"))

TILE = 32


def _temporal_launch(p) -> Launch:
    s, ppt = p["steps"], p["ppt"]
    r = TILE + 2 * s
    threads = TILE * TILE // ppt
    return Launch(
        block=(TILE, TILE // ppt, 1), grid=(cdiv(p["nx"], TILE), cdiv(p["ny"], TILE), 1),
        loops={"ld": cdiv(r * r, threads), "s": s, "jj": cdiv((r - 2) ** 2, threads), "wr": ppt},
        params={**p, "R": r, "T": threads},
        defs={"tid": "ty*32 + tx", "j": "tid + ld*T", "ly": "j / R", "lx": "j % R",
              "gx": "bx*32 - steps + lx", "gy": "by*32 - steps + ly",
              "inside": "j < R*R and gx >= 0 and gx < nx and gy >= 0 and gy < ny",
              "w": "R - 2*(s + 1)", "q": "tid + jj*T", "cy": "s + 1 + q / w", "cx": "s + 1 + q % w",
              "cur": "(s % 2)*R*R + cy*R + cx", "old": "((s + 1) % 2)*R*R + cy*R + cx",
              "o": "tid + wr*T", "oy": "steps + o / 32", "ox": "steps + o % 32",
              "ogx": "bx*32 - steps + ox", "ogy": "by*32 - steps + oy",
              "written": "ogx < nx and ogy < ny", "src_x": "nx / 6", "src_y": "ny / 2",
              "at_source": "bx*32 - steps + cx == src_x and by*32 - steps + cy == src_y"})


def _temporal_accesses(p) -> list[Access]:
    st = "q < w*w"
    acc = []
    for k, name in enumerate(("u", "prev", "c2", "damp")):
        acc.append(Access(f"{name} load", "global", "gy*nx + gx", cond="inside", loops=("ld",), array=name))
        acc.append(Access(f"{name} to shared", "shared", f"{k}*R*R + ly*R + lx", store=True,
                          cond="j < R*R", loops=("ld",), array="s" + name))
    for name, index in (("cur centre", "cur"), ("cur west", "cur - 1"), ("cur east", "cur + 1"),
                        ("cur north", "cur - R"), ("cur south", "cur + R"), ("old", "old"),
                        ("c2", "2*R*R + cy*R + cx"), ("damp", "3*R*R + cy*R + cx")):
        acc.append(Access(f"step read {name}", "shared", index, cond=st, loops=("s", "jj"), array="tile"))
    acc.append(Access("step write", "shared", "old", store=True, cond=st, loops=("s", "jj"), array="tile"))
    acc.append(Access("source term", "global", "s", cond=f"{st} and at_source", loops=("s", "jj"),
                      array="src_values"))
    final_cur = f"{p['steps'] % 2}*R*R + oy*R + ox"
    final_old = f"{(p['steps'] + 1) % 2}*R*R + oy*R + ox"
    acc += [Access("final read cur", "shared", final_cur, cond="written", loops=("wr",), array="tile"),
            Access("final read old", "shared", final_old, cond="written", loops=("wr",), array="tile"),
            Access("u_out store", "global", "ogy*nx + ogx", store=True, cond="written", loops=("wr",),
                   array="u_out"),
            Access("prev_out store", "global", "ogy*nx + ogx", store=True, cond="written", loops=("wr",),
                   array="prev_out")]
    return acc


def temporal_cell_updates(p) -> int:
    """Cell updates a launch computes, halo recomputation included."""
    blocks = cdiv(p["nx"], TILE) * cdiv(p["ny"], TILE)
    r = TILE + 2 * p["steps"]
    return blocks * sum((r - 2 * s) ** 2 for s in range(1, p["steps"] + 1))


register(KernelCase(
    name="stencil.temporal", study="stencil", source="stencil.cu",
    static_smem=lambda p: 4 * 4 * (TILE + 2 * p["steps"]) ** 2,  # su, sp, sc, sd: [R][R] floats
    defaults={"nx": 8192, "ny": 8192, "steps": 4, "ppt": 1},
    entry=lambda p: f"wave_temporal_{p['steps']}_{p['ppt']}", launch=_temporal_launch,
    accesses=_temporal_accesses, flops=lambda p: FLOPS_PER_CELL * temporal_cell_updates(p),
    setup=_temporal_setup,
    compulsory_bytes=lambda p: (16 * _cells(p), 8 * _cells(p)), model="stencil", sync_after_loads=True,
    description="temporal blocking: STEPS time steps per launch in shared memory, tile 32"))
