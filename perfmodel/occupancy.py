"""Theoretical occupancy, exactly as NVIDIA's cuda_occupancy.h computes it.

The core works on numpy arrays (broadcast block sizes x registers x shared memory), so a sweep
of half a million launch configurations is one call; `occupancy()` is its checked scalar face.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .devices import DeviceSpec
from .devices import device as lookup_device
from .errors import LimitError, PerfModelError

if TYPE_CHECKING:
    import pandas as pd

INT_MAX = 2**31 - 1
LIMITERS = ("warps", "registers", "shared_memory", "blocks", "barriers")


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM for one launch configuration, and why."""

    device: str
    threads_per_block: int
    registers_per_thread: int
    static_smem_bytes: int
    dynamic_smem_bytes: int
    carveout: int | None
    opt_in: bool
    warps_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    threads_per_sm: int
    max_warps_per_sm: int
    occupancy: float  # active warps / max warps per SM
    limiters: tuple[str, ...]
    block_limit_warps: int
    block_limit_registers: int | None  # None: no register limit (0 registers)
    block_limit_shared_memory: int | None  # None: no shared memory in use
    block_limit_blocks: int
    registers_per_block: int  # allocated, with the per-warp granularity
    smem_per_block_bytes: int  # allocated, with the driver's reservation and granularity
    smem_per_sm_bytes: int  # the carveout cuda_occupancy.h assumes (the preference, or the maximum)
    carveout_bytes: int  # the carveout the SM ends up with: the driver's smallest step that fits
    block_limit_shared_memory_at_carveout: int | None  # the limit ncu reports, at that carveout

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


@dataclass(frozen=True)
class Limits:
    """Vectorised result of the occupancy rules (arrays broadcast from the inputs)."""

    blocks: np.ndarray
    before_barriers: np.ndarray  # min of the four resource limits, before the barrier limit
    warps: np.ndarray
    registers: np.ndarray
    shared_memory: np.ndarray
    block_slots: int
    barriers: np.ndarray
    registers_per_block: np.ndarray
    smem_per_block_bytes: np.ndarray
    smem_per_sm_bytes: np.ndarray
    warps_per_block: np.ndarray

    def limiter_mask(self) -> np.ndarray:
        """Bit i set when LIMITERS[i] equals the binding limit (the header's limitingFactors)."""
        b = self.before_barriers  # the header flags resources before applying barriers
        mask = (self.warps == b).astype(np.int64)
        mask |= (self.registers == b) << 1
        mask |= (self.shared_memory == b) << 2
        mask |= (self.block_slots == b) << 3
        mask |= (self.barriers == self.blocks) << 4
        return mask


def _round_up(x: np.ndarray | int, m: int) -> np.ndarray:
    return -(-np.asarray(x) // m) * m


def _align_carveout(dev: DeviceSpec, size: np.ndarray) -> np.ndarray:
    """Round a shared-memory size up to the next size the SM can be configured to."""
    steps = np.asarray(dev.carveout_steps_bytes, dtype=np.int64)
    idx = np.searchsorted(steps, size, side="left")
    if np.any(idx >= len(steps)):
        bad = int(np.max(size))
        raise LimitError("shared memory per SM", bad,
                         f"at most {steps[-1]} bytes on compute capability {dev.compute_capability}")
    return steps[idx]


def preferred_smem_per_sm(dev: DeviceSpec, carveout: int | None) -> int:
    """The carveout that a preference (percent of the maximum, None = none) asks for."""
    if dev.major < 7:
        return dev.smem_per_sm_bytes
    size = dev.smem_per_sm_bytes if carveout is None else carveout * dev.smem_per_sm_bytes // 100
    return int(_align_carveout(dev, np.asarray(size)))


def limits(dev: DeviceSpec, threads: Any, registers: Any, static_smem: Any = 0,
           dynamic_smem: Any = 0, carveout: int | None = None, opt_in: bool = False,
           block_barriers: int = 1) -> Limits:
    """Every per-resource block limit of cudaOccMaxActiveBlocksPerMultiprocessor, vectorised.

    Inputs are assumed valid (see `occupancy` for the checked entry point).
    """
    a = dev.arch
    threads, registers, static_smem, dynamic_smem = (
        np.asarray(v, dtype=np.int64) for v in (threads, registers, static_smem, dynamic_smem))
    warps = -(-threads // dev.warp_size)

    reg_limit, regs_per_block = _register_limit(dev, warps, registers, a.warp_allocation_granularity)
    if (dev.major, dev.minor) == (6, 0):  # GP100 must also fit on GP10x (4 sub-partitions)
        gp10x, _ = _register_limit(dev, warps, registers, 4)
        reg_limit = np.where((reg_limit != 0) & (gp10x == 0), 0, reg_limit)

    warp_limit = np.where(threads > dev.max_threads_per_block, 0, dev.max_warps_per_sm // warps)

    gran = a.smem_allocation_granularity_bytes
    reserved = dev.reserved_smem_per_block_bytes
    alloc = _round_up(static_smem + reserved + dynamic_smem, gran)
    per_block = np.full(alloc.shape, dev.smem_per_block_bytes, dtype=np.int64)
    exceeded = np.zeros(alloc.shape, dtype=bool)
    if opt_in and dev.major >= 7:
        max_dynamic = dev.smem_per_block_optin_bytes - static_smem
        uses_optin = static_smem + reserved + max_dynamic > dev.smem_per_block_bytes
        per_block = np.where(uses_optin, dev.smem_per_block_optin_bytes, per_block)
        exceeded |= dynamic_smem > max_dynamic
    if dev.major >= 8:
        per_block = per_block + reserved
    exceeded |= alloc > per_block
    preference = preferred_smem_per_sm(dev, carveout)
    if dev.major >= 7:
        fits = np.where(exceeded, 0, alloc)
        smem_sm = np.where(preference >= alloc, preference, _align_carveout(dev, fits))
    else:
        smem_sm = np.full(alloc.shape, dev.smem_per_sm_bytes, dtype=np.int64)
    smem_limit = np.where(exceeded, 0, np.where(alloc > 0, smem_sm // np.maximum(alloc, 1), INT_MAX))

    slots = a.max_blocks_per_sm
    blocks = np.minimum(np.minimum(reg_limit, smem_limit), np.minimum(warp_limit, slots))
    before_barriers = blocks
    barriers = np.full(blocks.shape, INT_MAX, dtype=np.int64)
    if dev.major >= 9 and block_barriers > 0:
        barriers[...] = slots * a.barrier_slots_per_block_limit // block_barriers
        blocks = np.minimum(blocks, barriers)
    shape = blocks.shape
    return Limits(blocks=blocks, before_barriers=before_barriers, warps=np.broadcast_to(warp_limit, shape),
                  registers=np.broadcast_to(reg_limit, shape),
                  shared_memory=np.broadcast_to(smem_limit, shape), block_slots=slots,
                  barriers=barriers, registers_per_block=np.broadcast_to(regs_per_block, shape),
                  smem_per_block_bytes=np.broadcast_to(alloc, shape),
                  smem_per_sm_bytes=np.broadcast_to(smem_sm, shape),
                  warps_per_block=np.broadcast_to(warps, shape))


def _register_limit(dev: DeviceSpec, warps: np.ndarray, registers: np.ndarray,
                    sub_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    a = dev.arch
    per_warp = _round_up(registers * dev.warp_size, a.register_allocation_unit)
    per_block = per_warp * warps
    assumed = per_warp * _round_up(warps, sub_partitions)
    fails = ((dev.registers_per_block < assumed) | (dev.registers_per_block < per_block)
             | (registers > a.max_registers_per_thread))
    warps_per_partition = (dev.registers_per_sm // sub_partitions) // np.maximum(per_warp, 1)
    limit = np.where(per_warp > 0, warps_per_partition * sub_partitions // warps, INT_MAX)
    return np.where(fails, 0, limit), per_block


def _check(dev: DeviceSpec, threads: int, registers: int, static_smem: int, dynamic_smem: int,
           carveout: int | None, opt_in: bool) -> None:
    if not 0 < threads <= dev.max_threads_per_block:
        raise LimitError("threads per block", threads,
                         f"1..{dev.max_threads_per_block} on {dev.name}")
    if not 0 <= registers <= dev.max_registers_per_thread:
        raise LimitError("registers per thread", registers,
                         f"0..{dev.max_registers_per_thread} on compute capability {dev.compute_capability}")
    for what, v in (("static shared memory", static_smem), ("dynamic shared memory", dynamic_smem)):
        if v < 0:
            raise LimitError(what, v, "must not be negative")
    if static_smem > dev.smem_per_block_bytes:
        raise LimitError("static shared memory per block", static_smem,
                         f"at most {dev.smem_per_block_bytes} bytes (static allocations cannot opt in)")
    total = static_smem + dynamic_smem
    if total > dev.smem_per_block_optin_bytes:
        raise LimitError("shared memory per block (static + dynamic)", total,
                         f"at most {dev.smem_per_block_optin_bytes} bytes, the opt-in maximum of {dev.name}")
    if carveout is not None and not (isinstance(carveout, int | np.integer) and 0 <= carveout <= 100):
        raise LimitError("carveout", carveout, "None or a whole percentage 0..100 of the maximum shared memory")


def occupancy(device: DeviceSpec | str, threads_per_block: int, registers_per_thread: int,
              static_smem_bytes: int = 0, dynamic_smem_bytes: int = 0, carveout: int | None = None,
              opt_in: bool = False) -> Occupancy:
    """Occupancy of one launch, as cudaOccMaxActiveBlocksPerMultiprocessor computes it."""
    dev = lookup_device(device)
    _check(dev, threads_per_block, registers_per_thread, static_smem_bytes, dynamic_smem_bytes,
           carveout, opt_in)
    lim = limits(dev, threads_per_block, registers_per_thread, static_smem_bytes,
                 dynamic_smem_bytes, carveout, opt_in)
    blocks = int(lim.blocks)
    mask = int(lim.limiter_mask())
    warps_per_block = int(lim.warps_per_block)
    reg, smem = int(lim.registers), int(lim.shared_memory)
    alloc = int(lim.smem_per_block_bytes)
    chosen = driver_carveout(dev, lim, carveout)
    return Occupancy(
        device=dev.name, threads_per_block=threads_per_block,
        registers_per_thread=registers_per_thread, static_smem_bytes=static_smem_bytes,
        dynamic_smem_bytes=dynamic_smem_bytes, carveout=carveout, opt_in=opt_in,
        warps_per_block=warps_per_block, blocks_per_sm=blocks,
        warps_per_sm=blocks * warps_per_block, threads_per_sm=blocks * threads_per_block,
        max_warps_per_sm=dev.max_warps_per_sm,
        occupancy=blocks * warps_per_block / dev.max_warps_per_sm,
        limiters=tuple(name for i, name in enumerate(LIMITERS) if mask >> i & 1),
        block_limit_warps=int(lim.warps), block_limit_registers=None if reg == INT_MAX else reg,
        block_limit_shared_memory=None if smem == INT_MAX else smem,
        block_limit_blocks=lim.block_slots, registers_per_block=int(lim.registers_per_block),
        smem_per_block_bytes=alloc, smem_per_sm_bytes=int(lim.smem_per_sm_bytes), carveout_bytes=chosen,
        block_limit_shared_memory_at_carveout=(chosen // alloc if alloc and smem != INT_MAX else None))


# Read off 50 ncu launches on the H200 (mem.carveout: 64..1024 threads x 1..9 KiB, static and dynamic
# shared memory) and every suite kernel: with no preference the driver sizes the carveout for twice the
# blocks the other limits allow (capped by the block slots, and at 132 KiB unless one block set needs
# more) for blocks of up to 512 threads, and for exactly those blocks for larger ones. A kernel with no
# shared memory of its own (the 1 KiB reserve only) gets room for four times the blocks (32 x 256
# threads, 16 x 512 and 8 x 1024: the naive transpose's block shapes).
DRIVER_CARVEOUT_CAP_BYTES = {9: 132 * 1024}


def driver_carveout(dev: DeviceSpec, lim: Limits, preference: int | None) -> int:
    """The carveout the driver configures (ncu's launch__occupancy_limit_shared_mem is taken at it)."""
    if dev.major < 7 or not dev.carveout_steps_bytes:
        return dev.smem_per_sm_bytes
    if preference is not None:
        return int(lim.smem_per_sm_bytes)
    alloc = int(lim.smem_per_block_bytes)
    others = int(min(lim.warps, lim.registers, lim.block_slots))
    top = int(lim.smem_per_sm_bytes)
    minimal = int(_align_carveout(dev, np.asarray(min(others * alloc, top))))
    cap = DRIVER_CARVEOUT_CAP_BYTES.get(dev.major)
    if cap is None or int(lim.warps_per_block) * dev.warp_size > 512:
        return minimal
    room = 4 if alloc <= dev.reserved_smem_per_block_bytes else 2
    target = min(room * others, lim.block_slots) * alloc
    doubled = int(_align_carveout(dev, np.asarray(min(target, top))))
    return max(minimal, min(doubled, cap))


def occupancy_of_function(device: DeviceSpec | str, function: Any, threads_per_block: int,
                          dynamic_smem_bytes: int = 0, carveout: int | None = None,
                          opt_in: bool = False) -> Occupancy:
    """Occupancy of a compiled kernel (a PyCUDA Function: its num_regs and shared_size_bytes)."""
    return occupancy(device, threads_per_block, int(function.num_regs),
                     int(function.shared_size_bytes), dynamic_smem_bytes, carveout, opt_in)


def max_potential_block_size(device: DeviceSpec | str, registers_per_thread: int,
                             static_smem_bytes: int = 0,
                             dynamic_smem_bytes: int | Callable[[int], int] = 0,
                             max_threads_per_block: int | None = None, carveout: int | None = None,
                             opt_in: bool = False) -> tuple[int, int]:
    """(min_grid_size, block_size) as cudaOccupancyMaxPotentialBlockSize chooses them."""
    dev = lookup_device(device)
    limit = min(dev.max_threads_per_block, max_threads_per_block or dev.max_threads_per_block)
    sizes = np.minimum(limit, np.arange(_round_up(limit, dev.warp_size), 0, -dev.warp_size))
    dyn = (np.array([dynamic_smem_bytes(int(s)) for s in sizes]) if callable(dynamic_smem_bytes)
           else dynamic_smem_bytes)
    blocks = limits(dev, sizes, registers_per_thread, static_smem_bytes, dyn, carveout, opt_in).blocks
    threads = sizes * blocks
    if threads.max() <= 0:
        raise PerfModelError(f"no block size lets one block of this kernel fit on an SM of {dev.name}")
    best = int(np.argmax(threads))  # first maximum in descending block size, as the header
    return int(blocks[best]) * dev.sm_count, int(sizes[best])


def _curve(dev: DeviceSpec, column: str, values: np.ndarray, lim: Limits) -> pd.DataFrame:
    import pandas as pd

    mask = lim.limiter_mask()
    warps = lim.blocks * lim.warps_per_block
    return pd.DataFrame({
        column: values, "blocks_per_sm": lim.blocks, "warps_per_sm": warps,
        "occupancy": warps / dev.max_warps_per_sm,
        "limiter": [",".join(n for i, n in enumerate(LIMITERS) if m >> i & 1) for m in mask]})


def curves(device: DeviceSpec | str, threads_per_block: int, registers_per_thread: int,
           static_smem_bytes: int = 0, dynamic_smem_bytes: int = 0, carveout: int | None = None,
           opt_in: bool = False) -> dict[str, pd.DataFrame]:
    """The three graphs of NVIDIA's calculator: occupancy against block size, registers, smem."""
    dev = lookup_device(device)
    _check(dev, threads_per_block, registers_per_thread, static_smem_bytes, dynamic_smem_bytes,
           carveout, opt_in)
    common = dict(carveout=carveout, opt_in=opt_in)
    sizes = np.arange(dev.warp_size, dev.max_threads_per_block + 1, dev.warp_size)
    regs = np.arange(0, dev.max_registers_per_thread + 1)
    smem_max = dev.smem_per_block_optin_bytes if opt_in else dev.smem_per_block_bytes
    smem = np.arange(0, smem_max - static_smem_bytes + 1, 512)
    return {
        "threads_per_block": _curve(dev, "threads_per_block", sizes, limits(
            dev, sizes, registers_per_thread, static_smem_bytes, dynamic_smem_bytes, **common)),
        "registers_per_thread": _curve(dev, "registers_per_thread", regs, limits(
            dev, threads_per_block, regs, static_smem_bytes, dynamic_smem_bytes, **common)),
        "smem_per_block_bytes": _curve(dev, "smem_per_block_bytes", smem + static_smem_bytes, limits(
            dev, threads_per_block, registers_per_thread, static_smem_bytes, smem, **common)),
    }
