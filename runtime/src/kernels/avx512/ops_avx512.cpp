// Fused kernels compiled for AVX-512F (only called when CPUID has it).
#include "hc/base/settings.h"
#include "internal.h"

namespace hc::rt {
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"))), apply_to = function)
namespace avx512 {
// Vector register width (bytes): sizes the register-resident column blocks.
constexpr int kVectorBytes = 64;
#include "kernels/ops_impl.inc"
} // namespace avx512
#pragma clang attribute pop
const OpsTable &opsAvx512() { return avx512::kTable; }
} // namespace hc::rt
