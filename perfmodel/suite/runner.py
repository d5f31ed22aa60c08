"""Run registry cases on the GPU: check against numpy, time with events, record tidy rows."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..devices import DeviceSpec
from ..measurements import BUSY_WARM, READ_FLUSH, Measurement
from . import gpu
from .plan import PlannedCase, case_id, params_json
from .registry import KernelCase, Setup, get

UNSTABLE_CV = 0.05


class CheckFailed(AssertionError):
    pass


@dataclass
class Bound:
    """A case bound to parameters and compiled: what a launch needs."""

    case: KernelCase
    params: dict[str, int]
    kernel: gpu.Kernel

    @classmethod
    def make(cls, name: str, params: dict[str, int]) -> Bound:
        case = get(name)
        return cls(case, params, gpu.kernel(case.source, case.entry(params)))

    @property
    def launch_geometry(self) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        shape = self.case.launch(self.params)
        return shape.grid, shape.block, self.case.dynamic_smem(self.params)

    def upload(self, setup: Setup) -> tuple[gpu.Buffers, list]:
        bufs = gpu.Buffers()
        for name, host in setup.inputs.items():
            bufs.upload(name, host)
        for name, (shape, dtype) in setup.output_shapes().items():
            bufs.empty(name, shape, dtype)
            bufs.poison(name)
        args = [bufs.device[a] if isinstance(a, str) else a for a in setup.args]
        return bufs, args

    def runner(self, args: list):
        grid, block, smem = self.launch_geometry
        gpu.set_max_dynamic_smem(self.kernel, smem)
        return lambda: gpu.launch(self.kernel, grid, block, args, smem)


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """||out - ref|| / ||ref|| over finite reference entries; inf if any of those came back NaN."""
    mask = np.isfinite(ref)
    if not np.all(np.isfinite(out[mask])):
        return float("inf")
    num = np.linalg.norm(out[mask].astype(np.float64) - ref[mask])
    den = np.linalg.norm(ref[mask].astype(np.float64)) or 1.0
    return float(num / den)


def check_outputs(bound: Bound, setup: Setup, bufs: gpu.Buffers) -> float:
    """Compare the launched outputs with numpy's; the worst relative error, or CheckFailed on a wrong one."""
    worst = 0.0
    for name, ref in setup.expected_values().items():
        out = bufs.download(name)
        if setup.rtol == 0:
            ok = np.array_equal(out, ref, equal_nan=True)
            err = 0.0 if ok else float("inf")
        else:
            err = relative_error(out, ref)
            ok = err <= setup.rtol
        worst = max(worst, err)
        if not ok:
            bad = int(np.count_nonzero(~np.isclose(out, ref, rtol=1e-3, equal_nan=True)))
            raise CheckFailed(f"{case_id(bound.case.name, bound.params)}: output {name} wrong: "
                              f"relative error {err:.3g} > {setup.rtol}, {bad} of {out.size} elements differ")
    return worst


def check(bound: Bound, rng: np.random.Generator) -> float:
    """Run once on fresh random inputs with poisoned outputs; raise CheckFailed on a wrong result."""
    setup = bound.case.setup(bound.params, rng)
    bufs, args = bound.upload(setup)
    try:
        bound.runner(args)()
        gpu.synchronize()
        return check_outputs(bound, setup, bufs)
    finally:
        bufs.free()


def time_case(bound: Bound, rng: np.random.Generator, before: Callable[[], None] | None,
              reps: int = 50, budget_s: float = 0.6) -> np.ndarray:
    setup = bound.case.setup(bound.params, rng)
    bufs, args = bound.upload(setup)
    try:
        times = gpu.time_launches(bound.runner(args), reps=reps, before=before, budget_s=budget_s)
        for name in setup.output_shapes() if setup.dense else ():
            out = bufs.download(name)
            if not np.all(np.isfinite(out)):
                raise CheckFailed(f"{case_id(bound.case.name, bound.params)}: {name} has unwritten "
                                  "(poisoned) elements at the timed size")
        return times
    finally:
        bufs.free()


def time_rows(study: str, name: str, params: dict[str, int], times: np.ndarray, metric: str = "time_s",
              source: str = "events") -> Iterator[Measurement]:
    cid, pj = case_id(name, params), params_json(params)
    med = float(np.median(times))
    cv = float(np.std(times) / np.mean(times)) if len(times) > 1 else 0.0
    stats = {"min": float(times.min()), "median": med, "max": float(times.max()),
             "mean": float(times.mean()), "cv": cv, "n": float(len(times)),
             "unstable": float(cv > UNSTABLE_CV)}
    for stat, value in stats.items():
        yield Measurement(study, name, cid, pj, metric, "s" if stat in ("min", "median", "max", "mean") else "1",
                          stat, value, source)


def measure(pc: PlannedCase, spec: DeviceSpec, flusher: gpu.L2Flusher, rng: np.random.Generator
            ) -> list[Measurement]:
    """Check, time and describe one planned case; failures become rows, never exceptions."""
    case = get(pc.name)
    cid, pj = pc.case_id, params_json(pc.params)
    rows: list[Measurement] = []

    def row(metric: str, unit: str, stat: str, value: float, source: str) -> None:
        rows.append(Measurement(case.study, pc.name, cid, pj, metric, unit, stat, float(value), source))

    try:
        bound = Bound.make(pc.name, pc.params)
        err = check(Bound.make(pc.name, pc.check) if pc.check else bound, rng)
        row("check_rel_error", "1", "value", err, "check")
        row("check_passed", "1", "value", 1.0, "check")
        k = bound.kernel
        row("num_regs", "1", "value", k.num_regs, "compiler")
        row("shared_size_bytes", "B", "value", k.shared_size_bytes, "compiler")
        row("local_size_bytes", "B", "value", k.local_size_bytes, "compiler")
        grid, block, smem = bound.launch_geometry
        threads = int(np.prod(block))
        blocks = gpu.driver_occupancy(k, threads, smem)
        if blocks is not None:
            row("blocks_per_sm", "1", "value", blocks, "driver")
        if pc.time:
            cold = pc.cold and flusher is not None
            # clean L2, or written; warm launches behind a spinning warp (no host latency timed)
            source = (READ_FLUSH if flusher.mode == "read" else "events") if cold else BUSY_WARM
            before = flusher if cold else gpu.Spinner()
            rows.extend(time_rows(case.study, pc.name, pc.params, time_case(bound, rng, before), source=source))
    except Exception as exc:  # noqa: BLE001 - a failing case is data, and the run goes on
        row("check_passed", "1", "value", 0.0, "check")
        print(f"  FAILED {cid}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return rows


def progress(i: int, n: int, label: str, t0: float) -> None:
    elapsed = time.time() - t0
    eta = elapsed / max(i, 1) * (n - i)
    print(f"[{i:>4}/{n}] {elapsed:6.1f}s (eta {eta:5.0f}s) {label}", flush=True)
