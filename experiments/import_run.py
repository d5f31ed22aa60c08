"""Turn what a device call brought back ($OUT) into recorded data under reports/data/<device>/.

    python experiments/import_run.py /work/.device/N [--device h200]

Copies measurements.csv and device.json, and writes the ncu rows (parsed from ncu_raw.tar.gz
when ncu.csv did not come back) with the run's provenance. Recorded data is never edited by hand.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

from perfmodel.measurements import DATA_DIR, Provenance, Recorder
from perfmodel.suite import profile


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--device", default="h200")
    ap.add_argument("--commit", help="the commit the run measured, where the device copy had no git")
    a = ap.parse_args()
    info = json.loads((a.folder / "device.json").read_text())
    if a.commit and info["provenance"]["commit"] == "unknown":
        info["provenance"]["commit"] = a.commit
    prov = Provenance(**info["provenance"])
    dest = DATA_DIR / a.device
    dest.mkdir(parents=True, exist_ok=True)
    stem = f"run-{prov.run_id}"
    (dest / f"{stem}-device.json").write_text(json.dumps(info, indent=1))
    events = pd.read_csv(a.folder / "measurements.csv")
    events["commit"] = prov.commit
    events.to_csv(dest / f"{stem}-events.csv", index=False)
    out = dest / f"{stem}-ncu.csv"
    out.unlink(missing_ok=True)
    if (a.folder / "ncu.csv").exists():
        shutil.copy(a.folder / "ncu.csv", out)
    elif (a.folder / "ncu_raw.tar.gz").exists():
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(a.folder / "ncu_raw.tar.gz") as tar:
            tar.extractall(tmp, filter="data")
            raw = Path(tmp) / "ncu_raw"
            rec = Recorder(out, prov)
            for manifest in sorted(raw.glob("manifest_*.json")):
                study = manifest.stem.removeprefix("manifest_")
                rec.write(profile.parse(raw / f"ncu_{study}.csv", manifest))
            rec.close()
    print(f"recorded {len(events)} event rows and {out.name} under {dest}")


if __name__ == "__main__":
    main()
