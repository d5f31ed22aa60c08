"""How a kernel's stores fill the sectors they touch: which ones L2 holds in part when it loses
them (a read-modify-write past L2), by the distance to the block that completes them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..devices import DeviceSpec
from ..memory import Access, Launch
from .l1 import block_addresser, chunk_keys, global_accesses


@dataclass(frozen=True)
class WrittenSectors:
    """How the kernel's stores fill what they touch, judged around the middle block."""

    partial_share: float = 0.0  # of a block's written sectors, those L2 holds in part when it loses them
    per_line: float = 4.0  # sectors written of each 128-byte line written (L2 holds whole lines)
    split_share: float = 0.0  # of a block's written sectors, those other writers complete (or none)
    completed_share: float = 0.0  # of those lost, those other blocks complete later (the measured curve's)
    between_bytes: float = 0.0  # the traffic between such a sector's writers, mean over those lost
    rewrites_per_fill: float = 0.5  # per fill of those lost, DRAM writes beyond the one a whole sector costs

    @property
    def partial(self) -> bool:  # L2 loses a sector in part (DRAM read-modify-write past L2)
        return self.partial_share >= MIN_LOST_SHARE

    @property
    def split_lost(self) -> float:  # of the sectors other writers complete, those L2 loses first
        return self.partial_share / self.split_share if self.split_share else 0.0


# Below this share of a block's written sectors, L2's losses of sectors written in part are left out
# (their fills are under 1 % of the writes: a row transpose's few off-sector row starts)
MIN_LOST_SHARE = 0.01


def block_bytes(launch: Launch, compulsory: tuple[int, int], l1_bytes: float) -> float:
    """The kernel's mean traffic per block: its compulsory bytes, or what its warps load and store
    where it has no closed form."""
    return (sum(compulsory) or l1_bytes) / max(launch.blocks, 1)


def partial_reach_blocks(dev: DeviceSpec, launch: Launch, compulsory: tuple[int, int], l1_bytes: float) -> int:
    """How many blocks later a write still completes a sector L2 holds in part, where the device has
    no measured loss curve: while less than half an L2 partition's traffic follows."""
    return max(1, int(dev.l2_partition_bytes / 2 / max(block_bytes(launch, compulsory, l1_bytes), 1.0)))


def lost_at(lost: Callable[[float], float], blocks_later: float, per_block_bytes: float,
            spread_blocks: np.ndarray | None = None) -> tuple[float, float]:
    """(share L2 loses, mean bytes between the writers of those it loses) of sectors completed
    `blocks_later` blocks later in launch order; where the writers' store order spreads, over the
    recorded spread (store_order.StoreSpread: quantiles, in blocks)."""
    offsets = np.zeros(1) if spread_blocks is None else spread_blocks
    between = np.abs(blocks_later + offsets) * per_block_bytes
    shares = np.array([lost(b) for b in between])
    share = float(shares.mean())
    return share, float((shares * between).sum() / shares.sum()) if share else 0.0


def written_sectors(accesses: list[Access], launch: Launch, reach_blocks: int, per_block_bytes: float = 0.0,
                    lost: Callable[[float], float] | None = None, spread_blocks: np.ndarray | None = None,
                    word_budget: int = 24_000_000, row_budget: int = 2_000_000,
                    written_back: Callable[[float], float] | None = None) -> WrittenSectors:
    """The middle block's written sectors, and for each the distance to the block that writes its last
    word (blocks outward from it, in rings a 64th of the distance wide). A sector completed `d`
    blocks later is lost first with the device's measured share at d x `per_block_bytes` of traffic
    between (`lost`; probe.split_store: 1 % at 2 MiB, 35 % at 16 MiB, all past 64 MiB - by that
    distance alone, at 128-512 MiB a buffer), over the spread of the writers' store order where
    given (`spread_blocks`, lost_at), and written back before its second writer with `written_back`'s
    share (probe.split_store: 60 % at 16 MiB; `lost`'s where none); a sector of more than two
    writers with that share at the distance from its first writer to its last (probe.piece_store),
    once for all its pieces; without a curve, every sector not completed within `reach_blocks`.
    Sectors never completed are lost. Also the sectors it fills per line where no
    block within `reach_blocks` writes further sectors of its lines (lines that others share are
    taken as completed, as the naive transpose's are by blocks up to 32 rows away)."""
    glob = global_accesses(accesses, launch, store=True)
    if not glob:
        return WrittenSectors()
    gx, gy, gz = launch.grid
    total = gx * gy * gz
    middle = (gx // 2, gy // 2, gz // 2)
    addresses = block_addresser(glob, launch, row_budget)
    if addresses is None:
        return WrittenSectors()
    own = chunk_keys(addresses(middle), 4)
    if not len(own):
        return WrittenSectors()
    lines = np.unique(own // 32)  # 32 words a line (the array id's bits are far above)
    sectors = np.unique(own // 8)
    words = (sectors[:, None] * 8 + np.arange(8)).ravel()
    signed = np.where(np.isin(words, own), 0.0, np.nan)  # each word's writer, blocks from the middle one
    m = middle[0] + gx * (middle[1] + gy * middle[2])
    shared_reach = max(1, min(reach_blocks, row_budget // len(own) // 2))
    far = lost is not None and per_block_bytes > 0
    dense = max(shared_reach, min(total, word_budget // (2 * len(own)))) if far else shared_reach
    shared = False

    def seen(offsets: np.ndarray) -> np.ndarray:  # the words of own lines the blocks m + offsets write
        lin = m + offsets
        lin = lin[(lin >= 0) & (lin < total)]
        if not len(lin):
            return np.zeros(0, np.int64)
        w = chunk_keys(addresses(np.stack([lin % gx, lin // gx % gy, lin // (gx * gy)], axis=1)), 4)
        return w[np.isin(w // 32, lines)]

    def mark(k: int, ks: np.ndarray) -> np.ndarray:  # words first found k blocks away (either side)
        found = []
        for sign in (-1, 1):
            w = seen(sign * ks)
            hit = np.isnan(signed) & np.isin(words, w)
            signed[hit] = sign * k
            found.append(w)
        return np.concatenate(found)

    r = 0  # rings a 64th of the distance wide, densely up to `dense` blocks
    while r < dense and ((r < shared_reach and not shared) or (far and np.isnan(signed).any())):
        end = min(dense, r + max(1, r // 64), r + max(1, row_budget // (2 * len(own))))
        if r < shared_reach:  # the shared-line check ends at the reach
            end = min(end, shared_reach)
        ks = np.arange(r + 1, end + 1)
        r = int(ks[-1])
        w = mark(r, ks)
        shared = shared or (r <= shared_reach and not np.isin(w // 8, sectors).all())
    # beyond: single blocks at quarter octaves (a writer 2^j blocks away is found exactly; one at other
    # far distances is missed, and its sectors count as never completed)
    quarters = np.arange(math.ceil(4 * math.log2(max(r, 1))), math.floor(4 * math.log2(total)) + 1)
    far_ks = np.unique(np.round(2.0 ** (quarters / 4)))
    for k in far_ks[far_ks > r].astype(np.int64) if far else ():
        if not np.isnan(signed).any():
            break
        mark(int(k), np.array([k]))
    offsets = signed.reshape(-1, 8)
    # blocks away that the sector's last word is written (inf: never found)
    done = np.where(np.isnan(offsets).any(axis=1), np.inf, np.abs(np.nan_to_num(offsets)).max(axis=1))
    part = done > 0
    per_line = 4.0 if shared else len(sectors) / len(lines)
    if not part.any():
        return WrittenSectors(0.0, per_line)
    later = part & np.isfinite(done)
    writers = np.array([len(set(row)) for row in offsets.tolist()])
    span = np.nanmax(offsets, axis=1) - np.nanmin(offsets, axis=1)  # blocks from first writer to last
    # two writers (the block and one other): the measured curve at the distance between them, a fill
    # for each piece (ceilings.partial_law); more: one fill for the sector, lost with the curve's share
    # at its first-to-last span (probe.piece_store, 8 pieces: 72 % filled at 14336 blocks, the curve
    # 67 %; 0.35 % at 1792, the curve 4 %) - without a curve, all past the reach
    two = later & (writers == 2) if far else np.zeros_like(later)
    many = later & (writers > 2) if far else np.zeros_like(later)
    share = np.where(np.isfinite(done), (done > reach_blocks).astype(float), 1.0)
    between = np.zeros(len(done))
    for sel, distance in ((two, done), (many, span)):
        if sel.any():
            share[sel], between[sel] = zip(*(lost_at(lost, d, per_block_bytes, spread_blocks)
                                             for d in distance[sel]), strict=True)
    back = share.copy()
    if two.any() and written_back is not None:
        back[two] = [lost_at(written_back, d, per_block_bytes, spread_blocks)[0] for d in done[two]]
    share[many] /= writers[many]  # each of the sector's writers counts its pieces: one fill in all
    completed = two | many
    curve = share[completed].sum()
    mean_between = float((share[completed] * between[completed]).sum() / curve) if curve else 0.0
    # a sector of two writers written back before the second (`back`) goes to DRAM once more - filled
    # for the first piece, and for the second too where L2 has lost it since; of more writers filled
    # once and written back twice (probe.piece_store, as the naive transpose's fills)
    rewrites = float((0.5 * back[two].sum() + share[many].sum()) / curve) if curve else 0.0
    return WrittenSectors(float(share.mean()), per_line, float(part.mean()),
                          float(curve / share.sum()) if share.sum() else 0.0, mean_between, rewrites)


