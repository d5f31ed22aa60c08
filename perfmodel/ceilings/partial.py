"""Sectors two writers each write in part: what L2 loses of them before the second writes, and what
each fill costs - PartialLaw, fitted on probe.split_store (shifted launches against aligned ones)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..devices import DeviceSpec
from .base import Ceiling


def _weibull(x: float, scale: float, shape: float) -> float:
    return float(1 - np.exp(-((x / scale) ** shape)))


@dataclass(frozen=True)
class PartialLaw:
    """Sectors two writers each write in part, the second `between` bytes of the kernel's traffic
    after the first: L2 has lost the share 1 - exp(-(between / scale)^shape) first (filled from DRAM
    and written back, once for each piece), and each fill adds fill_s x (between / ref)^-fill_exponent
    to a streaming kernel's time. Earlier still, 1 - exp(-(between / written_scale)^written_shape), L2
    has written the first piece back (filled, and one DRAM write more: the second piece then lands in
    the whole clean sector, unless L2 has also lost it). All fitted on probe.split_store (partial_law)."""

    scale_bytes: float
    shape: float
    fill_s: float  # at ref_bytes
    fill_exponent: float
    ref_bytes: float = 16 << 20
    written_scale_bytes: float = 0.0  # none: written back as late as lost
    written_shape: float = 0.0

    def lost(self, between_bytes: float) -> float:
        return _weibull(between_bytes, self.scale_bytes, self.shape)

    def written_back(self, between_bytes: float) -> float:
        """The share of sectors two writers share that L2 writes back between them (one DRAM write
        more each); at least the share lost."""
        if not self.written_scale_bytes:
            return self.lost(between_bytes)
        return max(self.lost(between_bytes),
                   _weibull(between_bytes, self.written_scale_bytes, self.written_shape))

    def per_fill_s(self, between_bytes: float) -> float:
        return float(self.fill_s * (max(between_bytes, 1.0) / self.ref_bytes) ** -self.fill_exponent)


def split_store_pairs(data, times, l2_bytes: float):
    """probe.split_store past L2 under ncu, each shifted launch (offset off a sector: one sector
    shared by two warps per segment boundary, n / 32 of them) beside the aligned one at the same n and
    dist (the same scattered order, no shared sector): the bytes moved between the two writers (dist
    warps apart, at the model's mean bytes a block: models.written.block_bytes), the share of shared sectors
    lost (each filled twice: DRAM reads past the aligned launch's / (2 x shared)), the fills and the
    time they add, and the DRAM writes in the kernel past the aligned launch's over the shared
    sectors' bytes (`rewritten`)."""
    import pandas as pd

    from ..models.written import block_bytes
    from ..suite.registry import get

    case = get("probe.split_store")

    def between(p: dict) -> float:
        bound = case.bind(**p)
        launch = case.launch(bound)
        return block_bytes(launch, case.compulsory_bytes(bound), 0) * p["dist"] * 32 / launch.threads_per_block

    sel = data[(data.case == "probe.split_store") & (data.source == "ncu")
               & data.metric.isin(["dram__bytes_read.sum", "dram__bytes_write.sum"])]
    dram = sel.pivot_table(index=["case_id", "params"], columns="metric", values="value", aggfunc="median")
    rows = {}
    for (cid, params), (read, write) in zip(dram.index, dram[["dram__bytes_read.sum", "dram__bytes_write.sum"]]
                                            .to_numpy(), strict=True):
        p = json.loads(params)
        if 4 * p["n"] > l2_bytes and cid in times:
            rows[(p["n"], p["dist"], p["offset"] % 32 != 0)] = (cid, float(read), float(times[cid]), float(write))
    out = []
    for (n, dist, shifted), (cid, read, t, write) in rows.items():
        if not shifted or (aligned := rows.get((n, dist, False))) is None:
            continue
        fills = max(read - aligned[1], 0.0) / 32
        out.append({"case_id": cid, "aligned_id": aligned[0], "n": n, "dist": dist,
                    "between_bytes": between({"n": n, "dist": dist, "offset": 4}),
                    "lost": min(fills / (2 * n / 32), 1.0), "fills": fills, "added_s": t - aligned[2],
                    "rewritten": (write - aligned[3]) / n})
    return pd.DataFrame(out)


# probe.split_store's buffer sizes that calibrate partial_law; its launches at other sizes (256 MiB
# a buffer: the suite's, and the sweep's full range of distances) test it
PARTIAL_CALIBRATION_N = (1 << 25, 1 << 27)


def _weibull_fit(between: np.ndarray, share: np.ndarray) -> tuple[float, float]:
    """(scale, shape) of 1 - exp(-(between / scale)^shape) by least squares on ln(-ln(1 - share))
    against ln(between), shares clipped at 99.9 %."""
    shape, offset = np.polyfit(np.log(between), np.log(-np.log(1 - np.clip(share, None, 0.999))), 1)
    return float(np.exp(-offset / shape)), float(shape)


def written_back_shares(pairs):
    """Each pair's DRAM writes past the aligned launch's (`rewritten`) over those of the launch of the
    same buffer size that lost all its shared sectors (at least 95 %): the share written back before
    the second writer. All lost, the writes exceed the one rewrite a shared sector by a constant ~6 MB
    at 128-512 MiB a buffer (L2 ends the kernel with fewer lines dirty), which this scale takes out.
    Sizes with no such launch are left out."""
    full = pairs[pairs.lost >= 0.95].groupby("n").rewritten.median()
    kept = pairs[pairs.n.isin(full.index)]
    return kept.assign(written_back=(kept.rewritten / kept.n.map(full)).clip(lower=0.0))


def partial_law(pairs) -> PartialLaw | None:
    """Fit PartialLaw to split_store_pairs: the loss's scale and shape (Weibull, _weibull_fit), the
    fill cost's power law in log-log, over the pairs losing at least 1 % of their shared sectors;
    the write-backs' Weibull over those writing back at least 1 % (written_back_shares)."""
    lossy = pairs[(pairs.lost >= 0.01) & (pairs.fills > 0)]
    if lossy.between_bytes.nunique() < 2:
        return None
    scale, shape = _weibull_fit(lossy.between_bytes.to_numpy(), lossy.lost.to_numpy())
    x = np.log(lossy.between_bytes.to_numpy())
    slope, at = np.polyfit(x - np.log(PartialLaw.ref_bytes), np.log((lossy.added_s / lossy.fills).to_numpy()), 1)
    written = written_back_shares(pairs)
    written = written[written.written_back.between(0.01, 0.999)]
    w_scale, w_shape = (_weibull_fit(written.between_bytes.to_numpy(), written.written_back.to_numpy())
                        if written.between_bytes.nunique() >= 2 else (0.0, 0.0))
    return PartialLaw(scale, shape, float(np.exp(at)), float(-slope), written_scale_bytes=w_scale,
                      written_shape=w_shape)


def _partial_loss(data, times, dev: DeviceSpec) -> dict[str, object]:
    pairs = split_store_pairs(data, times, dev.l2_bytes)
    cal = pairs[pairs.n.isin(PARTIAL_CALIBRATION_N)] if len(pairs) else pairs
    law = partial_law(cal) if len(cal) else None
    if law is None:
        return {}
    half = law.scale_bytes * np.log(2) ** (1 / law.shape)
    return {"partial_law": law, "partial_loss_probe": Ceiling(
        "L2's loss of sectors two writers share: bytes between the writers that lose half", float(half), "B",
        f"measured: probe.split_store under ncu, shifted against aligned, {len(cal)} pairs at "
        f"{cal.between_bytes.min() / 2**20:.0f}-{cal.between_bytes.max() / 2**20:.0f} MiB between, "
        f"{', '.join(f'{4 * n >> 20}' for n in PARTIAL_CALIBRATION_N)} MiB a buffer",
        tuple(sorted({*cal.case_id, *cal.aligned_id})))}
