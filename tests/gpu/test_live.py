"""Live tests on the GPU (marker gpu): the same assertions on a fresh measurement.

    source .gpu/setup.sh && python3 -m pytest -m gpu tests/gpu -q
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _gpu_or_skip():
    try:
        import pycuda.driver as drv

        drv.init()
        if drv.Device.count() == 0:
            raise RuntimeError("no device")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"needs an NVIDIA GPU with PyCUDA (pip install 'perfmodel[gpu]'): {exc}")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    _gpu_or_skip()
    from perfmodel.suite import campaign

    out = tmp_path_factory.mktemp("live")
    campaign.run("experiments/plans/smoke.toml", out, ncu=bool(os.environ.get("PERFMODEL_LIVE_NCU")),
                 extras=False, budget_s=240)
    import pandas as pd

    frames = [pd.read_csv(out / f) for f in ("measurements.csv", "ncu.csv") if (out / f).exists()]
    return pd.concat(frames, ignore_index=True)


def test_every_kernel_checks_against_numpy(live):
    checks = live[live.metric == "check_passed"]
    assert len(checks) >= 60 and (checks.value == 1).all(), checks[checks.value != 1].case_id.tolist()


def test_occupancy_equals_the_driver(live):
    from perfmodel.validate import compare

    t = compare("h200", live.assign(device="h200"), progress=False)
    occ = t[t.metric == "blocks_per_sm"]
    assert len(occ) >= 20 and (occ.rel_error == 0).all()
    counters = t[t.case.str.startswith("mem.") & (t.kind == "counter-l1")]
    if len(counters):
        assert (counters.rel_error == 0).all()


def test_device_properties_match_the_data_file():
    _gpu_or_skip()
    import perfmodel
    from perfmodel.devices import DeviceSpec
    from perfmodel.suite.gpu import device_properties

    live = DeviceSpec.from_pycuda()
    if "H200" not in live.name:
        pytest.skip(f"not an H200: {live.name}")
    ref = perfmodel.device("h200")
    props = device_properties()  # the launch limits the model refuses past (models.launch_limits)
    assert tuple(props["maxGridSize"]) == ref.arch.max_grid
    assert tuple(props["maxThreadsDim"]) == ref.arch.max_block
    for field in ("sm_count", "max_threads_per_sm", "registers_per_sm", "smem_per_sm_bytes",
                  "smem_per_block_optin_bytes", "reserved_smem_per_block_bytes", "l2_bytes"):
        assert getattr(live, field) == getattr(ref, field), field
    assert np.isclose(live.sm_clock_hz, ref.sm_clock_hz, rtol=0.01)
