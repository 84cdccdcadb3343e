// Graph-op entry points (graph_ops.h) against float64 references written
// here after the compiler's evaluator (compiler/lib/Eval). Inputs come in
// several storage layouts of the same logical tensor: contiguous, transposed
// (dims stored in reverse order), strided (every dim with gaps, inner stride
// 2), padded (contiguous rows, gaps between rows) and broadcast (one dim of
// stride 0); gaps in the storage hold NaN, so reading one shows. Outputs are
// NaN-poisoned first and every check fails on NaN. Each op runs on 1 thread
// and on the whole team. Tolerances (u = 2^-24) are stated at each test.
#include "graph_ops_test_util.h"

using namespace graph_ops_test;

namespace {

// ------------------------------------------------------------ elementwise ----
struct BinCase {
  Shape a, b;
  Layout la, lb;
};
const BinCase kBinCases[] = {
    {{3, 5, 7}, {3, 5, 7}, kContig, kContig},
    {{3, 5, 7}, {3, 5, 7}, kTransposed, kStrided},
    {{4, 1, 7}, {5, 1}, kPadded, kContig},       // NumPy broadcast both ways
    {{2, 3, 5, 7}, {5, 7}, kBroadcast, kTransposed},
    {{1}, {3, 1, 4}, kContig, kBroadcast},
    {{}, {6, 5}, kContig, kStrided},             // 0-d operand
    {{13, 1}, {}, kStrided, kContig},
    {{131, 257}, {257}, kPadded, kContig},       // big enough for the team
    {{1}, {1}, kContig, kContig},
};

template <class Ref>
void checkBinary(const char *name, OpFn f, Ref ref, double lo, double hi, double rtol,
                 int32_t outType = HCRT_F32, int32_t inType = HCRT_F32) {
  uint32_t seed = 100;
  for (const BinCase &bc : kBinCases)
    for (int th : kThreads) {
      TT a = make(bc.a, bc.la, seed++, lo, hi, inType), b = make(bc.b, bc.lb, seed++, lo, hi, inType);
      Shape os = bcastShape({bc.a, bc.b});
      TT y = output(os, outType);
      run(f, {&a, &b}, {&y}, attrs(), th);
      Checker c{tag(name, th, {&a, &b})};
      for (int64_t i = 0; i < y.n(); ++i) {
        double want = roundTo(outType, ref(bget(a, os, i), bget(b, os, i)));
        c.check(y.out(i), want, rtol * std::fabs(want) + 1e-300, i);
      }
    }
}

// + - * / max min: float result = the rounded double result: |err| <= u|y|.
// pow (double then rounded): 2u|y|. less/equal: exact.
TEST(GraphOps, Binary) {
  checkBinary("add", hcrt_op_add, [](double a, double b) { return a + b; }, -1, 1, kU);
  checkBinary("sub", hcrt_op_sub, [](double a, double b) { return a - b; }, -1, 1, kU);
  checkBinary("mul", hcrt_op_mul, [](double a, double b) { return a * b; }, -1, 1, kU);
  checkBinary("div", hcrt_op_div, [](double a, double b) { return a / b; }, 0.25, 2, kU);
  checkBinary("pow", hcrt_op_pow, [](double a, double b) { return std::pow(a, b); }, 0.1, 3, 2 * kU);
  checkBinary("max", hcrt_op_max, [](double a, double b) { return std::max(a, b); }, -1, 1, 0);
  checkBinary("min", hcrt_op_min, [](double a, double b) { return std::min(a, b); }, -1, 1, 0);
  checkBinary("less", hcrt_op_less, [](double a, double b) { return double(a < b); }, -1, 1, 0, HCRT_I1);
  // Integers in [-2, 2]: equal often holds.
  checkBinary("equal", hcrt_op_equal, [](double a, double b) { return double(a == b); }, -2, 2, 0,
              HCRT_I1, HCRT_I64);
  checkBinary("equal_f32", hcrt_op_equal, [](double a, double b) { return double(a == b); }, -1, 1, 0,
              HCRT_I1);
  // Integer arithmetic (the double path): division truncates toward zero.
  checkBinary("add_i64", hcrt_op_add, [](double a, double b) { return a + b; }, -50, 50, 0, HCRT_I64,
              HCRT_I64);
  checkBinary("div_i32", hcrt_op_div, [](double a, double b) { return std::trunc(a / b); }, 1, 9, 0,
              HCRT_I32, HCRT_I32);
}

TEST(GraphOps, EqualOnEqualFloats) {
  TT a = place({4}, kContig, HCRT_F32, {1.5, -2, 0, 3});
  TT b = place({4}, kStrided, HCRT_F32, {1.5, 2, -0.0, 3.0000002});
  TT y = output({4}, HCRT_I1);
  run(hcrt_op_equal, {&a, &b}, {&y}, attrs(), 1);
  EXPECT_EQ(y.out(0), 1);
  EXPECT_EQ(y.out(1), 0);
  EXPECT_EQ(y.out(2), 1);
  EXPECT_EQ(y.out(3), 0);
}

struct UnCase {
  const char *name;
  OpFn f;
  std::function<double(double)> ref;
  double lo, hi, atol, rtol;
  std::initializer_list<int64_t> ints;
};

// Computed in double and rounded: 2u|y| (u|y| for exactly rounded ones);
// HCOps kernels: SiLU 1e-7 + 8u|y|, GELU-tanh 5e-7 + 4u|y| (README-kernels).
TEST(GraphOps, Unary) {
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  const UnCase cases[] = {
      {"neg", hcrt_op_neg, [](double x) { return -x; }, -3, 3, 0, 0, {}},
      {"sqrt", hcrt_op_sqrt, [](double x) { return std::sqrt(x); }, 0.01, 4, 0, kU, {}},
      {"exp", hcrt_op_exp, [](double x) { return std::exp(x); }, -5, 5, 0, 2 * kU, {}},
      {"log", hcrt_op_log, [](double x) { return std::log(x); }, 0.01, 5, 0, 2 * kU, {}},
      {"tanh", hcrt_op_tanh, [](double x) { return std::tanh(x); }, -4, 4, 0, 2 * kU, {}},
      {"sigmoid", hcrt_op_sigmoid, sig, -8, 8, 0, 2 * kU, {}},
      {"sin", hcrt_op_sin, [](double x) { return std::sin(x); }, -7, 7, 0, 2 * kU, {}},
      {"cos", hcrt_op_cos, [](double x) { return std::cos(x); }, -7, 7, 0, 2 * kU, {}},
      {"erf", hcrt_op_erf, [](double x) { return std::erf(x); }, -3, 3, 0, 2 * kU, {}},
      {"reciprocal", hcrt_op_reciprocal, [](double x) { return 1 / x; }, 0.1, 3, 0, kU, {}},
      {"silu", hcrt_op_silu, [&](double x) { return x * sig(x); }, -10, 10, 1e-7, 8 * kU, {}},
      {"gelu_tanh", hcrt_op_gelu,
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); },
       -8, 8, 5e-7, 4 * kU, {1}},
      {"gelu_erf", hcrt_op_gelu, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
       -8, 8, 1e-300, 2 * kU, {0}},
  };
  const Shape shapes[] = {{}, {1}, {3, 5, 7}, {2, 1, 13}, {181, 199}};
  uint32_t seed = 300;
  for (const UnCase &uc : cases)
    for (const Shape &s : shapes)
      for (Layout l : kAllLayouts)
        for (int th : kThreads) {
          if (s.size() > 2 && th == 0)
            continue;
          TT x = make(s, l, seed++, uc.lo, uc.hi);
          TT y = output(s);
          hcrt_attrs a = attrs(uc.ints);
          run(uc.f, {&x}, {&y}, a, th);
          Checker c{tag(uc.name, th, {&x})};
          for (int64_t i = 0; i < y.n(); ++i) {
            double want = uc.ref(x.v[i]);
            c.close(y.out(i), want, uc.atol + 1e-300, uc.rtol, i);
          }
        }
}

// where: exact (a selection); cond broadcast, f32 fast path and i64 path.
TEST(GraphOps, Where) {
  uint32_t seed = 500;
  for (int th : kThreads)
    for (int32_t dt : {HCRT_F32, HCRT_I64}) {
      TT c = make({5, 1}, kStrided, seed++, 0, 1, HCRT_I1);
      TT a = make({4, 5, 7}, kTransposed, seed++, -9, 9, dt);
      TT b = make({}, kContig, seed++, -9, 9, dt);
      Shape os = {4, 5, 7};
      TT y = output(os, dt);
      run(hcrt_op_where, {&c, &a, &b}, {&y}, attrs(), th);
      Checker ck{tag("where", th, {&c, &a, &b})};
      for (int64_t i = 0; i < y.n(); ++i)
        ck.check(y.out(i), bget(c, os, i) ? bget(a, os, i) : bget(b, os, i), 0, i);
    }
}

// cast: exact; float -> int truncates toward zero, -> i1 is != 0.
TEST(GraphOps, CastAndCopy) {
  struct C {
    int32_t from, to;
    double lo, hi;
  };
  const C cases[] = {{HCRT_F32, HCRT_I64, -9, 9}, {HCRT_F32, HCRT_I32, -9, 9}, {HCRT_F32, HCRT_I1, -1, 1},
                     {HCRT_I64, HCRT_F32, -1000, 1000}, {HCRT_I1, HCRT_F32, 0, 1}, {HCRT_I32, HCRT_F64, -5, 5},
                     {HCRT_F32, HCRT_F64, -1, 1}, {HCRT_F64, HCRT_F32, -1, 1}, {HCRT_F32, HCRT_F32, -1, 1}};
  uint32_t seed = 600;
  for (const C &cc : cases)
    for (Layout l : kAllLayouts)
      for (int th : kThreads) {
        TT x = make({3, 4, 5}, l, seed++, cc.lo, cc.hi, cc.from);
        if (cc.from == HCRT_F32 && cc.to == HCRT_I1)
          x = place(x.shape, l, cc.from, [&] {  // some exact zeros
            std::vector<double> v = x.v;
            for (size_t i = 0; i < v.size(); i += 3)
              v[i] = 0;
            if (l == kBroadcast)
              return std::vector<double>(v.size(), 0.0);
            return v;
          }());
        TT y = output(x.shape, cc.to);
        run(hcrt_op_cast, {&x}, {&y}, attrs(), th);
        Checker c{tag("cast", th, {&x}) + " " + std::to_string(cc.from) + "->" + std::to_string(cc.to)};
        for (int64_t i = 0; i < y.n(); ++i) {
          double v = x.v[i];
          double want = cc.to == HCRT_I1 ? double(v != 0)
                        : (cc.to == HCRT_I64 || cc.to == HCRT_I32) ? std::trunc(v)
                                                                   : roundTo(cc.to, v);
          c.check(y.out(i), want, 0, i);
        }
      }
  // Transposed views of >= 8 x 8 take the tiled transposing copy.
  const Shape copyShapes[] = {{2, 3, 1, 5}, {3, 37, 45}, {8, 8}, {9, 100}, {33, 2, 40}};
  for (const Shape &s : copyShapes)
    for (int32_t dt : {HCRT_F32, HCRT_I64, HCRT_I1, HCRT_F64})
      for (Layout l : kAllLayouts)
        for (int th : kThreads) {
          TT x = make(s, l, seed++, -3, 3, dt);
          TT y = output(x.shape, dt);
          run(hcrt_op_copy, {&x}, {&y}, attrs(), th);
          Checker c{tag("copy", th, {&x}) + " dtype=" + std::to_string(dt)};
          for (int64_t i = 0; i < y.n(); ++i)
            c.check(y.out(i), x.v[i], 0, i);
        }
  // A permutation that moves the contiguous dim to the middle: [a, b, c]
  // stored as [b, c, a]... viewed with src stride 1 along dim 0.
  {
    const Shape s = {40, 3, 50};
    std::vector<double> v(numelOf(s));
    std::iota(v.begin(), v.end(), 0.0);
    TT x = place(s, kContig, HCRT_F32, v);
    // storage [3, 50, 40]: (i, j, k) at j * 2000 + k * 40 + i
    TT st = output({3, 50, 40});
    float *p = reinterpret_cast<float *>(st.mem.data());
    for (int64_t i = 0; i < 40; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 50; ++k)
          p[j * 2000 + k * 40 + i] = (float)v[(i * 3 + j) * 50 + k];
    hcrt_tensor view = st.t;
    view.shape[0] = 40, view.shape[1] = 3, view.shape[2] = 50;
    view.strides[0] = 1, view.strides[1] = 2000, view.strides[2] = 40;
    TT y = output(s);
    hcrt_tensor yt = y.t;
    hcrt_op_copy(&view, 1, &yt, 1, nullptr, hc_threads{0, 0});
    Checker c{"copy permuted (1,2000,40)"};
    for (int64_t i = 0; i < y.n(); ++i)
      c.check(y.out(i), v[i], 0, i);
  }
}

// ------------------------------------------------------------- reductions ----
// Double accumulation, one rounding: u|y| + 1e-12 sum|x|.
TEST(GraphOps, Reductions) {
  struct C {
    Shape s;
    std::vector<int64_t> axes;
  };
  const C cases[] = {{{6, 1, 7, 5}, {3}},       {{6, 1, 7, 5}, {0}},    {{6, 1, 7, 5}, {0, 2}},
                     {{6, 1, 7, 5}, {1, 3}},    {{6, 1, 7, 5}, {0, 1, 2, 3}}, {{6, 1, 7, 5}, {}},
                     {{6, 1, 7, 5}, {1}},       {{1}, {0}},             {{300, 151}, {0}},
                     {{300, 151}, {1}},         {{3, 300, 61}, {0, 2}},
                     // bias-gradient shape: row chunks x column blocks, odd
                     {{3, 191, 1030}, {0, 1}},
                     // adaLN gate-gradient shape: per sample, over tokens
                     {{5, 300, 37}, {1}}, {{4, 7, 530}, {1}}};
  uint32_t seed = 700;
  for (const C &cc : cases)
    for (Layout l : kAllLayouts)
      for (int th : kThreads)
        for (int mean = 0; mean < 2; ++mean) {
          TT x = make(cc.s, l, seed++);
          Shape kept;
          std::vector<bool> red(cc.s.size(), false);
          for (int64_t a : cc.axes)
            red[a] = true;
          for (size_t d = 0; d < cc.s.size(); ++d)
            if (!red[d])
              kept.push_back(cc.s[d]);
          TT y = output(kept);
          hcrt_attrs a{};
          for (int64_t ax : cc.axes)
            a.ints[a.num_ints++] = ax;
          run(mean ? hcrt_op_reduce_mean : hcrt_op_reduce_sum, {&x}, {&y}, a, th);
          std::vector<double> want(y.n(), 0.0), mag(y.n(), 0.0);
          Shape st = rowStrides(cc.s);
          int64_t count = 1;
          for (int64_t ax : cc.axes)
            count *= cc.s[ax];
          for (int64_t i = 0; i < x.n(); ++i) {
            int64_t o = 0;
            for (size_t d = 0; d < cc.s.size(); ++d)
              if (!red[d])
                o = o * cc.s[d] + (i / st[d]) % cc.s[d];
            want[o] += x.v[i];
            mag[o] += std::fabs(x.v[i]);
          }
          Checker c{tag(mean ? "reduce_mean" : "reduce_sum", th, {&x})};
          for (int64_t o = 0; o < y.n(); ++o) {
            double w = mean ? want[o] / count : want[o];
            c.check(y.out(o), w, kU * std::fabs(w) + 1e-12 * mag[o], o);
          }
        }
}

// ------------------------------------------------------------- softmax ----
// Last axis (HCOps kernel): |y - y64| <= (n + 8) u y + u; other axes run in
// double (same bound checked). Backward: (n + 8) u (|y| sum|y dy| + |y dy|)
// + 4u |dx| + 1e-30.
TEST(GraphOps, Softmax) {
  struct C {
    Shape s;
    int64_t axis;
  };
  const C cases[] = {{{3, 5, 17}, 2}, {{3, 5, 17}, 1}, {{3, 5, 17}, 0}, {{1}, 0}, {{4, 1}, 1}, {{2, 300, 67}, 2}};
  uint32_t seed = 800;
  for (const C &cc : cases)
    for (Layout l : kAllLayouts)
      for (int th : kThreads) {
        TT x = make(cc.s, l, seed++, -4, 4);
        TT y = output(cc.s);
        run(hcrt_op_softmax, {&x}, {&y}, attrs({cc.axis}), th);
        const int64_t n = cc.s[cc.axis];
        Shape st = rowStrides(cc.s);
        const int64_t sa = st[cc.axis];
        std::vector<double> ref(x.n());
        for (int64_t i = 0; i < x.n(); ++i) {
          if ((i / sa) % n != 0)
            continue;  // i: first element of its softmax group
          double m = -INFINITY, sum = 0;
          for (int64_t k = 0; k < n; ++k)
            m = std::max(m, x.v[i + k * sa]);
          for (int64_t k = 0; k < n; ++k)
            sum += ref[i + k * sa] = std::exp(x.v[i + k * sa] - m);
          for (int64_t k = 0; k < n; ++k)
            ref[i + k * sa] /= sum;
        }
        Checker c{tag("softmax", th, {&x}) + " axis=" + std::to_string(cc.axis)};
        for (int64_t i = 0; i < x.n(); ++i)
          c.check(y.out(i), ref[i], (n + 8) * kU * ref[i] + kU, i);

        // Backward with y = the reference softmax (stored in layout l2).
        Layout l2 = l == kBroadcast ? kContig : l;
        TT yy = place(cc.s, l2, HCRT_F32, ref);
        TT dy = make(cc.s, l == kBroadcast ? kBroadcast : kStrided, seed++, -1, 1);
        TT dx = output(cc.s);
        run(hcrt_op_softmax_grad, {&dy, &yy}, {&dx}, attrs({cc.axis}), th);
        Checker cg{tag("softmax_grad", th, {&dy, &yy}) + " axis=" + std::to_string(cc.axis)};
        for (int64_t i = 0; i < x.n(); ++i) {
          if ((i / sa) % n != 0)
            continue;
          double dot = 0, mag = 0;
          for (int64_t k = 0; k < n; ++k) {
            dot += dy.v[i + k * sa] * yy.v[i + k * sa];
            mag += std::fabs(dy.v[i + k * sa] * yy.v[i + k * sa]);
          }
          for (int64_t k = 0; k < n; ++k) {
            int64_t j = i + k * sa;
            double w = yy.v[j] * (dy.v[j] - dot);
            double tol = (n + 8) * kU * (std::fabs(yy.v[j]) * mag + std::fabs(yy.v[j] * dy.v[j])) +
                         4 * kU * std::fabs(w) + 1e-30;
            cg.check(dx.out(j), w, tol, j);
          }
        }
      }
}

// ---------------------------------------------------------- layer norm ----
// Forward: 8 (D + 16) u (1 + |y|). Backward (dx): 16 (D + 16) u max(1, rstd)
// (1 + |dx| + sum|dxhat| (1 + |xhat|) / D)   (README-kernels bounds).
TEST(GraphOps, LayerNorm) {
  struct C {
    Shape s;
    int64_t axis;
    bool w, b;
  };
  const C cases[] = {{{2, 5, 13}, 2, true, true}, {{2, 5, 13}, 1, true, false}, {{2, 5, 13}, 2, false, false},
                     {{1, 1}, 1, true, true},     {{7, 1}, 1, false, true},     {{3, 64, 33}, 2, true, true}};
  uint32_t seed = 900;
  for (const C &cc : cases)
    for (Layout l : kAllLayouts)
      for (int th : kThreads) {
        const double eps = 1e-5;
        TT x = make(cc.s, l, seed++, -2, 3);
        Shape ns(cc.s.begin() + cc.axis, cc.s.end());
        TT w = cc.w ? make(ns, l == kContig ? kContig : kStrided, seed++, 0.5, 1.5) : absent();
        TT b = cc.b ? make(ns, l == kTransposed ? kBroadcast : kContig, seed++) : absent();
        TT y = output(cc.s);
        run(hcrt_op_layer_norm, {&x, &w, &b}, {&y}, attrs({cc.axis}, {eps}), th);
        TT dy = make(cc.s, l == kStrided ? kTransposed : kStrided, seed++);
        TT dx = output(cc.s);
        run(hcrt_op_layer_norm_grad, {&dy, &x, &w}, {&dx}, attrs({cc.axis}, {eps}), th);
        const int64_t D = numelOf(ns), rows = x.n() / D;
        Checker c{tag("layer_norm", th, {&x})}, cg{tag("layer_norm_grad", th, {&dy, &x})};
        std::vector<double> xh(D), dxh(D);
        for (int64_t r = 0; r < rows; ++r) {
          const double *v = &x.v[r * D], *g = &dy.v[r * D];
          double mean = 0, var = 0;
          for (int64_t k = 0; k < D; ++k)
            mean += v[k];
          mean /= D;
          for (int64_t k = 0; k < D; ++k)
            var += (v[k] - mean) * (v[k] - mean);
          var /= D;
          double rstd = 1 / std::sqrt(var + eps), m1 = 0, m2 = 0, mag = 0;
          for (int64_t k = 0; k < D; ++k) {
            xh[k] = (v[k] - mean) * rstd;
            double want = xh[k] * (cc.w ? w.v[k] : 1.0) + (cc.b ? b.v[k] : 0.0);
            c.check(y.out(r * D + k), want, 8 * (D + 16) * kU * (1 + std::fabs(want)), r * D + k);
            dxh[k] = g[k] * (cc.w ? w.v[k] : 1.0);
            m1 += dxh[k];
            m2 += dxh[k] * xh[k];
            mag += std::fabs(dxh[k]) * (1 + std::fabs(xh[k]));
          }
          m1 /= D, m2 /= D;
          for (int64_t k = 0; k < D; ++k) {
            double want = rstd * (dxh[k] - m1 - xh[k] * m2);
            double tol = 16 * (D + 16) * kU * std::max(1.0, rstd) * (1 + std::fabs(want) + mag / D);
            cg.check(dx.out(r * D + k), want, tol, r * D + k);
          }
        }
      }
}

// ------------------------------------------------------------ modulate ----
// Computed in double: y and dx within u|y|; dshift/dscale (double sums):
// u|y| + 1e-12 sum|terms|.
TEST(GraphOps, Modulate) {
  // 300 columns: blocks of 256 and 64-column register blocks with tails.
  const Shape shapes[] = {{2, 7, 5}, {1, 1, 1}, {3, 19, 300}, {2, 3, 64}};
  uint32_t seed = 1000;
  for (const Shape &s : shapes)
    for (Layout l : kAllLayouts)
      for (int th : kThreads)
        for (int rowsContig = 0; rowsContig < 2; ++rowsContig) {
        const int64_t B = s[0], N = s[1], D = s[2];
        TT x = make(s, l, seed++);
        // rowsContig: shift/scale rows contiguous, as adaLN's chunks are
        // (the vectorized paths); else broadcast/strided/transposed.
        TT sh = make({B, D}, l == kContig || rowsContig ? kContig : kBroadcast, seed++);
        TT sc = make({B, D}, rowsContig ? kContig : l == kPadded ? kTransposed : kStrided, seed++);
        TT y = output(s);
        run(hcrt_op_modulate, {&x, &sh, &sc}, {&y}, attrs(), th);
        TT dy = make(s, l == kContig ? kTransposed : kContig, seed++);
        TT dx = output(s), dsh = output({B, D}), dsc = output({B, D});
        run(hcrt_op_modulate_grad, {&dy, &x, &sc}, {&dx, &dsh, &dsc}, attrs(), th);
        Checker c{tag("modulate", th, {&x, &sh, &sc})}, cg{tag("modulate_grad", th, {&dy, &x, &sc})};
        for (int64_t b = 0; b < B; ++b)
          for (int64_t d = 0; d < D; ++d) {
            double ws = 0, wc = 0, ms = 0, mc = 0;
            for (int64_t n = 0; n < N; ++n) {
              int64_t i = (b * N + n) * D + d;
              double want = x.v[i] * (1 + sc.v[b * D + d]) + sh.v[b * D + d];
              c.check(y.out(i), want, kU * std::fabs(want), i);
              double wdx = dy.v[i] * (1 + sc.v[b * D + d]);
              cg.check(dx.out(i), wdx, kU * std::fabs(wdx), i);
              ws += dy.v[i], ms += std::fabs(dy.v[i]);
              wc += dy.v[i] * x.v[i], mc += std::fabs(dy.v[i] * x.v[i]);
            }
            cg.check(dsh.out(b * D + d), ws, kU * std::fabs(ws) + 1e-12 * ms, 1000000 + b * D + d);
            cg.check(dsc.out(b * D + d), wc, kU * std::fabs(wc) + 1e-12 * mc, 2000000 + b * D + d);
          }
      }
}

// -------------------------------------------------- modulated layer norm ----
// Against float64: y = x_hat (1 + scale) + shift and its adjoints, the
// statistics in float (the forward's, recomputed by the backward); dshift,
// dscale float sums over N. Each sample's sums do not depend on the thread
// count: the team's outputs equal one thread's bit for bit.
TEST(GraphOps, ModulatedLayerNorm) {
  const Shape shapes[] = {{2, 7, 5}, {1, 1, 1}, {3, 19, 300}, {5, 3, 64}, {2, 64, 33}};
  uint32_t seed = 1300;
  const double eps = 1e-6;
  for (const Shape &s : shapes)
    for (Layout l : kAllLayouts) {
      const int64_t B = s[0], N = s[1], D = s[2];
      TT x = make(s, l, seed++, -2, 3);
      TT sh = make({B, D}, l == kContig ? kContig : kBroadcast, seed++);
      TT sc = make({B, D}, l == kPadded ? kTransposed : kContig, seed++);
      TT dy = make(s, l == kContig ? kTransposed : kContig, seed++);
      std::vector<float> first[3];
      for (int th : kThreads) {
        TT y = output(s), dx = output(s), dsh = output({B, D}), dsc = output({B, D});
        run(hcrt_op_modulated_layer_norm, {&x, &sh, &sc}, {&y}, attrs({}, {eps}), th);
        run(hcrt_op_modulated_layer_norm_grad, {&dy, &x, &sc}, {&dx, &dsh, &dsc}, attrs({}, {eps}), th);
        Checker c{tag("modulated_layer_norm", th, {&x, &sh, &sc})},
            cg{tag("modulated_layer_norm_grad", th, {&dy, &x, &sc})};
        std::vector<double> xh(B * N * D), ws(B * D, 0), wc(B * D, 0), ms(B * D, 0), mc(B * D, 0);
        for (int64_t r = 0; r < B * N; ++r) {
          const int64_t b = r / N;
          const double *v = &x.v[r * D], *g = &dy.v[r * D];
          double mean = 0, var = 0;
          for (int64_t k = 0; k < D; ++k)
            mean += v[k];
          mean /= D;
          for (int64_t k = 0; k < D; ++k)
            var += (v[k] - mean) * (v[k] - mean);
          var /= D;
          const double rstd = 1 / std::sqrt(var + eps);
          double m1 = 0, m2 = 0, mag = 0;
          std::vector<double> gx(D);
          for (int64_t k = 0; k < D; ++k) {
            const double f = 1 + sc.v[b * D + k], h = (v[k] - mean) * rstd;
            xh[r * D + k] = h;
            const double want = h * f + sh.v[b * D + k];
            c.check(y.out(r * D + k), want,
                    8 * (D + 16) * kU * (1 + std::fabs(h)) * (1 + std::fabs(f)) + kU * std::fabs(want),
                    r * D + k);
            gx[k] = g[k] * f;
            m1 += gx[k], m2 += gx[k] * h;
            mag += std::fabs(gx[k]) * (1 + std::fabs(h));
            ws[b * D + k] += g[k], ms[b * D + k] += std::fabs(g[k]);
            wc[b * D + k] += g[k] * h, mc[b * D + k] += std::fabs(g[k]) * (1 + std::fabs(h));
          }
          m1 /= D, m2 /= D;
          for (int64_t k = 0; k < D; ++k) {
            const double want = rstd * (gx[k] - m1 - xh[r * D + k] * m2);
            const double tol = 16 * (D + 16) * kU * std::max(1.0, rstd) * (1 + std::fabs(want) + mag / D);
            cg.check(dx.out(r * D + k), want, tol, r * D + k);
          }
        }
        for (int64_t i = 0; i < B * D; ++i) {
          cg.check(dsh.out(i), ws[i], (N + 2) * kU * ms[i], 1000000 + i);
          cg.check(dsc.out(i), wc[i], (N + 8 * (D + 16)) * kU * mc[i], 2000000 + i);
        }
        const TT *outs[3] = {&dx, &dsh, &dsc};
        for (int o = 0; o < 3; ++o) {
          std::vector<float> got(outs[o]->n());
          for (int64_t i = 0; i < outs[o]->n(); ++i)
            got[i] = static_cast<float>(outs[o]->out(i));
          if (th == kThreads[0])
            first[o] = got;
          else
            EXPECT_EQ(0, std::memcmp(first[o].data(), got.data(), got.size() * sizeof(float)))
                << "modulated_layer_norm_grad output " << o << " differs between thread counts, "
                << shapeStr(s) << " " << layoutName(l);
        }
      }
    }
}

// -------------------------------------------------------- gated residual ----
// y = x + fl(g h) in float: within u|y| of the double value plus the product's
// rounding; dh = dy g exact up to one rounding; dgate (double sums) within
// u|dgate| + 1e-12 sum|terms|.
TEST(GraphOps, GatedResidual) {
  const Shape shapes[] = {{2, 7, 5}, {1, 1, 1}, {3, 19, 300}, {2, 3, 64}};
  uint32_t seed = 1200;
  for (const Shape &s : shapes)
    for (Layout l : kAllLayouts)
      for (int th : kThreads) {
        const int64_t B = s[0], N = s[1], D = s[2];
        TT x = make(s, l, seed++);
        TT g = make({B, D}, l == kContig ? kContig : kTransposed, seed++);
        TT h = make(s, l == kContig ? kTransposed : kContig, seed++);
        TT y = output(s);
        run(hcrt_op_gated_residual, {&x, &g, &h}, {&y}, attrs(), th);
        TT dy = make(s, l, seed++);
        TT dg = output({B, D}), dh = output(s);
        run(hcrt_op_gated_residual_grad, {&dy, &g, &h}, {&dg, &dh}, attrs(), th);
        Checker c{tag("gated_residual", th, {&x, &g, &h})},
            cg{tag("gated_residual_grad", th, {&dy, &g, &h})};
        for (int64_t b = 0; b < B; ++b)
          for (int64_t d = 0; d < D; ++d) {
            double wg = 0, mg = 0;
            for (int64_t n = 0; n < N; ++n) {
              const int64_t i = (b * N + n) * D + d;
              const double p = g.v[b * D + d] * h.v[i], want = x.v[i] + p;
              c.check(y.out(i), want, kU * (std::fabs(want) + std::fabs(p)), i);
              const double wdh = dy.v[i] * g.v[b * D + d];
              cg.check(dh.out(i), wdh, kU * std::fabs(wdh), i);
              wg += dy.v[i] * h.v[i], mg += std::fabs(dy.v[i] * h.v[i]);
            }
            cg.check(dg.out(b * D + d), wg, kU * std::fabs(wg) + 1e-12 * mg, 1000000 + b * D + d);
          }
      }
}

// ---------------------------------------------------------- contractions ----
// SGEMM bound (README-kernels): |c - c64| <= 2 (K + 4) u (S + |bias|),
// S = sum_k |a b|.
struct LinCase {
  Shape x;     // [..., in]
  int64_t out;
};

TEST(GraphOps, Linear) {
  const LinCase cases[] = {{{2, 3, 17}, 11}, {{1, 1}, 1}, {{5, 1}, 7}, {{1, 9}, 1}, {{4, 13, 37}, 29}, {{67, 5}, 3}};
  uint32_t seed = 1100;
  for (const LinCase &lc : cases)
    for (Layout lx : kAllLayouts)
      for (Layout lw : {kContig, kTransposed, kStrided, kBroadcast})
        for (int bias = 0; bias < 2; ++bias) {
          const int th = bias ? 0 : 1;
          const int64_t K = lc.x.back(), N = lc.out, M = numelOf(lc.x) / K;
          TT x = make(lc.x, lx, seed++);
          TT w = make({N, K}, lw, seed++);
          TT b = bias ? make({N}, lx == kContig ? kBroadcast : kStrided, seed++) : absent();
          Shape ys = lc.x;
          ys.back() = N;
          TT y = output(ys);
          run(hcrt_op_linear, {&x, &w, &b}, {&y}, attrs(), th);
          Checker c{tag("linear", th, {&x, &w})};
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double acc = bias ? b.v[n] : 0, S = 0;
              for (int64_t k = 0; k < K; ++k) {
                acc += x.v[m * K + k] * w.v[n * K + k];
                S += std::fabs(x.v[m * K + k] * w.v[n * K + k]);
              }
              c.check(y.out(m * N + n), acc, 2 * (K + 4) * kU * (S + (bias ? std::fabs(b.v[n]) : 0)) + 1e-30,
                      m * N + n);
            }
          // dx = dy W  (K of this product: N)
          TT dy = make(ys, lx == kContig ? kTransposed : lx, seed++);
          TT dx = output(lc.x);
          run(hcrt_op_linear_grad_input, {&dy, &w}, {&dx}, attrs(), th);
          Checker cgi{tag("linear_grad_input", th, {&dy, &w})};
          for (int64_t m = 0; m < M; ++m)
            for (int64_t k = 0; k < K; ++k) {
              double acc = 0, S = 0;
              for (int64_t n = 0; n < N; ++n) {
                acc += dy.v[m * N + n] * w.v[n * K + k];
                S += std::fabs(dy.v[m * N + n] * w.v[n * K + k]);
              }
              cgi.check(dx.out(m * K + k), acc, 2 * (N + 4) * kU * S + 1e-30, m * K + k);
            }
          // dw = dy^T x  (K of this product: M)
          TT dw = output({N, K});
          run(hcrt_op_linear_grad_weight, {&dy, &x}, {&dw}, attrs(), th);
          Checker cgw{tag("linear_grad_weight", th, {&dy, &x})};
          for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k) {
              double acc = 0, S = 0;
              for (int64_t m = 0; m < M; ++m) {
                acc += dy.v[m * N + n] * x.v[m * K + k];
                S += std::fabs(dy.v[m * N + n] * x.v[m * K + k]);
              }
              cgw.check(dw.out(n * K + k), acc, 2 * (M + 4) * kU * S + 1e-30, n * K + k);
            }
        }
}

// linear's y stored as bf16 (kernels.def's HCRT_BF16_SLOTS: the qkv that
// only attention reads): every element the float32 y of the same call
// rounded to nearest even, at precision bf16 and fp32, with and without a
// bias, on 1 and 2 threads; nothing past y written.
TEST(GraphOps, LinearBf16Output) {
  uint32_t seed = 1300;
  const int64_t K = 45, N = 101, M = 3 * 37;
  for (int64_t precision : {1, 0})
    for (int bias = 0; bias < 2; ++bias)
      for (int th : {1, 2}) {
        TT x = make({3, 37, K}, kContig, seed++);
        TT w = make({N, K}, kContig, seed++);
        TT b = bias ? make({N}, kContig, seed++) : absent();
        TT y32 = output({3, 37, N}), y16 = output({3, 37, N}, HCRT_BF16);
        const hcrt_attrs a = attrs({precision, 0});
        run(hcrt_op_linear, {&x, &w, &b}, {&y32}, a, th);
        run(hcrt_op_linear, {&x, &w, &b}, {&y16}, a, th);
        const float *f = reinterpret_cast<const float *>(y32.mem.data());
        const uint16_t *h = reinterpret_cast<const uint16_t *>(y16.mem.data());
        int64_t bad = 0;
        for (int64_t i = 0; i < M * N; ++i) {
          uint32_t u;
          std::memcpy(&u, &f[i], 4);
          u += 0x7fffu + ((u >> 16) & 1u);
          bad += static_cast<uint16_t>(u >> 16) != h[i];
        }
        // y16's storage past its M N bf16 elements still holds the poison
        // (0x7f bytes) output() filled it with
        for (int64_t i = M * N; i < 2 * M * N; ++i)
          bad += h[i] != 0x7f7f;
        EXPECT_EQ(bad, 0) << "precision " << (precision ? "bf16" : "fp32") << " bias " << bias
                          << " threads " << th;
      }
}

// The epilogue-fused GEMMs: linear_gelu's pre-activation within the SGEMM
// bound, its output within that times max|gelu'| (1.13) plus the fast
// GELU's 2e-6 (1 + |t|); linear_grad_input_gelu within 1.13 times the
// SGEMM bound plus the fast derivative's (1e-6 + 8u) |dy W| (Ops.Gelu*).
// linear_grad_weight_bias: dw and db the same bits as linear_grad_weight and
// reduce_sum over every dim but the last, in fp32 and bf16, layouts, thread
// counts, dY rows spanning several HC_SUM_CHUNK chunks (odd tails).
TEST(GraphOps, LinearGradWeightBias) {
  const LinCase cases[] = {{{2, 3, 17}, 11}, {{1, 1}, 1}, {{3, 301, 37}, 29}, {{1029, 5}, 70}};
  uint32_t seed = 1130;
  for (const LinCase &lc : cases)
    for (Layout lx : kAllLayouts)
      for (int bf16 = 0; bf16 < 2; ++bf16)
        for (int th : {1, 0}) {
          const int64_t K = lc.x.back(), N = lc.out;
          Shape ys = lc.x;
          ys.back() = N;
          TT x = make(lc.x, lx, seed++);
          TT dy = make(ys, lx == kContig ? kTransposed : lx, seed++);
          TT dw = output({N, K}), db = output({N}), dw2 = output({N, K}), db2 = output({N});
          const hcrt_attrs prec = attrs({bf16});
          run(hcrt_op_linear_grad_weight_bias, {&dy, &x}, {&dw, &db}, prec, th);
          run(hcrt_op_linear_grad_weight, {&dy, &x}, {&dw2}, prec, th);
          hcrt_attrs lead{};
          for (int64_t d = 0; d + 1 < static_cast<int64_t>(ys.size()); ++d)
            lead.ints[lead.num_ints++] = d;
          run(hcrt_op_reduce_sum, {&dy}, {&db2}, lead, th);
          const std::string at = tag("linear_grad_weight_bias", th, {&dy, &x}) +
                                 (bf16 ? " bf16" : " fp32");
          for (int64_t i = 0; i < N * K; ++i)
            ASSERT_EQ(dw.out(i), dw2.out(i)) << at << ": dw element " << i;
          for (int64_t i = 0; i < N; ++i)
            ASSERT_EQ(db.out(i), db2.out(i)) << at << ": db element " << i;
        }
}

TEST(GraphOps, LinearGeluEpilogues) {
  const LinCase cases[] = {{{2, 3, 17}, 11}, {{1, 1}, 1}, {{5, 1}, 7}, {{4, 13, 37}, 29}, {{67, 5}, 3}};
  uint32_t seed = 1150;
  for (const LinCase &lc : cases)
    for (Layout lx : kAllLayouts)
      for (Layout lw : {kContig, kTransposed})
        for (int bias = 0; bias < 2; ++bias) {
          const int th = bias ? 0 : 1;
          const int64_t K = lc.x.back(), N = lc.out, M = numelOf(lc.x) / K;
          TT x = make(lc.x, lx, seed++);
          TT w = make({N, K}, lw, seed++);
          TT b = bias ? make({N}, kContig, seed++) : absent();
          Shape ys = lc.x;
          ys.back() = N;
          TT y = output(ys), pre = output(ys);
          run(hcrt_op_linear_gelu, {&x, &w, &b}, {&y, &pre}, attrs(), th);
          Checker c{tag("linear_gelu", th, {&x, &w})};
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double acc = bias ? b.v[n] : 0, S = 0;
              for (int64_t k = 0; k < K; ++k) {
                acc += x.v[m * K + k] * w.v[n * K + k];
                S += std::fabs(x.v[m * K + k] * w.v[n * K + k]);
              }
              const double tol = 2 * (K + 4) * kU * (S + (bias ? std::fabs(b.v[n]) : 0)) + 1e-30;
              c.check(pre.out(m * N + n), acc, tol, m * N + n);
              c.check(y.out(m * N + n), geluD(acc), 1.13 * tol + 2e-6 * (1 + std::fabs(acc)), -(m * N + n));
            }
          // dx = (dy W) * gelu'(h), h = the GELU's input [..., in]
          TT dy = make(ys, lx == kContig ? kTransposed : lx, seed++);
          TT h = make(lc.x, lx == kContig ? kContig : kTransposed, seed++);
          TT dx = output(lc.x);
          run(hcrt_op_linear_grad_input_gelu, {&dy, &w, &h}, {&dx}, attrs(), th);
          Checker cg{tag("linear_grad_input_gelu", th, {&dy, &w, &h})};
          for (int64_t m = 0; m < M; ++m)
            for (int64_t k = 0; k < K; ++k) {
              double acc = 0, S = 0;
              for (int64_t n = 0; n < N; ++n) {
                acc += dy.v[m * N + n] * w.v[n * K + k];
                S += std::fabs(dy.v[m * N + n] * w.v[n * K + k]);
              }
              const double d = geluGradD(h.v[m * K + k]);
              cg.check(dx.out(m * K + k), acc * d,
                       1.13 * 2 * (N + 4) * kU * S + (1e-6 + 8 * kU) * std::fabs(acc) + 1e-30,
                       m * K + k);
            }
        }
}

TEST(GraphOps, Matmul) {
  struct C {
    Shape a, b;
  };
  const C cases[] = {{{2, 3, 4, 5}, {2, 1, 5, 6}}, {{4}, {3, 4, 5}}, {{2, 3, 4}, {4}}, {{4}, {4}},
                     {{3, 5}, {5, 2}},             {{1, 1}, {1, 1}}, {{7, 1, 2, 9}, {3, 9, 1}}, {{2, 1, 65, 33}, {1, 3, 33, 70}}};
  uint32_t seed = 1200;
  for (const C &cc : cases)
    for (Layout la : kAllLayouts)
      for (Layout lb : {kContig, kTransposed, kStrided, kBroadcast}) {
        const int th = (la + lb) % 2 ? 0 : 1;
        TT a = make(cc.a, la, seed++), b = make(cc.b, lb, seed++);
        Shape sa = cc.a, sb = cc.b;
        const bool vA = sa.size() == 1, vB = sb.size() == 1;
        if (vA)
          sa.insert(sa.begin(), 1);
        if (vB)
          sb.push_back(1);
        const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
        Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
        Shape bs = bcastShape({ba, bb});
        Shape ys = bs;
        if (!vA)
          ys.push_back(M);
        if (!vB)
          ys.push_back(N);
        TT y = output(ys);
        run(hcrt_op_matmul, {&a, &b}, {&y}, attrs(), th);
        // batch index -> operand batch offsets (broadcast)
        auto boff = [&](const Shape &own, int64_t bi) {
          int64_t off = 0, mult = 1;
          const int r = (int)bs.size(), orr = (int)own.size();
          for (int d = r - 1; d >= 0; --d) {
            int64_t c = bi % bs[d];
            bi /= bs[d];
            int od = d - (r - orr);
            if (od >= 0) {
              off += (own[od] == 1 ? 0 : c) * mult;
              mult *= own[od];
            }
          }
          return off;
        };
        Checker c{tag("matmul", th, {&a, &b})};
        const int64_t nb = numelOf(bs);
        for (int64_t bi = 0; bi < nb; ++bi) {
          const double *pa = &a.v[boff(ba, bi) * M * K], *pb = &b.v[boff(bb, bi) * K * N];
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double acc = 0, S = 0;
              for (int64_t k = 0; k < K; ++k) {
                acc += pa[m * K + k] * pb[k * N + n];
                S += std::fabs(pa[m * K + k] * pb[k * N + n]);
              }
              int64_t o = (bi * M + m) * N + n;
              c.check(y.out(o), acc, 2 * (K + 4) * kU * S + 1e-30, o);
            }
        }
      }
}

// --------------------------------------------------------------- loss ----
// Loss (double accumulation): 2u loss + 1e-30; gradient: 4u |grad| + 1e-30.
TEST(GraphOps, MseLoss) {
  const Shape shapes[] = {{1}, {3, 7, 5}, {}, {200, 201}};
  uint32_t seed = 1400;
  for (const Shape &s : shapes)
    for (Layout l : kAllLayouts)
      for (int th : kThreads) {
        TT p = make(s, l, seed++), t = make(s, l == kContig ? kBroadcast : kContig, seed++);
        TT loss = output({});
        run(hcrt_op_mse_loss, {&p, &t}, {&loss}, attrs(), th);
        double want = 0;
        for (int64_t i = 0; i < p.n(); ++i)
          want += (p.v[i] - t.v[i]) * (p.v[i] - t.v[i]);
        want /= p.n();
        Checker c{tag("mse_loss", th, {&p, &t})};
        c.check(loss.out(0), want, 2 * kU * want + 1e-30, 0);
        TT dl = place({}, kContig, HCRT_F32, {0.75});
        TT dp = output(s);
        run(hcrt_op_mse_loss_grad, {&dl, &p, &t}, {&dp}, attrs(), th);
        for (int64_t i = 0; i < p.n(); ++i) {
          double w = 0.75 * 2 * (p.v[i] - t.v[i]) / p.n();
          c.check(dp.out(i), w, 4 * kU * std::fabs(w) + 1e-30, i);
        }
      }
}
} // namespace
