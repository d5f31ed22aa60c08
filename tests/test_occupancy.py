"""Occupancy: worked examples, bad input, curves and the block-size chooser."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.devices import DeviceSpec
from perfmodel.errors import LimitError, PerfModelError


def _sm(**over) -> DeviceSpec:
    props = dict(major=8, minor=0, multiProcessorCount=100, warpSize=32, maxThreadsPerBlock=1024,
                 maxThreadsPerMultiProcessor=2048, regsPerBlock=65536, regsPerMultiprocessor=65536,
                 sharedMemPerBlock=49152, sharedMemPerMultiprocessor=100 * 1024,
                 sharedMemPerBlockOptin=99 * 1024, reservedSharedMemPerBlock=0)
    props.update(over)
    return DeviceSpec.from_properties(props, name="textbook SM")


def test_worked_example_registers_256_threads_96_regs():
    occ = perfmodel.occupancy(_sm(), 256, 96)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.occupancy) == (2, 16, 0.25)
    assert occ.limiters == ("registers",)


def test_worked_example_512_threads_64_regs_16k_smem():
    occ = perfmodel.occupancy(_sm(), 512, 64, static_smem_bytes=16 * 1024)
    assert occ.blocks_per_sm == 2 and occ.occupancy == 0.5
    assert "registers" in occ.limiters and occ.block_limit_shared_memory == 6
    assert occ.max_warps_per_sm == 64 and occ.block_limit_blocks == 32


def test_h200_question_from_the_issue():
    occ = perfmodel.occupancy("H200", 256, 96, static_smem_bytes=16 * 1024)
    assert occ.blocks_per_sm == 2 and occ.limiters == ("registers",)
    assert occ.smem_per_block_bytes == 17 * 1024  # 16 KiB + the driver's 1 KiB reservation
    assert occ.registers_per_block == 96 * 32 * 8


def test_zero_blocks_is_a_result_not_an_error():
    occ = perfmodel.occupancy("h200", 1024, 255)
    assert occ.blocks_per_sm == 0 and "registers" in occ.limiters
    occ = perfmodel.occupancy("h200", 128, 32, dynamic_smem_bytes=64 * 1024)  # not opted in
    assert occ.blocks_per_sm == 0 and occ.limiters == ("shared_memory",)
    occ = perfmodel.occupancy("h200", 128, 32, dynamic_smem_bytes=64 * 1024, opt_in=True)
    assert occ.blocks_per_sm == 3


def test_carveout_changes_the_smem_limit():
    small = perfmodel.occupancy("h200", 128, 32, static_smem_bytes=8 * 1024, carveout=25)
    assert small.smem_per_sm_bytes == 64 * 1024  # 25 % of 228 KiB = 57 KiB -> next step, 64 KiB
    assert small.block_limit_shared_memory == 7


@pytest.mark.parametrize("kwargs, words", [
    (dict(threads_per_block=0, registers_per_thread=32), "threads per block = 0"),
    (dict(threads_per_block=2048, registers_per_thread=32), "1..1024"),
    (dict(threads_per_block=256, registers_per_thread=300), "registers per thread = 300"),
    (dict(threads_per_block=256, registers_per_thread=32, dynamic_smem_bytes=-1), "must not be negative"),
    (dict(threads_per_block=256, registers_per_thread=32, dynamic_smem_bytes=300_000), "232448"),
    (dict(threads_per_block=256, registers_per_thread=32, carveout=150), "carveout = 150"),
])
def test_bad_input_names_the_limit(kwargs, words):
    with pytest.raises(LimitError, match=words) as err:
        perfmodel.occupancy("h200", **kwargs)
    assert isinstance(err.value, ValueError)


def test_unknown_device_lists_close_matches():
    with pytest.raises(PerfModelError, match="H100"):
        perfmodel.device("H10")


def test_curves_have_the_three_graphs_and_mark_the_limiter():
    c = perfmodel.curves("h200", 256, 64, static_smem_bytes=4096)
    assert set(c) == {"threads_per_block", "registers_per_thread", "smem_per_block_bytes"}
    regs = c["registers_per_thread"].set_index("registers_per_thread")
    assert regs.loc[32, "occupancy"] == 1.0 and regs.loc[128, "occupancy"] == 0.25
    assert regs.loc[128, "limiter"] == "registers"
    assert len(c["threads_per_block"]) == 32


def test_max_potential_block_size():
    grid, block = perfmodel.max_potential_block_size("h200", 32)
    assert (grid, block) == (2 * 132, 1024)
    grid, block = perfmodel.max_potential_block_size("h200", 128)
    assert block * (grid // 132) == 512  # 128 regs: 16 warps per SM at most


def test_every_device_file_loads_with_consistent_limits():
    devs = perfmodel.devices()
    assert {d.key for d in devs} >= {"v100", "t4", "a100", "a10", "l4", "rtx-4000-ada", "rtx-4090",
                                      "h100", "h200", "b200", "rtx-5090"}
    for d in devs:
        assert d.smem_per_block_optin_bytes + d.reserved_smem_per_block_bytes <= d.smem_per_sm_bytes
        assert d.dram_bandwidth_bytes_per_s > 0 and d.fp32_flops_per_s > 0
        assert d.max_threads_per_sm % d.warp_size == 0
        assert perfmodel.device(d.name) is d
