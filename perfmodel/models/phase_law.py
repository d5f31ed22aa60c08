"""An issue-bound work phase between barriers that outlasts its load phase (temporal blocking): warps
waiting at each step's barrier issue nothing, so the phase runs below the SM's peak issue rate, and
the load phase hides behind it the more, the longer the work phase is. Both read off the suite's
recorded launches (CUDA events) per blocks per SM; an L1-bound work phase (a bank-conflicted
transpose) keeps its pipe busy through the waits and is left to `time.hidden_behind_others`."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..cache import on_disk
from ..devices import DeviceSpec
from ..measurements import load, median_times

CASE = "stencil.temporal"  # the suite's launches the law is read off


@dataclass(frozen=True)
class IssuePhaseLaw:
    """Per blocks per SM (`blocks_per_sm`, the nearest measured count for others): the share of the
    peak issue rate the work phase keeps, and the share of the load phase left exposed when the two
    phases are even, falling linearly to none at a work/load ratio of `hidden_at_ratio`."""

    blocks_per_sm: tuple[int, ...]
    issue_shares: tuple[float, ...]
    exposed_at_even: tuple[float, ...]
    hidden_at_ratio: float
    source: str

    def _nearest(self, blocks_per_sm: int) -> int:
        return int(np.argmin([abs(b - blocks_per_sm) for b in self.blocks_per_sm]))

    def phases(self, blocks_per_sm: int, load_s: float, issue_s: float) -> tuple[float, float] | None:
        """(work phase seconds, share of the load phase exposed), or None where the work phase at
        the law's issue share does not outlast the load phase (the law was read where it does)."""
        i = self._nearest(blocks_per_sm)
        work_s = issue_s / self.issue_shares[i]
        if work_s <= load_s:
            return None
        over = (work_s / load_s - 1) / (self.hidden_at_ratio - 1)
        return work_s, self.exposed_at_even[i] * min(max(1 - over, 0.0), 1.0)


@dataclass(frozen=True)
class _Launch:
    blocks_per_sm: int
    load_s: float
    issue_s: float
    rest_s: float  # the launch's time outside the two phases (latency waits, startup, launch)
    measured_s: float


def _launches(dev: DeviceSpec) -> list[_Launch]:
    """The suite's issue-bound temporal launches as the model without the law times them."""
    from ..suite.registry import get
    from . import _predict
    from .time import overlapped_s, work_phase

    data = load(dev.key)
    data = data[data.case == CASE]
    times = median_times(data)
    out = []
    for cid, params in data.drop_duplicates("case_id")[["case_id", "params"]].itertuples(index=False):
        if cid not in times.index:
            continue
        items = tuple(sorted(get(CASE).bind(**json.loads(params)).items()))
        pred = _predict(CASE, dev, items, issue_law=False)
        by = {t.name: t.time_s for t in pred.breakdown}
        work = max(by["l1"], by["l1_tag"], by.get("issue", 0.0))
        if pred.bound != "barrier" or by.get("issue", 0.0) < work:
            continue
        load_s, b = by["dram"], pred.occupancy.blocks_per_sm
        rest = pred.time_s - overlapped_s(load_s, *work_phase(b, load_s, work, by["issue"])[:2])
        out.append(_Launch(b, load_s, by["issue"], rest, float(times[cid])))
    return out


@on_disk
def issue_phase_law(dev: DeviceSpec) -> IssuePhaseLaw | None:
    """The law fitted (least squares on the relative time error) to the suite's launches; None where
    fewer than two per blocks-per-SM count are recorded."""
    from scipy.optimize import least_squares

    from .time import overlapped_s, work_phase

    launches = _launches(dev)
    counts = sorted({x.blocks_per_sm for x in launches})
    if not counts or any(sum(x.blocks_per_sm == b for x in launches) < 2 for b in counts):
        return None
    n = len(counts)

    def law(p: np.ndarray, source: str = "") -> IssuePhaseLaw:
        shares, exposed = tuple(map(float, p[:n])), tuple(map(float, p[n:2 * n]))
        return IssuePhaseLaw(tuple(counts), shares, exposed, float(p[-1]), source)

    def residuals(p: np.ndarray) -> np.ndarray:
        fit = law(p)
        out = []
        for x in launches:
            work, exposed, _ = work_phase(x.blocks_per_sm, x.load_s, x.issue_s, x.issue_s, lambda: fit)
            out.append((overlapped_s(x.load_s, work, exposed) + x.rest_s) / x.measured_s - 1)
        return np.array(out)

    start = np.array([0.85] * n + [0.5] * n + [4.0])
    fit = least_squares(residuals, start, bounds=([0.3] * n + [0.0] * n + [1.05], [1.0] * n + [1.0] * n + [20.0]))
    err = np.abs(residuals(fit.x)) * 100
    shares = ", ".join(f"{b}: {s:.3f}" for b, s in zip(counts, fit.x[:n], strict=True))
    return law(fit.x, f"fitted to {len(launches)} suite launches of {CASE} (CUDA events; issue share by blocks "
                      f"per SM {shares}; {err.mean():.1f} % mean, {err.max():.1f} % worst)")
