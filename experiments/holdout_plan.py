"""Draw a held-out plan: kernel-family cases at shapes no earlier run measured, picked by a seeded
random generator (not by hand), so the model meets them the way a user's kernel would.

    python experiments/holdout_plan.py --seed 20261129 > experiments/plans/h200_holdout.toml

Sizes are log-uniform and ragged (no rounding); matrices and grids are not square.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from perfmodel.errors import PerfModelError
from perfmodel.suite.plan import case_id, load_plan
from perfmodel.suite.registry import get

PLANS = Path(__file__).parent / "plans"

# family -> (draws, size ranges by parameter, discrete choices by parameter)
FAMILIES: dict[str, tuple[int, dict[str, tuple[int, int]], dict[str, list[int]]]] = {
    "matmul.naive": (2, {"m": (700, 3000), "n": (700, 3000), "k": (500, 3000)}, {}),
    "matmul.naive_colmajor_b": (2, {"m": (700, 2500), "n": (700, 2500), "k": (500, 2500)}, {}),
    "matmul.tiled": (4, {"m": (700, 5000), "n": (700, 5000), "k": (500, 4000)}, {"tile": [16, 32]}),
    "matmul.corner_turning": (4, {"m": (700, 4000), "n": (700, 4000), "k": (500, 4000)},
                              {"tile": [16, 32], "pad": [0, 1]}),
    "matmul.coarsened": (4, {"m": (700, 6000), "n": (700, 6000), "k": (500, 4000)}, {"coarse": [1, 2, 4, 8]}),
    "transpose.naive": (3, {"rows": (1000, 9000), "cols": (1000, 9000)}, {}),
    "transpose.naive_rows": (3, {"rows": (1000, 9000), "cols": (1000, 9000)}, {"block_rows": [1, 2, 4, 8, 16, 32]}),
    "transpose.smem": (4, {"rows": (1000, 9000), "cols": (1000, 9000)}, {"tile": [16, 32], "pad": [0, 1]}),
    "transpose.rows": (3, {"rows": (1000, 9000), "cols": (1000, 9000)}, {"pad": [0, 1]}),
    "transpose.rows_capped": (3, {"rows": (1000, 9000), "cols": (1000, 9000)},
                              {"pad": [0, 1], "blocks_per_sm": [2, 3, 4, 5, 6, 7, 8]}),
    "transpose.rows_swapped": (3, {"rows": (1000, 9000), "cols": (1000, 9000)}, {}),
    "stencil.naive": (3, {"nx": (1000, 9000), "ny": (1000, 9000)}, {}),
    "stencil.temporal": (4, {"nx": (1000, 9000), "ny": (1000, 9000)}, {"steps": list(range(1, 9)), "ppt": [1, 2]}),
    # passes over 16-64 MiB: L2 retention (the stream's, the shared and the split readers' curves), per-pass timing
    "probe.l2_read": (3, {"n": (4 << 20, 16 << 20)}, {"passes": [2, 3, 5, 6, 8]}),
    "probe.l2_read_shared": (3, {"n": (4 << 20, 16 << 20)}, {"passes": [2, 3, 5, 6, 8], "mult": [389, 653, 797]}),
    "probe.l2_read_split": (3, {"n": (4 << 20, 16 << 20)}, {"passes": [2, 3, 5, 6, 8], "mult": [389, 653, 797]}),
}
WHOLE = {"n": 4}  # sizes drawn in multiples: the probes' n (floats) read as float4


def families(only: list[str], draws: int | None, ranges: dict[str, tuple[int, int]] | None = None
             ) -> list[tuple[str, int, dict, dict]]:
    """The families to draw from: all, or the variants `only` names ("matmul.coarsened:coarse=8",
    choices fixed to the values given), each `draws` times where given, sizes from `ranges` where
    they name the parameter."""
    got = _families(only, draws)
    return [(name, n, {k: (ranges or {}).get(k, r) for k, r in sizes.items()}, choices)
            for name, n, sizes, choices in got]


def _families(only: list[str], draws: int | None) -> list[tuple[str, int, dict, dict]]:
    if not only:
        return [(name, draws or n, sizes, choices) for name, (n, sizes, choices) in FAMILIES.items()]
    out = []
    for spec in only:
        name, _, fixed = spec.partition(":")
        if name not in FAMILIES:
            raise SystemExit(f"--only {spec}: no family {name!r}; families: {', '.join(FAMILIES)}")
        n, sizes, choices = FAMILIES[name]
        pinned = dict(kv.split("=") for kv in fixed.split(",") if kv)
        unknown = set(pinned) - set(choices)
        if unknown:
            raise SystemExit(f"--only {spec}: {name} draws no {sorted(unknown)}; it chooses {sorted(choices)}")
        out.append((name, draws or n, sizes, {**choices, **{k: [int(v)] for k, v in pinned.items()}}))
    return out


def draw(seed: int, only: list[str] | None = None, draws: int | None = None,
         ranges: dict[str, tuple[int, int]] | None = None) -> list[tuple[str, dict[str, int] | str]]:
    """(case, parameters) per draw, or (case, why) where the draw has no compiled kernel."""
    rng = np.random.default_rng(seed)
    out: list[tuple[str, dict[str, int] | str]] = []
    for name, n, sizes, choices in families(only or [], draws, ranges):
        for _ in range(n):
            p = {k: int(round(math.exp(rng.uniform(math.log(lo), math.log(hi))))) for k, (lo, hi) in sizes.items()}
            p = {k: v - v % WHOLE.get(k, 1) for k, v in p.items()}
            p.update({k: int(rng.choice(v)) for k, v in choices.items()})
            try:
                out.append((name, get(name).bind(**p)))
            except PerfModelError as exc:  # steps 3, 5, 7 of stencil.temporal are not compiled
                out.append((name, f"{p}: {exc}"))
    return out


def planned_before(plans: Path = PLANS) -> dict[str, str]:
    """case id -> the plan that already holds it, over every plan in experiments/plans."""
    seen: dict[str, str] = {}
    for path in sorted(plans.glob("*.toml")):
        try:
            cases = load_plan(path)
        except Exception:  # noqa: BLE001 - the file this draw is being written to is empty yet
            continue
        for c in cases:
            seen.setdefault(case_id(c.name, c.params), path.stem)
    return seen


def toml(seed: int, only: list[str] | None = None, draws: int | None = None,
         ranges: dict[str, tuple[int, int]] | None = None) -> str:
    how = (f"--seed {seed}" + (f" --only {' '.join(only)}" if only else "") + (f" --draws {draws}" if draws else "")
           + (f" --sizes {' '.join(f'{k}={lo}:{hi}' for k, (lo, hi) in ranges.items())}" if ranges else ""))
    lines = [f"# Held-out cases, drawn by `python experiments/holdout_plan.py {how}` (do not edit by hand):",
             "# shapes no earlier run measured; perfmodel.holdout froze the model's predictions of them before",
             "# they were measured. Timed, profiled and written back like the suite.",
             "ncu_writeback = true", ""]
    seen, kept, drawn = planned_before(), 0, draw(seed, only, draws, ranges)
    for name, p in drawn:
        if isinstance(p, str):
            lines += [f"# dropped {name} {p}", ""]
            continue
        if (cid := case_id(name, p)) in seen:
            lines += [f"# dropped {cid}: already in plan {seen[cid]}", ""]
            continue
        kept += 1
        inline = ", ".join(f"{k} = {v}" for k, v in p.items())
        lines += ["[[case]]", f'name = "{name}"', f"params = {{ {inline} }}", "ncu = true", ""]
    if drawn and kept < len(drawn) // 2:
        raise SystemExit(f"seed {seed} draws {len(drawn) - kept} of {len(drawn)} cases that earlier plans hold "
                         "(a seed used before?): choose another")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--only", nargs="+", help='variants to draw, e.g. "matmul.coarsened:coarse=8"')
    ap.add_argument("--draws", type=int, help="draws per family (default: its own count)")
    ap.add_argument("--sizes", nargs="+", default=[],
                    help='size ranges replacing the families\' own, e.g. "cols=15000:90000"')
    a = ap.parse_args()
    try:
        ranges = {k: (int(lo), int(hi)) for k, _, v in (s.partition("=") for s in a.sizes) for lo, hi in [v.split(":")]}
    except ValueError:
        raise SystemExit(f"--sizes {' '.join(a.sizes)}: give each as name=low:high, e.g. cols=15000:90000") from None
    print(toml(a.seed, a.only, a.draws, ranges or None), end="")
