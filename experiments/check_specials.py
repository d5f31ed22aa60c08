"""The special measurements' kernels on small sizes, for compute-sanitizer (they are not registry cases):

    compute-sanitizer --tool memcheck --report-api-errors no python3 experiments/check_specials.py
"""

from __future__ import annotations

from perfmodel.suite import gpu, special

if __name__ == "__main__":
    gpu.context()
    flush = gpu.L2Flusher(gpu.device_properties()["l2CacheSize"], mode="read")
    flush()
    gpu.synchronize()
    print("flush_read: ok", flush=True)
    rows = special.chase_loaded(stream_blocks=(0, 132), steps=64, n=1 << 20, chain_bytes=1 << 24)
    print(f"chase_loaded: {len(rows)} rows", flush=True)
    rows = special.chase(sizes=(1 << 16, 1 << 24), steps=256)
    print(f"chase: {len(rows)} rows", flush=True)
