// Fused kernels compiled for AVX2+FMA (only called when CPUID has them).
#include "hc/base/settings.h"
#include "internal.h"

// ops_impl.inc's 16-lane vector helpers are static to this file, so their
// by-value vector arguments never cross an ABI boundary: -Wpsabi's warning
// about AVX-512 vectors without avx512f is noise here.
#pragma clang diagnostic ignored "-Wpsabi"

namespace hc::rt {
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
namespace avx2 {
// Vector register width (bytes): sizes the register-resident column blocks.
constexpr int kVectorBytes = 32;
#include "kernels/ops_impl.inc"
} // namespace avx2
#pragma clang attribute pop
const OpsTable &opsAvx2() { return avx2::kTable; }
} // namespace hc::rt
