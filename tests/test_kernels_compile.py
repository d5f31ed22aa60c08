"""Every CUDA source compiles for sm_90 with the toolkit's nvcc (no GPU needed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc (CUDA toolkit) not installed here")
@pytest.mark.parametrize("source", sorted(p.name for p in KERNELS.glob("*.cu")))
def test_source_compiles_for_sm90(source, tmp_path):
    out = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-O3", f"-I{KERNELS}", "-o", str(tmp_path / "k.cubin"),
                          str(KERNELS / source)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_every_registry_entry_point_exists_in_its_source():
    from perfmodel.suite.plan import load_plan
    from perfmodel.suite.registry import get

    for plan in ("h200", "sanitize"):
        for pc in load_plan(KERNELS.parent / "experiments" / "plans" / f"{plan}.toml"):
            case = get(pc.name)
            text = (KERNELS / case.source).read_text()
            entry = case.entry(pc.params)
            assert f"void {entry}(" in text or "_##" in text and entry.rsplit("_", 2)[0] in text, entry
