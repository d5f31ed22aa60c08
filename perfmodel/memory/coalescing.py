"""Global-memory coalescing: requests, 32-byte sectors and 128-byte lines per warp instruction."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lanes import INACTIVE, as_rows, distinct_sorted, sorted_keys

SECTOR_BYTES = 32
LINE_BYTES = 128


@dataclass(frozen=True)
class GlobalAccess:
    """What L1TEX counts for a set of warp-level global loads or stores."""

    width_bytes: int
    store: bool
    requests: int
    sectors: int
    lines: int
    bytes_requested: int
    sectors_per_row: np.ndarray
    lines_per_row: np.ndarray | None = None
    active_per_row: np.ndarray | None = None

    @property
    def bytes_moved(self) -> int:
        return self.sectors * SECTOR_BYTES

    @property
    def efficiency(self) -> float:
        """Bytes the threads asked for over bytes the sectors carried (1.0 = fully coalesced)."""
        return self.bytes_requested / self.bytes_moved if self.sectors else 1.0

    @property
    def line_efficiency(self) -> float:
        """The same against whole 128-byte lines: the textbook's transaction-level figure."""
        return self.bytes_requested / (self.lines * LINE_BYTES) if self.lines else 1.0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    def describe(self) -> str:
        return (f"{self.sectors_per_request:.3g} sectors per request, "
                f"{self.efficiency:.1%} efficient ({self.bytes_requested} B requested, "
                f"{self.bytes_moved} B moved)")


def global_access(addresses: object, width: int, store: bool = False) -> GlobalAccess:
    """Count requests (one per warp instruction with an active lane), sectors and lines."""
    a, active = as_rows(addresses, width)
    # an aligned access of <= 16 bytes never straddles a sector
    by_sector = sorted_keys(a >> 5, active)
    sectors = distinct_sorted(by_sector)
    lines = distinct_sorted(np.where(by_sector == INACTIVE, INACTIVE, by_sector >> 2))
    n_active = np.count_nonzero(active, axis=1)
    return GlobalAccess(width_bytes=width, store=store, requests=int(np.count_nonzero(n_active)),
                        sectors=int(sectors.sum()), lines=int(lines.sum()),
                        bytes_requested=int(n_active.sum()) * width, sectors_per_row=sectors,
                        lines_per_row=lines, active_per_row=n_active)
