"""Calibrations kept on disk between runs: what the model reads off the recorded data (ceilings, replays)
takes ~20 s to rebuild, so each process would pay it for one `perfmodel predict`. A result is stored under
a key of the function, its arguments and a fingerprint of everything it may read - the package's code and
device files, the recorded data (names, sizes, times) and the library versions - so any change rebuilds it.

$PERFMODEL_CACHE_DIR picks the folder (default: $XDG_CACHE_HOME/perfmodel or ~/.cache/perfmodel); set it
to "off" to compute everything afresh (the tests do)."""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .measurements import DATA_DIR as DATA

T = TypeVar("T")

PACKAGE = Path(__file__).resolve().parent
OFF = "off"


def folder() -> Path | None:
    """Where results are kept; None when caching is off."""
    chosen = os.environ.get("PERFMODEL_CACHE_DIR")
    if chosen is not None:
        return None if chosen.strip().lower() in (OFF, "") else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "perfmodel"


@functools.cache
def fingerprint() -> str:
    """A digest of the inputs a calibration may read: code and device files by content, recorded data by
    name, size and modification time."""
    import numpy
    import pandas

    h = hashlib.sha256(f"{sys.version}|{numpy.__version__}|{pandas.__version__}".encode())
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".toml", ".cu", ".cuh", ".json"):
            h.update(str(path.relative_to(PACKAGE)).encode())
            h.update(path.read_bytes())
    if DATA.is_dir():
        for path in sorted(DATA.rglob("*")):
            if path.is_file():
                st = path.stat()
                h.update(f"{path.relative_to(DATA)}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()


@functools.cache
def _say_building(where: Path) -> None:
    """Once a process: a calibration is being rebuilt (the code or the recorded data changed, or first use)."""
    print(f"perfmodel: reading the calibrations off the recorded data (~20 s, once; kept under {where})",
          file=sys.stderr, flush=True)


def on_disk(fn: Callable[..., T]) -> Callable[..., T]:
    """Memoise `fn` (hashable, picklable arguments; a picklable result) in memory and on disk."""
    @functools.cache
    def wrapper(*args: object, **kwargs: object) -> T:
        where = folder()
        if where is None:
            return fn(*args, **kwargs)
        call = (fn.__module__, fn.__qualname__, args, sorted(kwargs.items()), fingerprint())
        key = hashlib.sha256(pickle.dumps(call)).hexdigest()
        path = where / f"{fn.__qualname__}-{key[:32]}.pkl"
        try:
            return pickle.loads(path.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            pass  # not kept yet, or kept by code that no longer reads it: compute
        _say_building(where)
        value = fn(*args, **kwargs)
        try:
            where.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=where, delete=False, suffix=".tmp") as f:
                f.write(pickle.dumps(value))
            os.replace(f.name, path)
        except OSError:
            pass  # a read-only home: the result still stands for this process
        return value

    return functools.update_wrapper(wrapper, fn)
