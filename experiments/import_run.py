"""Turn what a device call brought back ($OUT) into recorded data under reports/data/<device>/.

    python experiments/import_run.py /work/.device/N [--device h200] [--commit HASH [--force-commit]] [--holdout SET]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfmodel.holdout import HOLDOUT_DIR
from perfmodel.measurements import DATA_DIR
from perfmodel.suite.importer import import_run

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--device", default="h200")
    ap.add_argument("--commit", help="the commit the run measured, where the device copy had no git")
    ap.add_argument("--force-commit", action="store_true",
                    help="replace the commit the device copy reported (its git named an older one)")
    ap.add_argument("--holdout", metavar="SET", help="a held-out set's run (its plan's name): recorded beside its "
                    "frozen predictions under reports/data/holdout/SET")
    a = ap.parse_args()
    dest = import_run(a.folder, a.device, a.commit, a.force_commit, HOLDOUT_DIR / a.holdout if a.holdout else DATA_DIR)
    print(f"recorded under {dest}")
