// Graph-op entry points (graph_ops.h), part 3: the contractions on
// hc_sgemm (linear and its gradients, NumPy matmul) and the GEMMs with a
// fused epilogue the compiler's epilogue fusion asks for (linear_gelu,
// linear_grad_input_gelu). A strided operand the GEMM cannot address is
// packed into a contiguous temporary. Each takes the registry's
// precision flag (ints[0]): 1 runs hc_gemm_bf16 (both GEMM operands
// rounded to bf16, fp32 accumulation), absent or 0 hc_sgemm.
#include "graph_ops_util.h"

#include <algorithm>
#include <string>
#include <vector>

namespace hc::rt::gop {
namespace {

// ---------------------------------------------------------------- GEMM ----
// A logical rows x cols matrix at p with strides (rs, cs), as a GEMM
// operand: row-major (trans 0) or column-major (trans 1) with a leading
// dimension; false when neither fits.
struct GemmOperand {
  const float *p = nullptr;
  int64_t ld = 1;
  int32_t trans = 0;
  bool bf16 = false;  // p points at bf16 elements (hc_sgemm_args::a_bf16)
};

bool gemmOperand(const float *p, int64_t rows, int64_t cols, int64_t rs,
                 int64_t cs, GemmOperand &o) {
  o.p = p;
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<int64_t>(cols, 1))) {
    o.trans = 0;
    o.ld = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
    return true;
  }
  if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<int64_t>(rows, 1))) {
    o.trans = 1;
    o.ld = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
    return true;
  }
  return false;
}

// The operand, or a contiguous packed copy of it in `buf`.
GemmOperand gemmOperandOrPack(const float *p, int64_t rows, int64_t cols,
                              int64_t rs, int64_t cs, Buf<float> &buf,
                              hc_threads th) {
  GemmOperand o;
  if (gemmOperand(p, rows, cols, rs, cs, o))
    return o;
  float *d = buf.alloc(rows * cols);
  const int64_t shape[2] = {rows, cols}, dst[2] = {cols, 1}, src[2] = {rs, cs};
  copyStrided(2, shape, d, dst, p, src, 4, th);
  o.p = d;
  o.trans = 0;
  o.ld = std::max<int64_t>(cols, 1);
  return o;
}

// `t` as a matrix with rows = dims [0, split); a packed copy when its dims
// do not fold.
Mat matOrPack(const hcrt_tensor &t, int split, Buf<float> &buf, hc_threads th,
              const float *&p) {
  Mat m;
  p = static_cast<const float *>(t.data);
  if (matView(t, split, m))
    return m;
  p = contiguousF32(t, buf, th);
  m.rows = prod(t.shape, 0, split);
  m.cols = prod(t.shape, split, t.rank);
  m.rs = m.cols;
  m.cs = 1;
  return m;
}

// The precision flag of a GEMM-class call (kernels.def).
bool bf16Of(const hcrt_attrs *attrs) { return attrInt(attrs, 0, 0) != 0; }

// A bf16 activation (kernels.def's HCRT_BF16_SLOTS: x of linear and of
// its weight gradients) as a GEMM operand, rows = all but its last dim,
// read where it lies: hc-bf16-storage gives such a call precision bf16 and
// a buffer whose dims fold (a contiguous one, or a CFTP cut of its rows).
GemmOperand bf16Operand(const hcrt_tensor &t, bool bf16Call, const char *kernel) {
  Mat m;
  GemmOperand o;
  if (!bf16Call || !matView(t, t.rank - 1, m) ||
      !gemmOperand(static_cast<const float *>(t.data), m.rows, m.cols, m.rs, m.cs, o)) {
    std::string what = std::string(kernel) +
                       ": a bf16 x needs precision bf16 and dims that fold to a matrix";
    contractViolation(what.c_str());
  }
  o.bf16 = true;
  return o;
}
// linear's and linear_gelu's `weight` flag (kernels.def): the compiler says
// the weight's bytes stay the same from call to call (a sampler's).
bool weightConstantOf(const hcrt_attrs *attrs) { return attrInt(attrs, 1, 0) != 0; }

// aSums: op(A)'s row sums too (hc_sgemm_row_sums), or null.
void runGemm(const hc_sgemm_args &g, bool bf16, hc_threads th,
             double *aSums = nullptr) {
  if (bf16 && aSums)
    hc_gemm_bf16_row_sums(&g, aSums, th);
  else if (bf16)
    hc_gemm_bf16(&g, th);
  else if (aSums)
    hc_sgemm_row_sums(&g, aSums, th);
  else
    hc_sgemm(&g, th);
}

// cBf16: c holds bf16 elements (hc_sgemm_args::c_bf16).
void gemm(int64_t M, int64_t N, int64_t K, const GemmOperand &a,
          const GemmOperand &b, float *c, const hc_epilogue *epi, bool bf16,
          hc_threads th, double *aSums = nullptr, bool bConstant = false,
          bool cBf16 = false) {
  if (M <= 0 || N <= 0)
    return;
  hc_sgemm_args g{};
  g.M = M, g.N = N, g.K = K, g.batch = 1;
  g.trans_a = a.trans, g.trans_b = b.trans;
  g.alpha = 1.0f, g.beta = 0.0f;
  g.A = a.p, g.lda = a.ld;
  g.B = b.p, g.ldb = b.ld;
  g.a_bf16 = a.bf16, g.b_bf16 = b.bf16;
  g.C = c, g.ldc = N;
  g.c_bf16 = cBf16 ? 1 : 0;
  g.epi = epi;
  g.b_constant = bConstant ? 1 : 0;
  runGemm(g, bf16, th, aSums);
}

// y [..., out] = x [..., in] W^T (+ b), with `epi` (the bias is added to
// it here when ins[2] is given): linear and linear_gelu. constantW: W's
// packed panels may be kept between calls (read in place only: a packed
// copy of W is this call's own). yBf16: y holds bf16 elements (kernels.def's
// HCRT_BF16_SLOTS: linear's y), each result rounded.
void linearForward(const hcrt_tensor *ins, int32_t nin, float *y,
                   hc_epilogue epi, bool bf16, hc_threads th,
                   bool constantW = false, bool yBf16 = false) {
  const hcrt_tensor &x = ins[0], &w = ins[1];
  Buf<float> bx, bx2, bw, bb;
  const float *px;
  GemmOperand A;
  int64_t M, K;
  const int64_t N = w.shape[0];
  if (x.dtype == HCRT_BF16) {
    A = bf16Operand(x, bf16, "linear");
    M = prod(x.shape, 0, x.rank - 1), K = x.shape[x.rank - 1];
  } else {
    Mat mx = matOrPack(x, x.rank - 1, bx, th, px);
    M = mx.rows, K = mx.cols;
    A = gemmOperandOrPack(px, M, K, mx.rs, mx.cs, bx2, th);
  }
  // B = W^T: logical K x N, element (k, n) = W[n, k].
  GemmOperand Bop = gemmOperandOrPack(static_cast<const float *>(w.data), K, N,
                                      w.strides[1], w.strides[0], bw, th);
  if (nin > 2 && ins[2].data) {
    epi.flags |= HC_EPI_BIAS;
    epi.bias = contiguousF32(ins[2], bb, th);
  }
  gemm(M, N, K, A, Bop, y, epi.flags || epi.preact ? &epi : nullptr, bf16, th,
       nullptr, constantW && Bop.p == w.data, yBf16);
}

// dx [..., in] = dy [..., out] W, with `epi` (or none): linear_grad_input
// and linear_grad_input_gelu.
void linearGradInput(const hcrt_tensor &dy, const hcrt_tensor &w, float *dx,
                     const hc_epilogue *epi, bool bf16, hc_threads th) {
  Buf<float> bg, bg2, bw;
  const float *pg;
  Mat mg = matOrPack(dy, dy.rank - 1, bg, th, pg);
  const int64_t M = mg.rows, K = mg.cols, N = w.shape[1];
  GemmOperand A = gemmOperandOrPack(pg, M, K, mg.rs, mg.cs, bg2, th);
  GemmOperand Bop = gemmOperandOrPack(static_cast<const float *>(w.data), K, N,
                                      w.strides[0], w.strides[1], bw, th);
  gemm(M, N, K, A, Bop, dx, epi, bf16, th);
}

// dw [out, in] = dy^T x over all leading dims; with db, also db [out] =
// dy's column sums (double, in HC_SUM_CHUNK row chunks added in order, as
// reduce_sum's columnSums adds them).
void linearGradWeight(const hcrt_tensor &dy, const hcrt_tensor &x,
                      hcrt_tensor &dw, hcrt_tensor *db, bool bf16, hc_threads th) {
  Buf<float> bg, bx, bg2, bx2;
  const float *pg, *px = nullptr;
  Mat mg = matOrPack(dy, dy.rank - 1, bg, th, pg);
  Mat mx{};
  const bool xBf16 = x.dtype == HCRT_BF16;
  if (!xBf16)
    mx = matOrPack(x, x.rank - 1, bx, th, px);
  const int64_t M = mg.cols, N = x.shape[x.rank - 1], K = mg.rows;
  if (K <= 0 || M <= 0 || N <= 0) {  // no product to read dY: dW = 0
    float *o = static_cast<float *>(dw.data);
    std::fill(o, o + M * N, 0.0f);
    if (db)
      columnSums(pg, 1, 0, K, mg.rs, M, *db, 1.0, th);
    return;
  }
  const int64_t chunks = (K + HC_SUM_CHUNK - 1) / HC_SUM_CHUNK;
  std::vector<double> sums(db ? static_cast<size_t>(chunks * M) : 0, 0.0);
  GemmOperand A = gemmOperandOrPack(pg, M, K, mg.cs, mg.rs, bg2, th);
  GemmOperand Bop = xBf16 ? bf16Operand(x, bf16, "linear_grad_weight")
                          : gemmOperandOrPack(px, K, N, mx.rs, mx.cs, bx2, th);
  gemm(M, N, K, A, Bop, static_cast<float *>(dw.data), nullptr, bf16, th,
       db ? sums.data() : nullptr);
  if (db)
    for (int64_t m = 0; m < M; ++m) {
      double s = 0;
      for (int64_t c = 0; c < chunks; ++c)
        s += sums[static_cast<size_t>(c * M + m)];
      storeD(db->data, db->dtype, m, s);
    }
}

} // namespace
} // namespace hc::rt::gop

using namespace hc::rt;
using namespace hc::rt::gop;

extern "C" {

// ------------------------------------------------------------ contractions ----
// y [..., out] = x [..., in] W^T (+ b), bias through the GEMM epilogue.
HCRT_OP_DEF(linear) {
  (void)nout;
  linearForward(ins, nin, static_cast<float *>(outs[0].data), hc_epilogue{},
                bf16Of(attrs), threads, weightConstantOf(attrs),
                outs[0].dtype == HCRT_BF16);
}

// dx [..., in] = dy [..., out] W.
HCRT_OP_DEF(linear_grad_input) {
  (void)nin, (void)nout;
  linearGradInput(ins[0], ins[1], static_cast<float *>(outs[0].data), nullptr,
                  bf16Of(attrs), threads);
}

// dw [out, in] = dy^T x, summed over all leading dims.
HCRT_OP_DEF(linear_grad_weight) {
  (void)nin, (void)nout;
  linearGradWeight(ins[0], ins[1], outs[0], nullptr, bf16Of(attrs), threads);
}

// dw as linear_grad_weight, and db [out] = dy summed over all leading dims,
// added up by the GEMM as it reads dY (hc_sgemm_row_sums): the same
// bits as reduce_sum's column sums, without their pass over dY.
HCRT_OP_DEF(linear_grad_weight_bias) {
  (void)nin, (void)nout;
  linearGradWeight(ins[0], ins[1], outs[0], &outs[1], bf16Of(attrs), threads);
}

// NumPy matmul: 1-D operands promoted (and their dim dropped), batch dims
// broadcast. One hc_sgemm call per run of evenly strided batch entries.
HCRT_OP_DEF(matmul) {
  (void)nin, (void)nout;
  const bool bf16 = bf16Of(attrs);
  hcrt_tensor a = ins[0], b = ins[1];
  hcrt_tensor &y = outs[0];
  const bool vecA = a.rank == 1, vecB = b.rank == 1;
  Buf<float> ba, bb;
  for (int pass = 0; pass < 2; ++pass) {
    const int64_t M = vecA ? 1 : a.shape[a.rank - 2], K = a.shape[a.rank - 1];
    const int64_t N = vecB ? 1 : b.shape[b.rank - 1];
    const int64_t rsA = vecA ? 0 : a.strides[a.rank - 2], csA = a.strides[a.rank - 1];
    const int64_t rsB = b.strides[vecB ? 0 : b.rank - 2], csB = vecB ? 0 : b.strides[b.rank - 1];
    GemmOperand A, Bop;
    bool okA = gemmOperand(static_cast<const float *>(a.data), M, K, rsA, csA, A);
    bool okB = gemmOperand(static_cast<const float *>(b.data), K, N, rsB, csB, Bop);
    if (!okA || !okB) {
      // Pack the offending operand whole, then retry (contiguous always fits).
      if (!okA) {
        float *p = ba.alloc(numel(a));
        copyToContiguous(a, p, threads);
        a = asContiguous(a, p);
      }
      if (!okB) {
        float *p = bb.alloc(numel(b));
        copyToContiguous(b, p, threads);
        b = asContiguous(b, p);
      }
      continue;
    }
    // Batch dims of the output; operands' batch strides right-aligned.
    const int nbd = y.rank - (vecA ? 0 : 1) - (vecB ? 0 : 1);
    int64_t bshape[HCRT_MAX_RANK], sa[HCRT_MAX_RANK], sb[HCRT_MAX_RANK],
        sc[HCRT_MAX_RANK];
    int64_t cs = M * N;
    for (int d = nbd - 1; d >= 0; --d) {
      bshape[d] = y.shape[d];
      sc[d] = cs;
      cs *= y.shape[d];
    }
    auto batchStrides = [&](const hcrt_tensor &t, int mdims, int64_t *s) {
      const int tb = t.rank - mdims;  // t's batch dims
      for (int d = 0; d < nbd; ++d) {
        int i = d - (nbd - tb);
        s[d] = (i >= 0 && t.shape[i] != 1) ? t.strides[i] : 0;
      }
    };
    batchStrides(a, vecA ? 1 : 2, sa);
    batchStrides(b, vecB ? 1 : 2, sb);
    const int64_t *sts[3] = {sc, sa, sb};
    Loop L = makeLoop(nbd, bshape, 3, sts);
    if (L.total <= 0 || M <= 0 || N <= 0)
      return;
    const int q = L.rank - 1;
    float *pc = static_cast<float *>(y.data);
    // Runs of the innermost batch dim become one batched GEMM call.
    const int64_t outer = L.total / L.shape[q];
    for (int64_t o = 0; o < outer; ++o) {
      loopRange(L, o * L.shape[q], (o + 1) * L.shape[q],
                [&](const int64_t *off, int64_t n) {
                  hc_sgemm_args g{};
                  g.M = M, g.N = N, g.K = K, g.batch = n;
                  g.trans_a = A.trans, g.trans_b = Bop.trans;
                  g.alpha = 1.0f, g.beta = 0.0f;
                  g.A = A.p + off[1], g.lda = A.ld, g.stride_a = L.st[1][q];
                  g.B = Bop.p + off[2], g.ldb = Bop.ld, g.stride_b = L.st[2][q];
                  g.C = pc + off[0], g.ldc = N, g.stride_c = L.st[0][q];
                  runGemm(g, bf16, threads);
                });
    }
    return;
  }
}

// ----------------------------------------------------- fused epilogues ----
// outs: y = GELU-tanh(x W^T + b), preact = x W^T + b, both [..., out]: the
// GEMM's epilogue writes both while each tile is hot.
HCRT_OP_DEF(linear_gelu) {
  (void)nout;
  hc_epilogue epi{};
  epi.flags = HC_EPI_GELU_TANH;
  epi.preact = static_cast<float *>(outs[1].data);
  epi.ld_preact = ins[1].shape[0];
  linearForward(ins, nin, static_cast<float *>(outs[0].data), epi,
                bf16Of(attrs), threads, weightConstantOf(attrs));
}

// dx [..., in] = (dy [..., out] W) * gelu_tanh'(preact [..., in]): the
// gelu_grad pass done by the GEMM's epilogue.
HCRT_OP_DEF(linear_grad_input_gelu) {
  (void)nin, (void)nout;
  const hcrt_tensor &pre = ins[2];
  Buf<float> bp;
  const float *pp;
  Mat mp = matOrPack(pre, pre.rank - 1, bp, threads, pp);
  if (mp.cs != 1) {  // rows of the GELU input must be contiguous
    pp = contiguousF32(pre, bp, threads);
    mp.rs = ins[1].shape[1];
  }
  hc_epilogue epi{};
  epi.flags = HC_EPI_GELU_TANH_GRAD;
  epi.gelu_x = pp;
  epi.ld_gelu_x = mp.rs;
  linearGradInput(ins[0], ins[1], static_cast<float *>(outs[0].data), &epi,
                  bf16Of(attrs), threads);
}

} // extern "C"
