"""Recorded block placement (which SM ran each block, and when) and the L1 reuse across blocks.

Blocks that read the same rows, resident on one SM at once, share the lines in its L1. Where a
launch's placement was recorded (experiments/placement.py) the model shares L1 as those blocks met
(`models.placed`); elsewhere it spreads block starts as the recorded launches pooled do
(`coresidency.law`, `models.traffic.co_resident_hits`). This module says what the pooled law alone
would predict for the recorded launches: the gap the recorded placements close.
"""

from __future__ import annotations

from .coresidency import recorded
from .devices import device as lookup
from .models import _predict
from .suite.plan import case_id


def pooled_law_sectors(device: str = "h200") -> dict[str, float]:
    """Per recorded case id: the L1-requested sectors the model predicts with the pooled start-spread
    law in place of the launch's own recorded placement."""
    dev = lookup(device)
    return {case_id(r.case, r.params): _predict(r.case, dev, tuple(sorted(r.params.items())), placed=False)
            .l2_read_bytes / 32 for r in recorded(dev.key)}
