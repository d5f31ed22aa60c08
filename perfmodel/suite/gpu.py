"""The one door to the GPU: PyCUDA context, compilation cache, launches, events, occupancy API."""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import GpuUnavailableError
from .registry import KERNEL_DIR

POISON_BITS = 0x7FC00000  # a quiet NaN: any output left unwritten stays NaN
FLUSH_GRID = (1056, 256)  # the reading L2 flush (probes.cu flush_read): blocks x threads
FLUSH_KERNEL = "flush_read"


def _driver() -> Any:
    try:
        import pycuda.driver as drv
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise GpuUnavailableError("PyCUDA is not installed: pip install 'perfmodel[gpu]' on a machine "
                                  "with an NVIDIA GPU") from exc
    return drv


@functools.cache
def context() -> Any:
    """Initialise CUDA once and keep a context on device 0 (or $PERFMODEL_DEVICE)."""
    drv = _driver()
    drv.init()
    if drv.Device.count() == 0:
        raise GpuUnavailableError("no CUDA device found")
    dev = drv.Device(int(os.environ.get("PERFMODEL_DEVICE", "0")))
    ctx = dev.make_context()
    import atexit

    atexit.register(ctx.pop)
    return ctx


def identity() -> dict[str, str]:
    """Which card this is (nvidia-smi: UUID, serial, PCI bus, VBIOS), so runs of different sessions can
    be told apart when they are compared (plan h200_session_check). {} where unknown."""
    import subprocess

    fields = ("uuid", "serial", "pci.bus_id", "vbios_version")
    try:
        bus = _driver().Context.get_device().pci_bus_id()
        line = subprocess.run(["nvidia-smi", "-i", bus, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError, AttributeError):
        return {}
    values = [v.strip() for v in line.split(",")]
    return dict(zip(fields, values, strict=True)) if len(values) == len(fields) else {}


def device_properties(device: Any = None) -> dict[str, Any]:
    """cudaDeviceProp-named properties of the live device, plus driver and clocks."""
    drv = _driver()
    context()
    dev = device or drv.Context.get_device()
    A = drv.device_attribute
    attr = dev.get_attributes()
    major, minor = dev.compute_capability()

    def get(name: str, default: int = 0) -> int:
        key = getattr(A, name, None)
        return int(attr.get(key, default)) if key is not None else default

    return {
        "name": dev.name(), "major": major, "minor": minor,
        "multiProcessorCount": get("MULTIPROCESSOR_COUNT"), "warpSize": get("WARP_SIZE"),
        "maxThreadsPerBlock": get("MAX_THREADS_PER_BLOCK"),
        "maxThreadsPerMultiProcessor": get("MAX_THREADS_PER_MULTIPROCESSOR"),
        "regsPerBlock": get("MAX_REGISTERS_PER_BLOCK"),
        "regsPerMultiprocessor": get("MAX_REGISTERS_PER_MULTIPROCESSOR"),
        "sharedMemPerBlock": get("MAX_SHARED_MEMORY_PER_BLOCK"),
        "sharedMemPerMultiprocessor": get("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        "sharedMemPerBlockOptin": get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        "reservedSharedMemPerBlock": get("RESERVED_SHARED_MEMORY_PER_BLOCK"),
        "l2CacheSize": get("L2_CACHE_SIZE"), "totalGlobalMem": int(dev.total_memory()),
        "clockRate": get("CLOCK_RATE"), "memoryClockRate": get("MEMORY_CLOCK_RATE"),
        "memoryBusWidth": get("GLOBAL_MEMORY_BUS_WIDTH"),
        "maxBlocksPerMultiProcessor": get("MAX_BLOCKS_PER_MULTIPROCESSOR"),
        "maxGridSize": [get(f"MAX_GRID_DIM_{a}") for a in "XYZ"],
        "maxThreadsDim": [get(f"MAX_BLOCK_DIM_{a}") for a in "XYZ"],
        "driverVersion": drv.get_driver_version(),
    }


@dataclass
class Kernel:
    """A compiled entry point with its resources (what the occupancy model reads)."""

    name: str
    function: Any
    cubin: bytes

    @property
    def num_regs(self) -> int:
        return int(self.function.num_regs)

    @property
    def shared_size_bytes(self) -> int:
        return int(self.function.shared_size_bytes)

    @property
    def local_size_bytes(self) -> int:
        return int(self.function.local_size_bytes)


@functools.cache
def _module(source: str, arch: str) -> tuple[Any, bytes]:
    from pycuda.compiler import compile as nvcc_compile

    context()
    text = (KERNEL_DIR / source).read_text()
    cubin = nvcc_compile(text, no_extern_c=True, arch=arch, include_dirs=[str(KERNEL_DIR)],
                         options=["-O3", "-lineinfo"])
    return _driver().module_from_buffer(cubin), cubin


def arch() -> str:
    """The live device's target, e.g. sm_90 (kernels are compiled for it, not for a generic PTX)."""
    context()
    major, minor = _driver().Context.get_device().compute_capability()
    return f"sm_{major}{minor}"


@functools.cache
def kernel(source: str, entry: str) -> Kernel:
    module, cubin = _module(source, arch())
    return Kernel(entry, module.get_function(entry), cubin)


def set_max_dynamic_smem(k: Kernel, nbytes: int) -> None:
    if nbytes > 48 * 1024:
        drv = _driver()
        k.function.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, int(nbytes))


def set_carveout(k: Kernel, percent: int) -> None:
    """The kernel's preferred shared-memory carveout, in percent of the most an SM has (0: the largest L1;
    -1: the driver's choice, which for a kernel with any shared memory may leave L1 small)."""
    if not -1 <= percent <= 100:
        raise ValueError(f"carveout = {percent} %: -1 (the driver's choice) or 0-100")
    drv = _driver()
    k.function.set_attribute(drv.function_attribute.PREFERRED_SHARED_MEMORY_CARVEOUT, int(percent))


class Buffers:
    """Device allocations by name; freed together."""

    def __init__(self) -> None:
        self.device: dict[str, Any] = {}
        self.shapes: dict[str, tuple[tuple[int, ...], np.dtype]] = {}

    def upload(self, name: str, host: np.ndarray) -> Any:
        drv = _driver()
        host = np.ascontiguousarray(host)
        buf = drv.mem_alloc(max(host.nbytes, 4))
        drv.memcpy_htod(buf, host)
        self.device[name], self.shapes[name] = buf, (host.shape, host.dtype)
        return buf

    def empty(self, name: str, shape: tuple[int, ...], dtype: Any = np.float32) -> Any:
        drv = _driver()
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        buf = drv.mem_alloc(max(nbytes, 4))
        self.device[name], self.shapes[name] = buf, (shape, np.dtype(dtype))
        return buf

    def poison(self, name: str) -> None:
        shape, dtype = self.shapes[name]
        words = int(np.prod(shape)) * dtype.itemsize // 4
        _driver().memset_d32(self.device[name], POISON_BITS, max(words, 1))

    def download(self, name: str) -> np.ndarray:
        shape, dtype = self.shapes[name]
        out = np.empty(shape, dtype)
        _driver().memcpy_dtoh(out, self.device[name])
        return out

    def free(self) -> None:
        for buf in self.device.values():
            buf.free()
        self.device.clear()


def launch(k: Kernel, grid: tuple[int, ...], block: tuple[int, ...], args: list[Any],
           shared: int = 0, stream: Any = None) -> None:
    k.function(*args, grid=tuple(int(g) for g in grid), block=tuple(int(b) for b in block),
               shared=int(shared), stream=stream)


def synchronize() -> None:
    """Wait for the device and surface any launch error now."""
    _driver().Context.synchronize()


class L2Flusher:
    """Touches a buffer twice the L2 size so the next launch starts with cold caches: by writing it
    (memset: leaves ~an L2 of dirty lines the next kernel must write back first) or by reading it
    (flush_read: leaves clean lines and writes nothing)."""

    def __init__(self, l2_bytes: int, mode: str = "write") -> None:
        if mode not in ("write", "read"):
            raise ValueError(f"L2Flusher mode must be 'write' or 'read', not {mode!r}")
        self.mode = mode
        self.words = 2 * max(l2_bytes, 1 << 20) // 4
        self.buf = _driver().mem_alloc(self.words * 4)
        _driver().memset_d32(self.buf, 0, self.words)
        if mode == "read":
            self.sink = _driver().mem_alloc(FLUSH_GRID[0] * FLUSH_GRID[1] * 4)  # never written
            self.kernel = kernel("probes.cu", FLUSH_KERNEL)

    def __call__(self) -> None:
        if self.mode == "write":
            _driver().memset_d32(self.buf, 0, self.words)
        else:
            self.read(self.buf, self.words)

    def read(self, buf: Any, words: int) -> None:
        """Read `words` 4-byte words of `buf` through L2, writing nothing (a reading flusher only)."""
        launch(self.kernel, (FLUSH_GRID[0], 1, 1), (FLUSH_GRID[1], 1, 1),
               [buf, self.sink, np.uint64(words // 4), np.float32(1.0)])


class Spinner:
    """One warp spinning `seconds` on the SM clock (probes.cu spin): queued before the start event, it
    keeps the GPU busy while the host enqueues the timed launch."""

    def __init__(self, seconds: float = 50e-6) -> None:
        self.kernel = kernel("probes.cu", "spin")
        self.cycles = np.int64(seconds * device_properties()["clockRate"] * 1e3)

    def __call__(self) -> None:
        launch(self.kernel, (1, 1, 1), (32, 1, 1), [self.cycles])


def time_launches(run: Any, reps: int, warmup: int = 2, before: Any = None,
                  budget_s: float = 1.0) -> np.ndarray:
    """Seconds per call of run(), each timed with CUDA events; `before` runs outside the events."""
    drv = _driver()
    for _ in range(warmup):
        run()
    synchronize()
    start, end = drv.Event(), drv.Event()
    times: list[float] = []
    spent = 0.0
    for _ in range(reps):
        if before is not None:
            before()
        start.record()
        run()
        end.record()
        end.synchronize()
        t = end.time_since(start) * 1e-3
        times.append(t)
        spent += t
        if spent > budget_s and len(times) >= 5:
            break
    return np.array(times)


def driver_occupancy(k: Kernel, block_threads: int, dynamic_smem: int) -> int | None:
    """cuOccupancyMaxActiveBlocksPerMultiprocessor through cuda.bindings (None if unavailable)."""
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None
    err, module = cu.cuModuleLoadData(k.cubin)
    if int(err) != 0:
        return None
    err, fn = cu.cuModuleGetFunction(module, k.name.encode())
    if dynamic_smem > 48 * 1024:
        cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              int(dynamic_smem))
    err, blocks = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, int(block_threads), int(dynamic_smem))
    cu.cuModuleUnload(module)
    return int(blocks) if int(err) == 0 else None


def software_versions() -> dict[str, str]:
    import pycuda

    drv = _driver()
    smi = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    return {"driver": str(drv.get_driver_version()), "cuda": ".".join(map(str, drv.get_version())),
            "pycuda": pycuda.VERSION_TEXT, "nvidia_smi": smi}
