"""Differential test: perfmodel.occupancy against NVIDIA's cuda_occupancy.h, >= 10,000 configs."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import perfmodel
from perfmodel.devices import DeviceSpec
from perfmodel.devices import arch as arch_facts
from perfmodel.errors import PerfModelError
from perfmodel.occupancy import INT_MAX, limits
from tests.oracle.cuda_toolkit import build_harness, cuda_include

pytestmark = pytest.mark.skipif(cuda_include() is None,
                                reason="CUDA toolkit (cuda_occupancy.h) not installed here")

CCS = [(5, 0), (5, 2), (5, 3), (6, 0), (6, 1), (6, 2), (7, 0), (7, 2), (7, 5), (8, 0), (8, 6),
       (8, 7), (8, 9), (9, 0), (10, 0), (10, 1), (10, 3), (11, 0), (12, 0), (12, 1)]
N_RANDOM = 12_000


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return build_harness(tmp_path_factory.mktemp("oracle"))


def _random_device(rng: np.random.Generator) -> DeviceSpec:
    if rng.random() < 0.4:
        return perfmodel.devices()[rng.integers(len(perfmodel.devices()))]
    major, minor = CCS[rng.integers(len(CCS))]
    arch = arch_facts(major, minor)
    steps = [s for s in arch.carveout_steps_bytes if s >= 48 * 1024] or [rng.choice([48, 64, 96]) * 1024]
    smem_sm = int(rng.choice(steps)) if rng.random() < 0.8 else int(rng.integers(48, 260) * 1024)
    reserved = 1024 if major >= 8 else 0
    props = dict(major=major, minor=minor, multiProcessorCount=int(rng.integers(1, 200)),
                 warpSize=32, maxThreadsPerBlock=int(rng.choice([512, 1024])),
                 maxThreadsPerMultiProcessor=int(rng.choice([1024, 1536, 2048])),
                 regsPerBlock=int(rng.choice([32768, 65536])),
                 regsPerMultiprocessor=int(rng.choice([32768, 65536, 65536])),
                 sharedMemPerBlock=49152, sharedMemPerMultiprocessor=smem_sm,
                 sharedMemPerBlockOptin=max(49152, smem_sm - reserved),
                 reservedSharedMemPerBlock=reserved)
    return DeviceSpec.from_properties(props, name=f"random sm_{major}{minor}")


def _random_launch(rng: np.random.Generator, dev: DeviceSpec) -> tuple:
    edge = rng.random()
    threads = int(rng.integers(1, dev.max_threads_per_block + 1))
    if edge < 0.5:
        threads = int(rng.integers(1, dev.max_threads_per_block // 32 + 1)) * 32
    regs = int(rng.choice([0, dev.max_registers_per_thread, int(rng.integers(0, 256))])) \
        if rng.random() < 0.3 else int(rng.integers(0, dev.max_registers_per_thread + 1))
    static = int(rng.integers(0, 49153)) if rng.random() < 0.4 else int(rng.choice([0, 1024, 16384, 49152]))
    opt_in = bool(rng.random() < 0.4)
    room = dev.smem_per_block_optin_bytes - static
    dyn = int(rng.integers(0, max(room, 0) + 1)) if rng.random() < 0.6 else 0
    if rng.random() < 0.1:
        dyn = max(room, 0)  # exactly at the opt-in limit
    carveout = int(rng.choice([-1, 0, 25, 50, 75, 100, int(rng.integers(0, 101))]))
    barriers = int(rng.choice([0, 1, 1, 2]))
    return threads, regs, static, dyn, carveout, opt_in, barriers


def _ours(dev, threads, regs, static, dyn, carveout, opt_in, barriers):
    try:
        lim = limits(dev, threads, regs, static, dyn, None if carveout < 0 else carveout, opt_in, barriers)
    except PerfModelError:
        return (1,)
    mask = int(lim.limiter_mask()) & 0b11111
    # the header reports bit 4 (0x10) for barriers and 0x20 for virtual resources
    return (0, int(lim.blocks), mask, int(lim.registers), int(lim.shared_memory), int(lim.warps),
            lim.block_slots, int(lim.registers_per_block), int(lim.smem_per_block_bytes))


def _header_bits(flags: int) -> int:
    return flags & 0b11111  # drop virtual resources (unused: kernels declare none)


def test_random_configurations_match_the_header(harness):
    rng = np.random.default_rng(20261129)
    cases = []
    for _ in range(N_RANDOM):
        dev = _random_device(rng)
        cases.append((dev, _random_launch(rng, dev)))
    lines = []
    for dev, (t, r, s, d, c, o, b) in cases:
        p = dev.to_properties()
        lines.append(" ".join(str(x) for x in (
            p["major"], p["minor"], p["maxThreadsPerBlock"], p["maxThreadsPerMultiProcessor"],
            p["regsPerBlock"], p["regsPerMultiprocessor"], p["warpSize"], p["sharedMemPerBlock"],
            p["sharedMemPerMultiprocessor"], p["multiProcessorCount"], p["sharedMemPerBlockOptin"],
            p["reservedSharedMemPerBlock"], t, r, s, d, c, int(o), b)))
    out = subprocess.run([str(harness)], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True).stdout.split("\n")
    mismatches = []
    for (dev, launch), line in zip(cases, out, strict=False):
        ref = tuple(int(x) for x in line.split())
        ours = _ours(dev, *launch)
        ref = (ref[0],) if ref[0] != 0 else (0, ref[1], _header_bits(ref[2]), *ref[3:])
        if ours != ref:
            mismatches.append((dev.name, dev.compute_capability, launch, ours, ref))
    assert len(cases) >= 10_000
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"
    errors = sum(1 for (_, _), line in zip(cases, out, strict=False) if line.split()[0] != "0")
    assert errors < len(cases) // 10  # most configurations are real launches, not error paths


@pytest.mark.parametrize("dev", perfmodel.devices(), ids=lambda d: d.key)
def test_builtin_edge_cases_match_the_header(harness, dev):
    launches = []
    for threads in (1, 31, 32, 33, 96, 100, 256, 640, 1000, dev.max_threads_per_block):
        for regs in (0, 1, 32, 64, 96, 128, 168, 255):
            for static, dyn, opt_in in ((0, 0, False), (0, 48 * 1024 - 1024, False),
                                        (16384, dev.smem_per_block_optin_bytes - 16384, True),
                                        (0, dev.smem_per_block_optin_bytes, True), (4000, 5000, True)):
                for carveout in (-1, 0, 10, 50, 100):
                    launches.append((threads, regs, static, dyn, carveout, opt_in, 1))
    p = dev.to_properties()
    head = " ".join(str(p[k]) for k in ("major", "minor", "maxThreadsPerBlock",
                                        "maxThreadsPerMultiProcessor", "regsPerBlock",
                                        "regsPerMultiprocessor", "warpSize", "sharedMemPerBlock",
                                        "sharedMemPerMultiprocessor", "multiProcessorCount",
                                        "sharedMemPerBlockOptin", "reservedSharedMemPerBlock"))
    text = "\n".join(f"{head} {t} {r} {s} {d} {c} {int(o)} {b}" for t, r, s, d, c, o, b in launches)
    out = subprocess.run([str(harness)], input=text + "\n", capture_output=True, text=True,
                         check=True).stdout.split("\n")
    for launch, line in zip(launches, out, strict=False):
        ref = tuple(int(x) for x in line.split())
        ref = (ref[0],) if ref[0] else (0, ref[1], _header_bits(ref[2]), *ref[3:])
        assert _ours(dev, *launch) == ref, (dev.name, launch)
    # the public API agrees with the core on a valid launch
    occ = perfmodel.occupancy(dev, 256, 32)
    assert occ.blocks_per_sm == int(limits(dev, 256, 32).blocks)
    assert occ.block_limit_warps < INT_MAX
