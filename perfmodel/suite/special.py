"""Measurements that are not one launch of a registry case: pointer-chase latency, the driver's
device-to-device copy, and the streams overlap."""

from __future__ import annotations

import numpy as np

from ..measurements import Measurement
from ..memory.coalescing import LINE_BYTES
from . import gpu
from .plan import case_id, params_json
from .runner import time_rows

CHASE_SIZES = [16 << 10, 32 << 10, 64 << 10, 128 << 10, 192 << 10, 256 << 10, 384 << 10, 512 << 10,
               1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 24 << 20, 32 << 20, 40 << 20, 48 << 20,
               56 << 20, 64 << 20, 96 << 20, 128 << 20, 256 << 20, 512 << 20, 1 << 30]
L1_EDGE_SIZES = [kib << 10 for kib in range(160, 392, 8)]  # where ld.ca stops hitting L1 (one chase: 192-384 KiB)
L1_EDGE_SEEDS = (1, 2, 3)  # other cycle orders: does the share an over-full L1 keeps hang on the order?
L1_FILL_SIZES = [kib << 10 for kib in (0, 8, 16, 24, 32, 64, 96, 128, 160, 176, 192, 208, 224, 240, 256, 288, 320,
                                       384, 512, 768, 1024)]
WORDS_PER_LINE = LINE_BYTES // 4
HIT_MARGIN_CYCLES = 120  # an L1 hit reloads within this of the no-fill reload; L2 is ~250 cycles further
# l1_survival's variants (carveout %, x inside the fill buffer's allocation, times x is loaded before the
# fills, passes over the fills, loads of each fill line a step). Its first runs (20261205) timed the last
# fill's latency too (~650 cycles, no reload from L1 at any size): ptxas had dropped the store that held the
# clock back - fixed. Since: a line loaded twice outlives 1 MiB of fills, walked once or twice (FINDINGS.md,
# "The L1 keeps by recency"); among fills loaded twice a step (hit lines too) it leaves by recency, at
# 160-256 KiB (run 20261205T160011Z)
L1_SURVIVAL_VARIANTS = ((0, 0, 2, 1, 1), (0, 0, 2, 1, 2), (0, 0, 1, 1, 2), (0, 0, 3, 1, 2))


def _row(study: str, name: str, params: dict, metric: str, unit: str, value: float, source: str,
         stat: str = "value") -> Measurement:
    return Measurement(study, name, case_id(name, params), params_json(params), metric, unit, stat,
                       float(value), source)


def _chain(host: np.ndarray, slots: int, rng: np.random.Generator) -> None:
    """Write into host[: slots * 32] one random cycle through `slots` 128-byte lines: each line's
    first word holds the word index of the next line, every other word is 0."""
    order = rng.permutation(slots)
    nxt = np.empty(slots, dtype=np.int64)
    nxt[order] = np.roll(order, -1)
    host[: slots * WORDS_PER_LINE] = 0
    host[np.arange(slots) * WORDS_PER_LINE] = (nxt * WORDS_PER_LINE).astype(np.uint32)


def chase(ops=("ca", "cg", "cv"), sizes=CHASE_SIZES, steps: int = 4096, seed: int = 1) -> list[Measurement]:
    """Cycles per dependent load over a random cyclic walk of one 128-byte line per slot."""
    rng = np.random.default_rng(seed)
    total = max(sizes)
    host = np.zeros(total // 4, dtype=np.uint32)
    buf = gpu.Buffers()
    dev_next = buf.empty("next", (total // 4,), np.uint32)
    cycles = buf.empty("cycles", (1,), np.uint64)
    sink = buf.empty("sink", (1,), np.uint32)
    rows = []
    flush = gpu.L2Flusher(128 << 20, mode="read")
    import pycuda.driver as drv

    for size in sizes:
        slots = size // LINE_BYTES
        warm = slots if size <= 128 << 20 else 0
        for n_op, op in enumerate(ops):
            if n_op == 0 or not warm:  # a cold walk needs a fresh chain for each operator
                _chain(host, slots, rng)
                drv.memcpy_htod(dev_next, host[: size // 4])
            if not warm:
                flush()  # the upload went through L2: evict it so the walk starts cold
            k = gpu.kernel("probes.cu", f"chase_{op}")
            gpu.launch(k, (1, 1, 1), (1, 1, 1), [dev_next, np.int32(warm), np.int32(steps), cycles, sink])
            gpu.synchronize()
            c = float(buf.download("cycles")[0]) / steps
            params = {"bytes": size, "op": ["ca", "cg", "cv"].index(op)}
            rows.append(_row("latency", f"probe.chase_{op}", params, "cycles_per_load", "cycle", c, "clock64"))
        print(f"  chase {size >> 10:>8} KiB: " + " ".join(f"{r.value:7.1f}" for r in rows[-len(ops):]),
              flush=True)
    buf.free()
    return rows


def chase_l1_edge() -> list[Measurement]:
    """`chase` with ld.ca at 160-384 KiB in 8 KiB steps, three cycle orders: the L1's capacity and how
    much of a cycle larger than it stays (none under LRU, exp(-x (1 - h)) at random; tests/test_l1_policy.py)."""
    return [r for seed in L1_EDGE_SEEDS for r in chase(ops=("ca",), sizes=L1_EDGE_SIZES, seed=seed)]


def survival_chain(trials: int, fills: int, rng: np.random.Generator) -> np.ndarray:
    """The fill buffer of `l1_survival`: trials x fills lines, trial t's own run of lines from line
    t x fills on in a random order, each line's first word the word index of the trial's next line, the
    last line's 0 (every other word 0)."""
    host = np.zeros(max(trials * fills, 1) * WORDS_PER_LINE, dtype=np.uint32)
    for t in range(trials if fills else 0):
        first = t * fills
        order = np.concatenate(([first], first + 1 + rng.permutation(fills - 1)))
        host[order[:-1] * WORDS_PER_LINE] = (order[1:] * WORDS_PER_LINE).astype(np.uint32)
    return host


def l1_survival(sizes=L1_FILL_SIZES, trials: int = 64, seed: int = 1,
                variants=L1_SURVIVAL_VARIANTS) -> list[Measurement]:
    """How much of a line L1 keeps after `size` bytes of other lines came in: per size, the share of
    trials whose reload took under HIT_MARGIN_CYCLES more than the median reload with no fills (the
    first size, 0), and the median cycles. An L1 that replaces at random keeps exp(-fills / L1), an LRU
    one all of it up to its capacity and none past (models.placed.kept). Once per variant
    (L1_SURVIVAL_VARIANTS), recorded as `carveout_pct`, `x_in_fill`, `touches`, `fill_passes` and
    `fill_touches`."""
    if sizes[0] != 0:
        raise ValueError(f"l1_survival: the first fill size must be 0 (the L1-hit baseline), not {sizes[0]}")
    if any(min(touches, passes, fill_touches) < 1 for _, _, touches, passes, fill_touches in variants):
        raise ValueError(f"l1_survival: each variant must load x and the fills at least once, not {variants}")
    rng = np.random.default_rng(seed)
    buf = gpu.Buffers()
    x_words = trials * WORDS_PER_LINE
    x = buf.upload("x", np.zeros(x_words, dtype=np.uint32))
    cycles = buf.empty("cycles", (trials,), np.uint64)
    sink = buf.empty("sink", (1,), np.uint32)
    k = gpu.kernel("probes.cu", "l1_survival")
    rows, baseline = [], 0.0
    chains = {}  # per size: the fill chain with x's zeroed lines after it, in one allocation
    for size in sizes:
        chain = survival_chain(trials, size // LINE_BYTES, rng)
        chains[size] = (buf.upload(f"fill{size}", np.concatenate([chain, np.zeros(x_words, np.uint32)])),
                        chain.nbytes)
    for (carveout, inside, touches, passes, fill_touches), size in ((v, s) for v in variants for s in sizes):
        gpu.set_carveout(k, carveout)
        fills, (fill, x_offset) = size // LINE_BYTES, chains[size]
        line = np.uintp(int(fill) + x_offset) if inside else x
        gpu.launch(k, (1, 1, 1), (1, 1, 1),
                   [line, fill, np.int32(fills), np.int32(trials), cycles, sink, np.int32(touches), np.int32(passes),
                    np.int32(fill_touches)])
        gpu.synchronize()
        c = buf.download("cycles").astype(float)
        if not fills:
            baseline = float(np.median(c))
        hit = float(np.mean(c < baseline + HIT_MARGIN_CYCLES))
        params = {"fill_bytes": size, "trials": trials, "carveout_pct": carveout, "x_in_fill": int(inside),
                  "touches": touches, "fill_passes": passes, "fill_touches": fill_touches}
        rows.append(_row("latency", "probe.l1_survival", params, "reload_cycles", "cycle", np.median(c), "clock64"))
        rows.append(_row("latency", "probe.l1_survival", params, "l1_hit_share", "share", hit, "clock64"))
        print(f"  l1_survival carveout {carveout:>2} %, x in fill {int(inside)}, touches {touches}, "
              f"fill passes {passes}, fill touches {fill_touches}, {size >> 10:>4} KiB of fills: "
              f"median {np.median(c):6.1f} cycles, {100 * hit:5.1f} % from L1", flush=True)
    buf.free()
    return rows


def chase_shared(steps: int = 4096) -> list[Measurement]:
    n = 1024
    perm = np.random.default_rng(2).permutation(n)
    nxt = np.empty(n, dtype=np.uint32)
    nxt[perm] = np.roll(perm, -1)
    buf = gpu.Buffers()
    init = buf.upload("init", nxt)
    cycles = buf.empty("cycles", (1,), np.uint64)
    sink = buf.empty("sink", (1,), np.uint32)
    k = gpu.kernel("probes.cu", "chase_shared")
    gpu.launch(k, (1, 1, 1), (1, 1, 1), [init, np.int32(n), np.int32(steps), cycles, sink])
    gpu.synchronize()
    c = float(buf.download("cycles")[0]) / steps
    buf.free()
    return [_row("latency", "probe.chase_shared", {"bytes": n * 4}, "cycles_per_load", "cycle", c, "clock64")]


def memcpy_dtod(nbytes: int = 1 << 30) -> list[Measurement]:
    import pycuda.driver as drv

    a, b = drv.mem_alloc(nbytes), drv.mem_alloc(nbytes)
    drv.memset_d32(a, 0x3F800000, nbytes // 4)
    times = gpu.time_launches(lambda: drv.memcpy_dtod(b, a, nbytes), reps=20, budget_s=1.0)
    a.free()
    b.free()
    return list(time_rows("ceilings", "probe.memcpy_dtod", {"bytes": nbytes}, times))


def streams(n: int = 1 << 26, counts=(1, 2, 4, 8), reps: int = 3) -> list[Measurement]:
    """c = a + b over n floats in S chunks, each chunk H2D -> kernel -> D2H on its own stream."""
    import pycuda.driver as drv

    rng = np.random.default_rng(3)
    a = drv.pagelocked_empty(n, np.float32)
    b = drv.pagelocked_empty(n, np.float32)
    c = drv.pagelocked_empty(n, np.float32)
    a[:] = rng.uniform(-1, 1, n).astype(np.float32)
    b[:] = rng.uniform(-1, 1, n).astype(np.float32)
    da, db, dc = (drv.mem_alloc(4 * n) for _ in range(3))
    k = gpu.kernel("probes.cu", "vadd")
    rows: list[Measurement] = []
    for s in counts:
        chunk = n // s
        sts = [drv.Stream() for _ in range(s)]
        totals = []
        for rep in range(reps + 1):
            c[:] = np.nan
            ev = [[drv.Event() for _ in range(4)] for _ in range(s)]
            t0 = drv.Event()
            t0.record()
            for i, st in enumerate(sts):
                lo = i * chunk
                off = 4 * lo
                ev[i][0].record(st)
                drv.memcpy_htod_async(int(da) + off, a[lo:lo + chunk], st)
                drv.memcpy_htod_async(int(db) + off, b[lo:lo + chunk], st)
                ev[i][1].record(st)
                gpu.launch(k, (264, 1, 1), (256, 1, 1),
                           [np.uintp(int(da) + off), np.uintp(int(db) + off), np.uintp(int(dc) + off),
                            np.uint64(chunk)], stream=st)
                ev[i][2].record(st)
                drv.memcpy_dtoh_async(c[lo:lo + chunk], int(dc) + off, st)
                ev[i][3].record(st)
            gpu.synchronize()
            if not np.array_equal(c, a + b):
                raise AssertionError(f"streams={s}: vector add result wrong")
            if rep == 0:
                continue  # warm-up
            end = max(e[3].time_since(t0) for e in ev) * 1e-3
            totals.append(end)
            if rep == reps:
                params = {"n": n, "streams": s}
                for i, e in enumerate(ev):
                    for j, stage in enumerate(("h2d_start", "kernel_start", "d2h_start", "d2h_end")):
                        rows.append(_row("streams", "streams.vadd", params, "event_s", "s",
                                         e[j].time_since(t0) * 1e-3, "events", stat=f"stream{i}.{stage}"))
        rows.extend(time_rows("streams", "streams.vadd", {"n": n, "streams": s}, np.array(totals)))
        print(f"  streams {s}: {np.median(totals) * 1e3:.2f} ms", flush=True)
    for buf in (da, db, dc):
        buf.free()
    return rows


LOADED_BLOCKS = (0, 132, 264, 396, 528, 660, 792, 924, 1056)


def chase_loaded(stream_blocks=LOADED_BLOCKS, steps: int = 2048, n: int = 1 << 27, seed: int = 2,
                 chain_bytes: int = 1 << 30, lanes_list=(1, 32, 128), copies=(False, True),
                 vecs=(0, 1)) -> list[Measurement]:
    """DRAM latency under load: one thread (or one warp loading a 128-byte line each step, or 512
    bytes: `lanes` 128) chases a cold 1 GiB chain while `blocks` blocks of 256 threads stream
    scalar loads over 512 MiB (probe.read's pattern) or copy it (probe.copy's: reads and writes);
    `vec` 1 streams 16-byte loads (read_f4's 4 in flight per thread, copy_f4), which reach the DRAM
    ceiling the scalar stream does not. The stream's rate is timed with events around the launch,
    the chase's cycles per load with clock64."""
    import pycuda.driver as drv

    rng = np.random.default_rng(seed)
    host = np.empty(chain_bytes // 4, dtype=np.uint32)
    _chain(host, chain_bytes // LINE_BYTES, rng)
    buf = gpu.Buffers()
    dev_next = buf.upload("next", host)
    del host
    cycles = buf.empty("cycles", (1,), np.uint64)
    sink = buf.empty("sink", (1,), np.uint32)
    data = buf.upload("in", rng.uniform(-1, 1, n).astype(np.float32))
    out = buf.empty("out", (max(stream_blocks) * 256 + 256,), np.float32)
    dst = buf.empty("copy", (n,), np.float32) if any(copies) else None
    flush = gpu.L2Flusher(128 << 20, mode="read")
    k = gpu.kernel("probes.cu", "chase_loaded")
    rows = []
    runs = [(la, c, v, b) for v in vecs for c in copies
            for la in (lanes_list if not c else (32,)) if la > 1 or not v
            for b in stream_blocks if b or not (c or v)]
    for lanes, copy, vec, blocks in runs:
        # the stream must outlast the chase (~steps x 700 ns, up to ~1.4 us under a full stream):
        # passes scale with the grid, and with the 16-byte stream's higher rate
        passes = max(1, round(blocks / 1056 * (40 if vec else 12))) if blocks else 0
        start, end = drv.Event(), drv.Event()
        flush()
        start.record()
        gpu.launch(k, (blocks + 1, 1, 1), (256, 1, 1),
                   [dev_next, np.int32(steps), cycles, sink, data, np.uint64(n), np.int32(passes), out,
                    np.int32(lanes), dst if copy else np.uintp(0), np.int32(vec)])
        end.record()
        end.synchronize()
        t = end.time_since(start) * 1e-3
        c = float(buf.download("cycles")[0]) / steps
        params = {"blocks": blocks, "n": n, "passes": passes, **({"lanes": lanes} if lanes != 1 else {}),
                  **({"copy": 1} if copy else {}), **({"vec": 1} if vec else {})}
        moved = 4 * n * passes * (2 if copy else 1)
        rows.append(_row("latency", "probe.chase_loaded", params, "cycles_per_load", "cycle", c, "clock64"))
        if blocks:
            rows.append(_row("latency", "probe.chase_loaded", params, "stream_bytes_per_s", "B/s",
                             moved / t, "events"))
        print(f"  loaded chase, {lanes:>3} lanes, {blocks:>4} {'copying' if copy else 'reading'} "
              f"{'16-byte' if vec else 'scalar'} blocks: "
              f"{c:7.1f} cycles/load, {moved / t / 1e12 if blocks else 0:.2f} TB/s moved", flush=True)
    buf.free()
    return rows
