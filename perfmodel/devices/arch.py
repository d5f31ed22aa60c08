"""Per-compute-capability facts that the driver does not report.

One table, keyed by (major, minor), mirroring NVIDIA's occupancy rules (cuda_occupancy.h,
CUDA 13.0) and the CUDA programming guide's table of technical specifications. Products
never repeat these; a DeviceSpec looks them up from its compute capability.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PerfModelError

KiB = 1024
_VOLTA_STEPS = (0, 8, 16, 32, 64, 96)
_TURING_STEPS = (32, 64)
_GA100_STEPS = (0, 8, 16, 32, 64, 100, 132, 164)
_GA10X_STEPS = (0, 8, 16, 32, 64, 100)
_HOPPER_STEPS = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)


@dataclass(frozen=True)
class ArchFacts:
    """Allocation rules of one compute capability."""

    major: int
    minor: int
    max_blocks_per_sm: int
    max_registers_per_thread: int
    register_allocation_unit: int  # registers per warp are rounded up to this
    register_allocation_granularity: str  # "warp": registers are allocated per warp
    warp_allocation_granularity: int  # warps per block rounded up to this for the register check
    smem_allocation_granularity_bytes: int
    carveout_steps_bytes: tuple[int, ...]  # shared-memory sizes an SM can be configured to; () = fixed
    barrier_slots_per_block_limit: int  # block barriers available per resident-block slot (cc >= 9)
    reserved_smem_per_block_bytes: int  # the driver's default reservation
    shared_memory_banks: int = 32
    bank_width_bytes: int = 4
    warp_schedulers: int = 4  # per SM, each issues one warp instruction per cycle
    dram_granule_bytes: int = 32  # smallest DRAM read (the H200 reads 64-byte sector pairs)
    l2_partitions: int = 1  # halves joined by a fabric (GA100, GH100, GB100): an SM's near half fills first
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)  # cudaDeviceProp.maxGridSize since cc 3.0
    max_block: tuple[int, int, int] = (1024, 1024, 64)  # cudaDeviceProp.maxThreadsDim

    @property
    def compute_capability(self) -> str:
        return f"{self.major}.{self.minor}"


def _steps(kib: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(k * KiB for k in kib)


def _max_blocks(major: int, minor: int) -> int:
    if major in (5, 6):
        return 32
    if major == 7:
        return 16 if minor == 5 else 32
    if major == 8:
        return {0: 32, 9: 24}.get(minor, 16)
    if major == 9:
        return 32
    if major == 10:
        return 24 if minor == 1 else 32
    if major == 11:
        return 24 if minor == 0 else 32
    return 24  # 12.x


def _carveouts(major: int, minor: int) -> tuple[int, ...] | None:
    """None: no such device in NVIDIA's tables; (): shared memory is not configurable."""
    if major in (5, 6):
        return ()
    if major == 7:
        return _steps(_TURING_STEPS if minor == 5 else _VOLTA_STEPS)
    if major == 8:
        return _steps(_GA100_STEPS if minor in (0, 7) else _GA10X_STEPS)
    if major == 9:
        return _steps(_HOPPER_STEPS)
    if major in (10, 11):
        return _steps(_HOPPER_STEPS) if minor in (0, 1, 3) else None
    if major == 12:
        return _steps(_GA10X_STEPS) if minor in (0, 1) else None
    return None


def _barrier_slots(major: int, minor: int) -> int:
    if (major, minor) in ((10, 1), (11, 0)) or major == 12 or (major == 8 and minor != 0):
        return 1
    return 2


def arch(major: int, minor: int) -> ArchFacts:
    """The facts for compute capability major.minor (5.0 to 12.x)."""
    steps = _carveouts(major, minor) if 5 <= major <= 12 else None
    if steps is None:
        raise PerfModelError(
            f"compute capability {major}.{minor} is not supported: perfmodel knows 5.x, 6.x, 7.x, "
            "8.x, 9.x, 10.0/10.1/10.3, 11.0/11.1/11.3 and 12.0/12.1 (as cuda_occupancy.h of CUDA 13.0)")
    return ArchFacts(
        major=major,
        minor=minor,
        max_blocks_per_sm=_max_blocks(major, minor),
        max_registers_per_thread=255 if major < 7 else 256,
        register_allocation_unit=256,
        register_allocation_granularity="warp",
        warp_allocation_granularity=2 if (major, minor) == (6, 0) else 4,
        smem_allocation_granularity_bytes=256 if major < 8 else 128,
        carveout_steps_bytes=steps,
        barrier_slots_per_block_limit=_barrier_slots(major, minor),
        reserved_smem_per_block_bytes=1 * KiB if major >= 8 else 0,
        dram_granule_bytes=64 if (major, minor) in ((8, 0), (9, 0), (10, 0)) else 32,
        l2_partitions=2 if (major, minor) in ((8, 0), (9, 0), (10, 0)) else 1,
    )
