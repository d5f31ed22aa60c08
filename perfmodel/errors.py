"""Error types: every bad input surfaces as a PerfModelError (a ValueError) naming the limit."""

from __future__ import annotations


class PerfModelError(ValueError):
    """Base class for all user-facing errors of perfmodel."""


class UnknownDeviceError(PerfModelError, KeyError):
    """A device name that matches no built-in device."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class LimitError(PerfModelError):
    """A value outside a hardware or API limit."""

    def __init__(self, what: str, value: object, limit: str) -> None:
        super().__init__(f"{what} = {value} violates the limit: {limit}")
        self.what, self.value, self.limit = what, value, limit


class AccessError(PerfModelError):
    """A malformed memory-access description (shape, alignment, expression)."""


class GpuUnavailableError(PerfModelError, RuntimeError):
    """Raised where a GPU (or PyCUDA) is needed but missing."""
