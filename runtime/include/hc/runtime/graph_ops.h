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

#include "hc/runtime/kernels.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HCRT_GRAPH_OPS_VERSION 1
#define HCRT_MAX_RANK 8

enum { HCRT_F32 = 0, HCRT_F64 = 1, HCRT_I64 = 2, HCRT_I32 = 3, HCRT_I1 = 4 /* uint8 0/1 */ };

typedef struct hcrt_tensor {
  void *data;
  int32_t dtype;
  int32_t rank;
  int64_t shape[HCRT_MAX_RANK];
  int64_t strides[HCRT_MAX_RANK];  // elements; contiguous row-major for outputs
} hcrt_tensor;

// Op attributes, by position (per op below). Unused entries are ignored.
typedef struct hcrt_attrs {
  int64_t ints[2 * HCRT_MAX_RANK];
  int32_t num_ints;
  double floats[8];
  int32_t num_floats;
} hcrt_attrs;

#define HCRT_OP(name)                                                          \
  void hcrt_op_##name(const hcrt_tensor *ins, int32_t nin, hcrt_tensor *outs,  \
                      int32_t nout, const hcrt_attrs *attrs, hc_threads threads)

// Elementwise, NumPy broadcasting of inputs to the output shape.
HCRT_OP(add); HCRT_OP(sub); HCRT_OP(mul); HCRT_OP(div); HCRT_OP(pow);
HCRT_OP(max); HCRT_OP(min);
HCRT_OP(less); HCRT_OP(equal);      // output i1
HCRT_OP(where);                     // ins: cond (i1), lhs, rhs
HCRT_OP(neg); HCRT_OP(sqrt); HCRT_OP(exp); HCRT_OP(log); HCRT_OP(tanh);
HCRT_OP(sigmoid); HCRT_OP(sin); HCRT_OP(cos); HCRT_OP(erf);
HCRT_OP(reciprocal); HCRT_OP(silu);
HCRT_OP(gelu);                      // ints[0]: 1 tanh approximation, 0 erf
HCRT_OP(cast);                      // any dtype -> any dtype; to int truncates
                                    // (saturating, NaN -> 0); to i1 is != 0
HCRT_OP(copy);                      // strided view -> contiguous, same dtype
// Reductions: ints[0..num_ints) = reduced axes of ins[0] (sorted); the
// output holds the kept dims in order (with or without size-1 dims).
HCRT_OP(reduce_sum); HCRT_OP(reduce_mean);
HCRT_OP(softmax);                   // ints[0]: axis
HCRT_OP(layer_norm);                // ins: x, [scale], [shift]; ints[0] axis
                                    // (normalized dims [axis, rank)); floats[0] eps
HCRT_OP(modulate);                  // ins: x [B,N,D], shift [B,D], scale [B,D]
HCRT_OP(linear);                    // ins: x [...,in], w [out,in], [b [out]]
HCRT_OP(matmul);                    // NumPy matmul, batch dims broadcast
HCRT_OP(attention);                 // ins: qkv [B,N,3D]; ints[0] heads; floats[0] scale
HCRT_OP(concat);                    // ints[0]: axis; nin inputs
HCRT_OP(gather);                    // ins: data, indices (i64/i32); ints[0] axis
                                    // (negative indices wrap; out of range -> 0)
HCRT_OP(mse_loss);                  // ins: prediction, target; out: 0-d
// random_uniform: ins: seed, step, sample_offset (0-d i64); ints[0] op_id;
// floats[0] low, floats[1] high. Element i of sample b (row-major within
// the sample) = low + (high-low) * hc::rt::uniform01(seed, step,
// sample_offset + b, op_id, i) from hc/runtime/random.h.
HCRT_OP(random_uniform);

// Backward ops.
HCRT_OP(linear_grad_input);         // ins: dy [...,out], w [out,in] -> dx [...,in]
HCRT_OP(linear_grad_weight);        // ins: dy [...,out], x [...,in] -> dw [out,in]
HCRT_OP(layer_norm_grad);           // ins: dy, x, [scale]; ints[0] axis; floats[0] eps
HCRT_OP(modulate_grad);             // ins: dy, x, scale -> outs: dx, dshift, dscale
HCRT_OP(silu_grad);                 // ins: dy, x
HCRT_OP(gelu_grad);                 // ins: dy, x; ints[0] as gelu
HCRT_OP(softmax_grad);              // ins: dy, y (softmax output); ints[0] axis
HCRT_OP(attention_grad);            // ins: dout, qkv -> dqkv; ints[0] heads; floats[0] scale
HCRT_OP(mse_loss_grad);             // ins: dloss (0-d), prediction, target -> dprediction
HCRT_OP(scatter_add);               // ins: dy, indices; ints[0] axis; out zero-filled first
HCRT_OP(slice_grad);                // ins: dy; ints[0..rank) starts, ints[rank..2rank)
                                    // steps; out zero-filled, dy written at the slice

// Optimizers, in place: outs[i] may alias ins[...] (same data pointer).
// adamw: ins: step (0-d i64, completed steps), N params, N grads, N m, N v;
// outs: N params, N m, N v; floats: lr, beta1, beta2, eps, weight_decay.
// Exactly torch.optim.AdamW with t = step + 1 (float32 arithmetic, the
// scalars 1 - beta, lr / (1 - beta1^t), sqrt(1 - beta2^t) formed in double).
HCRT_OP(adamw);
// adam: ONNX ai.onnx.preview.training Adam. ins: R (0-d f32/f64), T (0-d i64,
// the update count), N X, N G, N V, N H; outs: N X, N V, N H; floats: alpha,
// beta, epsilon, norm_coefficient, norm_coefficient_post. The operator's
// pseudo code in float32 (R_adjusted and 1 - alpha etc. formed in double).
HCRT_OP(adam);
// sgd: ins: N params, N grads; outs: N params; floats: lr, weight_decay.
// p <- p - lr * (g + wd * p).
HCRT_OP(sgd);

#undef HCRT_OP

// --check-finite (hc_step_env.check_finite): the index of the first NaN or
// infinity among the elements of `t` (an output: contiguous), or -1; -1 too
// for non-float tensors. `*value` gets that element. Test hook:
// HC_CHECK_FINITE_PLANT=KERNEL writes a NaN into element 0 of the first
// tensor checked for that kernel name in the process, before the scan.
int64_t hcrt_first_nonfinite(const hcrt_tensor *t, const char *kernel,
                             double *value);

#ifdef __cplusplus
}
#endif

#endif // HC_RUNTIME_GRAPH_OPS_H
