// SGEMM kernels for AVX-512F: 8x48 micro-kernel, 24 zmm accumulators (only
// called when CPUID and the OS report AVX-512F).
#include "internal.h"

#include <immintrin.h>

namespace hc::rt {
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"))), apply_to = function)
namespace gemm_avx512 {
#define HC_GEMM_ISA 2
#include "kernels/gemm_impl.inc"
#undef HC_GEMM_ISA
} // namespace gemm_avx512
#pragma clang attribute pop
const GemmKernel &gemmAvx512() { return gemm_avx512::kKernel; }
const GemmKernel &gemmAvx512Rounded() {
  static const GemmKernel k = gemm_avx512::roundedKernel();
  return k;
}
} // namespace hc::rt
