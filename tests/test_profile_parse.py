"""ncu's raw CSV -> tidy rows, matched to the worker's manifest by launch order (no GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from perfmodel.suite.gpu import FLUSH_KERNEL
from perfmodel.suite.profile import PRE_FLUSHES, WRITEBACK, parse, run_ncu


def _raw(path, kernels_and_writes):
    lines = ['"ID","Kernel Name","dram__bytes_write.sum","dram__bytes_read.sum"', '"","","byte","byte"']
    lines += [f'"{i}","{k}(float*)","{w:,}","{r}"' for i, (k, w, r) in enumerate(kernels_and_writes)]
    path.write_text("==PROF== noise before the table\n" + "\n".join(lines) + "\n")


def _manifest(path, entries):
    path.write_text(json.dumps([{"case": "probe.copy", "case_id": f"probe.copy[n={n}]", "params": {"n": n},
                                 "study": "ceilings", "kernel": "copy_f4"} for n in entries]))


def test_writeback_rows_pair_each_kernel_with_the_flush_after_it(tmp_path):
    raw, manifest = tmp_path / f"ncu_{WRITEBACK}.csv", tmp_path / f"manifest_{WRITEBACK}.json"
    launches = []
    for w in (1000, 2000):
        launches += [(FLUSH_KERNEL, 7, 1)] * PRE_FLUSHES + [("copy_f4", w, 5), (FLUSH_KERNEL, w // 10, 9)]
    _raw(raw, launches)
    _manifest(manifest, [1, 2])
    rows = parse(raw, manifest)
    got = {(r.case_id, r.metric): r.value for r in rows}
    assert {r.source for r in rows} == {"ncu-writeback"}
    assert got[("probe.copy[n=1]", "dram__bytes_write.sum")] == 1000  # the kernel's own, thousands separator read
    assert got[("probe.copy[n=1]", "dram__bytes_write_after.sum")] == 100  # the flush after it
    assert got[("probe.copy[n=2]", "dram__bytes_read_after.sum")] == 9
    assert got[("probe.copy[n=2]", "flush_sink_bytes")] == 0
    assert not any(v == 7 for (_, m), v in got.items() if m.startswith("dram"))  # flushes before: not kept


def test_a_launch_order_mismatch_stops_the_parse(tmp_path):
    raw, manifest = tmp_path / "ncu_ceilings.csv", tmp_path / "manifest_ceilings.json"
    _raw(raw, [("copy_f4", 10, 1), ("other_kernel", 20, 2)])
    _manifest(manifest, [1, 2])
    rows = parse(raw, manifest)
    assert {r.case_id for r in rows} == {"probe.copy[n=1]"} and {r.source for r in rows} == {"ncu"}


def test_an_imported_run_is_stored_compressed_and_loads_back(tmp_path, monkeypatch):
    """import_run writes gzip-compressed run tables (the recorded data stays small enough to carry to
    the device); load() reads them with the plain ones."""
    import pandas as pd

    from perfmodel.measurements import COLUMNS, load
    from perfmodel.suite import importer

    prov = {"run_id": "20260101T000000Z", "device": "NVIDIA H200", "driver": "1", "cuda": "13.0", "pycuda": "x",
            "sm_clock_mhz": "1980", "commit": "unknown", "utc": "2026-01-01T00:00:00Z"}
    run = tmp_path / "run"
    run.mkdir()
    (run / "device.json").write_text(json.dumps({"properties": {}, "provenance": prov}))
    row = {**prov, "study": "ceilings", "case": "probe.copy", "case_id": "probe.copy[n=1]", "params": "{}",
           "metric": "time_s", "unit": "s", "stat": "median", "value": 1.5e-6, "source": "events"}
    pd.DataFrame([row], columns=list(COLUMNS)).to_csv(run / "measurements.csv", index=False)
    monkeypatch.setattr(importer, "DATA_DIR", tmp_path / "data")
    dest = importer.import_run(run, "h200", commit="abc1234")
    assert (dest / "run-20260101T000000Z-events.csv.gz").exists()
    back = load("h200", tmp_path / "data")
    assert len(back) == 1 and back.value.iloc[0] == 1.5e-6 and back.commit.iloc[0] == "abc1234"


def test_a_timed_out_ncu_takes_the_worker_it_profiles_with_it(tmp_path, monkeypatch):
    """ncu past its time is killed with its whole group: the worker must not run on unprofiled
    (a plan's ncu budget ran out on an H100 on 2026-12-07 and the worker rewrote its manifest after)."""
    pidfile = tmp_path / "worker.pid"
    fake = tmp_path / "ncu"  # stands for ncu: starts a long "worker" and waits for it
    fake.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pidfile}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(subprocess.TimeoutExpired):
        run_ncu("plan.toml", "ceilings", tmp_path / "raw", ["dram__bytes_read.sum"], timeout_s=1)
    worker = int(pidfile.read_text())
    for _ in range(50):  # the kill is sent; give the kernel a moment to reap it
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the worker (pid {worker}) outlived ncu's timeout")
