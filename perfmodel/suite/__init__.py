"""The kernel suite: the real CUDA kernels of kernels/, their registry, and the PyCUDA runner.

Only `gpu.py` (and what imports it: runner, profiling) needs PyCUDA; the registry works anywhere.
"""
