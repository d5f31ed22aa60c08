"""DRAM traffic: each array once while the footprint fits in L2; past that, per-family reuse models
(matmul: B streamed again per group of blocks, as much as L2 has lost of it), and the writes still
dirty in L2 when the kernel ends."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..devices import DeviceSpec
from ..memory import Launch
from ..memory.coalescing import SECTOR_BYTES, straddle_share


@dataclass(frozen=True)
class DramEstimate:
    read_bytes: int
    write_bytes: int
    note: str


def group_blocks(dev: DeviceSpec, launch: Launch) -> int:
    """The consecutive blocks that stream one B slice together (`matmul_operands`): max(SMs, blocks per row)."""
    return max(dev.sm_count, launch.grid[0])


def matmul_operands(dev: DeviceSpec, launch: Launch, params: dict[str, int]) -> tuple[int, int, float]:
    """A's bytes (m x k floats), B's (k x n) and how many times the blocks stream B: B is shared by every block
    row; blocks launched together, one per SM, share each B slice in L2, later residency slots run
    staggered and do not (seen on the H200: tiled/coarsened matmul at 4096, TILE 16 and 32, COARSE
    1-8) - so once per group of max(SMs, blocks per row) consecutive blocks."""
    return (4 * params["m"] * params["k"], 4 * params["k"] * params["n"],
            max(1.0, launch.blocks / group_blocks(dev, launch)))


def group_bytes(dev: DeviceSpec, launch: Launch, params: dict[str, int]) -> float:
    """What L2 takes in between two groups' reads of one B slice (`matmul_operands`' groups, each sweeping
    all of B): B, and the A strips of one group's block rows (a block's rows of k floats a row of blocks)."""
    _, b_bytes, _ = matmul_operands(dev, launch, params)
    rows = min(launch.blocks, group_blocks(dev, launch)) / launch.grid[0]
    return b_bytes + rows * launch.block[1] * params["k"] * 4


def sweep_miss_share(dev: DeviceSpec, launch: Launch, params: dict[str, int], dram_read_bytes: float) -> float:
    """The share of a matmul's tile sweeps that wait on DRAM, one block an SM, averaged over the waves its
    rounds run in (each wave's rounds take as long, however many blocks it has). A group of blocks
    (`matmul_operands`) reads each tile together, so one miss holds them all: the first group reads its
    A strips and B from DRAM, a later one its own A strips and what L2 has lost of B (`b_loss_from_reads`
    of the DRAM reads), each share over the A strips and B columns that group sweeps. So a partial last
    wave after full ones finds most of B in L2 (COARSE 8 at 1.1-1.2 waves: +8..+10 % on the launch's
    average share, +2 % so)."""
    a_bytes, b_bytes, streams = matmul_operands(dev, launch, params)
    if streams == 1.0:
        return min(dram_read_bytes / (a_bytes + b_bytes), 1.0)
    loss = min(max(b_loss_from_reads(dram_read_bytes, a_bytes, b_bytes, streams), 0.0), 1.0)
    group = group_blocks(dev, launch)
    waves, weighted = 0, 0.0
    for first in range(0, launch.blocks, group):
        blocks = min(group, launch.blocks - first)
        a_swept = a_bytes * blocks / launch.blocks
        b_swept = b_bytes * min(blocks, launch.grid[0]) / launch.grid[0]
        missed = a_swept + b_swept * (1.0 if first == 0 else loss)
        waves_in = math.ceil(blocks / dev.sm_count)
        waves += waves_in
        weighted += waves_in * missed / (a_swept + b_swept)
    return weighted / waves


def b_loss_from_reads(read_bytes: float, a_bytes: float, b_bytes: float, streams: float) -> float:
    """The share of B lost per re-read that a matmul's DRAM reads say, inverting `dram_traffic`'s
    A + B (1 + (streams - 1) loss); NaN where B is streamed once."""
    return ((read_bytes - a_bytes) / b_bytes - 1) / (streams - 1) if streams > 1 else float("nan")


def reread_miss(dev: DeviceSpec, footprint_bytes: float) -> float:
    """The share of a working set that L2 has lost by the time it is read again: none while it fits
    one L2 partition, all of it past the whole L2, linear in between (a line that SMs on both sides
    read may be held in both halves, so only one half is sure to hold such data). Measured in the band
    (plans/h200_reuse.toml): a cyclic read stream loses 4/24/83 % at 40/48/56 MiB, matmul's B
    9/25/50/75 % (TILE 32) to 10/44/93 % (TILE 16) at 32/40/48/56 MiB - the line is a middle road."""
    near = dev.l2_partition_bytes
    if footprint_bytes <= near:
        return 0.0
    if footprint_bytes >= dev.l2_bytes:
        return 1.0
    return (footprint_bytes - near) / (dev.l2_bytes - near)


# The kernels (case, tile) whose B is swept like a stream: each block row reads all of B in launch order.
# Their DRAM reads follow the kernel's own loss curve where it is recorded (perfmodel.b_curve), else the
# read stream's measured loss at the footprint of the same demand on each partition (`swept_footprint`);
# suite and held-out TILE 16 in the band: tests/test_recorded_dram.py.
# Not corner-turning (+115..+181 % at 38-47 MiB) nor TILE 32 or COARSE (they lose more below 36 MiB and
# less above; their recorded schedules replayed explain them, perfmodel.l2replay - COARSE 4 and 8 read
# their own curves over B and a group's A instead, `own_loss`).
SWEPT = (("matmul.tiled", 16),)


def swept(case: str, params: dict[str, int]) -> bool:
    return (case, params.get("tile")) in SWEPT


def swept_footprint(b_bytes: float) -> float:
    """The read stream (probe.l2_read: each line read by one SM, every pass) whose L2 partitions hold
    what B's do: a partition keeps its own half of a stream and copies of the lines its SMs read from
    the other half (3/4 of the stream); of B, which SMs on both sides read, its own half and copies of
    all the other half (all of B). So B fills the partitions as a stream of 4/3 its size."""
    return 4 * b_bytes / 3


def swept_loss(dev: DeviceSpec, params: dict[str, int], b_bytes: float,
               pass_loss: Callable[..., float | None]) -> tuple[float, str] | None:
    """A swept B's loss per re-read and where it comes from: the kernel's own measured curve where recorded
    (perfmodel.b_curve), else the read stream's measured loss at `swept_footprint`."""
    from ..b_curve import tile16_loss

    if (own := tile16_loss(dev.key, params["n"], params["k"], b_bytes)) is not None:
        return own
    stream = pass_loss(swept_footprint(b_bytes))
    return None if stream is None else (stream, f"the read stream's measured loss at "
                                                f"{swept_footprint(b_bytes) / 2**20:.0f} MiB: B swept as a stream")


def own_loss(dev: DeviceSpec, case: str, launch: Launch, params: dict[str, int],
             pass_loss: Callable[..., float | None]) -> tuple[float, str] | None:
    """B's loss per re-read measured on the kernel itself, and where it comes from: TILE 16 (`swept_loss`),
    COARSE 4 and 8 (perfmodel.coarse_curve), the naive kernel (perfmodel.naive_curve), each within its
    sizes; None for the others."""
    from ..coarse_curve import coarse_loss
    from ..naive_curve import CASE, naive_loss

    if swept(case, params):
        return swept_loss(dev, params, matmul_operands(dev, launch, params)[1], pass_loss)
    if case == CASE:
        return naive_loss(dev, launch, params)
    return coarse_loss(dev, launch, params) if case == "matmul.coarsened" else None


def split_row_share(case: str, params: dict[str, int]) -> float:
    """The share of B's lines that two blocks read in pieces, at TILE 32: where B's pitch (4n bytes) is
    off the line, a block's 128 x COARSE-byte row segment straddles COARSE + 1 lines and shares the two
    at its ends with its neighbours - one line in COARSE over the rows that do not start on a line (all
    but 1 in 128 / gcd(4n, 128)). 0 elsewhere."""
    if case not in ("matmul.tiled", "matmul.coarsened") or params.get("tile") != 32:
        return 0.0
    return straddle_share(32, params["n"]) / params.get("coarse", 1)


def split_line_factor(split_loss: float | None, whole_loss: float | None, share: float) -> float:
    """How much more of B L2 loses where `share` of its lines are read in pieces by two SMs: the split
    probe's loss over the shared probe's at B's size (probe.l2_read_split / _shared, one run: 1.2-2.3x
    at 32-52 MiB), a point added to each so sizes that lose nothing give 1. Scales the replay's re-reads,
    which hold whole lines."""
    if not share or split_loss is None or whole_loss is None:
        return 1.0
    return 1.0 + share * ((split_loss + SPLIT_FLOOR) / (whole_loss + SPLIT_FLOOR) - 1.0)


SPLIT_FLOOR = 0.01  # a point of loss: the ratio of two curves that both lose ~nothing is 1, not noise


def with_split_lines(read_bytes: float, write_bytes: int, note: str, dev: DeviceSpec, launch: Launch, case: str,
                     params: dict[str, int], loss: Callable[..., float | None]) -> DramEstimate:
    """The replay's DRAM reads (whole lines) with B's re-reads scaled by split_line_factor where B's
    pitch splits its rows' lines between two blocks, capped at every group re-reading all of B (or at the
    replay's own re-reads, where they pass that: A lost as well);
    `loss(footprint, readers)`: Ceilings.l2_loss."""
    share = split_row_share(case, params)
    if not share:
        return DramEstimate(int(read_bytes), write_bytes, note)
    a_bytes, b_bytes, streams = matmul_operands(dev, launch, params)
    factor = split_line_factor(loss(b_bytes, "split"), loss(b_bytes, "shared"), share)
    again = max(0.0, read_bytes - a_bytes - b_bytes)  # the cap never takes the replay's own re-reads (of A too) away
    return DramEstimate(int(a_bytes + b_bytes + min(again * factor, max(again, (streams - 1) * b_bytes))), write_bytes,
                        f"{note}; x{factor:.2f} on the re-reads: {100 * share:.0f} % of B's rows straddle two lines, "
                        "lost as the split probe loses them against whole lines")


def dram_traffic(dev: DeviceSpec, compulsory: tuple[int, int], resident_blocks: int, launch: Launch,
                 family: str, params: dict[str, int],
                 pass_loss: Callable[..., float | None] = lambda footprint, passes=0: None,
                 b_loss: tuple[float, str] | None = None) -> DramEstimate:
    """`pass_loss(footprint, passes)`: the measured share of a buffer L2 loses between passes, on average
    over that many (Ceilings.l2_loss; passes 0: the retention curve's own count);
    `b_loss`: matmul's B lost between its re-reads as measured on the kernel (`own_loss`), with its source."""
    read, write = compulsory
    once = "each array read once and written once (compulsory traffic)"
    if family == "l2" and params.get("passes", 1) > 1:  # passes over one buffer: L2 keeps what fits
        measured = pass_loss(read, passes=params["passes"])
        miss = reread_miss(dev, read) if measured is None else measured
        if miss == 0.0:
            return DramEstimate(read, write, once)
        times = 1 + (params["passes"] - 1) * miss
        return DramEstimate(int(read * times), write, f"{read / 2**20:.0f} MiB read {times:.1f} times: "
                            f"L2 loses {100 * miss:.0f} % of it between passes")
    if family != "matmul":
        return DramEstimate(read, write, once)
    # matmul: each group of blocks streams B again, where L2 has lost it
    a_bytes, b_bytes, streams = matmul_operands(dev, launch, params)
    miss = reread_miss(dev, b_bytes) if b_loss is None else b_loss[0]
    if streams == 1.0 or miss == 0.0:
        return DramEstimate(read, write, once)
    times = 1 + (streams - 1) * miss
    return DramEstimate(int(a_bytes + times * b_bytes), write,
                        f"B ({b_bytes / 2**20:.0f} MiB) read {times:.1f} times: {streams:.1f} groups of "
                        f"{group_blocks(dev, launch)} consecutive blocks, each missing {100 * miss:.0f} % "
                        f"of it in L2" + (f" ({b_loss[1]})" if b_loss else ""))


def dirty_at_end(read_bytes: float, write_bytes: float, held_bytes: float, partial: bool,
                 in_sm: bool = False, sectors_per_line: float = 4.0) -> float:
    """DRAM writes still dirty in L2 when the kernel ends, of the lines L2 holds at a stream's end
    (measured: Ceilings.l2_dirty_at_end_bytes, whole lines): a stream's write share of them, in
    lines - a store filling one sector of each line keeps a quarter of the bytes dirty (probe.
    store_lines: ~5 MB left, not 40). A kernel bound inside the SM leaves DRAM idle, and L2 writes
    its lines back - except where its reads fit beside them: then L2 evicts nothing and the room
    its reads leave stays dirty (matmul at 2048: 6.8-8.7 MB measured, 6.4 MB this way). Sectors
    left in part (`partial`) go to DRAM as read-modify-writes during the kernel: none counted here."""
    if partial or not read_bytes + write_bytes:
        return 0.0
    line = 128.0
    written_lines = write_bytes / (SECTOR_BYTES * sectors_per_line)
    if in_sm:
        room = max(0.0, held_bytes - read_bytes) / line
        return min(write_bytes, room * SECTOR_BYTES * sectors_per_line)
    share = written_lines / (read_bytes / line + written_lines)
    return min(write_bytes, held_bytes / line * share * SECTOR_BYTES * sectors_per_line)


