// Reference (float64, naive) semantics of the backward and optimizer ops.
#include "EvalSupport.h"

#include "hc/Graph/GraphOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace hc::graph;

namespace hc::eval {
namespace {

const EvalTensor &get(Env &env, Value v) {
  auto it = env.find(v);
  if (it == env.end())
    fail("value used before definition");
  return it->second;
}

EvalTensor zerosLike(Value v) {
  Shape s = shapeOf(v);
  return EvalTensor{s, std::vector<double>(product(s), 0.0)};
}

double geluDerivative(double x, bool tanhApprox) {
  if (tanhApprox) {
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    double t = std::tanh(k * (x + c * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

// d(inputs) of softmax(q·kᵀ·scale)·v per (batch, head), one query row at a
// time: probabilities are recomputed, never stored as an N×L matrix. One
// gradient per input: dq, dk, dv, or d(qkv) packed as qkv is. bf16 (the
// bf16 kernel's rule): q, k, v, dO, the probabilities and dS rounded to
// bf16 where they enter a product; O is the bf16 forward's, and D_i = dO·O
// takes dO unrounded.
std::vector<EvalTensor> attentionGrad(const EvalTensor &dout, const std::vector<EvalTensor> &in,
                                      int64_t heads, double scale, bool bf16) {
  const std::array<EvalTensor, 3> qkv = attentionInputs(in, bf16);
  auto r16 = [&](double x) { return bf16 ? bf16Round(x) : x; };
  const EvalTensor &Q = qkv[0], &K = qkv[1], &V = qkv[2];
  const int64_t B = Q.shape[0], N = Q.shape[1], L = K.shape[1], D = Q.shape[2],
                Dh = D / heads;
  std::array<EvalTensor, 3> g;
  for (int w = 0; w < 3; ++w)
    g[w] = EvalTensor{qkv[w].shape, std::vector<double>(qkv[w].data.size(), 0.0)};
  std::vector<double> p(L), o(Dh), dO16(Dh);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < N; ++i) {
        const double *q = &Q.data[(b * N + i) * D + h * Dh];
        auto key = [&](int64_t j) { return (b * L + j) * D + h * Dh; };
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < L; ++j) {
          const double *k = &K.data[key(j)];
          double s = 0;
          for (int64_t d = 0; d < Dh; ++d)
            s += q[d] * k[d];
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        for (int64_t j = 0; j < L; ++j)
          sum += (p[j] = std::exp(p[j] - m));
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = 0; j < L; ++j) {
          const double *v = &V.data[key(j)];
          const double pj = r16(p[j]);  // the forward's product reads it so
          for (int64_t d = 0; d < Dh; ++d)
            o[d] += pj * v[d];
          p[j] /= sum;
        }
        const double *dO = &dout.data[(b * N + i) * D + h * Dh];
        double rowDot = 0;  // dO_i · O_i
        for (int64_t d = 0; d < Dh; ++d)
          rowDot += dO[d] * (o[d] / sum);
        for (int64_t d = 0; d < Dh; ++d)
          dO16[d] = r16(dO[d]);
        double *dq = &g[0].data[(b * N + i) * D + h * Dh];
        for (int64_t j = 0; j < L; ++j) {
          const double *k = &K.data[key(j)], *v = &V.data[key(j)];
          double dp = 0;
          for (int64_t d = 0; d < Dh; ++d)
            dp += dO16[d] * v[d];
          const double ds = r16(p[j] * (dp - rowDot)) * scale, pj = r16(p[j]);
          double *dk = &g[1].data[key(j)], *dv = &g[2].data[key(j)];
          for (int64_t d = 0; d < Dh; ++d) {
            dq[d] += ds * k[d];
            dk[d] += ds * q[d];
            dv[d] += pj * dO16[d];
          }
        }
      }
  if (in.size() == 3)
    return {g[0], g[1], g[2]};
  // Packed as the forward's qkv [B, N, 3D].
  EvalTensor packed{in[0].shape, std::vector<double>(in[0].data.size())};
  for (int64_t r = 0; r < B * N; ++r)
    for (int w = 0; w < 3; ++w)
      std::copy_n(&g[w].data[r * D], D, &packed.data[r * 3 * D + w * D]);
  return {packed};
}

// dW [out, in] = dY^T X over every leading dim.
EvalTensor linearGradWeightD(const EvalTensor &dy, const EvalTensor &x,
                             const Shape &shape) {
  const int64_t out = dy.shape.back(), in = x.shape.back(),
                rows = out ? dy.numElements() / out : 0;
  EvalTensor dw{shape, std::vector<double>(out * in, 0.0)};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out; ++j)
      for (int64_t i = 0; i < in; ++i)
        dw.data[j * in + i] += dy.data[r * out + j] * x.data[r * in + i];
  return dw;
}

EvalTensor bf16Rounded(EvalTensor t) {
  for (double &v : t.data)
    v = bf16Round(v);
  return t;
}

// Layer norm's dx over rows of n (statistics from x): dx_hat = dxhat(row,
// k, dy); with dxhat null, x_hat itself (the normalized x).
EvalTensor layerNormGrad(const EvalTensor &dy, const EvalTensor &x, int64_t n,
                         double eps,
                         std::function<double(int64_t, int64_t, double)> dxhat) {
  int64_t rows = x.numElements() / n;
  EvalTensor dx = x;
  std::vector<double> xhat(n), gx(n);
  for (int64_t r = 0; r < rows; ++r) {
    const double *v = &x.data[r * n], *g = &dy.data[r * n];
    double mean = 0, var = 0;
    for (int64_t k = 0; k < n; ++k)
      mean += v[k];
    mean /= n;
    for (int64_t k = 0; k < n; ++k)
      var += (v[k] - mean) * (v[k] - mean);
    double rstd = 1.0 / std::sqrt(var / n + eps), m1 = 0, m2 = 0;
    for (int64_t k = 0; k < n; ++k) {
      xhat[k] = (v[k] - mean) * rstd;
      gx[k] = dxhat ? dxhat(r, k, g[k]) : 0.0;
      m1 += gx[k];
      m2 += gx[k] * xhat[k];
    }
    m1 /= n;
    m2 /= n;
    for (int64_t k = 0; k < n; ++k)
      dx.data[r * n + k] = dxhat ? rstd * (gx[k] - m1 - xhat[k] * m2) : xhat[k];
  }
  return dx;
}

} // namespace

bool evalBackwardOp(Operation *op, Env &env) {
  auto set = [&](Value v, EvalTensor t) { env[v] = std::move(t); };
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case<LinearGradInputOp>([&](LinearGradInputOp o) {
        set(o.getResult(), linearGradInputD(get(env, o.getGrad()),
                                            get(env, o.getWeight()),
                                            shapeOf(o.getResult())));
        return true;
      })
      .Case<LinearGradWeightOp>([&](LinearGradWeightOp o) {
        set(o.getResult(), linearGradWeightD(get(env, o.getGrad()),
                                             get(env, o.getInput()),
                                             shapeOf(o.getResult())));
        return true;
      })
      .Case<LayerNormGradOp>([&](LayerNormGradOp o) {
        const EvalTensor &dy = get(env, o.getGrad()), &x = get(env, o.getInput());
        const EvalTensor *w = o.getWeight() ? &get(env, o.getWeight()) : nullptr;
        int64_t n = product(x.shape, o.getAxis());
        set(o.getResult(),
            layerNormGrad(dy, x, n, o.getEpsilon().convertToDouble(),
                          [&](int64_t, int64_t k, double g) {
                            return g * (w ? w->data[k] : 1.0);
                          }));
        return true;
      })
      .Case<ModulatedLayerNormGradOp>([&](ModulatedLayerNormGradOp o) {
        // dshift, dscale as modulate_grad's from x_hat; dx as layer norm's
        // from dy (1 + scale)
        const EvalTensor &dy = get(env, o.getGrad()), &x = get(env, o.getInput()),
                         &sc = get(env, o.getScale());
        int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2];
        double eps = o.getEpsilon().convertToDouble();
        EvalTensor dx = layerNormGrad(dy, x, D, eps, [&](int64_t r, int64_t k, double g) {
          return g * (1.0 + sc.data[(r / N) * D + k]);
        });
        EvalTensor xhat = layerNormGrad(dy, x, D, eps, nullptr);
        EvalTensor dsh = zerosLike(o.getShiftGrad()), dsc = zerosLike(o.getScaleGrad());
        for (int64_t b = 0; b < B; ++b)
          for (int64_t n = 0; n < N; ++n)
            for (int64_t d = 0; d < D; ++d) {
              int64_t i = (b * N + n) * D + d;
              dsh.data[b * D + d] += dy.data[i];
              dsc.data[b * D + d] += dy.data[i] * xhat.data[i];
            }
        set(o.getInputGrad(), std::move(dx));
        set(o.getShiftGrad(), std::move(dsh));
        set(o.getScaleGrad(), std::move(dsc));
        return true;
      })
      .Case<ModulateGradOp>([&](ModulateGradOp o) {
        const EvalTensor &dy = get(env, o.getGrad()), &x = get(env, o.getInput()),
                         &sc = get(env, o.getScale());
        int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2];
        EvalTensor dx = x, dsh = zerosLike(o.getShiftGrad()),
                   dsc = zerosLike(o.getScaleGrad());
        for (int64_t b = 0; b < B; ++b)
          for (int64_t n = 0; n < N; ++n)
            for (int64_t d = 0; d < D; ++d) {
              int64_t i = (b * N + n) * D + d;
              dx.data[i] = dy.data[i] * (1.0 + sc.data[b * D + d]);
              dsh.data[b * D + d] += dy.data[i];
              dsc.data[b * D + d] += dy.data[i] * x.data[i];
            }
        set(o.getInputGrad(), std::move(dx));
        set(o.getShiftGrad(), std::move(dsh));
        set(o.getScaleGrad(), std::move(dsc));
        return true;
      })
      .Case<SiluGradOp>([&](SiluGradOp o) {
        set(o.getResult(),
            elementwise({&get(env, o.getGrad()), &get(env, o.getInput())},
                        shapeOf(o.getResult()), [](const double *v) {
                          double s = 1.0 / (1.0 + std::exp(-v[1]));
                          return v[0] * s * (1.0 + v[1] * (1.0 - s));
                        }));
        return true;
      })
      .Case<GeluGradOp>([&](GeluGradOp o) {
        bool tanhApprox = o.getApproximate() == "tanh";
        set(o.getResult(),
            elementwise({&get(env, o.getGrad()), &get(env, o.getInput())},
                        shapeOf(o.getResult()), [&](const double *v) {
                          return v[0] * geluDerivative(v[1], tanhApprox);
                        }));
        return true;
      })
      .Case<GatedResidualGradOp>([&](GatedResidualGradOp o) {
        const EvalTensor &dy = get(env, o.getGrad()), &g = get(env, o.getGate()),
                         &h = get(env, o.getBranch());
        int64_t B = h.shape[0], N = h.shape[1], D = h.shape[2];
        EvalTensor dg{shapeOf(o.getGateGrad()), std::vector<double>(B * D, 0.0)};
        EvalTensor dh = h;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t n = 0; n < N; ++n)
            for (int64_t d = 0; d < D; ++d) {
              const int64_t i = (b * N + n) * D + d;
              dg.data[b * D + d] += dy.data[i] * h.data[i];
              dh.data[i] = dy.data[i] * g.data[b * D + d];
            }
        set(o.getGateGrad(), std::move(dg));
        set(o.getBranchGrad(), std::move(dh));
        return true;
      })
      // Epilogue-fused ops: the GEMM, then the elementwise op, in float64.
      .Case<LinearGeluOp>([&](LinearGeluOp o) {
        EvalTensor pre = linearD(get(env, o.getInput()), get(env, o.getWeight()),
                                 o.getBias() ? &get(env, o.getBias()) : nullptr,
                                 shapeOf(o.getPreact()));
        EvalTensor y = elementwise({&pre}, pre.shape, [](const double *v) {
          const double x = v[0];
          return 0.5 * x *
                 (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        });
        set(o.getResult(), std::move(y));
        set(o.getPreact(), std::move(pre));
        return true;
      })
      // bf16 rounds the product's operands only (the op is kept out of the
      // interpreter's operand rounding): db sums dY as the reduce_sum did.
      .Case<LinearGradWeightBiasOp>([&](LinearGradWeightBiasOp o) {
        const EvalTensor &dy = get(env, o.getGrad()), &x = get(env, o.getInput());
        const bool bf16 = bf16Precision(o);
        set(o.getWeightGrad(),
            linearGradWeightD(bf16 ? bf16Rounded(dy) : dy, bf16 ? bf16Rounded(x) : x,
                              shapeOf(o.getWeightGrad())));
        const int64_t out = dy.shape.back(), rows = out ? dy.numElements() / out : 0;
        EvalTensor db{shapeOf(o.getBiasGrad()), std::vector<double>(out, 0.0)};
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < out; ++j)
            db.data[j] += dy.data[r * out + j];
        set(o.getBiasGrad(), std::move(db));
        return true;
      })
      .Case<LinearGradInputGeluOp>([&](LinearGradInputGeluOp o) {
        const EvalTensor &pre = get(env, o.getPreact());
        EvalTensor dx = linearGradInputD(get(env, o.getGrad()), get(env, o.getWeight()),
                                         shapeOf(o.getResult()));
        for (size_t i = 0; i < dx.data.size(); ++i)
          dx.data[i] *= geluDerivative(pre.data[i], true);
        set(o.getResult(), std::move(dx));
        return true;
      })
      .Case<SoftmaxGradOp>([&](SoftmaxGradOp o) {
        const EvalTensor &dy = get(env, o.getGrad()), &y = get(env, o.getOutput());
        int64_t axis = o.getAxis(), outer = product(y.shape, 0, axis),
                n = y.shape[axis], inner = product(y.shape, axis + 1);
        EvalTensor dx = y;
        for (int64_t a = 0; a < outer; ++a)
          for (int64_t c = 0; c < inner; ++c) {
            double dot = 0;
            for (int64_t k = 0; k < n; ++k) {
              int64_t i = (a * n + k) * inner + c;
              dot += dy.data[i] * y.data[i];
            }
            for (int64_t k = 0; k < n; ++k) {
              int64_t i = (a * n + k) * inner + c;
              dx.data[i] = y.data[i] * (dy.data[i] - dot);
            }
          }
        set(o.getResult(), std::move(dx));
        return true;
      })
      .Case<AttentionGradOp>([&](AttentionGradOp o) {
        std::vector<EvalTensor> in;
        for (Value v : o.getInputs())
          in.push_back(get(env, v));
        std::vector<EvalTensor> g = attentionGrad(get(env, o.getGrad()), in, o.getNumHeads(),
                                                  o.getScale().convertToDouble(),
                                                  bf16Precision(o));
        for (auto [r, t] : llvm::zip(o.getGrads(), g))
          set(r, std::move(t));
        return true;
      })
      .Case<MseLossGradOp>([&](MseLossGradOp o) {
        const EvalTensor &p = get(env, o.getPrediction());
        double k = 2.0 * get(env, o.getGrad()).data.at(0) /
                   static_cast<double>(p.data.size());
        set(o.getResult(),
            elementwise({&p, &get(env, o.getTarget())}, p.shape,
                        [&](const double *v) { return k * (v[0] - v[1]); }));
        return true;
      })
      .Case<ScatterAddOp>([&](ScatterAddOp o) {
        const EvalTensor &dy = get(env, o.getGrad()), &idx = get(env, o.getIndices());
        EvalTensor r = zerosLike(o.getResult());
        int64_t axis = o.getAxis(), dim = r.shape[axis],
                outer = product(r.shape, 0, axis), inner = product(r.shape, axis + 1);
        int64_t src = 0;
        for (int64_t i = 0; i < outer; ++i)
          for (double v : idx.data) {
            int64_t k = static_cast<int64_t>(v);
            if (k < -dim || k >= dim)
              fail("scatter index out of range");
            if (k < 0)
              k += dim;
            for (int64_t j = 0; j < inner; ++j)
              r.data[(i * dim + k) * inner + j] += dy.data[src++];
          }
        set(o.getResult(), std::move(r));
        return true;
      })
      .Case<SliceGradOp>([&](SliceGradOp o) {
        const EvalTensor &dy = get(env, o.getGrad());
        EvalTensor r = zerosLike(o.getResult());
        Shape in = stridesOf(r.shape), st(r.shape.size());
        int64_t base = 0;
        for (size_t d = 0; d < r.shape.size(); ++d) {
          st[d] = in[d] * o.getSteps()[d];
          base += o.getStarts()[d] * in[d];
        }
        forEachBroadcast(dy.shape, {st}, [&](int64_t flat, const int64_t *off) {
          r.data[base + off[0]] = dy.data[flat];
        });
        set(o.getResult(), std::move(r));
        return true;
      })
      .Case<AdamWOp>([&](AdamWOp o) {
        unsigned n = o.getNumParams();
        double lr = o.getLr().convertToDouble(), b1 = o.getBeta1().convertToDouble(),
               b2 = o.getBeta2().convertToDouble(), eps = o.getEps().convertToDouble(),
               wd = o.getWeightDecay().convertToDouble();
        double t = get(env, o.getStep()).data.at(0) + 1;
        double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
        for (unsigned i = 0; i < n; ++i) {
          EvalTensor p = get(env, o.getTensors()[i]), m = get(env, o.getTensors()[2 * n + i]),
                     v = get(env, o.getTensors()[3 * n + i]);
          const EvalTensor &g = get(env, o.getTensors()[n + i]);
          for (size_t k = 0; k < p.data.size(); ++k) {
            p.data[k] *= 1 - lr * wd;
            m.data[k] = b1 * m.data[k] + (1 - b1) * g.data[k];
            v.data[k] = b2 * v.data[k] + (1 - b2) * g.data[k] * g.data[k];
            double denom = std::sqrt(v.data[k]) / std::sqrt(bc2) + eps;
            p.data[k] -= lr / bc1 * m.data[k] / denom;
          }
          set(o.getUpdated()[i], std::move(p));
          set(o.getUpdated()[n + i], std::move(m));
          set(o.getUpdated()[2 * n + i], std::move(v));
        }
        return true;
      })
      .Case<AdamOp>([&](AdamOp o) {
        // The ONNX operator's pseudo code, line by line.
        unsigned n = o.getNumParams();
        double alpha = o.getAlpha().convertToDouble(), beta = o.getBeta().convertToDouble(),
               eps = o.getEpsilon().convertToDouble(),
               nc = o.getNormCoefficient().convertToDouble(),
               post = o.getNormCoefficientPost().convertToDouble();
        double r = get(env, o.getR()).data.at(0), t = get(env, o.getT()).data.at(0);
        double rAdjusted =
            t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
        for (unsigned i = 0; i < n; ++i) {
          EvalTensor x = get(env, o.getTensors()[i]), v = get(env, o.getTensors()[2 * n + i]),
                     h = get(env, o.getTensors()[3 * n + i]);
          const EvalTensor &g = get(env, o.getTensors()[n + i]);
          for (size_t k = 0; k < x.data.size(); ++k) {
            double gr = nc * x.data[k] + g.data[k];
            v.data[k] = alpha * v.data[k] + (1 - alpha) * gr;
            h.data[k] = beta * h.data[k] + (1 - beta) * gr * gr;
            double xNew = x.data[k] - rAdjusted * v.data[k] / (std::sqrt(h.data[k]) + eps);
            x.data[k] = (1 - post) * xNew;
          }
          set(o.getUpdated()[i], std::move(x));
          set(o.getUpdated()[n + i], std::move(v));
          set(o.getUpdated()[2 * n + i], std::move(h));
        }
        return true;
      })
      .Case<GradNormOp>([&](GradNormOp o) {
        double sum = 0;
        for (Value g : o.getGrads())
          for (double x : get(env, g).data)
            sum += x * x;
        EvalTensor r = zerosLike(o.getNorm());
        r.data.at(0) = static_cast<float>(std::sqrt(sum));  // an f32 result
        set(o.getNorm(), std::move(r));
        return true;
      })
      .Case<GradClipOp>([&](GradClipOp o) {
        const double maxNorm = o.getMaxGradNorm().convertToDouble();
        const double norm = get(env, o.getNorm()).data.at(0);
        const double coef = maxNorm > 0 ? std::min(1.0, maxNorm / (norm + 1e-6)) : 1.0;
        for (auto [g, c] : llvm::zip(o.getGrads(), o.getClipped())) {
          EvalTensor r = get(env, g);
          for (double &x : r.data)
            x *= coef;
          set(c, std::move(r));
        }
        return true;
      })
      .Case<GradAccumulateOp>([&](GradAccumulateOp o) {
        const double i = o.getMicroBatch().convertToDouble(),
                     k = o.getMicroBatches().convertToDouble();
        EvalTensor g = get(env, o.getGrad()), acc = get(env, o.getAcc());
        for (size_t e = 0; e < g.data.size() && k > 1; ++e) {
          if (i == 0)
            acc.data[e] = g.data[e];
          else if (i < k - 1)
            acc.data[e] += g.data[e];
          else
            g.data[e] = (acc.data[e] + g.data[e]) * (1 / k);
        }
        set(o.getNewGrad(), std::move(g));
        set(o.getNewAcc(), std::move(acc));
        return true;
      })
      .Case<SgdOp>([&](SgdOp o) {
        unsigned n = o.getTensors().size() / 2;
        double lr = o.getLr().convertToDouble(),
               wd = o.getWeightDecay().convertToDouble();
        for (unsigned i = 0; i < n; ++i) {
          EvalTensor p = get(env, o.getTensors()[i]);
          const EvalTensor &g = get(env, o.getTensors()[n + i]);
          for (size_t k = 0; k < p.data.size(); ++k)
            p.data[k] -= lr * (g.data[k] + wd * p.data[k]);
          set(o.getUpdated()[i], std::move(p));
        }
        return true;
      })
      .Default([](Operation *) { return false; });
}

} // namespace hc::eval
