// Graph-op entry points (graph_ops.h), part 2: the ops that sit on the
// HCOps kernels of kernels.h (GEMM, flash attention, layer norm, GELU, SiLU,
// softmax, MSE, SGD), plus AdamW (own loop, see there); adaLN's ops are in
// graph_ops_adaln.cpp.
// A strided input a kernel cannot address is packed into a contiguous
// temporary (or copied into the output when the kernel may run in place);
// cases the kernels do not cover (softmax over a non-last axis, exact-erf
// GELU, non-f32 data) run generic double loops.
#include "graph_ops_util.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace hc::rt::gop {
namespace {

constexpr double kSqrt2OverPiD = 0.79788456080286535588;
constexpr double kGeluCD = 0.044715;

double geluTanhD(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPiD * (x + kGeluCD * x * x * x)));
}
double geluErfD(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double geluGradD(double x, bool tanhApprox) {
  if (tanhApprox) {
    double t = std::tanh(kSqrt2OverPiD * (x + kGeluCD * x * x * x));
    return 0.5 * (1 + t) +
           0.5 * x * (1 - t * t) * kSqrt2OverPiD * (1 + 3 * kGeluCD * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
         x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}
double siluD(double x) { return x / (1.0 + std::exp(-x)); }
double siluGradD(double dy, double x) {
  double s = 1.0 / (1.0 + std::exp(-x));
  return dy * s * (1.0 + x * (1.0 - s));
}

// y[i] = f(x[i]) (or f(a[i], b[i])) over same-shape strided inputs into a
// contiguous output, computed in double: the fallback of the kernel ops.
template <class F>
void mapD(const hcrt_tensor *const *in, int nin, hcrt_tensor &out, double cost,
          hc_threads th, F &&f) {
  const int R = out.rank;
  int64_t st[3][HCRT_MAX_RANK];
  const int64_t *sts[3];
  contiguousStrides(R, out.shape, st[0]);
  sts[0] = st[0];
  for (int k = 0; k < nin; ++k) {
    bcastStrides(*in[k], R, out.shape, st[k + 1]);
    sts[k + 1] = st[k + 1];
  }
  Loop L = makeLoop(R, out.shape, nin + 1, sts);
  const int r = L.rank - 1;
  parFor(th, L.total, 64, cost, [&](int64_t b, int64_t e) {
    loopRange(L, b, e, [&](const int64_t *off, int64_t n) {
      double v[2] = {0, 0};
      for (int64_t i = 0; i < n; ++i) {
        for (int k = 0; k < nin; ++k)
          v[k] = loadD(in[k]->data, in[k]->dtype, off[k + 1] + i * L.st[k + 1][r]);
        storeD(out.data, out.dtype, off[0] + i, f(v));
      }
    });
  });
}

// float32 input `x` as a contiguous array of the output's size: x itself,
// or copied into the output buffer (for kernels that may run in place).
const float *inPlaceSource(const hcrt_tensor &x, hcrt_tensor &out,
                           hc_threads th) {
  if (isContiguous(x))
    return static_cast<const float *>(x.data);
  copyToContiguous(x, out.data, th);
  return static_cast<const float *>(out.data);
}

// ------------------------------------------------------------ softmax ----
// Generic softmax / softmax backward along `axis` of strided views, double.
void softmaxGeneric(const hcrt_tensor &x, int axis, hcrt_tensor &out,
                    hc_threads th) {
  const int R = x.rank;
  int64_t shape[HCRT_MAX_RANK], so[HCRT_MAX_RANK], sx[HCRT_MAX_RANK];
  int64_t ost[HCRT_MAX_RANK];
  contiguousStrides(R, x.shape, ost);
  int r = 0;
  for (int d = 0; d < R; ++d)
    if (d != axis) {
      shape[r] = x.shape[d], so[r] = ost[d], sx[r] = x.strides[d];
      ++r;
    }
  const int64_t *sts[2] = {so, sx};
  Loop L = makeLoop(r, shape, 2, sts);
  const int64_t n = x.shape[axis], ax = x.strides[axis], ao = ost[axis];
  const float *px = static_cast<const float *>(x.data);
  float *po = static_cast<float *>(out.data);
  parFor(th, L.total, 1, static_cast<double>(n) * 8, [&](int64_t b, int64_t e) {
    loopRange(L, b, e, [&](const int64_t *off, int64_t cnt) {
      for (int64_t i = 0; i < cnt; ++i) {
        const float *xi = px + off[1] + i * L.st[1][L.rank - 1];
        float *oi = po + off[0] + i * L.st[0][L.rank - 1];
        double m = -INFINITY, sum = 0;
        for (int64_t k = 0; k < n; ++k)
          m = std::max(m, static_cast<double>(xi[k * ax]));
        for (int64_t k = 0; k < n; ++k)
          sum += std::exp(xi[k * ax] - m);
        for (int64_t k = 0; k < n; ++k)
          oi[k * ao] = static_cast<float>(std::exp(xi[k * ax] - m) / sum);
      }
    });
  });
}

void softmaxGradGeneric(const hcrt_tensor &dy, const hcrt_tensor &y, int axis,
                        hcrt_tensor &out, hc_threads th) {
  const int R = y.rank;
  int64_t shape[HCRT_MAX_RANK], so[HCRT_MAX_RANK], sy[HCRT_MAX_RANK],
      sg[HCRT_MAX_RANK], ost[HCRT_MAX_RANK];
  contiguousStrides(R, y.shape, ost);
  int r = 0;
  for (int d = 0; d < R; ++d)
    if (d != axis) {
      shape[r] = y.shape[d], so[r] = ost[d], sy[r] = y.strides[d],
      sg[r] = dy.strides[d];
      ++r;
    }
  const int64_t *sts[3] = {so, sy, sg};
  Loop L = makeLoop(r, shape, 3, sts);
  const int64_t n = y.shape[axis], ay = y.strides[axis], ag = dy.strides[axis],
                ao = ost[axis];
  const float *py = static_cast<const float *>(y.data);
  const float *pg = static_cast<const float *>(dy.data);
  float *po = static_cast<float *>(out.data);
  const int q = L.rank - 1;
  parFor(th, L.total, 1, static_cast<double>(n) * 2, [&](int64_t b, int64_t e) {
    loopRange(L, b, e, [&](const int64_t *off, int64_t cnt) {
      for (int64_t i = 0; i < cnt; ++i) {
        const float *yi = py + off[1] + i * L.st[1][q];
        const float *gi = pg + off[2] + i * L.st[2][q];
        float *oi = po + off[0] + i * L.st[0][q];
        double dot = 0;
        for (int64_t k = 0; k < n; ++k)
          dot += static_cast<double>(gi[k * ag]) * yi[k * ay];
        for (int64_t k = 0; k < n; ++k)
          oi[k * ao] = static_cast<float>(yi[k * ay] * (gi[k * ag] - dot));
      }
    });
  });
}

int normAxis(int64_t axis, int rank) {
  if (axis < 0)
    axis += rank;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(axis, 0), rank));
}

} // namespace
} // namespace hc::rt::gop

using namespace hc::rt;
using namespace hc::rt::gop;

extern "C" {

// ----------------------------------------------------------- activations ----
HCRT_OP_DEF(silu) {
  (void)nin, (void)nout, (void)attrs;
  const hcrt_tensor &x = ins[0];
  hcrt_tensor &y = outs[0];
  if (x.dtype == HCRT_F32 && y.dtype == HCRT_F32) {
    const float *px = inPlaceSource(x, y, threads);
    hc_silu_fwd(numel(y), px, static_cast<float *>(y.data), threads);
    return;
  }
  const hcrt_tensor *in[1] = {&x};
  mapD(in, 1, y, 8, threads, [](const double *v) { return siluD(v[0]); });
}

// ints[0]: 1 tanh approximation (HCOps kernel), 0 exact erf (double loop).
HCRT_OP_DEF(gelu) {
  (void)nin, (void)nout;
  const hcrt_tensor &x = ins[0];
  hcrt_tensor &y = outs[0];
  const bool tanhApprox = attrInt(attrs, 0, 1) != 0;
  if (tanhApprox && x.dtype == HCRT_F32 && y.dtype == HCRT_BF16) {  // bf16 storage
    Buf<float> bx;
    hc_gelu_tanh_fwd_bf16(numel(y), contiguousF32(x, bx, threads),
                          static_cast<uint16_t *>(y.data), threads);
    return;
  }
  if (tanhApprox && x.dtype == HCRT_F32 && y.dtype == HCRT_F32) {
    const float *px = inPlaceSource(x, y, threads);
    hc_gelu_tanh_fwd(numel(y), px, static_cast<float *>(y.data), threads);
    return;
  }
  const hcrt_tensor *in[1] = {&x};
  if (tanhApprox)
    mapD(in, 1, y, 8, threads, [](const double *v) { return geluTanhD(v[0]); });
  else
    mapD(in, 1, y, 8, threads, [](const double *v) { return geluErfD(v[0]); });
}

HCRT_OP_DEF(silu_grad) {
  (void)nin, (void)nout, (void)attrs;
  const hcrt_tensor &dy = ins[0], &x = ins[1];
  hcrt_tensor &dx = outs[0];
  if (dy.dtype == HCRT_F32 && x.dtype == HCRT_F32 && dx.dtype == HCRT_F32) {
    Buf<float> bx;
    const float *px = contiguousF32(x, bx, threads);
    const float *pg = inPlaceSource(dy, dx, threads);  // dx may alias dy
    hc_silu_bwd(numel(dx), px, pg, static_cast<float *>(dx.data), threads);
    return;
  }
  const hcrt_tensor *in[2] = {&dy, &x};
  mapD(in, 2, dx, 8, threads, [](const double *v) { return siluGradD(v[0], v[1]); });
}

HCRT_OP_DEF(gelu_grad) {
  (void)nin, (void)nout;
  const hcrt_tensor &dy = ins[0], &x = ins[1];
  hcrt_tensor &dx = outs[0];
  const bool tanhApprox = attrInt(attrs, 0, 1) != 0;
  if (tanhApprox && dy.dtype == HCRT_F32 && x.dtype == HCRT_F32 &&
      dx.dtype == HCRT_F32) {
    Buf<float> bx;
    const float *px = contiguousF32(x, bx, threads);
    const float *pg = inPlaceSource(dy, dx, threads);  // dx may alias dy
    hc_gelu_tanh_bwd(numel(dx), px, pg, static_cast<float *>(dx.data), threads);
    return;
  }
  const hcrt_tensor *in[2] = {&dy, &x};
  mapD(in, 2, dx, 8, threads, [tanhApprox](const double *v) {
    return v[0] * geluGradD(v[1], tanhApprox);
  });
}

// --------------------------------------------------------------- softmax ----
// Last axis: hc_softmax_fwd over rows (input copied into the output first
// when its rows are not evenly strided); other axes: double loop.
HCRT_OP_DEF(softmax) {
  (void)nin, (void)nout;
  const hcrt_tensor &x = ins[0];
  hcrt_tensor &y = outs[0];
  if (numel(y) <= 0)
    return;
  const int axis = normAxis(attrInt(attrs, 0, x.rank - 1), x.rank);
  if (axis == x.rank - 1 && x.dtype == HCRT_F32) {
    const int64_t cols = x.shape[axis], rows = numel(y) / cols;
    Mat m;
    const float *px;
    int64_t ld = cols;
    if (rowView(x, axis, m)) {
      px = static_cast<const float *>(x.data);
      ld = m.rs;
    } else {
      copyToContiguous(x, y.data, threads);
      px = static_cast<const float *>(y.data);
    }
    hc_softmax_fwd(rows, cols, px, ld, static_cast<float *>(y.data), cols,
                   threads);
    return;
  }
  softmaxGeneric(x, axis, y, threads);
}

HCRT_OP_DEF(softmax_grad) {
  (void)nin, (void)nout;
  const hcrt_tensor &dy = ins[0], &y = ins[1];
  hcrt_tensor &dx = outs[0];
  if (numel(dx) <= 0)
    return;
  const int axis = normAxis(attrInt(attrs, 0, y.rank - 1), y.rank);
  if (axis == y.rank - 1) {
    const int64_t cols = y.shape[axis], rows = numel(dx) / cols;
    Mat my, mg;
    Buf<float> by;
    const float *py = static_cast<const float *>(y.data);
    int64_t ldy = cols, ldg = cols;
    if (rowView(y, axis, my))
      ldy = my.rs;
    else
      py = contiguousF32(y, by, threads);
    const float *pg = static_cast<const float *>(dy.data);
    if (rowView(dy, axis, mg)) {
      ldg = mg.rs;
    } else {
      copyToContiguous(dy, dx.data, threads);  // dx may alias dy
      pg = static_cast<const float *>(dx.data);
    }
    hc_softmax_bwd(rows, cols, py, ldy, pg, ldg, static_cast<float *>(dx.data),
                   cols, threads);
    return;
  }
  softmaxGradGeneric(dy, y, axis, dx, threads);
}

// ------------------------------------------------------------ layer norm ----
HCRT_OP_DEF(layer_norm) {
  (void)nout;
  const hcrt_tensor &x = ins[0];
  hcrt_tensor &y = outs[0];
  const int axis = normAxis(attrInt(attrs, 0, x.rank - 1), x.rank);
  const int64_t D = prod(x.shape, axis, x.rank), rows = prod(x.shape, 0, axis);
  if (rows <= 0 || D <= 0)
    return;
  hc_layernorm_args a{};
  a.rows = rows, a.D = D;
  a.x = rowSource(x, axis, y.data, threads, a.ldx);  // y may alias x
  a.y = static_cast<float *>(y.data), a.ldy = D;
  Buf<float> bw, bb;
  if (nin > 1 && ins[1].data)
    a.gamma = contiguousF32(ins[1], bw, threads);
  if (nin > 2 && ins[2].data)
    a.beta = contiguousF32(ins[2], bb, threads);
  a.eps = static_cast<float>(attrFloat(attrs, 0, 1e-5));
  hc_layernorm_fwd(&a, threads);
}

// dx of layer norm; mean and rstd recomputed from x as the forward computes
// them (float), a chunk of rows at a time (hc_layernorm_bwd).
HCRT_OP_DEF(layer_norm_grad) {
  (void)nout;
  const hcrt_tensor &dy = ins[0], &x = ins[1];
  hcrt_tensor &dx = outs[0];
  const int axis = normAxis(attrInt(attrs, 0, x.rank - 1), x.rank);
  const int64_t D = prod(x.shape, axis, x.rank), rows = prod(x.shape, 0, axis);
  if (rows <= 0 || D <= 0)
    return;
  const double eps = attrFloat(attrs, 0, 1e-5);
  hc_layernorm_bwd_args a{};
  a.rows = rows, a.D = D;
  Buf<float> bx, bw;
  a.x = rowSource(x, axis, bx, threads, a.ldx);
  a.dy = rowSource(dy, axis, dx.data, threads, a.lddy);  // dx may alias dy
  a.dx = static_cast<float *>(dx.data), a.lddx = D;
  if (nin > 2 && ins[2].data)
    a.gamma = contiguousF32(ins[2], bw, threads);
  a.eps = eps;  // mean and rstd recomputed, a chunk of rows at a time
  hc_layernorm_bwd(&a, threads);
}

// ------------------------------------------------------------- attention ----
// A [B, T, F] tensor whose rows are read F at a time: its last dim must be
// unit stride (a broadcast or transposed view is packed first).
static hcrt_tensor rowsOf(const hcrt_tensor &t, Buf<float> &buf, hc_threads th) {
  if (t.strides[2] == 1 || t.shape[2] <= 1)
    return t;
  float *p = buf.alloc(numel(t));
  copyToContiguous(t, p, th);
  return asContiguous(t, p);
}

// q, k, v read in place: from one qkv [B, N, 3D] laid out (3, heads, Dh)
// along the last dim (nin 1), or from q [B, N, D], k and v [B, L, D] (nin
// 3, any batch and token strides: k and v may be views of one packed kv).
static void attentionArgs(const hcrt_tensor *ins, int64_t nin, int64_t heads, double scale,
                          bool bf16, Buf<float> (&buf)[3], hc_threads th,
                          hc_attention_args &a) {
  if (heads <= 0)
    heads = 1;
  a.heads = heads;
  a.scale = static_cast<float>(scale);
  a.bf16 = bf16;
  // bf16 storage (kernels.def's HCRT_BF16_SLOTS): all of q, k, v bf16, each
  // read where it lies (rows of unit stride), and only by bf16 products.
  a.qkv_bf16 = ins[0].dtype == HCRT_BF16;
  for (int64_t i = 0; i < nin; ++i)
    if ((ins[i].dtype == HCRT_BF16) != (a.qkv_bf16 != 0) ||
        (a.qkv_bf16 && (!bf16 || (ins[i].strides[2] != 1 && ins[i].shape[2] > 1))))
      contractViolation("attention: bf16 q, k, v need all three bf16, rows of unit "
                        "stride and precision bf16");
  if (nin == 1) {
    const hcrt_tensor qkv = rowsOf(ins[0], buf[0], th);
    const int64_t D = qkv.shape[2] / 3;
    const float *p = static_cast<const float *>(qkv.data);
    a.batch = qkv.shape[0], a.Tq = a.Tk = qkv.shape[1], a.Dh = D / heads;
    a.q = p;
    if (a.qkv_bf16) {
      const uint16_t *h = static_cast<const uint16_t *>(qkv.data);
      a.k = reinterpret_cast<const float *>(h + D), a.v = reinterpret_cast<const float *>(h + 2 * D);
    } else {
      a.k = p + D, a.v = p + 2 * D;
    }
    a.q_sb = a.k_sb = a.v_sb = qkv.strides[0];
    a.q_st = a.k_st = a.v_st = qkv.strides[1];
    a.q_sh = a.k_sh = a.v_sh = a.Dh;
    return;
  }
  const hcrt_tensor q = rowsOf(ins[0], buf[0], th), k = rowsOf(ins[1], buf[1], th),
                    v = rowsOf(ins[2], buf[2], th);
  a.batch = q.shape[0], a.Tq = q.shape[1], a.Tk = k.shape[1], a.Dh = q.shape[2] / heads;
  a.q = static_cast<const float *>(q.data);
  a.k = static_cast<const float *>(k.data);
  a.v = static_cast<const float *>(v.data);
  a.q_sb = q.strides[0], a.q_st = q.strides[1], a.q_sh = a.Dh;
  a.k_sb = k.strides[0], a.k_st = k.strides[1], a.k_sh = a.Dh;
  a.v_sb = v.strides[0], a.v_st = v.strides[1], a.v_sh = a.Dh;
}

// ins: qkv, or q, k, v. outs: the result [B, N, D] and, when given, each
// query row's log-sum-exp of its scaled scores [B, heads, N] (what the
// backward needs besides it).
HCRT_OP_DEF(attention) {
  const int64_t heads = attrInt(attrs, 0, 1);
  const double scale = attrFloat(attrs, 0, 1.0);
  hcrt_tensor &out = outs[0];
  Buf<float> buf[3];
  hc_attention_args a{};
  attentionArgs(ins, nin, heads, scale, attrInt(attrs, 1, 0) != 0, buf, threads, a);
  const int64_t N = a.Tq, D = a.heads * a.Dh;
  a.o = static_cast<float *>(out.data);
  a.o_sb = N * D, a.o_st = D, a.o_sh = a.Dh;
  a.lse = nout > 1 ? static_cast<float *>(outs[1].data) : nullptr;
  hc_flash_attention_fwd(&a, threads);
}

// ins: dOut, the forward's result and log-sum-exp (so the flash backward
// rebuilds each tile's probabilities without re-running the forward), then
// the forward's inputs (qkv, or q, k, v); outs: one gradient per input,
// contiguous, written straight by the kernel. Never an N x L matrix.
HCRT_OP_DEF(attention_grad) {
  (void)nout;
  const int64_t heads = attrInt(attrs, 0, 1);
  const double scale = attrFloat(attrs, 0, 1.0);
  Buf<float> bin[3], bo, bd, bl;
  hc_attention_args a{};
  attentionArgs(ins + 3, nin - 3, heads, scale, attrInt(attrs, 1, 0) != 0, bin, threads, a);
  const int64_t B = a.batch, N = a.Tq, L = a.Tk, D = a.heads * a.Dh;
  if (B <= 0 || N <= 0) {
    // No queries: k and v had no effect, their gradients are zero.
    for (int32_t i = 1; i < nout; ++i)
      std::fill_n(static_cast<float *>(outs[i].data), numel(outs[i]), 0.0f);
    return;
  }
  const hcrt_tensor o = rowsOf(ins[1], bo, threads), g = rowsOf(ins[0], bd, threads);
  a.o = const_cast<float *>(static_cast<const float *>(o.data));
  a.o_sb = o.strides[0], a.o_st = o.strides[1], a.o_sh = a.Dh;
  a.lse = const_cast<float *>(contiguousF32(ins[2], bl, threads));
  a.dout = static_cast<const float *>(g.data);
  a.do_sb = g.strides[0], a.do_st = g.strides[1], a.do_sh = a.Dh;
  a.dq_sh = a.dk_sh = a.dv_sh = a.Dh;
  if (nin - 3 == 1) {
    float *pd = static_cast<float *>(outs[0].data);
    a.dq = pd, a.dk = pd + D, a.dv = pd + 2 * D;
    a.dq_sb = a.dk_sb = a.dv_sb = N * 3 * D;
    a.dq_st = a.dk_st = a.dv_st = 3 * D;
  } else {
    a.dq = static_cast<float *>(outs[0].data);
    a.dk = static_cast<float *>(outs[1].data);
    a.dv = static_cast<float *>(outs[2].data);
    a.dq_sb = N * D, a.dk_sb = a.dv_sb = L * D;
    a.dq_st = a.dk_st = a.dv_st = D;
  }
  hc_flash_attention_bwd(&a, threads);
}

// ------------------------------------------------------------------ loss ----
HCRT_OP_DEF(mse_loss) {
  (void)nin, (void)nout, (void)attrs;
  Buf<float> bp, bt;
  const float *p = contiguousF32(ins[0], bp, threads);
  const float *t = contiguousF32(ins[1], bt, threads);
  const int64_t n = numel(ins[0]);
  float loss = n > 0 ? hc_mse_loss_fwd(n, p, t, threads) : NAN;
  storeD(outs[0].data, outs[0].dtype, 0, loss);
}

HCRT_OP_DEF(mse_loss_grad) {
  (void)nin, (void)nout, (void)attrs;
  const double dloss = loadD(ins[0].data, ins[0].dtype, 0);
  Buf<float> bp, bt;
  const float *p = contiguousF32(ins[1], bp, threads);
  const float *t = contiguousF32(ins[2], bt, threads);
  hc_mse_loss_bwd(numel(ins[1]), p, t, static_cast<float>(dloss),
                  static_cast<float *>(outs[0].data), threads);
}

// ------------------------------------------------------------ optimizers ----
// torch.optim.AdamW in float32 with the hyperparameters' derived scalars
// (1 - beta, bias corrections, lr / bc1) formed in double first, as torch
// forms them from Python floats, then the vectorized kernel of the ISA over
// the flat arena (the same float arithmetic, element by element).
HCRT_OP_DEF(adamw) {
  const int32_t n = (nin - 1) / 4;
  if (nout < 3 * n)
    return;
  const double lr = attrFloat(attrs, 0, 1e-3), b1 = attrFloat(attrs, 1, 0.9),
               b2 = attrFloat(attrs, 2, 0.999), eps = attrFloat(attrs, 3, 1e-8),
               wd = attrFloat(attrs, 4, 1e-2);
  const double t = static_cast<double>(loadI(ins[0].data, ins[0].dtype, 0) + 1);
  const double bc1 = 1.0 - std::pow(b1, t), bc2 = 1.0 - std::pow(b2, t);
  const float decay = static_cast<float>(1.0 - lr * wd);
  const float fb1 = static_cast<float>(b1), omb1 = static_cast<float>(1.0 - b1);
  const float fb2 = static_cast<float>(b2), omb2 = static_cast<float>(1.0 - b2);
  const float stepSize = static_cast<float>(lr / bc1);
  const float bc2sqrt = static_cast<float>(std::sqrt(bc2));
  const float feps = static_cast<float>(eps);
  adamLikeUpdate(ins, 1, n, outs, threads,
                 [&](int64_t b, int64_t e, float *p, const float *g, float *m,
                     float *v) {
                   ops().adamw(e - b, p + b, g + b, m + b, v + b, fb1, omb1,
                               fb2, omb2, feps, decay, stepSize, bc2sqrt);
                 });
}

HCRT_OP_DEF(sgd) {
  const int32_t n = nin / 2;
  if (nout < n)
    return;
  const float lr = static_cast<float>(attrFloat(attrs, 0, 1e-3));
  const float wd = static_cast<float>(attrFloat(attrs, 1, 0.0));
  for (int32_t i = 0; i < n; ++i) {
    float *op = inPlaceState(ins[i], outs[i], threads);
    Buf<float> bg;
    const float *pg = contiguousF32(ins[n + i], bg, threads);
    hc_sgd(numel(ins[i]), op, pg, nullptr, lr, 0.0f, 0.0f, wd, 0, 1, threads);
  }
}

HCRT_OP_DEF(grad_norm) {
  (void)nout, (void)attrs;
  // Per-chunk double sums of squares, added in chunk order afterwards.
  constexpr int64_t kChunk = 1 << 16;
  const OpsTable &o = ops();
  double total = 0;
  for (int32_t i = 0; i < nin; ++i) {
    Buf<float> bx;
    const float *x = contiguousF32(ins[i], bx, threads);
    const int64_t n = numel(ins[i]), chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> part(static_cast<size_t>(chunks), 0.0);
    parFor(threads, chunks, 1, double(kChunk), [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
        part[static_cast<size_t>(c)] = o.sumsq_f64(hi - lo, x + lo);
      }
    });
    for (double p : part)
      total += p;
  }
  storeD(outs[0].data, outs[0].dtype, 0, std::sqrt(total));
}

HCRT_OP_DEF(grad_accumulate) {
  if (nin < 2 || nout < 2)
    return;
  const double i = attrFloat(attrs, 0, 0.0), k = attrFloat(attrs, 1, 1.0);
  float *g = inPlaceState(ins[0], outs[0], threads);
  float *acc = inPlaceState(ins[1], outs[1], threads);
  if (k <= 1)
    return;
  const float inv = static_cast<float>(1.0 / k);
  parFor(threads, numel(outs[0]), 64, 1.0, [&](int64_t b, int64_t e) {
    if (i == 0)
      std::copy(g + b, g + e, acc + b);
    else if (i < k - 1)
      for (int64_t x = b; x < e; ++x)
        acc[x] += g[x];
    else
      for (int64_t x = b; x < e; ++x)
        g[x] = (acc[x] + g[x]) * inv;
  });
}

HCRT_OP_DEF(grad_clip) {
  const int32_t n = nin - 1;
  if (nout < n)
    return;
  const float maxNorm = static_cast<float>(attrFloat(attrs, 0, 0.0));
  const float norm = static_cast<float>(loadD(ins[0].data, ins[0].dtype, 0));
  // PyTorch: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1.
  const float coef = maxNorm > 0 ? std::min(1.0f, maxNorm / (norm + 1e-6f)) : 1.0f;
  for (int32_t i = 0; i < n; ++i) {
    float *g = inPlaceState(ins[1 + i], outs[i], threads);
    if (coef == 1.0f)
      continue;
    parFor(threads, numel(outs[i]), 64, 1.0, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k)
        g[k] *= coef;
    });
  }
}

} // extern "C"
