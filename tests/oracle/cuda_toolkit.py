"""Find the CUDA toolkit's include folder (for cuda_occupancy.h) and build the oracle harness."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).parent


def cuda_include() -> Path | None:
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda",
                  *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.insert(0, str(Path(os.path.realpath(nvcc)).parent.parent))
    for c in candidates:
        if c and (Path(c) / "include" / "cuda_occupancy.h").is_file():
            return Path(c) / "include"
    return None


def build_harness(out_dir: Path) -> Path:
    include = cuda_include()
    if include is None:
        raise FileNotFoundError("cuda_occupancy.h not found (no CUDA toolkit)")
    exe = out_dir / "occupancy_harness"
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise FileNotFoundError("no C++ compiler (g++) to build the occupancy harness")
    subprocess.run([cxx, "-O1", f"-I{include}", str(HERE / "occupancy_harness.cpp"), "-o", str(exe)],
                   check=True)
    return exe
