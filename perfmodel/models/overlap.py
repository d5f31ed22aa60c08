"""Closed-form models that are not one kernel: copy/compute overlap over streams and the
latency staircase (Little's law for latency hiding lives in the time model)."""

from __future__ import annotations


def streams_time(h2d_s: float, kernel_s: float, d2h_s: float, streams: int) -> float:
    """A three-stage pipeline over S equal chunks: one pass through every stage at chunk size,
    then the slowest stage for the remaining S - 1 chunks (copy engines run both directions)."""
    s = max(streams, 1)
    stages = (h2d_s / s, kernel_s / s, d2h_s / s)
    return sum(stages) + (s - 1) * max(stages)


def staircase_level(bytes_: int, op: str, l1_bytes: int, l2_bytes: int) -> str:
    """Which level serves a pointer chase over `bytes_` with cache operator ca / cg / cv."""
    if op == "ca" and bytes_ <= l1_bytes:
        return "l1"
    return "l2" if bytes_ <= l2_bytes else "dram"
