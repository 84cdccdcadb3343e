// Fused kernels, portable build (whatever the baseline ISA gives).
#include "hc/base/settings.h"
#include "internal.h"

// ops_impl.inc's 16-lane vector helpers are static to this file, so their
// by-value vector arguments never cross an ABI boundary: -Wpsabi's warning
// about AVX-512 vectors without avx512f is noise here.
#pragma clang diagnostic ignored "-Wpsabi"

namespace hc::rt {
namespace generic {
// Vector register width (bytes): sizes the register-resident column blocks.
constexpr int kVectorBytes = 16;
#include "kernels/ops_impl.inc"
} // namespace generic
const OpsTable &opsGeneric() { return generic::kTable; }
} // namespace hc::rt
