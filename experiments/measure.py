"""Measure the suite on the live GPU (run on the H200 through the device tool).

    source .gpu/setup.sh && python experiments/measure.py --plan experiments/plans/h200.toml --out $OUT
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfmodel.suite import campaign

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", default="experiments/plans/h200.toml")
    ap.add_argument("--out", type=Path, required=True, help="folder for measurements.csv, ncu.csv, ...")
    ap.add_argument("--no-ncu", action="store_true", help="skip the Nsight Compute phase")
    ap.add_argument("--no-extras", action="store_true", help="skip the extras (the chases, memcpy, streams)")
    ap.add_argument("--extras", nargs="+", choices=list(campaign.EXTRAS), metavar="NAME",
                    help=f"run only these extras, of {', '.join(campaign.EXTRAS)} "
                    f"(a full run: {', '.join(campaign.DEFAULT_EXTRAS)})")
    ap.add_argument("--check-only", action="store_true", help="only correctness checks (for compute-sanitizer)")
    ap.add_argument("--budget-s", type=float, default=540.0)
    a = ap.parse_args()
    extras = tuple(a.extras) if a.extras else not a.no_extras
    campaign.run(a.plan, a.out, ncu=not a.no_ncu, extras=extras, check_only=a.check_only,
                 budget_s=a.budget_s)
