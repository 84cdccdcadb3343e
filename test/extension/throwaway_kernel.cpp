// The throwaway kernel's body, with the runtime's calling convention, in a
// shared library of its own: the step library links it because the
// extension names it (CompilerExtension::kernelLibraries), not libhcrt.
#include "hc/runtime/graph_ops.h"

extern "C" void hcrt_op_throwaway_axpb(const hcrt_tensor *ins, int32_t nin,
                                       hcrt_tensor *outs, int32_t nout,
                                       const hcrt_attrs *attrs, hc_threads threads) {
  (void)nin, (void)nout, (void)threads;
  const hcrt_tensor &x = ins[0];
  hcrt_tensor &y = outs[0];
  const float *xs = static_cast<const float *>(x.data);
  float *ys = static_cast<float *>(y.data);
  const bool off = attrs->ints[0] != 0;
  const double alpha = attrs->floats[0], beta = attrs->floats[1];
  int64_t n = 1, index[HCRT_MAX_RANK] = {};
  for (int32_t d = 0; d < y.rank; ++d)
    n *= y.shape[d];
  // Any strides: an input may be a view (a transpose, a CFTP row block).
  for (int64_t i = 0; i < n; ++i) {
    int64_t xo = 0, yo = 0;
    for (int32_t d = 0; d < y.rank; ++d) {
      xo += index[d] * x.strides[d];
      yo += index[d] * y.strides[d];
    }
    ys[yo] = off ? xs[xo] : static_cast<float>(alpha * xs[xo] + beta);
    for (int32_t d = y.rank - 1; d >= 0; --d) {
      if (++index[d] < y.shape[d])
        break;
      index[d] = 0;
    }
  }
}
