// Reads launch configurations from stdin, one per line, and prints what NVIDIA's
// cuda_occupancy.h computes for each. Host-only: g++ -I<cuda>/include occupancy_harness.cpp
// in:  major minor maxThreadsPerBlock maxThreadsPerSM regsPerBlock regsPerSM warpSize
//      smemPerBlock smemPerSM numSms smemOptin reserved threads regs staticSmem dynSmem
//      carveout(-1 = default) optIn(0/1) blockBarriers
// out: status blocks limitingFactors limitRegs limitSmem limitWarps limitBlocks
//      allocatedRegs allocatedSmem
#include <cstdio>
#include <cuda_occupancy.h>

int main() {
    long long v[19];
    while (true) {
        for (int i = 0; i < 19; ++i)
            if (scanf("%lld", &v[i]) != 1) return 0;
        cudaOccDeviceProp p;
        p.computeMajor = (int)v[0]; p.computeMinor = (int)v[1];
        p.maxThreadsPerBlock = (int)v[2]; p.maxThreadsPerMultiprocessor = (int)v[3];
        p.regsPerBlock = (int)v[4]; p.regsPerMultiprocessor = (int)v[5]; p.warpSize = (int)v[6];
        p.sharedMemPerBlock = (size_t)v[7]; p.sharedMemPerMultiprocessor = (size_t)v[8];
        p.numSms = (int)v[9]; p.sharedMemPerBlockOptin = (size_t)v[10];
        p.reservedSharedMemPerBlock = (size_t)v[11];
        cudaOccFuncAttributes a;
        a.maxThreadsPerBlock = 1 << 30;
        a.numRegs = (int)v[13];
        a.sharedSizeBytes = (size_t)v[14];
        a.numBlockBarriers = (int)v[18];
        if (v[17]) {
            a.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
            a.maxDynamicSharedSizeBytes = p.sharedMemPerBlockOptin - a.sharedSizeBytes;
        }
        cudaOccDeviceState s;
        s.carveoutConfig = (int)v[16];
        cudaOccResult r = {};
        cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, (int)v[12], (size_t)v[15]);
        printf("%d %d %u %d %d %d %d %d %zu\n", (int)e, r.activeBlocksPerMultiprocessor,
               r.limitingFactors, r.blockLimitRegs, r.blockLimitSharedMem, r.blockLimitWarps,
               r.blockLimitBlocks, r.allocatedRegistersPerBlock, r.allocatedSharedMemPerBlock);
    }
}
