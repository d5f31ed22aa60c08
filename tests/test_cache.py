"""perfmodel.cache: calibrations kept on disk are read back only under the same code, data and arguments."""

from __future__ import annotations

import pytest

from perfmodel import cache


@pytest.fixture
def counted(tmp_path, monkeypatch):
    """A cached function that counts its calls, kept under a fresh folder."""
    monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path))
    calls = []

    def square(x: int, offset: int = 0) -> int:
        calls.append(x)
        return x * x + offset

    return square, calls


def test_a_result_is_read_back_in_a_new_process(counted, tmp_path):
    square, calls = counted
    assert cache.on_disk(square)(7) == 49
    assert cache.on_disk(square)(7) == 49  # a second wrapper: as a new process would, it reads the file
    assert calls == [7]
    assert len(list(tmp_path.glob("*.pkl"))) == 1
    assert cache.on_disk(square)(7, offset=1) == 50 and calls == [7, 7]


def test_a_changed_fingerprint_computes_again(counted, monkeypatch):
    square, calls = counted
    cache.on_disk(square)(3)
    monkeypatch.setattr(cache, "fingerprint", lambda: "other code or data")
    assert cache.on_disk(square)(3) == 9
    assert calls == [3, 3]


def test_a_damaged_file_computes_again(counted, tmp_path):
    square, calls = counted
    cache.on_disk(square)(5)
    for f in tmp_path.glob("*.pkl"):
        f.write_bytes(b"not a pickle")
    assert cache.on_disk(square)(5) == 25 and calls == [5, 5]


def test_off_keeps_nothing(counted, tmp_path, monkeypatch):
    square, calls = counted
    monkeypatch.setenv("PERFMODEL_CACHE_DIR", "off")
    assert cache.folder() is None
    cache.on_disk(square)(4)
    cache.on_disk(square)(4)
    assert calls == [4, 4] and not list(tmp_path.iterdir())


def test_the_fingerprint_follows_the_recorded_data(tmp_path, monkeypatch):
    """A recorded file added or rewritten changes the digest (what was kept from it is rebuilt)."""
    monkeypatch.setattr(cache, "DATA", tmp_path)
    digests = []
    for step in range(3):
        if step == 1:
            (tmp_path / "run.csv").write_text("a")
        if step == 2:
            (tmp_path / "run.csv").write_text("ab")
        cache.fingerprint.cache_clear()
        digests.append(cache.fingerprint())
    cache.fingerprint.cache_clear()
    assert len(set(digests)) == 3
