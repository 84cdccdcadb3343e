// SGEMM kernels, portable build.
#include "internal.h"

namespace hc::rt {
namespace gemm_generic {
#define HC_GEMM_ISA 0
#include "kernels/gemm_impl.inc"
#undef HC_GEMM_ISA
} // namespace gemm_generic
const GemmKernel &gemmGeneric() { return gemm_generic::kKernel; }
const GemmKernel &gemmGenericRounded() {
  static const GemmKernel k = gemm_generic::roundedKernel();
  return k;
}
} // namespace hc::rt
