// libhcrt graph-op kernels: one entry point per hc graph op (forward,
// backward and optimizer), called by generated training steps. They have the
// semantics of the compiler's float64 reference evaluator
// (compiler/lib/Eval/*.cpp) in float32, with sums accumulated in double or
// in a fixed order, so results are deterministic for a given thread range.
// Matrix products and the fused ops sit on the HCOps kernels of kernels.h.
//
// Calling convention, the same for every op:
//   void hcrt_op_<name>(const hcrt_tensor *ins, int32_t nin,
//                       hcrt_tensor *outs, int32_t nout,
//                       const hcrt_attrs *attrs, hc_threads threads);
// ins/outs follow the op's operands/results in order (hc dialect, see
// dialects/include/hc/Graph/GraphOps.td). An absent optional operand has
// data == NULL. INPUTS MAY BE ANY STRIDED VIEW (strides in elements, 0 for
// broadcast dims, any permutation); OUTPUTS ARE CONTIGUOUS ROW-MAJOR and
// must not alias inputs unless the op says so. Shapes are static and were
// checked by the compiler; kernels do not re-validate them.
#ifndef HC_RUNTIME_GRAPH_OPS_H
#define HC_RUNTIME_GRAPH_OPS_H

#include "hc/abi/tensor.h"
#include "hc/runtime/kernels.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCRT_GRAPH_OPS_VERSION 1
#define HCRT_OP(name)                                                          \
  void hcrt_op_##name(const hcrt_tensor *ins, int32_t nin, hcrt_tensor *outs,  \
                      int32_t nout, const hcrt_attrs *attrs, hc_threads threads)

// Every kernel of abi/include/hc/abi/kernels.def (the registry, with
// each kernel's operands and attribute layout documented there).
#define HCRT_KERNEL(name, flops, split, effect, ...) HCRT_OP(name);
#include "hc/abi/kernels.def"
#undef HCRT_KERNEL

#undef HCRT_OP

// --check-finite (hc_step_env.check_finite): the index of the first NaN or
// infinity among the elements of `t` (an output: contiguous), or -1; -1 too
// for non-float tensors. `*value` gets that element.
int64_t hcrt_first_nonfinite(const hcrt_tensor *t, double *value);

#ifdef __cplusplus
}
#endif

#endif // HC_RUNTIME_GRAPH_OPS_H
