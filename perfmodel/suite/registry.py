"""One registry: each real kernel with its launch, access description, reference and FLOP count.

A case is a function of its integer parameters. Everything here works without a GPU; the
runner (gpu.py) is the only place that turns a case into a launch.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PerfModelError
from ..memory import Access, Launch

Params = Mapping[str, int]
KERNEL_DIR = Path(__file__).resolve().parents[2] / "kernels"


BOUNDS = r"(?:__launch_bounds__\([^)]*\)\s*)?"  # an optional __launch_bounds__(threads, blocks) before the name


@functools.cache
def compiled_entries(source: str) -> frozenset[str]:
    """The extern "C" kernels a source file defines, macro instantiations expanded
    (`WAVE_T(4, 1)` of `wave_temporal_##S##_##P` -> wave_temporal_4_1); empty where it is not found."""
    path = KERNEL_DIR / source
    if not path.exists():
        return frozenset()
    text = path.read_text().replace("\\\n", " ")
    names = set(re.findall(rf'extern\s+"C"\s+__global__\s+void\s+{BOUNDS}(\w+)\s*\(', text))
    for macro, params, body in re.findall(r"#define\s+(\w+)\(([^)]*)\)(.*)", text):
        formals = [f.strip() for f in params.split(",")]
        templates = re.findall(rf'extern\s+"C"\s+__global__\s+void\s+{BOUNDS}([\w#]+)\s*\(', body)
        for args in re.findall(rf"^{macro}\(([^)]*)\)", text, flags=re.M):
            actual = dict(zip(formals, (a.strip() for a in args.split(",")), strict=False))
            names |= {"".join(actual.get(piece, piece) for piece in t.split("##")) for t in templates}
    return frozenset(names)


@dataclass
class Setup:
    """Host data of one launch: inputs to upload, outputs (poisoned on the device first) with their
    expected values, and the kernel's arguments in order (buffer names, or numpy scalars).

    `expected` may be a callable, so costly references run only when a result is checked;
    `outputs` then gives the output shapes. rtol = 0 asks for bit-exact results."""

    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray] | Callable[[], dict[str, np.ndarray]]
    args: list[Any]
    rtol: float = 1e-4
    outputs: dict[str, tuple[tuple[int, ...], Any]] = field(default_factory=dict)
    dense: bool = True  # every output element is written (False: strided stores leave gaps)

    def output_shapes(self) -> dict[str, tuple[tuple[int, ...], Any]]:
        if self.outputs:
            return self.outputs
        assert isinstance(self.expected, dict)
        return {k: (v.shape, v.dtype) for k, v in self.expected.items()}

    def expected_values(self) -> dict[str, np.ndarray]:
        return self.expected() if callable(self.expected) else self.expected


@dataclass(frozen=True)
class KernelCase:
    name: str  # "matmul.tiled"
    study: str
    source: str  # file in kernels/
    defaults: Mapping[str, int]
    entry: Callable[[Params], str]
    launch: Callable[[Params], Launch]
    accesses: Callable[[Params], list[Access]]
    flops: Callable[[Params], float] = lambda p: 0.0  # what the FP pipe executes (padding included)
    precision: str = "fp32"  # the pipe its FLOPs run on: fp32 | fp64
    setup: Callable[[Params, np.random.Generator], Setup] | None = None
    dynamic_smem: Callable[[Params], int] = lambda p: 0
    static_smem: Callable[[Params], int] = lambda p: 0  # the source's __shared__ arrays (where no compile is recorded)
    compulsory_bytes: Callable[[Params], tuple[int, int]] = lambda p: (0, 0)  # (read, write) once each
    description: str = ""
    model: str = "generic"  # time-model family (perfmodel.models)
    loads_in_flight: Callable[[Params], int] = lambda p: 1  # independent loads per thread in flight (Little)
    sync_after_loads: bool = False  # every block waits at a barrier for all its loads before storing
    barrier_phases: Callable[[Params], int] | None = None  # load -> barrier -> compute rounds per block
    rereaders: Callable[[Params], str] = lambda p: "one"  # who re-reads each line: Ceilings.l2_loss's readers

    def bind(self, **params: int) -> dict[str, int]:
        unknown = set(params) - set(self.defaults)
        if unknown:
            raise PerfModelError(f"{self.name} has no parameter(s) {sorted(unknown)}; "
                                 f"it takes {', '.join(self.defaults)}")
        p = {**self.defaults, **{k: int(v) for k, v in params.items()}}
        for k, v in p.items():
            if v < 0:
                raise PerfModelError(f"{self.name}: parameter {k} = {v} must not be negative")
        compiled = compiled_entries(self.source)
        if compiled and (entry := self.entry(p)) not in compiled:
            stem = entry.rstrip("0123456789_")
            have = sorted(e for e in compiled if e.startswith(stem)) or sorted(compiled)
            raise PerfModelError(f"{self.name}: no kernel {entry} for these parameters; kernels/{self.source} "
                                 f"compiles {', '.join(have)}")
        return p


REGISTRY: dict[str, KernelCase] = {}


def register(case: KernelCase) -> KernelCase:
    REGISTRY[case.name] = case
    return case


def get(name: str) -> KernelCase:
    _load()
    if name not in REGISTRY:
        import difflib

        close = difflib.get_close_matches(name, REGISTRY, n=3)
        raise PerfModelError(f"unknown case {name!r}" + (f"; did you mean {', '.join(close)}?" if close else "")
                             + f" (perfmodel.cases() lists {len(REGISTRY)})")
    return REGISTRY[name]


def case_parameters() -> dict[str, tuple[str, ...]]:
    _load()
    return {name: tuple(c.defaults) for name, c in sorted(REGISTRY.items())}


def _load() -> None:
    from . import cases  # noqa: F401  (registers everything)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Fresh random fp32 data in [-1, 1), never zeros by construction of the test."""
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
