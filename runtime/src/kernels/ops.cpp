// Fused (non-GEMM) kernels: partitioning over the thread range and dispatch
// to the per-ISA bodies of ops_impl.inc.
#include "internal.h"
#include "hc/base/settings.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace hc::rt {

const OpsTable &ops() {
  switch (hcrt_isa()) {
  case HC_ISA_AVX512:
    return opsAvx512();
  case HC_ISA_AVX2:
    return opsAvx2();
  default:
    return opsGeneric();
  }
}

void storeBf16(const float *src, int64_t n, uint16_t *dst) { ops().store_bf16(n, src, dst); }

namespace {

// Elementwise work below this many elements stays on one thread.
constexpr int64_t kSerialElems = 1 << 15;

Range shrink(Range r, int64_t work, int64_t serial) {
  if (work < serial)
    r.count = 1;
  return r;
}

// f(begin, end) over [0, n) in fixed pieces (up to 4 per thread, none under
// kSerialElems items but one per thread) taken dynamically: elementwise
// kernels only (the pieces' outputs are disjoint, so the thread that runs a
// piece does not change the result). grain: piece boundaries' multiple.
template <class F>
void forPieces(hc_threads t, int64_t n, int64_t work, int64_t grain, F &&f) {
  Range r = shrink(resolve(t), work, kSerialElems);
  // A one-thread CFTP stream: the same pieces, offered to waiting streams.
  if (const int64_t offered = r.count <= 1 ? offeredPieces((n + grain - 1) / grain,
                                                           static_cast<double>(work))
                                           : 0) {
    runOfferedSplit(n, offered, grain, f);
    return;
  }
  const int64_t pieces =
      r.count <= 1 ? 1
                   : std::min<int64_t>(4 * r.count,
                                       std::max<int64_t>(r.count, work / kSerialElems));
  parallelPieces(r, pieces, [&](int64_t i) {
    int64_t b, e;
    split(n, static_cast<int>(i), static_cast<int>(pieces), grain, b, e);
    if (e > b)
      f(b, e);
  });
}

// Whether a row kernel writes its output with non-temporal stores: when
// the output is bigger than the last-level cache it goes to memory anyway,
// and streaming it skips reading each line for ownership first (a third of
// a read+write kernel's traffic). Smaller outputs stay cached for the next
// kernel. Measured here (1 thread, 8192 x 1152 layer norm + modulate,
// 37.7 MB out, L3 32 MiB): 2.6-3.2 -> 2.1-2.3 ms. HC_STREAM_STORES=0/1
// forces plain/streaming stores (tests, tuning).
bool streamOutput(int64_t rows, int64_t cols) {
  if (const char *e = hc::rt::setting(hc::rt::Setting::StreamStores))
    return std::atoi(e) != 0;
  const double bytes = static_cast<double>(rows) * cols * 4;
  return bytes > static_cast<double>(cacheInfo().l3);
}

template <class F> void forChunks(hc_threads t, int64_t n, F &&f) {
  forPieces(t, n, n, 64, f);
}

} // namespace
} // namespace hc::rt

using namespace hc::rt;

extern "C" {

void hc_gelu_tanh_fwd(int64_t n, const float *x, float *y, hc_threads t) {
  const OpsTable &o = ops();
  forChunks(t, n, [&](int64_t b, int64_t e) { o.gelu_fwd(e - b, x + b, y + b); });
}

// Float32 results a piece at a time in L1, then rounded into y.
void hc_gelu_tanh_fwd_bf16(int64_t n, const float *x, uint16_t *y, hc_threads t) {
  const OpsTable &o = ops();
  forChunks(t, n, [&](int64_t b, int64_t e) {
    alignas(64) float tmp[2048];
    for (int64_t c = b; c < e; c += 2048) {
      const int64_t len = std::min<int64_t>(2048, e - c);
      o.gelu_fwd(len, x + c, tmp);
      storeBf16(tmp, len, y + c);
    }
  });
}

void hc_gelu_tanh_bwd(int64_t n, const float *x, const float *dy, float *dx,
                      hc_threads t) {
  const OpsTable &o = ops();
  forChunks(t, n, [&](int64_t b, int64_t e) {
    o.gelu_bwd(e - b, x + b, dy + b, dx + b);
  });
}

void hc_silu_fwd(int64_t n, const float *x, float *y, hc_threads t) {
  const OpsTable &o = ops();
  forChunks(t, n, [&](int64_t b, int64_t e) { o.silu_fwd(e - b, x + b, y + b); });
}

void hc_silu_bwd(int64_t n, const float *x, const float *dy, float *dx,
                 hc_threads t) {
  const OpsTable &o = ops();
  forChunks(t, n, [&](int64_t b, int64_t e) {
    o.silu_bwd(e - b, x + b, dy + b, dx + b);
  });
}

void hc_softmax_fwd(int64_t rows, int64_t cols, const float *x, int64_t ldx,
                    float *y, int64_t ldy, hc_threads t) {
  const OpsTable &o = ops();
  const bool stream = streamOutput(rows, cols);
  forPieces(t, rows, rows * cols, 1, [&](int64_t b, int64_t e) {
    o.softmax_fwd_rows(b, e, cols, x, ldx, y, ldy, stream);
  });
}

void hc_softmax_bwd(int64_t rows, int64_t cols, const float *y, int64_t ldy,
                    const float *dy, int64_t lddy, float *dx, int64_t lddx,
                    hc_threads t) {
  const OpsTable &o = ops();
  forPieces(t, rows, rows * cols, 1, [&](int64_t b, int64_t e) {
    o.softmax_bwd_rows(b, e, cols, y, ldy, dy, lddy, dx, lddx);
  });
}

void hc_layernorm_fwd(const hc_layernorm_args *a, hc_threads t) {
  const OpsTable &o = ops();
  const bool stream = streamOutput(a->rows, a->D);
  forPieces(t, a->rows, a->rows * a->D, 1, [&](int64_t b, int64_t e) {
    o.layernorm_fwd_rows(*a, b, e, stream);
  });
}

// A few rows at a time into scratch slot 5 (rows of one modulation group:
// a piece's rows restart at 0, so their group must be its first), then
// rounded into y.
void hc_layernorm_fwd_bf16(const hc_layernorm_args *a, uint16_t *y, hc_threads t) {
  const OpsTable &o = ops();
  const int64_t D = a->D, gr = a->group_rows > 0 ? a->group_rows : a->rows;
  if (a->rows <= 0 || D <= 0)
    return;
  const int64_t chunk = std::max<int64_t>(1, 16384 / D);
  forPieces(t, a->rows, a->rows * D, 1, [&](int64_t b, int64_t e) {
    float *tmp = scratch(5, static_cast<std::size_t>(chunk * D));
    for (int64_t r = b; r < e;) {
      const int64_t len = std::min({chunk, e - r, (r / gr + 1) * gr - r});
      hc_layernorm_args c = *a;
      c.rows = len, c.x = a->x + r * a->ldx, c.y = tmp, c.ldy = D;
      c.group_rows = len;
      if (a->shift)
        c.shift = a->shift + r / gr * a->ld_mod;
      if (a->scale)
        c.scale = a->scale + r / gr * a->ld_mod;
      c.mean = a->mean ? a->mean + r : nullptr;
      c.rstd = a->rstd ? a->rstd + r : nullptr;
      o.layernorm_fwd_rows(c, 0, len, false);
      storeBf16(tmp, len * D, y + r * D);
      r += len;
    }
  });
}

void hc_layernorm_bwd(const hc_layernorm_bwd_args *in, hc_threads t) {
  const OpsTable &o = ops();
  const hc_layernorm_bwd_args &a = *in;
  const int64_t rows = a.rows, D = a.D;
  if (rows <= 0 || D <= 0)
    return;
  const int64_t gr = a.group_rows > 0 ? a.group_rows : rows;
  const bool wantG = a.dgamma != nullptr, wantB = a.dbeta != nullptr;
  const bool wantS = a.dshift != nullptr, wantC = a.dscale != nullptr;
  Range r = shrink(resolve(t), rows * D, kSerialElems);
  // With modulation gradients, the threads take whole groups (samples):
  // each group's dshift/dscale is then one sum over its rows in order, the
  // same bits at any thread count and for any cut of the batch (hc-cftp
  // cuts hc.modulated_layer_norm_grad by samples). Fewer groups than
  // threads leave threads idle.
  const int64_t groups = (rows + gr - 1) / gr;
  const bool byGroup = (wantS || wantC) && groups > 1;
  if (byGroup && r.count > groups)
    r.count = static_cast<int>(groups);
  // A one-thread CFTP stream offers its parts to waiting streams where the
  // cut changes no sum: without dgamma and dbeta (whose parts are added).
  const int64_t offered =
      r.count <= 1 && !wantG && !wantB
          ? offeredPieces(byGroup ? groups : rows, static_cast<double>(rows * D))
          : 0;
  const int nParts = offered ? static_cast<int>(offered) : r.count;
  struct Part {
    int64_t b = 0, e = 0, g0 = 0, ng = 0;
    std::vector<float> g, bb, s, c;
  };
  std::vector<Part> parts(nParts);
  for (int i = 0; i < nParts; ++i) {
    Part &p = parts[i];
    if (byGroup) {
      int64_t gb, ge;
      split(groups, i, nParts, 1, gb, ge);
      p.b = gb * gr, p.e = std::min(rows, ge * gr);
    } else {
      split(rows, i, nParts, 1, p.b, p.e);
    }
    if (p.e <= p.b)
      continue;
    p.g0 = p.b / gr;
    p.ng = (p.e - 1) / gr - p.g0 + 1;
    if (wantG)
      p.g.resize(D);
    if (wantB)
      p.bb.resize(D);
    if (wantS)
      p.s.assign(p.ng * D, 0.0f);
    if (wantC)
      p.c.assign(p.ng * D, 0.0f);
  }
  const bool stream = streamOutput(rows, D);
  // Statistics recomputed: with dgamma/dbeta, a chunk of about 64 KiB of
  // x at a time (the backward's two reads of those rows then hit L2
  // instead of memory); without, row by row in the backward's pass.
  const bool recompute = a.mean == nullptr || a.rstd == nullptr;
  const bool byRow = recompute && !wantG && !wantB;
  const int64_t chunk = std::max<int64_t>(1, 16384 / D);
  std::vector<float> stats(recompute && !byRow ? 2 * rows : 0);
  hc_layernorm_bwd_args c = a;
  if (recompute && !byRow)
    c.mean = stats.data(), c.rstd = stats.data() + rows;
  auto runPart = [&](int i) {
    Part &p = parts[i];
    if (p.e <= p.b)
      return;
    // Without dgamma and dbeta (adaLN's form), each row's statistics are
    // recomputed just before its pass, the row arriving from memory
    // beside dy's (the trickle brings both ahead).
    if (!recompute || byRow) {
      o.layernorm_bwd_rows(a, p.b, p.e, wantG ? p.g.data() : nullptr,
                           wantB ? p.bb.data() : nullptr,
                           wantS ? p.s.data() : nullptr,
                           wantC ? p.c.data() : nullptr, stream);
      return;
    }
    std::vector<float> g(wantG ? D : 0), bb(wantB ? D : 0);
    for (int64_t b = p.b; b < p.e; b += chunk) {
      const int64_t e = std::min(p.e, b + chunk), g0 = b / gr - p.g0;
      o.layernorm_stats_rows(e - b, D, a.x + b * a.ldx, a.ldx, a.eps,
                             stats.data() + b, stats.data() + rows + b);
      o.layernorm_bwd_rows(c, b, e, wantG ? g.data() : nullptr,
                           wantB ? bb.data() : nullptr,
                           wantS ? p.s.data() + g0 * D : nullptr,
                           wantC ? p.c.data() + g0 * D : nullptr, stream);
      // parameter gradients: each chunk's partial sums added in order
      for (int64_t k = 0; wantG && k < D; ++k)
        p.g[k] = b == p.b ? g[k] : p.g[k] + g[k];
      for (int64_t k = 0; wantB && k < D; ++k)
        p.bb[k] = b == p.b ? bb[k] : p.bb[k] + bb[k];
    }
  };
  if (offered)
    runOffered(offered, [&](int64_t i) { runPart(static_cast<int>(i)); });
  else
    parallel(r, [&](int i, int) { runPart(i); });
  // Fixed-order reductions (slot order).
  auto reduceVec = [&](float *out, std::vector<float> Part::*field) {
    for (int64_t c = 0; c < D; ++c) {
      float v = a.accumulate ? out[c] : 0.0f;
      for (const Part &p : parts)
        if (p.e > p.b)
          v += (p.*field)[c];
      out[c] = v;
    }
  };
  if (wantG)
    reduceVec(a.dgamma, &Part::g);
  if (wantB)
    reduceVec(a.dbeta, &Part::bb);
  auto reduceGroups = [&](float *out, std::vector<float> Part::*field) {
    for (int64_t g = 0; g < groups; ++g) {
      float *og = out + g * a.ld_mod;
      if (!a.accumulate)
        for (int64_t c = 0; c < D; ++c)
          og[c] = 0;
      for (const Part &p : parts) {
        if (p.e <= p.b || g < p.g0 || g >= p.g0 + p.ng)
          continue;
        const float *src = (p.*field).data() + (g - p.g0) * D;
        for (int64_t c = 0; c < D; ++c)
          og[c] += src[c];
      }
    }
  };
  if (wantS)
    reduceGroups(a.dshift, &Part::s);
  if (wantC)
    reduceGroups(a.dscale, &Part::c);
}

void hc_adamw(int64_t n, float *param, const float *grad, float *exp_avg,
              float *exp_avg_sq, float lr, float beta1, float beta2, float eps,
              float weight_decay, int64_t step, hc_threads t) {
  const OpsTable &o = ops();
  // Scalars as torch computes them: in double, then used as float.
  double dlr = lr, db1 = beta1, db2 = beta2;
  double s = static_cast<double>(step < 1 ? 1 : step);
  float decay = static_cast<float>(1.0 - dlr * static_cast<double>(weight_decay));
  double bc1 = 1.0 - std::pow(db1, s), bc2 = 1.0 - std::pow(db2, s);
  float stepSize = static_cast<float>(dlr / bc1);
  float bc2sqrt = static_cast<float>(std::sqrt(bc2));
  forChunks(t, n, [&](int64_t b, int64_t e) {
    o.adamw(e - b, param + b, grad + b, exp_avg + b, exp_avg_sq + b, beta1,
            1.0f - beta1, beta2, 1.0f - beta2, eps, decay, stepSize, bc2sqrt);
  });
}

void hc_sgd(int64_t n, float *param, const float *grad, float *momentum_buf,
            float lr, float momentum, float dampening, float weight_decay,
            int32_t nesterov, int32_t first_step, hc_threads t) {
  const OpsTable &o = ops();
  forChunks(t, n, [&](int64_t b, int64_t e) {
    o.sgd(e - b, param + b, grad + b, momentum_buf ? momentum_buf + b : nullptr,
          lr, momentum, dampening, weight_decay, nesterov, first_step);
  });
}

float hc_mse_loss_fwd(int64_t n, const float *pred, const float *target,
                      hc_threads t) {
  if (n <= 0)
    return 0.0f;
  const OpsTable &o = ops();
  Range r = shrink(resolve(t), n, kSerialElems);
  std::vector<double> part(r.count, 0.0);
  parallel(r, [&](int i, int cnt) {
    int64_t b, e;
    split(n, i, cnt, 64, b, e);
    part[i] = e > b ? o.mse_sum(e - b, pred + b, target + b) : 0.0;
  });
  double s = 0;
  for (double v : part)
    s += v;
  return static_cast<float>(s / static_cast<double>(n));
}

void hc_mse_loss_bwd(int64_t n, const float *pred, const float *target,
                     float dloss, float *dpred, hc_threads t) {
  if (n <= 0)
    return;
  const OpsTable &o = ops();
  float k = static_cast<float>(2.0 * dloss / static_cast<double>(n));
  forChunks(t, n, [&](int64_t b, int64_t e) {
    o.mse_bwd(e - b, pred + b, target + b, k, dpred + b);
  });
}

void hc_embedding_fwd(int64_t n_idx, const int64_t *idx, int64_t num_rows,
                      int64_t D, const float *table, int64_t ld_table,
                      float *out, int64_t ld_out, hc_threads t) {
  Range r = shrink(resolve(t), n_idx * D, kSerialElems);
  parallel(r, [&](int i, int cnt) {
    int64_t b, e;
    split(n_idx, i, cnt, 1, b, e);
    for (int64_t k = b; k < e; ++k) {
      int64_t row = idx[k];
      float *o = out + k * ld_out;
      if (row < 0 || row >= num_rows)
        std::memset(o, 0, sizeof(float) * D);
      else
        std::memcpy(o, table + row * ld_table, sizeof(float) * D);
    }
  });
}

void hc_embedding_bwd(int64_t n_idx, const int64_t *idx, int64_t num_rows,
                      int64_t D, const float *dout, int64_t ld_dout,
                      float *dtable, int64_t ld_dtable, int32_t accumulate,
                      hc_threads t) {
  // Columns are split across threads; each thread adds its columns in index
  // order, so the result does not depend on the thread count.
  Range r = shrink(resolve(t), (n_idx + num_rows) * D, kSerialElems);
  parallel(r, [&](int i, int cnt) {
    int64_t c0, c1;
    split(D, i, cnt, 16, c0, c1);
    if (c1 <= c0)
      return;
    if (!accumulate)
      for (int64_t row = 0; row < num_rows; ++row)
        std::memset(dtable + row * ld_dtable + c0, 0, sizeof(float) * (c1 - c0));
    for (int64_t k = 0; k < n_idx; ++k) {
      int64_t row = idx[k];
      if (row < 0 || row >= num_rows)
        continue;
      float *d = dtable + row * ld_dtable;
      const float *g = dout + k * ld_dout;
      for (int64_t c = c0; c < c1; ++c)
        d[c] += g[c];
    }
  });
}

// Flash attention: (batch, head) pairs split over the threads; tiles sized
// so the two Br x Bc score tiles of the backward take half of L2. A
// sequence short enough for those two tiles to fit in all of L2 is one
// tile: cut in two it leaves a ragged tile, packs each operand twice and
// rescales the accumulator (512 KiB L2, Zen 3, 1 thread, S/2 T = 256:
// tiles of 176 against one of 256, alternated in one process, fwd 21.0
// -> 18.8 ms, bwd 46.9 -> 43.2 ms per 48 heads, medians of 9).
// HC_ATTENTION_TILE overrides (tests use it to get many partial tiles).
static void attentionTiles(const hc_attention_args &a, int64_t &Br,
                           int64_t &Bc) {
  const double l2Floats = static_cast<double>(cacheInfo().l2) / 4;
  int64_t t = static_cast<int64_t>(std::sqrt(l2Floats / 4)) / 16 * 16;
  t = std::max<int64_t>(32, std::min<int64_t>(512, t));
  const int64_t whole = static_cast<int64_t>(std::sqrt(l2Floats / 2));
  auto tile = [&](int64_t T) { return T <= whole ? T : t; };
  Br = tile(a.Tq), Bc = tile(a.Tk);
  if (const char *e = hc::rt::setting(hc::rt::Setting::AttentionTile))
    if (std::atoll(e) > 0)
      Br = Bc = std::atoll(e);
  Br = std::max<int64_t>(1, std::min(a.Tq, Br));
  Bc = std::max<int64_t>(1, std::min(a.Tk, Bc));
}

static void attentionRun(const hc_attention_args *a, hc_threads t, bool fwd) {
  const OpsTable &o = ops();
  const int64_t tasks = a->batch * a->heads;
  if (tasks <= 0 || a->Tq <= 0 || a->Dh <= 0)
    return;
  int64_t Br, Bc;
  attentionTiles(*a, Br, Bc);
  Range r = resolve(t);
  if (r.count > tasks)
    r.count = static_cast<int>(tasks);
  // one piece per (batch, head), taken dynamically (disjoint outputs); a
  // thread's next piece is likely count further on: both directions ask
  // for its first tile's rows while the last tile's exp pass runs
  const int count = r.count;
  auto piece = [&](int64_t k) {
    float *w = scratch(1, o.attention_scratch(a->Dh, a->Tq, Br, Bc));
    const int64_t b = k / a->heads, h = k % a->heads;
    if (fwd)
      o.attention_fwd_bh(*a, b, h, k + count < tasks ? k + count : -1, w, Br,
                         Bc);
    else
      o.attention_bwd_bh(*a, b, h, k + count < tasks ? k + count : -1, w, Br, Bc);
  };
  // A CFTP stream of one thread offers its pairs to the streams waiting
  // for it (stream_help.cpp).
  if (count == 1 && offersPieces())
    runOffered(tasks, piece);
  else
    parallelPieces(r, tasks, piece);
}

void hc_flash_attention_fwd(const hc_attention_args *a, hc_threads t) {
  attentionRun(a, t, true);
}

void hc_flash_attention_bwd(const hc_attention_args *a, hc_threads t) {
  attentionRun(a, t, false);
}

} // extern "C"
