// Graph-op entry point of ONNX's Adam (ai.onnx.preview.training), kept apart
// from AdamW: its epsilon sits outside the square root, T = 0 skips the bias
// correction, norm_coefficient is coupled L2 and norm_coefficient_post a
// decay after the update.
#include "graph_ops_util.h"

#include <cmath>

using namespace hc::rt;
using namespace hc::rt::gop;

namespace {

// The operator's pseudo code in float32, per element; the scalars were formed
// in double by the caller.
void adamChunk(int64_t n, float *x, const float *g, float *v, float *h,
               float nc, float alpha, float omAlpha, float beta, float omBeta,
               float rAdjusted, float eps, float keep) {
  for (int64_t i = 0; i < n; ++i) {
    const float gr = nc * x[i] + g[i];
    const float vi = alpha * v[i] + omAlpha * gr;
    const float hi = beta * h[i] + omBeta * (gr * gr);
    const float xNew = x[i] - rAdjusted * vi / (std::sqrt(hi) + eps);
    x[i] = keep * xNew;
    v[i] = vi;
    h[i] = hi;
  }
}

} // namespace

extern "C" {

HCRT_OP_DEF(adam) {
  const int32_t n = (nin - 2) / 4;
  if (nout < 3 * n)
    return;
  const double alpha = attrFloat(attrs, 0, 0.9), beta = attrFloat(attrs, 1, 0.999),
               eps = attrFloat(attrs, 2, 1e-6), nc = attrFloat(attrs, 3, 0.0),
               post = attrFloat(attrs, 4, 0.0);
  const double r = loadD(ins[0].data, ins[0].dtype, 0);
  const int64_t t = loadI(ins[1].data, ins[1].dtype, 0);
  const double td = static_cast<double>(t);
  const double rAdjusted =
      t > 0 ? r * std::sqrt(1.0 - std::pow(beta, td)) / (1.0 - std::pow(alpha, td)) : r;
  const float fnc = static_cast<float>(nc), fa = static_cast<float>(alpha),
              oma = static_cast<float>(1.0 - alpha), fb = static_cast<float>(beta),
              omb = static_cast<float>(1.0 - beta), fr = static_cast<float>(rAdjusted),
              feps = static_cast<float>(eps), keep = static_cast<float>(1.0 - post);
  adamLikeUpdate(ins, 2, n, outs, threads,
                 [&](int64_t b, int64_t e, float *x, const float *g, float *v,
                     float *h) {
                   adamChunk(e - b, x + b, g + b, v + b, h + b, fnc, fa, oma, fb,
                             omb, fr, feps, keep);
                 });
}

} // extern "C"
