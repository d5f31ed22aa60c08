"""Built-in GPUs, one TOML file each under data/, looked up by name or alias."""

from __future__ import annotations

import difflib
import functools
import re
import tomllib
from pathlib import Path

from ..errors import PerfModelError, UnknownDeviceError
from .arch import ArchFacts, arch
from .spec import DeviceSpec

DATA_DIR = Path(__file__).with_name("data")
FORMAT_VERSION = 1

__all__ = ["ArchFacts", "DeviceSpec", "arch", "device", "devices", "load_file"]


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower().replace("nvidia", "").replace("geforce", ""))


def load_file(path: Path) -> DeviceSpec:
    """Read one device file; errors name the file and the problem."""
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise PerfModelError(f"{path}: not valid TOML: {exc}") from exc
    if doc.get("format_version") != FORMAT_VERSION:
        raise PerfModelError(f"{path}: format_version {doc.get('format_version')!r}, "
                             f"expected {FORMAT_VERSION}")
    sheet = dict(doc.get("datasheet", {}))
    source = sheet.pop("source", "")
    return DeviceSpec.from_properties(doc["properties"], name=doc["name"], key=doc["key"],
                                      aliases=tuple(doc.get("aliases", ())),
                                      datasheet_source=source, **sheet)


@functools.cache
def _builtin() -> dict[str, DeviceSpec]:
    return {spec.key: spec for spec in map(load_file, sorted(DATA_DIR.glob("*.toml")))}


def devices() -> list[DeviceSpec]:
    """All built-in devices, by key."""
    return list(_builtin().values())


def device(name: str | DeviceSpec) -> DeviceSpec:
    """A built-in device by key, name or alias, case- and punctuation-insensitive."""
    if isinstance(name, DeviceSpec):
        return name
    wanted = _norm(name)
    names: dict[str, DeviceSpec] = {}
    for spec in devices():
        for label in (spec.key, spec.name, *spec.aliases):
            names[_norm(label)] = spec
    if wanted in names:
        return names[wanted]
    labels = [label for s in devices() for label in (s.key, *s.aliases)]
    close = difflib.get_close_matches(name, labels, n=3, cutoff=0.4) or \
        [lab for lab in labels if wanted and wanted in _norm(lab)][:3]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownDeviceError(f"unknown device {name!r}{hint or '.'} Known: "
                             f"{', '.join(s.key for s in devices())}")
