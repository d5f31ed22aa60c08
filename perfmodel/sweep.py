"""One case predicted over the values of one parameter: a table (one row a value) and a figure - the
predicted time and its terms, and the bytes each level moves - so what changes with a tile, a
coarsening factor or a size, and where the bound moves, can be seen at a glance."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import PerfModelError
from .models import predict

if TYPE_CHECKING:
    import pandas as pd

MAX_VALUES = 200


def parse_values(text: str) -> list[int]:
    """"1,2,4,8" or "start:stop:step" (stop included; step "xK" multiplies) -> the values."""
    parts = text.split(":")
    try:
        if len(parts) == 1:
            values = [int(v) for v in text.split(",") if v.strip()]
        elif len(parts) == 3:
            a, b = int(parts[0]), int(parts[1])
            factor = int(parts[2][1:]) if parts[2].startswith("x") else None
            step = None if factor else int(parts[2])
        else:
            raise ValueError
    except ValueError:
        raise PerfModelError(f"sweep values {text!r}: give 1,2,4,8 or start:stop:step (e.g. 1024:8192:x2 or "
                             "512:4096:512)") from None
    if len(parts) == 3:
        if factor is not None and (factor < 2 or a < 1):
            raise PerfModelError(f"sweep values {text!r}: a multiplying step needs a factor of at least 2 "
                                 f"(x{factor}) and a start of at least 1 ({a})")
        if step is not None and step < 1:
            raise PerfModelError(f"sweep values {text!r}: step = {step} must be at least 1")
        values = []
        while a <= b and len(values) <= MAX_VALUES:
            values.append(a)
            a = a * factor if factor else a + step
    if not values:
        raise PerfModelError(f"sweep values {text!r}: no values")
    if len(values) > MAX_VALUES:
        raise PerfModelError(f"sweep values {text!r}: more than {MAX_VALUES} values violates the limit: at most "
                             f"{MAX_VALUES}")
    return values


def sweep(case: str, device: str, name: str, values: list[int], progress: bool = True,
          **params: int) -> pd.DataFrame:
    """One row a value of parameter `name`: time, bound, bytes per level, arithmetic intensity,
    occupancy, waves, and each time term (columns term_<name>_s)."""
    import pandas as pd

    if name in params:
        raise PerfModelError(f"parameter {name} is both swept and fixed ({params[name]})")
    rows, t0 = [], time.time()
    for i, v in enumerate(values, 1):
        p = predict(case, device, **params, **{name: v})
        ai = p.arithmetic_intensity
        rows.append({name: v, "time_s": p.time_s, "bound": p.bound, "flops": p.flops,
                     "global_bytes": p.global_load_bytes + p.global_store_bytes, "l2_bytes": p.l2_bytes,
                     "dram_bytes": p.dram_bytes, "ai_dram_flop_per_byte": ai["dram"],
                     "occupancy": p.occupancy.occupancy, "blocks_per_sm": p.occupancy.blocks_per_sm,
                     "waves": p.waves, **{f"term_{t.name}_s": t.time_s for t in p.breakdown}})
        if progress and len(values) > 5:
            print(f"  sweep {name}: {i}/{len(values)} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def plot(table: pd.DataFrame, name: str, title: str, path: Path) -> str:
    """Predicted time with its three largest terms and the bound at each value; bytes per level."""
    from .report import figures

    terms = sorted((c for c in table.columns if c.startswith("term_")), key=lambda c: -table[c].max())[:3]
    return figures.sweep(table, name, terms, path, title)
