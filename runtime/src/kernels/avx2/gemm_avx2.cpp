// SGEMM kernels for AVX2+FMA: 6x16 micro-kernel (only called when CPUID has
// AVX2 and FMA).
#include "internal.h"

#include <immintrin.h>

namespace hc::rt {
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
namespace gemm_avx2 {
#define HC_GEMM_ISA 1
#include "kernels/gemm_impl.inc"
#undef HC_GEMM_ISA
} // namespace gemm_avx2
#pragma clang attribute pop
const GemmKernel &gemmAvx2() { return gemm_avx2::kKernel; }
const GemmKernel &gemmAvx2Rounded() {
  static const GemmKernel k = gemm_avx2::roundedKernel();
  return k;
}
} // namespace hc::rt
