// The schedule's cost model: how long a kernel call or a copy takes, from
// the registry's FLOP rules, the bytes a call touches and measured rates.
// Used by hc-automem to price recomputation against moving data.
#ifndef HC_PASSES_COSTMODEL_H
#define HC_PASSES_COSTMODEL_H

#include "hc/Schedule/ScheduleOps.h"

#include <string>

namespace hc {

// Rates of one rank's compute team. The defaults were measured on the
// developers' 2-core Zen 5 machine at 2 threads (bench/results-zen5-2core.txt:
// GEMM ~470 GFLOP/s; bench/results-kernels-zen5-2core.txt: triad ~50 GB/s;
// flash attention about half the GEMM rate; memcpy between arenas ~20 GB/s;
// the disk, dd with O_DIRECT on the VM's virtio disk: write 2.4, read 1.3 GB/s).
struct MachineRates {
  double gemmFlops = 470e9;       // linear, its gradients, matmul
  double attentionFlops = 230e9;  // flash attention forward and backward
  double memoryBytes = 50e9;      // memory-bound kernels (bytes touched)
  double copyBytes = 20e9;        // a tier copy (read + write of the buffer)
  double diskBytes = 1.3e9;       // to or from the disk tier (the slower way)
};

// "gemm=GFLOPS,attention=GFLOPS,memory=GBPS,copy=GBPS,disk=GBPS", any subset; false +
// error on anything else.
bool parseRates(const std::string &text, MachineRates &rates, std::string &error);

// Seconds one call takes: the larger of its FLOPs at its kernel class's rate
// and its operands' bytes at the memory rate.
double callSeconds(schedule::CallOp call, const MachineRates &rates);
// Seconds to copy `bytes` once between memory tiers, or to or from disk.
double copySeconds(int64_t bytes, const MachineRates &rates);
double diskSeconds(int64_t bytes, const MachineRates &rates);

} // namespace hc

#endif // HC_PASSES_COSTMODEL_H
