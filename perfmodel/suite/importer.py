"""Record a finished run: copy its tidy CSVs, with provenance, under reports/data/<device>/."""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

from ..measurements import DATA_DIR, Provenance, Recorder
from . import profile


def import_run(folder: Path, device: str, commit: str | None = None, force: bool = False,
               data_dir: Path | None = None) -> Path:
    """measurements.csv, device.json and the SASS listing are copied; ncu rows are taken from
    ncu.csv, or parsed from ncu_raw.tar.gz when ncu.csv was too large to come back. `commit`
    fills in a provenance the device copy could not tell ("unknown"), or replaces it with `force`
    (a device copy whose git named an older commit than the tree it ran). Recorded data is never
    edited by hand. `data_dir`: another data tree (the held-out runs live under reports/data/holdout)."""
    folder = Path(folder)
    info = json.loads((folder / "device.json").read_text())
    if commit and (force or info["provenance"]["commit"] == "unknown"):
        info["provenance"]["commit"] = commit
    prov = Provenance(**info["provenance"])
    dest = (data_dir or DATA_DIR) / device
    dest.mkdir(parents=True, exist_ok=True)
    stem = f"run-{prov.run_id}"
    (dest / f"{stem}-device.json").write_text(json.dumps(info, indent=1))
    events = pd.read_csv(folder / "measurements.csv")
    events["commit"] = prov.commit
    events.to_csv(dest / f"{stem}-events.csv.gz", index=False)  # recorded tables are stored compressed
    out = dest / f"{stem}-ncu.csv.gz"
    out.unlink(missing_ok=True)
    if (folder / "ncu.csv").exists():
        ncu = pd.read_csv(folder / "ncu.csv")
        ncu["commit"] = prov.commit
        ncu.to_csv(out, index=False)
    elif (folder / "ncu_raw.tar.gz").exists():
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(folder / "ncu_raw.tar.gz") as tar:
            tar.extractall(tmp, filter="data")
            raw = Path(tmp) / "ncu_raw"
            plain = Path(tmp) / "ncu.csv"
            rec = Recorder(plain, prov)
            for manifest in sorted(raw.glob("manifest_*.json")):
                study = manifest.stem.removeprefix("manifest_")
                rec.write(profile.parse(raw / f"ncu_{study}.csv", manifest))
            rec.close()
            pd.read_csv(plain).to_csv(out, index=False)
    if (folder / "sass.txt.gz").exists():  # the compiled kernels (perfmodel.sass reads the newest)
        shutil.copy(folder / "sass.txt.gz", dest / f"{stem}-sass.txt.gz")
    return dest
