"""DeviceSpec: one GPU as data, SI units in the field names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import PerfModelError
from .arch import ArchFacts, arch

# cudaDeviceProp field -> DeviceSpec field, for the properties the occupancy rules read.
PROPERTY_FIELDS = {
    "multiProcessorCount": "sm_count",
    "warpSize": "warp_size",
    "maxThreadsPerBlock": "max_threads_per_block",
    "maxThreadsPerMultiProcessor": "max_threads_per_sm",
    "regsPerBlock": "registers_per_block",
    "regsPerMultiprocessor": "registers_per_sm",
    "sharedMemPerBlock": "smem_per_block_bytes",
    "sharedMemPerMultiprocessor": "smem_per_sm_bytes",
    "sharedMemPerBlockOptin": "smem_per_block_optin_bytes",
    "reservedSharedMemPerBlock": "reserved_smem_per_block_bytes",
    "l2CacheSize": "l2_bytes",
    "totalGlobalMem": "dram_bytes",
}


@dataclass(frozen=True)
class DeviceSpec:
    """A GPU: what the driver reports and what the datasheet says."""

    name: str
    key: str
    major: int
    minor: int
    sm_count: int
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    registers_per_block: int
    registers_per_sm: int
    smem_per_block_bytes: int
    smem_per_sm_bytes: int
    smem_per_block_optin_bytes: int
    reserved_smem_per_block_bytes: int
    l2_bytes: int = 0
    dram_bytes: int = 0
    sm_clock_hz: float = 0.0
    l1_bytes_per_sm: int = 0
    dram_bandwidth_bytes_per_s: float = 0.0
    fp32_flops_per_s: float = 0.0
    fp64_flops_per_s: float = 0.0
    sector_bytes: int = 32
    cache_line_bytes: int = 128
    aliases: tuple[str, ...] = ()
    datasheet_source: str = ""
    # measured ceilings are not fields: perfmodel.ceilings reads them, labelled, from the recorded
    # data under reports/data/<device>/, so a spec stays the datasheet and the driver's word

    # --- facts of the compute capability -------------------------------------------------
    @property
    def arch(self) -> ArchFacts:
        return arch(self.major, self.minor)

    @property
    def compute_capability(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def l2_partition_bytes(self) -> int:
        """One L2 partition (half the L2 on GA100/GH100): what an SM's near half holds."""
        return self.l2_bytes // self.arch.l2_partitions

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def max_blocks_per_sm(self) -> int:
        return self.arch.max_blocks_per_sm

    @property
    def max_registers_per_thread(self) -> int:
        return self.arch.max_registers_per_thread

    @property
    def register_allocation_unit(self) -> int:
        return self.arch.register_allocation_unit

    @property
    def warp_allocation_granularity(self) -> int:
        return self.arch.warp_allocation_granularity

    @property
    def smem_allocation_granularity_bytes(self) -> int:
        return self.arch.smem_allocation_granularity_bytes

    @property
    def carveout_steps_bytes(self) -> tuple[int, ...]:
        return self.arch.carveout_steps_bytes

    @property
    def shared_memory_banks(self) -> int:
        return self.arch.shared_memory_banks

    @property
    def bank_width_bytes(self) -> int:
        return self.arch.bank_width_bytes

    @property
    def smem_bandwidth_bytes_per_s(self) -> float:
        """Datasheet-style shared-memory peak: banks x width per clock per SM."""
        return self.sm_count * self.shared_memory_banks * self.bank_width_bytes * self.sm_clock_hz

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def from_properties(cls, props: Mapping[str, Any], name: str | None = None,
                        **extra: Any) -> DeviceSpec:
        """Build from cudaDeviceProp field names (major, minor, multiProcessorCount, ...)."""
        missing = [k for k in ("major", "minor", *list(PROPERTY_FIELDS)[:10]) if k not in props]
        if missing:
            raise PerfModelError(f"device properties lack {', '.join(missing)} (cudaDeviceProp names)")
        major, minor = int(props["major"]), int(props["minor"])
        arch(major, minor)  # reject unknown compute capabilities early
        values: dict[str, Any] = {spec: int(props[prop]) for prop, spec in PROPERTY_FIELDS.items()
                                  if prop in props}
        if "clockRate" in props:  # kHz in cudaDeviceProp
            values["sm_clock_hz"] = float(props["clockRate"]) * 1e3
        dev_name = name or str(props.get("name", f"sm_{major}{minor} device"))
        values.update(extra)
        values.setdefault("key", dev_name.lower().replace("nvidia ", "").replace(" ", "-"))
        return cls(name=dev_name, major=major, minor=minor, **values)

    @classmethod
    def from_pycuda(cls, device: Any = None) -> DeviceSpec:
        """Read the live GPU through PyCUDA (imported only here)."""
        from ..suite.gpu import device_properties  # lazy: needs pycuda

        props = device_properties(device)
        return cls.from_properties(props, name=props["name"])

    def to_properties(self) -> dict[str, int]:
        """The cudaDeviceProp-named view (what cuda_occupancy.h consumes)."""
        out = {"major": self.major, "minor": self.minor}
        out.update({prop: int(getattr(self, spec)) for prop, spec in PROPERTY_FIELDS.items()})
        return out
