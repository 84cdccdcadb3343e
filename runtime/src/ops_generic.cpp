// Fused kernels, portable build (whatever the baseline ISA gives).
#include "internal.h"

namespace hc::rt {
namespace generic {
#include "ops_impl.inc"
} // namespace generic
const OpsTable &opsGeneric() { return generic::kTable; }
} // namespace hc::rt
