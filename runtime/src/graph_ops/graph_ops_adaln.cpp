// Graph-op entry points (graph_ops.h), part 4: adaLN's ops over [B, N, D]
// activations with per-sample [B, D] conditioning rows: modulate, the
// gated residual, and the layer norm fused with its modulate
// (hc-fuse-modulated-layer-norm), forward and backward side by side.
#include "graph_ops_util.h"

#include <algorithm>
#include <vector>

using namespace hc::rt;
using namespace hc::rt::gop;

extern "C" {

// -------------------------------------------------------------- modulate ----
// x [B, N, D] * (1 + scale[B, D]) + shift[B, D], in double.
HCRT_OP_DEF(modulate) {
  (void)nin, (void)nout, (void)attrs;
  const hcrt_tensor &x = ins[0], &sh = ins[1], &sc = ins[2];
  hcrt_tensor &y = outs[0];
  const int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2];
  int64_t shape[3] = {B, N, D}, so[3] = {N * D, D, 1},
          sx[3] = {x.strides[0], x.strides[1], x.strides[2]},
          ssh[3] = {sh.strides[0], 0, sh.strides[1]},
          ssc[3] = {sc.strides[0], 0, sc.strides[1]};
  const int64_t *sts[4] = {so, sx, ssh, ssc};
  Loop L = makeLoop(3, shape, 4, sts);
  const float *px = static_cast<const float *>(x.data);
  const float *psh = static_cast<const float *>(sh.data);
  const float *psc = static_cast<const float *>(sc.data);
  float *py = static_cast<float *>(y.data);
  if (x.strides[2] == 1 && sh.strides[1] == 1 && sc.strides[1] == 1) {
    const OpsTable &o = ops();
    parFor(threads, B * N, 1, static_cast<double>(D), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t bi = r / N, n = r % N;
        o.modulate_fwd_row(D, px + bi * x.strides[0] + n * x.strides[1],
                           psh + bi * sh.strides[0], psc + bi * sc.strides[0],
                           py + r * D);
      }
    });
    return;
  }
  const int q = L.rank - 1;
  const int64_t s1 = L.st[1][q], s2 = L.st[2][q], s3 = L.st[3][q];
  parFor(threads, L.total, 64, 1.0, [&](int64_t b, int64_t e) {
    loopRange(L, b, e, [&](const int64_t *off, int64_t n) {
      float *o = py + off[0];
      const float *xv = px + off[1], *hv = psh + off[2], *cv = psc + off[3];
      for (int64_t i = 0; i < n; ++i)
        o[i] = static_cast<float>(static_cast<double>(xv[i * s1]) *
                                      (1.0 + static_cast<double>(cv[i * s3])) +
                                  static_cast<double>(hv[i * s2]));
    });
  });
}

// dx = dy (1 + scale); dshift = sum_N dy; dscale = sum_N dy x (double sums
// in N order).
HCRT_OP_DEF(modulate_grad) {
  (void)nin, (void)nout, (void)attrs;
  const hcrt_tensor &dy = ins[0], &x = ins[1], &sc = ins[2];
  hcrt_tensor &dx = outs[0], &dsh = outs[1], &dsc = outs[2];
  const int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2];
  const float *pg = static_cast<const float *>(dy.data);
  const float *px = static_cast<const float *>(x.data);
  const float *pc = static_cast<const float *>(sc.data);
  float *odx = static_cast<float *>(dx.data);
  float *osh = static_cast<float *>(dsh.data);
  float *osc = static_cast<float *>(dsc.data);
  constexpr int64_t CB = 256;
  const int64_t nb = (D + CB - 1) / CB;
  const int64_t g0 = dy.strides[0], g1 = dy.strides[1], g2 = dy.strides[2];
  const int64_t x0 = x.strides[0], x1 = x.strides[1], x2 = x.strides[2];
  const int64_t c0s = sc.strides[0], c1s = sc.strides[1];
  if (g2 == 1 && x2 == 1 && c1s == 1) {
    const OpsTable &o = ops();
    parFor(threads, B * nb, 1, static_cast<double>(N * std::min(D, CB)) * 2,
           [&](int64_t b, int64_t e) {
             double as[CB], ac[CB];
             for (int64_t u = b; u < e; ++u) {
               const int64_t bi = u / nb, d0 = (u % nb) * CB,
                             w = std::min(D, d0 + CB) - d0;
               std::fill(as, as + w, 0.0);
               std::fill(ac, ac + w, 0.0);
               o.modulate_bwd_cols(N, w, pg + bi * g0 + d0, g1,
                                   px + bi * x0 + d0, x1, pc + bi * c0s + d0,
                                   odx + bi * N * D + d0, D, as, ac);
               for (int64_t d = 0; d < w; ++d) {
                 osh[bi * D + d0 + d] = static_cast<float>(as[d]);
                 osc[bi * D + d0 + d] = static_cast<float>(ac[d]);
               }
             }
           });
    return;
  }
  parFor(threads, B * nb, 1, static_cast<double>(N * std::min(D, CB)) * 2,
         [&](int64_t b, int64_t e) {
           double as[CB], ac[CB], f[CB];
           for (int64_t u = b; u < e; ++u) {
             const int64_t bi = u / nb, d0 = (u % nb) * CB,
                           w = std::min(D, d0 + CB) - d0;
             for (int64_t d = 0; d < w; ++d) {
               as[d] = ac[d] = 0;
               f[d] = 1.0 + static_cast<double>(pc[bi * c0s + (d0 + d) * c1s]);
             }
             for (int64_t n = 0; n < N; ++n) {
               const float *gr = pg + bi * g0 + n * g1 + d0 * g2;
               const float *xr = px + bi * x0 + n * x1 + d0 * x2;
               float *o = odx + (bi * N + n) * D + d0;
               for (int64_t d = 0; d < w; ++d) {
                 const double g = gr[d * g2], xv = xr[d * x2];
                 o[d] = static_cast<float>(g * f[d]);
                 as[d] += g;
                 ac[d] += g * xv;
               }
             }
             for (int64_t d = 0; d < w; ++d) {
               osh[bi * D + d0 + d] = static_cast<float>(as[d]);
               osc[bi * D + d0 + d] = static_cast<float>(ac[d]);
             }
           }
         });
}

// -------------------------------------------------------- gated residual ----
// y [B, N, D] = x + gate[B, D] h, in float32 (product, then sum); inputs
// that are not contiguous are packed first.
HCRT_OP_DEF(gated_residual) {
  (void)nin, (void)nout, (void)attrs;
  const hcrt_tensor &x = ins[0], &g = ins[1], &h = ins[2];
  const int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2];
  Buf<float> bx, bg, bh;
  const float *px = contiguousF32(x, bx, threads),
              *pg = contiguousF32(g, bg, threads),
              *ph = contiguousF32(h, bh, threads);
  float *py = static_cast<float *>(outs[0].data);
  const OpsTable &o = ops();
  parFor(threads, B * N, 1, static_cast<double>(D), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      o.gated_residual_row(D, px + r * D, pg + (r / N) * D, ph + r * D,
                           py + r * D);
  });
}

// dgate [B, D] = sum_N dy h (double, N in order), dh = dy gate.
HCRT_OP_DEF(gated_residual_grad) {
  (void)nin, (void)nout, (void)attrs;
  const hcrt_tensor &dy = ins[0], &g = ins[1], &h = ins[2];
  const int64_t B = h.shape[0], N = h.shape[1], D = h.shape[2];
  Buf<float> bd, bg, bh;
  const float *pd = contiguousF32(dy, bd, threads),
              *pg = contiguousF32(g, bg, threads),
              *ph = contiguousF32(h, bh, threads);
  float *odg = static_cast<float *>(outs[0].data),
        *odh = static_cast<float *>(outs[1].data);
  constexpr int64_t CB = 256;
  const int64_t nb = (D + CB - 1) / CB;
  const OpsTable &o = ops();
  parFor(threads, B * nb, 1, static_cast<double>(N * std::min(D, CB)) * 2,
         [&](int64_t b, int64_t e) {
           double acc[CB];
           for (int64_t u = b; u < e; ++u) {
             const int64_t bi = u / nb, d0 = (u % nb) * CB,
                           w = std::min(D, d0 + CB) - d0;
             std::fill(acc, acc + w, 0.0);
             o.gated_residual_bwd_cols(N, w, pd + bi * N * D + d0, D,
                                       ph + bi * N * D + d0, D, pg + bi * D + d0,
                                       odh + bi * N * D + d0, D, acc);
             for (int64_t d = 0; d < w; ++d)
               odg[bi * D + d0 + d] = static_cast<float>(acc[d]);
           }
         });
}

// ------------------------------------------------- modulated layer norm ----
// x [B, N, D] normalized over D (no affine), then * (1 + scale[B, D]) +
// shift[B, D]: hc_layernorm_fwd's adaLN form, one read of x and one write
// of y (the normalized x is never stored).
HCRT_OP_DEF(modulated_layer_norm) {
  (void)nin, (void)nout;
  const hcrt_tensor &x = ins[0], &sh = ins[1], &sc = ins[2];
  hcrt_tensor &y = outs[0];
  const int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2];
  if (B <= 0 || N <= 0 || D <= 0)
    return;
  hc_layernorm_args a{};
  a.rows = B * N, a.D = D;
  const bool bf16Out = y.dtype == HCRT_BF16;  // bf16 storage
  Buf<float> bx, bsh, bsc;
  if (bf16Out)
    a.x = rowSource(x, 2, bx, threads, a.ldx);
  else
    a.x = rowSource(x, 2, y.data, threads, a.ldx);  // y may alias x
  a.y = static_cast<float *>(y.data), a.ldy = D;
  a.shift = contiguousF32(sh, bsh, threads);
  a.scale = contiguousF32(sc, bsc, threads);
  a.group_rows = N, a.ld_mod = D;
  a.eps = static_cast<float>(attrFloat(attrs, 0, 1e-5));
  if (bf16Out)
    hc_layernorm_fwd_bf16(&a, static_cast<uint16_t *>(y.data), threads);
  else
    hc_layernorm_fwd(&a, threads);
}

// dx, dshift, dscale of modulated_layer_norm; mean and rstd recomputed from
// x as the forward computes them, a chunk of rows at a time (as
// layer_norm_grad). One pass over dy and x, where modulate_grad then
// layer_norm_grad made two and stored dx_hat between. Each sample's sums
// run over its rows in order: the same bits at any thread count.
HCRT_OP_DEF(modulated_layer_norm_grad) {
  (void)nin, (void)nout;
  const hcrt_tensor &dy = ins[0], &x = ins[1], &sc = ins[2];
  hcrt_tensor &dx = outs[0], &dsh = outs[1], &dsc = outs[2];
  const int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2], rows = B * N;
  if (B <= 0 || D <= 0)
    return;
  if (N <= 0) {  // sums over no rows
    std::fill_n(static_cast<float *>(dsh.data), B * D, 0.0f);
    std::fill_n(static_cast<float *>(dsc.data), B * D, 0.0f);
    return;
  }
  const double eps = attrFloat(attrs, 0, 1e-5);
  hc_layernorm_bwd_args a{};
  a.rows = rows, a.D = D;
  Buf<float> bx, bsc;
  a.x = rowSource(x, 2, bx, threads, a.ldx);
  a.dy = rowSource(dy, 2, dx.data, threads, a.lddy);  // dx may alias dy
  a.dx = static_cast<float *>(dx.data), a.lddx = D;
  a.scale = contiguousF32(sc, bsc, threads);
  a.group_rows = N, a.ld_mod = D;
  a.dshift = static_cast<float *>(dsh.data);
  a.dscale = static_cast<float *>(dsc.data);
  a.eps = eps;  // mean and rstd recomputed, a chunk of rows at a time
  hc_layernorm_bwd(&a, threads);
}

} // extern "C"
