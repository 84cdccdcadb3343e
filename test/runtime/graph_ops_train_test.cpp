// Graph-op entry points of the training step proper (concat, gather/scatter,
// slice gradient, random, optimizers) and determinism, against float64
// references; conventions as graph_ops_test.cpp.
#include "graph_ops_test_util.h"

using namespace graph_ops_test;

namespace {

// ---------------------------------------------------------- data movement ----
// Exact.
TEST(GraphOps, Concat) {
  uint32_t seed = 1500;
  for (int32_t dt : {HCRT_F32, HCRT_I64, HCRT_I1})
    for (int64_t axis : {0, 1, 2})
      for (int th : kThreads) {
        Shape s0 = {2, 3, 4}, s1 = s0, s2 = s0;
        s1[axis] = 1;
        s2[axis] = 5;
        TT a = make(s0, kTransposed, seed++, -5, 5, dt), b = make(s1, kStrided, seed++, -5, 5, dt),
           c = make(s2, kBroadcast, seed++, -5, 5, dt);
        Shape os = s0;
        os[axis] = s0[axis] + s1[axis] + s2[axis];
        TT y = output(os, dt);
        run(hcrt_op_concat, {&a, &b, &c}, {&y}, attrs({axis}), th);
        Checker ck{tag("concat", th, {&a, &b, &c}) + " axis=" + std::to_string(axis)};
        Shape st = rowStrides(os);
        for (int64_t i = 0; i < y.n(); ++i) {
          Shape idx(3);
          for (int d = 0; d < 3; ++d)
            idx[d] = (i / st[d]) % os[d];
          const TT *src = &a;
          int64_t k = idx[axis];
          if (k >= s0[axis]) {
            k -= s0[axis];
            src = &b;
            if (k >= s1[axis]) {
              k -= s1[axis];
              src = &c;
            }
          }
          idx[axis] = k;
          Shape ss = rowStrides(src->shape);
          ck.check(y.out(i), src->v[idx[0] * ss[0] + idx[1] * ss[1] + idx[2] * ss[2]], 0, i);
        }
      }
}

// gather: exact (negative indices wrap; out of range gives zeros).
// scatter_add: float sums in index order: (count + 1) u sum|terms| + 1e-30.
TEST(GraphOps, GatherScatter) {
  struct C {
    Shape data;
    int64_t axis;
    Shape idx;
  };
  const C cases[] = {{{7, 5}, 0, {2, 3}}, {{3, 7, 4}, 1, {4}}, {{7}, 0, {}}, {{6, 3}, 1, {2, 2}},
                     {{11, 1}, 0, {9}},   {{2, 5, 3, 2}, 2, {3, 1}}, {{400, 97}, 0, {150}}};
  uint32_t seed = 1600;
  for (const C &cc : cases)
    for (Layout l : kAllLayouts)
      for (int32_t it : {HCRT_I64, HCRT_I32})
        for (int th : kThreads) {
          const int64_t dim = cc.data[cc.axis];
          std::mt19937 rng(seed++);
          std::vector<double> iv(numelOf(cc.idx));
          for (double &v : iv)
            v = (double)(int64_t)(rng() % (2 * dim)) - dim;  // [-dim, dim)
          TT idx = place(cc.idx, l == kBroadcast ? kContig : (l == kContig ? kStrided : kContig), it, iv);
          TT data = make(cc.data, l, seed++);
          Shape os(cc.data.begin(), cc.data.begin() + cc.axis);
          os.insert(os.end(), cc.idx.begin(), cc.idx.end());
          os.insert(os.end(), cc.data.begin() + cc.axis + 1, cc.data.end());
          TT y = output(os);
          run(hcrt_op_gather, {&data, &idx}, {&y}, attrs({cc.axis}), th);
          const int64_t outer = numelOf(Shape(cc.data.begin(), cc.data.begin() + cc.axis)),
                        inner = numelOf(Shape(cc.data.begin() + cc.axis + 1, cc.data.end())),
                        nI = (int64_t)iv.size();
          Checker c{tag("gather", th, {&data, &idx})};
          int64_t o = 0;
          for (int64_t i = 0; i < outer; ++i)
            for (int64_t j = 0; j < nI; ++j) {
              int64_t k = (int64_t)idx.v[j];
              if (k < 0)
                k += dim;
              for (int64_t e = 0; e < inner; ++e, ++o)
                c.check(y.out(o), data.v[(i * dim + k) * inner + e], 0, o);
            }
          // scatter_add: the adjoint, into data's shape.
          TT dy = make(os, l == kTransposed ? kStrided : l, seed++);
          TT dd = output(cc.data);
          run(hcrt_op_scatter_add, {&dy, &idx}, {&dd}, attrs({cc.axis}), th);
          std::vector<double> want(dd.n(), 0.0), mag(dd.n(), 0.0), cnt(dd.n(), 0.0);
          o = 0;
          for (int64_t i = 0; i < outer; ++i)
            for (int64_t j = 0; j < nI; ++j) {
              int64_t k = (int64_t)idx.v[j];
              if (k < 0)
                k += dim;
              for (int64_t e = 0; e < inner; ++e, ++o) {
                int64_t t = (i * dim + k) * inner + e;
                want[t] += dy.v[o];
                mag[t] += std::fabs(dy.v[o]);
                cnt[t] += 1;
              }
            }
          Checker cs{tag("scatter_add", th, {&dy, &idx})};
          for (int64_t t = 0; t < dd.n(); ++t)
            cs.check(dd.out(t), want[t], (cnt[t] + 1) * kU * mag[t] + 1e-30, t);
        }
}

TEST(GraphOps, GatherOutOfRangeGivesZeros) {
  for (int64_t axis : {0, 1}) {
    TT data = make({3, 3}, kContig, 1);
    TT idx = place({3}, kContig, HCRT_I64, {1, 7, -9});
    TT y = output({3, 3});
    run(hcrt_op_gather, {&data, &idx}, {&y}, attrs({axis}), 1);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        int64_t pos = axis == 0 ? i : j, other = axis == 0 ? j : i;
        double want = pos == 0 ? (axis == 0 ? data.v[3 + other] : data.v[other * 3 + 1]) : 0.0;
        EXPECT_EQ(y.out(i * 3 + j), want) << "axis " << axis << " at " << i << "," << j;
      }
  }
}

// Exact: zeros except dy at starts + i * steps.
TEST(GraphOps, SliceGrad) {
  struct C {
    Shape dy, out;
    std::vector<int64_t> starts, steps;
  };
  const C cases[] = {{{2, 3}, {5, 7}, {1, 0}, {2, 3}},
                     {{1, 4, 2}, {3, 4, 9}, {2, 0, 1}, {1, 1, 4}},
                     {{5}, {5}, {0}, {1}},
                     {{3, 40}, {7, 200}, {0, 3}, {3, 5}}};
  uint32_t seed = 1700;
  for (const C &cc : cases)
    for (Layout l : kAllLayouts)
      for (int th : kThreads) {
        TT dy = make(cc.dy, l, seed++);
        TT y = output(cc.out);
        hcrt_attrs a{};
        for (int64_t s : cc.starts)
          a.ints[a.num_ints++] = s;
        for (int64_t s : cc.steps)
          a.ints[a.num_ints++] = s;
        run(hcrt_op_slice_grad, {&dy}, {&y}, a, th);
        std::vector<double> want(y.n(), 0.0);
        Shape so = rowStrides(cc.out), sd = rowStrides(cc.dy);
        for (int64_t i = 0; i < dy.n(); ++i) {
          int64_t off = 0;
          for (size_t d = 0; d < cc.dy.size(); ++d)
            off += (cc.starts[d] + ((i / sd[d]) % cc.dy[d]) * cc.steps[d]) * so[d];
          want[off] = dy.v[i];
        }
        Checker c{tag("slice_grad", th, {&dy})};
        for (int64_t i = 0; i < y.n(); ++i)
          c.check(y.out(i), want[i], 0, i);
      }
}

// Exact: low + (high - low) * uniform01(seed, step, offset + b, op, i),
// rounded once.
TEST(GraphOps, RandomUniform) {
  const Shape shapes[] = {{3, 4, 5}, {7}, {}, {2, 20000}};
  for (const Shape &s : shapes)
    for (int th : kThreads) {
      TT seed = place({}, kContig, HCRT_I64, {12345});
      TT step = place({}, kContig, HCRT_I64, {7});
      TT off = place({}, kContig, HCRT_I64, {3});
      TT y = output(s);
      run(hcrt_op_random_uniform, {&seed, &step, &off}, {&y}, attrs({42}, {-0.5, 1.5}), th);
      const int64_t per = s.empty() ? 1 : numelOf(Shape(s.begin() + 1, s.end()));
      Checker c{"random_uniform " + shapeStr(s)};
      for (int64_t i = 0; i < y.n(); ++i) {
        double want = (float)(-0.5 + 2.0 * hc::rt::uniform01(12345, 7, 3 + i / per, 42, i % per));
        c.check(y.out(i), want, 0, i);
      }
    }
}

// ------------------------------------------------------------ optimizers ----
// One AdamW step (t = step + 1), moments drawn at random (so the update
// lr m^/(sqrt(v^) + eps) is not bounded by ~lr): |p - p64| <= 16u (|p| +
// |update| + lr),
// |m - m64| <= 8u (|m| + |g|), |v - v64| <= 8u (v + g^2).
TEST(GraphOps, AdamW) {
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  uint32_t seed = 1800;
  for (int64_t step : {0, 4})
    for (int th : kThreads) {
      const Shape s0 = {5, 7}, s1 = {300, 131};
      TT st = place({}, kContig, HCRT_I64, {(double)step});
      TT p0 = make(s0, kContig, seed++), g0 = make(s0, kTransposed, seed++), m0 = make(s0, kContig, seed++),
         v0 = make(s0, kContig, seed++, 0, 0.01);
      TT p1 = make(s1, kPadded, seed++), g1 = make(s1, kContig, seed++), m1 = make(s1, kStrided, seed++),
         v1 = make(s1, kContig, seed++, 0, 0.01);
      // param 0 updated in place (outputs alias inputs), param 1 out of place
      TT op1 = output(s1), om1 = output(s1), ov1 = output(s1);
      std::vector<hcrt_tensor> ins = {st.t, p0.t, p1.t, g0.t, g1.t, m0.t, m1.t, v0.t, v1.t};
      std::vector<hcrt_tensor> outs = {p0.t, op1.t, m0.t, om1.t, v0.t, ov1.t};
      const std::vector<double> P0 = p0.v, M0 = m0.v, V0 = v0.v;
      hcrt_attrs a = attrs({}, {lr, b1, b2, eps, wd});
      hcrt_op_adamw(ins.data(), (int32_t)ins.size(), outs.data(), (int32_t)outs.size(), &a, hc_threads{0, th});
      const double t = step + 1, bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      auto check = [&](const char *name, const std::vector<double> &P, const std::vector<double> &G,
                       const std::vector<double> &M, const std::vector<double> &V, const TT &po, const TT &mo,
                       const TT &vo) {
        Checker c{std::string("adamw ") + name + " step=" + std::to_string(step) + " th=" + std::to_string(th)};
        for (size_t k = 0; k < P.size(); ++k) {
          double p = P[k] * (1 - lr * wd);
          double m = b1 * M[k] + (1 - b1) * G[k];
          double v = b2 * V[k] + (1 - b2) * G[k] * G[k];
          const double upd = lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
          p -= upd;
          c.check(po.out(k), p, 16 * kU * (std::fabs(p) + std::fabs(upd) + lr), k);
          c.check(mo.out(k), m, 8 * kU * (std::fabs(M[k]) + std::fabs(G[k])), k);
          c.check(vo.out(k), v, 8 * kU * (V[k] + G[k] * G[k]) + 1e-30, k);
        }
      };
      // in place: p0/m0/v0 storage is contiguous, so out(k) reads it
      check("in-place", P0, g0.v, M0, V0, p0, m0, v0);
      check("out-of-place", p1.v, g1.v, m1.v, v1.v, op1, om1, ov1);
    }
}

// ONNX Adam (ai.onnx.preview.training) vs its pseudo code in float64, on odd
// sizes and strided views: T = 0 (no bias correction) and T = 3, with and
// without the coupled L2 and post-update decay. Moments at random, so
// |X - X64| <= 16u (|X| + |update| + R), |V - V64| <= 8u (|V| + |G'|),
// |H - H64| <= 8u (H + G'^2).
TEST(GraphOps, Adam) {
  const double R = 1e-2, alpha = 0.9, beta = 0.999, eps = 1e-6;
  uint32_t seed = 1900;
  for (int64_t T : {0, 3})
    for (double nc : {0.0, 0.05})
      for (double post : {0.0, 0.01})
        for (int th : kThreads) {
          const Shape s0 = {3, 7}, s1 = {129, 131};
          TT r = place({}, kContig, HCRT_F32, {R}), t = place({}, kContig, HCRT_I64, {(double)T});
          TT x0 = make(s0, kContig, seed++), g0 = make(s0, kTransposed, seed++), v0 = make(s0, kContig, seed++),
             h0 = make(s0, kContig, seed++, 0, 0.01);
          TT x1 = make(s1, kPadded, seed++), g1 = make(s1, kContig, seed++), v1 = make(s1, kStrided, seed++),
             h1 = make(s1, kContig, seed++, 0, 0.01);
          TT ox1 = output(s1), ov1 = output(s1), oh1 = output(s1);  // param 1 out of place
          std::vector<hcrt_tensor> ins = {r.t, t.t, x0.t, x1.t, g0.t, g1.t, v0.t, v1.t, h0.t, h1.t};
          std::vector<hcrt_tensor> outs = {x0.t, ox1.t, v0.t, ov1.t, h0.t, oh1.t};
          const std::vector<double> X0 = x0.v, V0 = v0.v, H0 = h0.v;
          hcrt_attrs a = attrs({}, {alpha, beta, eps, nc, post});
          hcrt_op_adam(ins.data(), (int32_t)ins.size(), outs.data(), (int32_t)outs.size(), &a, hc_threads{0, th});
          const double radj = T > 0 ? R * std::sqrt(1 - std::pow(beta, T)) / (1 - std::pow(alpha, T)) : R;
          auto check = [&](const char *name, const std::vector<double> &X, const std::vector<double> &G,
                           const std::vector<double> &V, const std::vector<double> &H, const TT &xo,
                           const TT &vo, const TT &ho) {
            Checker c{std::string("adam ") + name + " T=" + std::to_string(T) + " nc=" + std::to_string(nc) +
                      " post=" + std::to_string(post) + " th=" + std::to_string(th)};
            for (size_t k = 0; k < X.size(); ++k) {
              const double gr = nc * X[k] + G[k];
              const double v = alpha * V[k] + (1 - alpha) * gr;
              const double h = beta * H[k] + (1 - beta) * gr * gr;
              const double upd = radj * v / (std::sqrt(h) + eps);
              const double x = (1 - post) * (X[k] - upd);
              c.check(xo.out(k), x, 16 * kU * (std::fabs(X[k]) + std::fabs(upd) + R), k);
              c.check(vo.out(k), v, 8 * kU * (std::fabs(V[k]) + std::fabs(gr) + std::fabs(X[k])), k);
              c.check(ho.out(k), h, 8 * kU * (H[k] + gr * gr + std::fabs(gr * X[k])) + 1e-30, k);
            }
          };
          check("in-place", X0, g0.v, V0, H0, x0, v0, h0);
          check("out-of-place", x1.v, g1.v, v1.v, h1.v, ox1, ov1, oh1);
        }
}

// SGD: |p - p64| <= 4u (|p| + lr (|g| + wd |p|)).
TEST(GraphOps, Sgd) {
  const double lr = 0.05, wd = 0.1;
  uint32_t seed = 1900;
  for (int th : kThreads) {
    const Shape s0 = {3, 11}, s1 = {200, 167};
    TT p0 = make(s0, kContig, seed++), g0 = make(s0, kBroadcast, seed++);
    TT p1 = make(s1, kTransposed, seed++), g1 = make(s1, kStrided, seed++);
    TT op1 = output(s1);
    const std::vector<double> P0 = p0.v;
    std::vector<hcrt_tensor> ins = {p0.t, p1.t, g0.t, g1.t}, outs = {p0.t, op1.t};
    hcrt_attrs a = attrs({}, {lr, wd});
    hcrt_op_sgd(ins.data(), 4, outs.data(), 2, &a, hc_threads{0, th});
    Checker c{"sgd th=" + std::to_string(th)};
    auto check = [&](const std::vector<double> &P, const std::vector<double> &G, const TT &o) {
      for (size_t k = 0; k < P.size(); ++k) {
        double want = P[k] - lr * (G[k] + wd * P[k]);
        c.check(o.out(k), want, 4 * kU * (std::fabs(want) + lr * (std::fabs(G[k]) + wd * std::fabs(P[k]))), k);
      }
    };
    check(P0, g0.v, p0);
    check(p1.v, g1.v, op1);
  }
}

// ------------------------------------------------ gradient norm, clipping ----
// grad_norm: double sums over fixed chunks: within a few ulps of the float64
// norm and the same bits at any thread count; odd sizes and strided views.
TEST(GraphOps, GradNorm) {
  uint32_t seed = 1950;
  std::vector<float> first;
  for (int th : {1, 0}) {
    TT a = make({3, 11}, kTransposed, seed), b = make({70001}, kContig, seed + 1, -2, 2),
       c = make({5, 7}, kStrided, seed + 2);
    TT norm = output({});
    run(hcrt_op_grad_norm, {&a, &b, &c}, {&norm}, attrs(), th);
    double sum = 0;
    for (const TT *x : {&a, &b, &c})
      for (double v : x->v)
        sum += v * v;
    Checker ck{"grad_norm th=" + std::to_string(th)};
    ck.check(norm.out(0), std::sqrt(sum), 2 * kU * std::sqrt(sum), 0);
    first.push_back(static_cast<float>(norm.out(0)));
  }
  EXPECT_EQ(first[0], first[1]) << "grad_norm depends on the thread count";
}

// grad_clip: g * min(1, max / (norm + 1e-6)) in float32; max 0: unchanged;
// a norm below max: unchanged; out of place from strided views.
TEST(GraphOps, GradClip) {
  uint32_t seed = 1960;
  for (int th : kThreads)
    for (double maxNorm : {0.0, 0.5, 1e9}) {
      TT g0 = make({4, 9}, kContig, seed++), g1 = make({13, 3}, kTransposed, seed++);
      const std::vector<double> G0 = g0.v, G1 = g1.v;
      TT norm = place({}, kContig, HCRT_F32, {2.5});
      TT o1 = output({13, 3});
      std::vector<hcrt_tensor> ins = {norm.t, g0.t, g1.t}, outs = {g0.t, o1.t};
      hcrt_attrs a = attrs({}, {maxNorm});
      hcrt_op_grad_clip(ins.data(), 3, outs.data(), 2, &a, hc_threads{0, th});
      const double coef = maxNorm > 0 ? std::min(1.0, maxNorm / (2.5 + 1e-6)) : 1.0;
      Checker ck{"grad_clip max=" + std::to_string(maxNorm)};
      for (size_t k = 0; k < G0.size(); ++k)
        ck.check(g0.out(k), G0[k] * coef, 2 * kU * std::fabs(G0[k]), k);
      for (size_t k = 0; k < G1.size(); ++k)
        ck.check(o1.out(k), G1[k] * coef, 2 * kU * std::fabs(G1[k]), k);
    }
}

// grad_accumulate over K = 3 micro-batches: acc = g0, acc += g1, then
// g = (acc + g2) / 3, in float32; K = 1 leaves both untouched.
TEST(GraphOps, GradAccumulate) {
  uint32_t seed = 1970;
  for (int th : kThreads) {
    const Shape s = {1001};
    TT acc = make(s, kContig, seed++);  // garbage: micro-batch 0 overwrites it
    std::vector<std::vector<double>> gs;
    TT g;
    for (int i = 0; i < 3; ++i) {
      g = make(s, kContig, seed++);
      gs.push_back(g.v);
      std::vector<hcrt_tensor> io = {g.t, acc.t};
      hcrt_attrs a = attrs({}, {double(i), 3.0});
      hcrt_op_grad_accumulate(io.data(), 2, io.data(), 2, &a, hc_threads{0, th});
    }
    Checker ck{"grad_accumulate th=" + std::to_string(th)};
    for (int64_t k = 0; k < g.n(); ++k) {
      const double want = (gs[0][k] + gs[1][k] + gs[2][k]) / 3;
      ck.check(g.out(k), want, 4 * kU * (std::fabs(gs[0][k]) + std::fabs(gs[1][k]) +
                                         std::fabs(gs[2][k])), k);
    }
    TT one = make(s, kContig, seed++), acc1 = make(s, kContig, seed++);
    const std::vector<double> O = one.v, A = acc1.v;
    std::vector<hcrt_tensor> io = {one.t, acc1.t};
    hcrt_attrs a = attrs({}, {0.0, 1.0});
    hcrt_op_grad_accumulate(io.data(), 2, io.data(), 2, &a, hc_threads{0, th});
    for (int64_t k = 0; k < one.n(); ++k) {
      ck.check(one.out(k), O[k], 0, k);
      ck.check(acc1.out(k), A[k], 0, k);
    }
  }
}

// -------------------------------------------------------------- determinism ----
// The same inputs and thread range give bit-identical outputs; the ops whose
// partitions never split a sum (reductions, scatter_add, modulate_grad,
// layer_norm_grad statistics) give the same bits at any thread count.
TEST(GraphOps, Deterministic) {
  TT x = make({64, 37, 29}, kTransposed, 2000);
  auto bits = [](const TT &t) {
    return std::vector<double>(t.mem.begin(), t.mem.end());
  };
  auto same = [](const std::vector<double> &a, const std::vector<double> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
  };
  std::vector<std::vector<double>> runs;
  for (int th : {0, 0, 1}) {
    TT y = output({64, 29});
    hcrt_attrs a{};
    a.ints[a.num_ints++] = 1;
    run(hcrt_op_reduce_sum, {&x}, {&y}, a, th);
    runs.push_back(bits(y));
  }
  EXPECT_TRUE(same(runs[0], runs[1]));
  EXPECT_TRUE(same(runs[0], runs[2]));
  TT w = make({50, 29}, kContig, 2001);
  TT none = absent();
  std::vector<std::vector<double>> lin;
  for (int rep = 0; rep < 2; ++rep) {
    TT y = output({64, 37, 50});
    run(hcrt_op_linear, {&x, &w, &none}, {&y}, attrs(), 0);
    lin.push_back(bits(y));
  }
  EXPECT_TRUE(same(lin[0], lin[1]));
  TT dy = make({2368, 29}, kContig, 2002);
  std::vector<double> iv(2368);
  for (size_t i = 0; i < iv.size(); ++i)
    iv[i] = (double)((i * 7) % 13);
  TT idx = place({2368}, kContig, HCRT_I64, iv);
  std::vector<std::vector<double>> sc;
  for (int th : {0, 1}) {
    TT d = output({13, 29});
    run(hcrt_op_scatter_add, {&dy, &idx}, {&d}, attrs({0}), th);
    sc.push_back(bits(d));
  }
  EXPECT_TRUE(same(sc[0], sc[1]));
}

} // namespace
