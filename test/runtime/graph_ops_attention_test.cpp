// Attention graph ops (graph_ops.h: self-attention from a packed qkv, and
// cross-attention from q, k, v) against float64 references, in the storage
// layouts and thread counts of graph_ops_test.cpp (graph_ops_test_util.h).
#include "graph_ops_test_util.h"

#include <cmath>
#include <map>
#include <tuple>

using namespace graph_ops_test;

namespace {

// ------------------------------------------------------------- attention ----
// Forward: 8 (L + Dh + 16) u (1 + |o|). Backward: 16 (2L + Dh + 16) u
// (1 + sum |terms|) per element (README-kernels flash attention bounds).

// float64 attention of q [B, N, D] over k, v [B, L, D] (read through `at`:
// which 0 q, 1 k, 2 v), with dOut [B, N, D]: the result, lse, and each
// gradient with the magnitude of its terms, indexed as q, k, v are.
// bf16: the model of the bf16 kernel (hc_attention_args::bf16): q, k, v
// and dOut rounded to bf16 where they enter a product, and so are the
// probabilities (unnormalized in the forward, one key tile) and dS; the
// softmax, lse and D_i = dOut . O exact.
struct AttentionRef {
  std::vector<double> o, lse, grad[3], mag[3];
};

// x rounded to bf16 (8 significant bits, to nearest even).
double bf16(double x) {
  if (!std::isfinite(x) || x == 0.0)
    return x;
  int e = 0;
  const double m = std::frexp(x, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

AttentionRef attentionRef(int64_t B, int64_t N, int64_t L, int64_t H, int64_t Dh,
                          double scale,
                          const std::function<double(int, int64_t, int64_t, int64_t, int64_t)> &at0,
                          const std::vector<double> &dout0, bool inBf16 = false) {
  const int64_t D = H * Dh;
  auto r16 = [&](double x) { return inBf16 ? bf16(x) : x; };
  auto at = [&](int w, int64_t b, int64_t t, int64_t h, int64_t d) {
    return r16(at0(w, b, t, h, d));
  };
  std::vector<double> dout(dout0.size());
  for (size_t i = 0; i < dout.size(); ++i)
    dout[i] = r16(dout0[i]);
  AttentionRef r;
  r.o.assign(B * N * D, 0.0);
  r.lse.assign(B * H * N, 0.0);
  for (int w = 0; w < 3; ++w) {
    r.grad[w].assign(B * (w ? L : N) * D, 0.0);
    r.mag[w].assign(B * (w ? L : N) * D, 0.0);
  }
  std::vector<double> P(L), E(L);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < N; ++i) {
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < L; ++j) {
          double s = 0;
          for (int64_t d = 0; d < Dh; ++d)
            s += at(0, b, i, h, d) * at(1, b, j, h, d);
          P[j] = s * scale;
          m = std::max(m, P[j]);
        }
        for (int64_t j = 0; j < L; ++j)
          sum += P[j] = std::exp(P[j] - m);
        for (int64_t j = 0; j < L; ++j)
          E[j] = r16(P[j]), P[j] /= sum;
        r.lse[(b * H + h) * N + i] = m + std::log(sum);
        double rowDot = 0;
        for (int64_t d = 0; d < Dh; ++d) {
          double od = 0;
          for (int64_t j = 0; j < L; ++j)
            od += E[j] * at(2, b, j, h, d);
          const int64_t oi = (b * N + i) * D + h * Dh + d;
          r.o[oi] = od / sum;
          rowDot += dout0[oi] * r.o[oi];
        }
        for (int64_t j = 0; j < L; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < Dh; ++d)
            dp += dout[(b * N + i) * D + h * Dh + d] * at(2, b, j, h, d);
          const double ds = r16(P[j] * (dp - rowDot)) * scale, pj = r16(P[j]);
          for (int64_t d = 0; d < Dh; ++d) {
            const double gd = dout[(b * N + i) * D + h * Dh + d];
            const double qd = at(0, b, i, h, d), kd = at(1, b, j, h, d);
            const int64_t qi = (b * N + i) * D + h * Dh + d, ki = (b * L + j) * D + h * Dh + d;
            r.grad[0][qi] += ds * kd;
            r.mag[0][qi] += std::fabs(ds * kd) + 4 * P[j];
            r.grad[1][ki] += ds * qd;
            r.mag[1][ki] += std::fabs(ds * qd) + 4 * P[j];
            r.grad[2][ki] += pj * gd;
            r.mag[2][ki] += std::fabs(pj * gd);
          }
        }
      }
  return r;
}

// Self-attention from a packed qkv [B, N, 3D] in every layout.
// A contiguous float32 [d0, d1, d2] tensor at p.
hcrt_tensor tensor3(float *p, int64_t d0, int64_t d1, int64_t d2) {
  hcrt_tensor t{};
  t.data = p, t.dtype = HCRT_F32, t.rank = 3;
  t.shape[0] = d0, t.shape[1] = d1, t.shape[2] = d2;
  t.strides[0] = d1 * d2, t.strides[1] = d2, t.strides[2] = 1;
  return t;
}

TEST(GraphOps, Attention) {
  struct C {
    int64_t B, N, H, Dh;
  };
  const C cases[] = {{2, 5, 2, 3}, {1, 1, 1, 1}, {1, 17, 2, 16}, {2, 70, 3, 8}, {1, 3, 1, 5}};
  uint32_t seed = 1300;
  for (const C &cc : cases)
    for (Layout l : kAllLayouts)
      for (int th : kThreads) {
        const int64_t B = cc.B, N = cc.N, H = cc.H, Dh = cc.Dh, D = H * Dh;
        const double scale = 1 / std::sqrt((double)Dh);
        TT qkv = make({B, N, 3 * D}, l, seed++, -2, 2);
        TT o = output({B, N, D}), lse = output({B, H, N});
        run(hcrt_op_attention, {&qkv}, {&o, &lse}, attrs({H}, {scale}), th);
        const Layout ldo[] = {kStrided, kPadded, kPadded, kContig, kBroadcast};  // by l
        TT dout = make({B, N, D}, ldo[l], seed++);
        TT g = output({B, N, 3 * D});
        run(hcrt_op_attention_grad, {&dout, &o, &lse, &qkv}, {&g}, attrs({H}, {scale}), th);
        auto packed = [&](int which, int64_t b, int64_t n, int64_t h, int64_t d) {
          return (b * N + n) * 3 * D + which * D + h * Dh + d;
        };
        const AttentionRef r = attentionRef(
            B, N, N, H, Dh, scale,
            [&](int w, int64_t b, int64_t n, int64_t h, int64_t d) { return qkv.v[packed(w, b, n, h, d)]; },
            dout.v);
        Checker c{tag("attention", th, {&qkv})}, cg{tag("attention_grad", th, {&dout, &qkv})};
        for (int64_t i = 0; i < lse.n(); ++i)
          c.check(lse.out(i), r.lse[i], 8 * (N + Dh + 16) * kU * (1 + std::fabs(r.lse[i])), i);
        for (int64_t i = 0; i < o.n(); ++i)
          c.check(o.out(i), r.o[i], 8 * (N + Dh + 16) * kU * (1 + std::fabs(r.o[i])), i);
        const double f = 16 * (2 * N + Dh + 16) * kU;
        for (int64_t i = 0; i < g.n(); ++i) {
          // packed index -> (row, which, column)
          const int64_t row = i / (3 * D), w = (i % (3 * D)) / D, col = i % D;
          const int64_t ri = row * D + col;
          cg.check(g.out(i), r.grad[w][ri], f * (1 + r.mag[w][ri]), i);
        }
      }
}

// Columns [start, start + size) of the last dim of `src`, as a view into its
// storage (k and v as the halves of one packed kv).
TT lastDimView(const TT &src, int64_t start, int64_t size) {
  TT x;
  x.shape = src.shape;
  x.shape.back() = size;
  x.strides = src.strides;
  x.dtype = src.dtype;
  x.layout = src.layout;
  x.t = src.t;
  x.t.shape[x.shape.size() - 1] = size;
  x.t.data = static_cast<char *>(src.t.data) + start * src.strides.back() * esizeOf(src.dtype);
  const int64_t outer = src.n() / src.shape.back();
  for (int64_t r = 0; r < outer; ++r)
    for (int64_t c = 0; c < size; ++c)
      x.v.push_back(src.v[r * src.shape.back() + start + c]);
  return x;
}

// Cross-attention: q [B, N, D] over k, v [B, L, D] with L != N (odd sizes,
// one key, more keys than queries), k and v the halves of a packed kv in
// every layout, or tensors of their own.
TEST(GraphOps, CrossAttention) {
  struct C {
    int64_t B, N, L, H, Dh;
  };
  const C cases[] = {{2, 5, 3, 2, 3}, {1, 7, 1, 1, 4}, {2, 3, 11, 3, 5}, {1, 65, 19, 2, 16},
                     {3, 1, 2, 1, 1}};
  uint32_t seed = 1350;
  for (const C &cc : cases)
    for (Layout l : kAllLayouts)
      for (bool packedKv : {true, false})
        for (int th : kThreads) {
          const int64_t B = cc.B, N = cc.N, L = cc.L, H = cc.H, Dh = cc.Dh, D = H * Dh;
          const double scale = 1 / std::sqrt((double)Dh);
          TT q = make({B, N, D}, l == kBroadcast ? kContig : l, seed++, -2, 2);
          TT kv = make({B, L, 2 * D}, l, seed++, -2, 2);
          TT k = packedKv ? lastDimView(kv, 0, D) : make({B, L, D}, l, seed++, -2, 2);
          TT v = packedKv ? lastDimView(kv, D, D) : make({B, L, D}, kStrided, seed++, -2, 2);
          TT o = output({B, N, D}), lse = output({B, H, N});
          run(hcrt_op_attention, {&q, &k, &v}, {&o, &lse}, attrs({H}, {scale}), th);
          TT dout = make({B, N, D}, kPadded, seed++);
          TT dq = output({B, N, D}), dk = output({B, L, D}), dv = output({B, L, D});
          run(hcrt_op_attention_grad, {&dout, &o, &lse, &q, &k, &v}, {&dq, &dk, &dv},
              attrs({H}, {scale}), th);
          const TT *in[3] = {&q, &k, &v};
          const AttentionRef r = attentionRef(
              B, N, L, H, Dh, scale,
              [&](int w, int64_t b, int64_t t, int64_t h, int64_t d) {
                return in[w]->v[(b * (w ? L : N) + t) * D + h * Dh + d];
              },
              dout.v);
          Checker c{tag("cross_attention", th, {&q, &k})},
              cg{tag("cross_attention_grad", th, {&dout, &k})};
          for (int64_t i = 0; i < lse.n(); ++i)
            c.check(lse.out(i), r.lse[i], 8 * (L + Dh + 16) * kU * (1 + std::fabs(r.lse[i])), i);
          for (int64_t i = 0; i < o.n(); ++i)
            c.check(o.out(i), r.o[i], 8 * (L + Dh + 16) * kU * (1 + std::fabs(r.o[i])), i);
          const double f = 16 * (2 * L + Dh + 16) * kU;
          TT *g[3] = {&dq, &dk, &dv};
          for (int w = 0; w < 3; ++w)
            for (int64_t i = 0; i < g[w]->n(); ++i)
              cg.check(g[w]->out(i), r.grad[w][i], f * (1 + r.mag[w][i]), i);
        }
}

// precision = "bf16" (ints[1]): self-attention from a packed qkv and
// cross-attention from q, k, v against the float64 model of the bf16 kernel
// (attentionRef's bf16), on every ISA path, with the vdpbf16ps kernel and
// with its emulation. Per element within the fp32 bounds, save where a
// float32 value rounded to the other bf16 neighbour than the float64
// model's (one probability does so for a whole row of O, one dS for a row
// of dQ): at most a tenth of the elements, each within 2^-7 of its terms.
// Over all cases of a path, each output at most 0.2 of the float32
// result's distance to the bf16 model (0.009-0.035 measured over 7 seeds):
// the rounding happens, and where the model says.
TEST(GraphOps, AttentionBf16) {
  struct C {
    int64_t B, N, L, H, Dh;  // L 0: self-attention from qkv
  };
  const C cases[] = {{2, 5, 0, 2, 3}, {1, 17, 0, 2, 16}, {2, 70, 0, 3, 8}, {1, 33, 0, 1, 64},
                     {2, 7, 3, 2, 5}, {1, 65, 19, 2, 16}, {3, 1, 2, 1, 1}};
  const int32_t savedIsa = hcrt_isa();
  std::vector<std::pair<int32_t, int32_t>> paths;  // (ISA, HC_BF16_* path)
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int32_t p : bf16PathsHere())
      paths.emplace_back(isa, p);
  }
  // Squared distances to the bf16 model, of the result and of float32's,
  // summed over the cases per path and output (single small cases are
  // noisy: a few rounding flips in dS weigh as much as the rounding).
  std::map<std::tuple<int32_t, int32_t, std::string>, std::pair<double, double>> sums;
  uint32_t seed = 1400;
  for (const auto &ip : paths)  // (not bindings: the lambdas below capture them)
    for (const C &cc : cases)
      for (Layout l : {kContig, kStrided, kPadded})
        for (int th : kThreads) {
          hcrt_set_isa(ip.first);
          if (!useBf16Path(ip.second))
            continue;
          const bool self = cc.L == 0;
          const int64_t B = cc.B, N = cc.N, L = self ? N : cc.L, H = cc.H, Dh = cc.Dh,
                        D = H * Dh;
          const double scale = 1 / std::sqrt((double)Dh);
          std::vector<TT> ins;
          if (self)
            ins.push_back(make({B, N, 3 * D}, l, seed++, -2, 2));
          else
            for (int64_t rows : {N, L, L})
              ins.push_back(make({B, rows, D}, l, seed++, -2, 2));
          std::vector<const TT *> inPtr;
          for (TT &t : ins)
            inPtr.push_back(&t);
          TT o = output({B, N, D}), lse = output({B, H, N});
          hcrt_attrs a = attrs({H, 1}, {scale});
          run(hcrt_op_attention, inPtr, {&o, &lse}, a, th);
          TT dout = make({B, N, D}, kPadded, seed++);
          std::vector<TT> g;
          if (self)
            g.push_back(output({B, N, 3 * D}));
          else
            for (int64_t rows : {N, L, L})
              g.push_back(output({B, rows, D}));
          std::vector<const TT *> bwdIns = {&dout, &o, &lse};
          std::vector<TT *> bwdOuts;
          bwdIns.insert(bwdIns.end(), inPtr.begin(), inPtr.end());
          for (TT &t : g)
            bwdOuts.push_back(&t);
          run(hcrt_op_attention_grad, bwdIns, bwdOuts, a, th);
          auto at = [&](int w, int64_t b, int64_t t, int64_t h, int64_t d) {
            return self ? ins[0].v[(b * N + t) * 3 * D + w * D + h * Dh + d]
                        : ins[w].v[(b * (w ? L : N) + t) * D + h * Dh + d];
          };
          const AttentionRef r16 = attentionRef(B, N, L, H, Dh, scale, at, dout.v, true),
                             r32 = attentionRef(B, N, L, H, Dh, scale, at, dout.v, false);
          const std::string what = std::string(self ? "attention" : "cross_attention") +
                                   " bf16 isa " + std::to_string(ip.first) + " " +
                                   hcrt_bf16_path_name(ip.second) + " " +
                                   tag("", th, {inPtr[0]});
          // got(i), the models' values and the fp32 bound of each element.
          auto compare = [&](const char *name, int64_t n, const std::function<double(int64_t)> &got,
                             const std::vector<double> &m16, const std::vector<double> &m32,
                             const std::function<double(int64_t)> &bound,
                             const std::function<double(int64_t)> &terms) {
            int64_t outside = 0;
            double d16 = 0, d32 = 0;
            for (int64_t i = 0; i < n; ++i) {
              const double e = std::fabs(got(i) - m16[i]);
              d16 += e * e;
              d32 += (m32[i] - m16[i]) * (m32[i] - m16[i]);
              if (e <= bound(i))
                continue;
              ++outside;
              EXPECT_LE(e, bound(i) + std::ldexp(terms(i), -7))
                  << what << " " << name << "[" << i << "]: got " << got(i) << " want " << m16[i];
            }
            EXPECT_LE(outside, std::max<int64_t>(2, n / 10)) << what << " " << name;
            auto &[s16, s32] = sums[{ip.first, ip.second, name}];
            s16 += d16, s32 += d32;
          };
          const double fo = 8 * (L + Dh + 16) * kU, fg = 16 * (2 * L + Dh + 16) * kU;
          compare("lse", lse.n(), [&](int64_t i) { return lse.out(i); }, r16.lse, r32.lse,
                  [&](int64_t i) { return fo * (1 + std::fabs(r16.lse[i])); },
                  [&](int64_t i) { return 1 + std::fabs(r16.lse[i]); });
          compare("o", o.n(), [&](int64_t i) { return o.out(i); }, r16.o, r32.o,
                  [&](int64_t i) { return fo * (1 + std::fabs(r16.o[i])); },
                  [&](int64_t i) { return 1 + std::fabs(r16.o[i]); });
          for (int w = 0; w < 3; ++w) {
            // element i of gradient w, where the kernel wrote it
            auto gotW = [&](int64_t i) {
              if (!self)
                return g[w].out(i);
              const int64_t row = i / D, col = i % D;
              return g[0].out(row * 3 * D + w * D + col);
            };
            const int64_t n = static_cast<int64_t>(r16.grad[w].size());
            compare(w == 0 ? "dq" : w == 1 ? "dk" : "dv", n, gotW, r16.grad[w], r32.grad[w],
                    [&](int64_t i) { return fg * (1 + r16.mag[w][i]); },
                    [&](int64_t i) { return 1 + r16.mag[w][i]; });
          }
        }
  for (const auto &[key, d] : sums) {
    const auto &[isa, path, name] = key;
    EXPECT_LE(std::sqrt(d.first), 0.2 * std::sqrt(d.second))
        << "bf16 attention, isa " << isa << " " << hcrt_bf16_path_name(path) << ", " << name
        << ": not closer to the bf16 model than the float32 result is";
  }
  hcrt_set_bf16_native(-1);
  hcrt_set_bf16_amx(-1);
  hcrt_set_isa(savedIsa);
}

// bf16 storage (hc-bf16-storage): q, k, v (one qkv, or three tensors with
// padded rows) held as bf16 give the bf16 attention and its gradient the
// very bits of float32 inputs holding the same values, on every bf16 path;
// a kernel reading a bf16 row past its end or with a float32 stride would
// differ. And the forward on its own packed tiles (HC_ATTENTION_PACKED=1,
// where the kernel packs B as pair words) gives the driver's bits (0),
// in one tile and in partial ones (edge panels, rescaled accumulators): a
// pair row converted out of place or an edge tile summed apart from how
// the driver sums it would differ.
TEST(GraphOps, AttentionBf16StoredQkvSameBits) {
  struct C {
    int64_t B, N, L, H, Dh;  // L 0: self-attention from qkv
    // HC_ATTENTION_TILE on the whole team (the threads split whole heads):
    // several key tiles (more than an AMX block of keys in 35 and 56),
    // whole and edge panels, rows past Dh in a 32-row AMX tile
    const char *tile;
  };
  const C cases[] = {{2, 5, 0, 2, 3, "16"},     {1, 70, 0, 3, 8, "35"},  {2, 7, 3, 2, 5, "16"},
                     {1, 65, 19, 2, 16, "56"},  {1, 53, 0, 2, 40, "35"}, {1, 100, 0, 1, 64, "56"}};
  const int32_t savedIsa = hcrt_isa();
  uint32_t seed = 1700;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int32_t path : bf16PathsHere())
      for (const C &cc : cases)
        for (int th : kThreads) {
          hcrt_set_isa(isa);
          if (!useBf16Path(path))
            continue;
          const char *tile = th == 1 ? "" : cc.tile;
          if (*tile)
            setenv("HC_ATTENTION_TILE", tile, 1);
          else
            unsetenv("HC_ATTENTION_TILE");
          const bool self = cc.L == 0;
          const int64_t B = cc.B, N = cc.N, L = self ? N : cc.L, H = cc.H, D = H * cc.Dh;
          const int64_t pad = self ? 0 : 3;  // rows of q, k, v padded
          struct In {
            std::vector<float> f;
            std::vector<uint16_t> h;
            hcrt_tensor tf{}, th{};
          };
          std::vector<In> ins(self ? 1 : 3);
          for (size_t w = 0; w < ins.size(); ++w) {
            const int64_t rows = self ? N : w ? L : N, cols = self ? 3 * D : D, ld = cols + pad;
            In &x = ins[w];
            std::vector<float> r = randomVec(B * rows * ld, seed++, -2, 2);
            x.f.resize(r.size()), x.h.resize(r.size());
            for (size_t i = 0; i < r.size(); ++i) {
              uint32_t u;
              std::memcpy(&u, &r[i], 4);
              u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
              if (static_cast<int64_t>(i) % ld >= cols)
                u = 0x7fc00000u;  // padding: NaN
              std::memcpy(&x.f[i], &u, 4);
              x.h[i] = static_cast<uint16_t>(u >> 16);
            }
            for (hcrt_tensor *t : {&x.tf, &x.th}) {
              t->rank = 3;
              t->shape[0] = B, t->shape[1] = rows, t->shape[2] = cols;
              t->strides[0] = rows * ld, t->strides[1] = ld, t->strides[2] = 1;
            }
            x.tf.dtype = HCRT_F32, x.tf.data = x.f.data();
            x.th.dtype = HCRT_BF16, x.th.data = x.h.data();
          }
          hcrt_attrs a = attrs({H, 1}, {1 / std::sqrt((double)cc.Dh)});
          std::vector<float> dout = randomVec(B * N * D, seed++);
          // fwd + bwd from the float32 (0) and the bf16 (1) inputs, and
          // from the bf16 ones through the driver (2), each with the tiles
          // of this pass
          std::vector<float> o[3], lse[3], grad[3];
          for (int k = 0; k < 3; ++k) {
            setenv("HC_ATTENTION_PACKED", k == 2 ? "0" : "1", 1);
            std::vector<hcrt_tensor> in;
            for (In &x : ins)
              in.push_back(k ? x.th : x.tf);
            o[k].assign(B * N * D, 0), lse[k].assign(B * H * N, 0);
            hcrt_tensor outs[2] = {tensor3(o[k].data(), B, N, D), tensor3(lse[k].data(), B, H, N)};
            hcrt_op_attention(in.data(), (int32_t)in.size(), outs, 2, &a, hc_threads{0, th});
            std::vector<hcrt_tensor> bin = {tensor3(dout.data(), B, N, D), outs[0], outs[1]};
            bin.insert(bin.end(), in.begin(), in.end());
            grad[k].assign(self ? B * N * 3 * D : B * (N + 2 * L) * D, 0);
            std::vector<hcrt_tensor> gout;
            if (self)
              gout.push_back(tensor3(grad[k].data(), B, N, 3 * D));
            else {
              gout.push_back(tensor3(grad[k].data(), B, N, D));
              gout.push_back(tensor3(grad[k].data() + B * N * D, B, L, D));
              gout.push_back(tensor3(grad[k].data() + B * (N + L) * D, B, L, D));
            }
            hcrt_op_attention_grad(bin.data(), (int32_t)bin.size(), gout.data(),
                                   (int32_t)gout.size(), &a, hc_threads{0, th});
          }
          unsetenv("HC_ATTENTION_PACKED");
          for (int k : {1, 2}) {
            const std::string what = std::string(self ? "qkv" : "q, k, v") + " isa " +
                                     std::to_string(isa) + " " + hcrt_bf16_path_name(path) +
                                     " threads " + std::to_string(th) + " tile " +
                                     (*tile ? tile : "default") +
                                     (k == 1 ? ": bf16 against float32 inputs"
                                             : ": the driver's forward against the packed one");
            EXPECT_EQ(0, std::memcmp(o[0].data(), o[k].data(), o[0].size() * 4)) << what << ": o";
            EXPECT_EQ(0, std::memcmp(lse[0].data(), lse[k].data(), lse[0].size() * 4))
                << what << ": lse";
            EXPECT_EQ(0, std::memcmp(grad[0].data(), grad[k].data(), grad[0].size() * 4))
                << what << ": gradients";
          }
        }
  }
  unsetenv("HC_ATTENTION_TILE");
  hcrt_set_bf16_native(-1);
  hcrt_set_bf16_amx(-1);
  hcrt_set_isa(savedIsa);
}

} // namespace
