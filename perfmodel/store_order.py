"""The order in which blocks that store after a barrier write, read off the recorded stamped row
transposes (experiments/store_order.py): each block took a ticket as its stores began. Against launch
order, ticket order spreads with the blocks resident per SM - a block writes at the end of a life
whose length varies - so two blocks `d` apart in launch order write `d + e` tickets apart, e drawn
from the recorded spread. Kept per blocks per SM in units of the blocks resident on the device
(a block's life is about that many dispatches long), so other kernels and devices' SM counts scale it."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .devices import device
from .measurements import DATA_DIR

QUANTILES = 64
# the launches the spread is read from: the suite's worst-predicted padded row transpose, at 2-8 blocks
# per SM; the other recorded shapes (3001 x 8556, 9001 x 4278) test it (tests/test_store_order.py)
CALIBRATION = "rows_9001x8556"
TILE_BLOCK_BYTES = 8 * 32 * 32  # a row transpose block's traffic: its 32 x 32 float tile read and written


@dataclass(frozen=True)
class StoredLaunch:
    """One recorded stamped launch: its shape, tickets and ncu's counts."""

    name: str  # e.g. rows_9001x8556_b8
    rows: int
    cols: int
    blocks_per_sm: int
    swapped: bool
    tickets: np.ndarray  # per block (row-major over the grid): its place in write order
    metrics: dict[str, float]


def recorded(device_key: str, launch: str = "ncu") -> list[StoredLaunch]:
    """Every stamped launch recorded on a device (the one profiled under ncu, or the timed one)."""
    folder = DATA_DIR / device_key / "checks" / "store_order"
    if not (folder / "store_order.csv").exists():
        return []
    metrics: dict[str, dict[str, float]] = {}
    shape: dict[str, tuple[int, int, int, bool]] = {}
    with open(folder / "store_order.csv") as f:
        for r in csv.DictReader(f):
            metrics.setdefault(r["case"], {})[r["metric"]] = float(r["value"])
            shape[r["case"]] = (int(r["rows"]), int(r["cols"]), int(r["blocks_per_sm"]), r["swapped"] == "True")
    stamps = np.load(folder / f"stamps_{launch}.npz")
    out = []
    for name, (rows, cols, b, swapped) in shape.items():
        offset = stamps[f"{name}/{launch}/ticket_minus_index"].astype(np.int64)
        out.append(StoredLaunch(name, rows, cols, b, swapped, np.arange(len(offset)) + offset, metrics[name]))
    return out


def spread(tickets: np.ndarray, distance: int) -> np.ndarray:
    """(ticket distance - launch distance) of every pair of blocks `distance` apart in launch order."""
    return tickets[distance:] - tickets[:-distance] - distance


@dataclass(frozen=True)
class StoreSpread:
    """Quantiles of the spread of write order, in resident blocks, per blocks per SM."""

    offsets: dict[int, np.ndarray]
    source: str

    def blocks(self, blocks_per_sm: int, sms: int) -> np.ndarray:
        """The spread, in blocks, of a kernel with `blocks_per_sm` resident on `sms` SMs: the recorded
        quantiles, linear between the recorded blocks per SM (the nearest outside them)."""
        known = sorted(self.offsets)
        b = min(max(blocks_per_sm, known[0]), known[-1])
        hi = next(k for k in known if k >= b)
        lo = max(k for k in known if k <= b)
        w = 0.0 if hi == lo else (b - lo) / (hi - lo)
        return ((1 - w) * self.offsets[lo] + w * self.offsets[hi]) * blocks_per_sm * sms


@lru_cache(maxsize=4)
def store_spread(device_key: str) -> StoreSpread | None:
    """The spread read off the calibration launches (the ncu-profiled ones); None where none is recorded."""
    q = (np.arange(QUANTILES) + 0.5) / QUANTILES
    sms = device(device_key).sm_count  # the recorded launches' resident blocks: blocks per SM x SMs
    offsets = {}
    for s in recorded(device_key):
        if s.name.startswith(CALIBRATION + "_b") and not s.swapped:
            offsets[s.blocks_per_sm] = np.quantile(spread(s.tickets, partner_distance(s)), q) / (s.blocks_per_sm * sms)
    if not offsets:
        return None
    return StoreSpread(offsets, f"stamped transpose.rows {CALIBRATION.split('_')[1]} at "
                                f"{', '.join(map(str, sorted(offsets)))} blocks per SM (experiments/store_order.py)")


def partner_distance(s: StoredLaunch) -> int:
    """Blocks in launch order between the two writers of a shared output sector: the next tile row
    (cols / 32 blocks), or the next block where the grid is swapped."""
    return 1 if s.swapped else -(-s.cols // 32)


def off_sector_share(rows) -> np.ndarray:
    """The share of output rows `rows` floats long (a number or a Series of them) that start off a
    32-byte sector (row starts move 4 * rows bytes, modulo 32, from one to the next)."""
    pitch = (4 * np.atleast_1d(np.asarray(rows))) % 32
    return np.array([1 - 1 / (32 // np.gcd(int(b), 32)) if b else 0.0 for b in pitch])


def shared_sectors(rows, cols, tile=32):
    """Sectors two blocks of a tiled transpose each write in part: one per tile boundary inside an
    output row (`rows` floats long, `cols` of them) where the row starts off a sector (numbers or Series)."""
    return cols * (np.ceil(rows / tile) - 1) * off_sector_share(rows)


def measured_lost(s: StoredLaunch) -> float:
    """The share of the shared sectors L2 lost first: DRAM reads past the input (ncu) over two fills
    (one for each piece) per shared sector."""
    shared = float(shared_sectors(s.rows, s.cols)[0])
    return (s.metrics["dram__bytes_read.sum"] - 4.0 * s.rows * s.cols) / (2 * 32) / shared


def lost_at_tickets(s: StoredLaunch, lost: Callable[[float], float], block_bytes: float = TILE_BLOCK_BYTES) -> float:
    """The loss law's share (`lost(bytes between)`) at the distances the writers' tickets put between them:
    models.written.lost_at over this launch's own spread."""
    from .models.written import lost_at  # models imports this module

    d = partner_distance(s)
    return lost_at(lost, d, block_bytes, spread(s.tickets, d))[0]
