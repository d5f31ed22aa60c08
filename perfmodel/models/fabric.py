"""Reads that cross the fabric between the L2 partitions (GH100: two halves of 30 MiB). An SM looks a
line up in its own partition first; a line homed in the other one that its own does not hold crosses
the fabric, is looked up at home and comes back over it (ncu: lts__t_sectors_srcunit_ltcfabric_op_read).
Between one partition and the whole L2 the fabric, not DRAM or the L2 slices, bounds a buffer re-read
by SMs that change from pass to pass (plan h200_fabric_reads: busy 85-90 % of its cycles)."""

from __future__ import annotations

from .base import Term


def crossing_read_bytes(buffer_bytes: float, dram_read_bytes: float, passes: int, readers: str,
                        partitions: int) -> tuple[float, float]:
    """(bytes, of them the first pass's) that cross the fabric when `passes` passes read a buffer of
    `buffer_bytes`, L2 losing what `dram_read_bytes` says between passes. A line is homed in each
    partition alike, so the first pass crosses for (P - 1) / P of it; a re-read crosses where the line is
    homed away and the reader's partition holds no copy. A copy is made by a reader on that side and
    kept as L2 keeps lines, k = 1 - the loss a pass, for each pass since: "one" reader a line reads it
    every pass (held: k); readers that change each pass ("shared", "split") last read it on this side j
    passes back with chance (1/P) ((P - 1) / P)^(j - 1) (held: that times k^j, summed). Against ncu
    (plan h200_fabric_reads): within 17 %, 4.7 % low on average - the reader's copies are lost a little
    sooner than the home's lines."""
    if partitions < 2 or not buffer_bytes:
        return 0.0, 0.0
    away = (partitions - 1) / partitions
    kept = 1.0 - (dram_read_bytes / buffer_bytes - 1) / (passes - 1) if passes > 1 else 1.0
    kept = min(max(kept, 0.0), 1.0)
    first = away * buffer_bytes
    total = first
    for k in range(2, passes + 1):
        held = kept if readers == "one" else sum((1 - away) * away ** (j - 1) * kept**j for j in range(1, k))
        total += away * buffer_bytes * (1 - held)
    return total, first


def fabric_term(crossing_bytes: float, rate_bytes_per_s: float, source: str) -> Term:
    return Term("fabric", crossing_bytes / rate_bytes_per_s, crossing_bytes, rate_bytes_per_s,
                f"reads crossing between the L2 partitions: {crossing_bytes / 2**20:.0f} MiB ({source})")
