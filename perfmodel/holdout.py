"""Held-out validation: the model's predictions of cases no run had measured, frozen in a file
(with the commit that made them) before those cases go to the GPU, then compared with what the
GPU measured - the accuracy a user meeting a new kernel shape can expect.

    python -m perfmodel.holdout freeze experiments/plans/h200_holdout.toml   # before measuring
    python experiments/measure.py --plan experiments/plans/h200_holdout.toml --out $OUT --no-extras
    python experiments/import_run.py $OUT --holdout h200_holdout       # reports/data/holdout/<plan>/
    perfmodel report                                                    # one section per held-out set

A held-out set is named after its plan's file; its frozen predictions and its runs live together.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from .devices import device as lookup
from .errors import PerfModelError
from .measurements import DATA_DIR, git_commit, load, utc_now
from .models import predict
from .models.base import Prediction
from .suite.plan import case_id, load_plan

if TYPE_CHECKING:
    import pandas as pd

HOLDOUT_DIR = DATA_DIR / "holdout"
FROZEN = "predictions.jsonl"


def sets() -> list[str]:
    """The held-out sets recorded (one per plan), in the order they were drawn (h200_holdout, 2, 3, ... 27)."""
    names = [p.name for p in HOLDOUT_DIR.iterdir() if p.is_dir()] if HOLDOUT_DIR.exists() else []
    return sorted(names, key=lambda n: (len(n), n))


def frozen_path(name: str, device: str = "h200") -> Path:
    return HOLDOUT_DIR / name / lookup(device).key / FROZEN


def freeze(plan: str | Path, device: str = "h200", force: bool = False) -> Path:
    """Write every planned case's prediction, one JSON line each, after a header line with the plan,
    the commit and the time. Refuses to replace a frozen file (that would un-hold-out its cases)."""
    dev = lookup(device)
    path = frozen_path(Path(plan).stem, dev.key)
    if path.exists() and not force:
        raise PerfModelError(f"{path} exists: frozen predictions are never replaced (force=True to start over)")
    commit = git_commit()
    if commit.endswith("-dirty") or commit == "unknown":
        raise PerfModelError(f"commit {commit!r}: freeze from a clean, committed tree so the model is on record")
    lines = [json.dumps({"plan": str(plan), "device": dev.key, "commit": commit, "utc": utc_now()})]
    for pc in load_plan(plan):
        pred = predict(pc.name, dev, **pc.params)
        lines.append(json.dumps({"case_id": pc.case_id, "prediction": pred.as_dict()}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def frozen(name: str, device: str = "h200") -> tuple[dict, dict[str, Prediction]]:
    """(header, case_id -> frozen Prediction) of one held-out set."""
    path = frozen_path(name, device)
    if not path.exists():
        return {}, {}
    header, *rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return header, {r["case_id"]: Prediction.from_dict(r["prediction"]) for r in rows}


def compare_holdout(name: str, device: str = "h200") -> pd.DataFrame:
    """A held-out set's run(s) against its frozen predictions (`predicted`, `rel_error`) and against
    the model as it is now (`predicted_now`, `rel_error_now`); empty where nothing was measured yet."""
    import pandas as pd

    from .validate import compare

    dev = lookup(device)
    data = load(dev.key, HOLDOUT_DIR / name)
    _, preds = frozen(name, dev.key)
    if not len(data) or not preds:
        return pd.DataFrame()
    data = data[data.case_id.isin(preds)]

    def then(case: str, _dev: object, **params: int) -> Prediction:
        return preds[case_id(case, params)]

    old = compare(dev.key, data, progress=False, predictor=then)
    now = compare(dev.key, data, progress=False)[["case_id", "metric", "predicted", "rel_error"]]
    return old.merge(now.rename(columns={"predicted": "predicted_now", "rel_error": "rel_error_now"}),
                     on=["case_id", "metric"], how="left")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("freeze", help="write the frozen predictions of a plan's cases")
    f.add_argument("plan")
    f.add_argument("--device", default="h200")
    a = ap.parse_args()
    path = freeze(a.plan, a.device)
    print(f"froze {len(frozen(Path(a.plan).stem, a.device)[1])} predictions in {path}")
