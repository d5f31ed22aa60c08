"""The one prediction type every model returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..occupancy import Occupancy


@dataclass(frozen=True)
class Term:
    """One line of a time breakdown: what limits, how long it alone would take, and why."""

    name: str  # dram | l2 | l2_requests | l2_input | fabric | l1 | l1_tag | fp32 | fp64 | issue | latency | barrier |
    # blocks | startup | launch
    time_s: float
    work: float
    rate_per_s: float
    note: str = ""


@dataclass(frozen=True)
class Prediction:
    """What a kernel case does on a device: operations, bytes per level, occupancy, time."""

    case: str
    device: str
    params: dict[str, int]
    flops: float  # executed FLOPs (a tiled kernel's padded tiles included), on the `precision` pipe
    global_load_bytes: int  # what the threads request (the textbook's "global memory accesses")
    global_store_bytes: int
    global_load_requests: int
    global_load_sectors: int
    global_store_requests: int
    global_store_sectors: int
    l2_read_bytes: int
    l2_write_bytes: int
    dram_read_bytes: int
    dram_write_bytes: int
    smem_load_wavefronts: int
    smem_store_wavefronts: int
    occupancy: Occupancy
    resident_blocks: int  # blocks resident on the whole device at once
    blocks: int
    waves: float
    bound: str
    time_s: float
    precision: str = "fp32"  # fp32 | fp64
    warp_instructions: float = 0.0  # issued, estimated from the SASS (0: no SASS recorded)
    global_load_wavefronts: int = 0  # L1 data stage (same bank rule as shared memory)
    global_store_wavefronts: int = 0
    global_load_tag_wavefronts: int = 0  # L1 tag-stage passes (4 hashed tag banks)
    global_store_tag_wavefronts: int = 0
    l2_read_requests: float = 0.0  # (request, line) pairs reaching L2
    l2_write_requests: float = 0.0
    dram_write_bytes_in_kernel: int = 0  # what ncu counts: the rest stays dirty in L2 past the kernel's end
    breakdown: tuple[Term, ...] = ()
    notes: tuple[str, ...] = ()
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def l2_bytes(self) -> int:
        return self.l2_read_bytes + self.l2_write_bytes

    @property
    def dram_bytes(self) -> int:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def smem_wavefronts(self) -> int:
        return self.smem_load_wavefronts + self.smem_store_wavefronts

    @property
    def arithmetic_intensity(self) -> dict[str, float]:
        """FLOP per byte at each level (L1 = what the threads request)."""
        def ai(b: float) -> float:
            return self.flops / b if b else float("inf")
        return {"l1": ai(self.global_load_bytes + self.global_store_bytes), "l2": ai(self.l2_bytes),
                "dram": ai(self.dram_bytes)}

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(l2_bytes=self.l2_bytes, dram_bytes=self.dram_bytes, smem_wavefronts=self.smem_wavefronts,
                 arithmetic_intensity=self.arithmetic_intensity)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Prediction:
        """The inverse of `as_dict` (through JSON): a prediction frozen in a file, read back."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["occupancy"] = Occupancy(**{**d["occupancy"], "limiters": tuple(d["occupancy"]["limiters"])})
        kw["breakdown"] = tuple(Term(**t) for t in d.get("breakdown", ()))
        kw["notes"] = tuple(d.get("notes", ()))
        return cls(**kw)
