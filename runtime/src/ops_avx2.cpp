// Fused kernels compiled for AVX2+FMA (only called when CPUID has them).
#include "internal.h"

namespace hc::rt {
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
namespace avx2 {
#include "ops_impl.inc"
} // namespace avx2
#pragma clang attribute pop
const OpsTable &opsAvx2() { return avx2::kTable; }
} // namespace hc::rt
