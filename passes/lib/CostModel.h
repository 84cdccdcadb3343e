// The schedule's cost model: how long a kernel call or a copy takes, from
// the registry's FLOP rules, the bytes a call touches and measured rates.
// Used by hc-automem to price recomputation against moving data.
#ifndef HC_PASSES_COSTMODEL_H
#define HC_PASSES_COSTMODEL_H

#include "hc/Schedule/ScheduleOps.h"

#include <string>

namespace hc {

// The kernels' rates per thread of a team, shared by hc-automem and
// hc-cftp. Built in: bench/cftp_rates.py's measurement on the developers'
// 2-core Zen 5 (bench/cftp-rates-zen5.txt); hc-compile --rates (both
// passes' `rates` option) gives others, in parseRates' one syntax.
struct KernelRates {
  double gemmFlops = 230.1e9;       // linear, its gradients, matmul: FLOP/s
  // The same GEMMs with precision = "bf16" (hc_gemm_bf16, vdpbf16ps): the
  // median of hc-bench-gemm's S/2 shapes on 1 thread of the same Zen 5,
  // bench/results-bf16-zen5-2core.txt. Where the CPU has no bf16 dot
  // product the runtime emulates it; a --rates file says so.
  double gemmBf16Flops = 490.0e9;
  double attentionFlops = 180.6e9;  // flash attention forward and backward
  // The same with precision = "bf16": not measured on that Zen 5; its fp32
  // rate times the in-step ratio bench/cftp_rates.py measured on a 2-core
  // Zen 4 (S/2 batch 8, 1 thread: 148.3 / 93.2 GFLOP/s = 1.59).
  double attentionBf16Flops = 287.4e9;
  double memoryBytes = 28.49e9;     // memory-bound kernels: bytes touched/s
  double call = 2.47e-6;            // seconds per kernel call
  double fork = 0.01e-6;            // extra per call that runs on several threads
};

// What hc-automem and hc-cftp price with: the kernels on a team of
// `threads` (hc-automem: the topology's cores per rank; hc-cftp: each
// cluster's), a blocking cross-cluster wait, and the tier copies: memcpy
// between arenas ~20 GB/s, and the disk, dd with O_DIRECT on the VM's
// virtio disk (write 2.4, read 1.3 GB/s; the slower way counts).
struct MachineRates {
  KernelRates kernel;
  int threads = 2;
  double sync = 1e-6;        // a cross-cluster wait that blocks (not measured)
  double copyBytes = 20e9;   // a tier copy (read + write of the buffer)
  double diskBytes = 1.3e9;  // to or from the disk tier
  std::string source = "built-in";  // the spec they came from
};

// The one syntax of machine rates: a comma-separated list of items, each
// KEY=VALUE or the path of a file holding such items one per line (`#`
// comments, blank lines). Keys (kRateKeys in CostModel.cpp):
// gemm_gflops_per_thread, gemm_bf16_gflops_per_thread,
// attention_gflops_per_thread, attention_bf16_gflops_per_thread,
// stream_gbps_per_thread, call_us, fork_us,
// sync_us, copy_gbps, disk_gbps. Any subset; the rest keep their values.
// False + one-line error (naming the file and line) on anything else.
bool parseRates(const std::string &spec, MachineRates &rates, std::string &error);
// The keys, for messages and help: "gemm_gflops_per_thread, ...".
std::string rateKeys();

// Seconds a kernel (by registry name) takes on `threads` threads, on
// operands of these shapes touching `bytes`: the larger of its FLOPs at its
// class's rate (the class's bf16 rate when `attrs` ask for bf16) and
// its bytes at the memory rate, plus the call's overhead.
double kernelSeconds(llvm::StringRef kernel, llvm::ArrayRef<llvm::ArrayRef<int64_t>> ins,
                     llvm::ArrayRef<llvm::ArrayRef<int64_t>> outs, double bytes,
                     const KernelRates &rates, int threads,
                     mlir::DictionaryAttr attrs = {});
// The same for a whole call on the rank's team.
double callSeconds(schedule::CallOp call, const MachineRates &rates);
// Seconds to copy `bytes` once between memory tiers, or to or from disk.
double copySeconds(int64_t bytes, const MachineRates &rates);
double diskSeconds(int64_t bytes, const MachineRates &rates);

} // namespace hc

#endif // HC_PASSES_COSTMODEL_H
