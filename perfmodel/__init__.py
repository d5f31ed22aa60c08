"""perfmodel: an analytical CUDA performance model, validated against an H200's counters.

Public API: device lookup, exact occupancy, memory-access analysis, kernel cases, predictions
and their comparison with recorded measurements.
"""

from __future__ import annotations

from . import memory
from .devices import DeviceSpec, device, devices
from .errors import LimitError, PerfModelError, UnknownDeviceError
from .occupancy import Occupancy, curves, max_potential_block_size, occupancy

__version__ = "0.1.0"

__all__ = [
    "DeviceSpec", "LimitError", "Occupancy", "PerfModelError", "UnknownDeviceError", "cases",
    "curves", "device", "devices", "max_potential_block_size", "memory", "occupancy", "predict", "validate",
]


def __getattr__(name: str):
    if name == "validate":  # pandas-heavy: imported on first use
        import importlib

        return importlib.import_module(".validate", __name__)
    raise AttributeError(f"module 'perfmodel' has no attribute {name!r}")


def cases() -> dict[str, tuple[str, ...]]:
    """Case names of the kernel registry with their parameter names."""
    from .suite.registry import case_parameters

    return case_parameters()


def predict(case_name: str, device: str | DeviceSpec = "h200", **params: int):
    """Predict one registry case on a device (no GPU needed)."""
    from .models import predict as _predict

    return _predict(case_name, device, **params)
