// Graph-op entry points (graph_ops.h) against float64 references written
// here after the compiler's evaluator (compiler/lib/Eval). Inputs come in
// several storage layouts of the same logical tensor: contiguous, transposed
// (dims stored in reverse order), strided (every dim with gaps, inner stride
// 2), padded (contiguous rows, gaps between rows) and broadcast (one dim of
// stride 0); gaps in the storage hold NaN, so reading one shows. Outputs are
// NaN-poisoned first and every check fails on NaN. Each op runs on 1 thread
// and on the whole team. Tolerances (u = 2^-24) are stated at each test.
#include "hc/runtime/graph_ops.h"
#include "hc/runtime/random.h"

#include "kernel_test_util.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

using namespace hctest;

namespace {

using OpFn = void (*)(const hcrt_tensor *, int32_t, hcrt_tensor *, int32_t,
                      const hcrt_attrs *, hc_threads);
using Shape = std::vector<int64_t>;

enum Layout { kContig, kTransposed, kStrided, kPadded, kBroadcast };
const Layout kAllLayouts[] = {kContig, kTransposed, kStrided, kPadded, kBroadcast};
const char *layoutName(Layout l) {
  static const char *n[] = {"contig", "transposed", "strided", "padded", "broadcast"};
  return n[l];
}

int64_t numelOf(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

Shape rowStrides(const Shape &s) {
  Shape st(s.size(), 1);
  for (int d = (int)s.size() - 2; d >= 0; --d)
    st[d] = st[d + 1] * s[d + 1];
  return st;
}

std::string shapeStr(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// A logical tensor (row-major double values) stored in some layout.
struct TT {
  Shape shape, strides;
  std::vector<double> v;
  int32_t dtype = HCRT_F32;
  std::vector<double> mem;  // storage (8-byte aligned bytes)
  hcrt_tensor t{};
  Layout layout = kContig;

  int64_t n() const { return numelOf(shape); }
  // Element i (row-major) of a contiguous output.
  double out(int64_t i) const {
    const void *p = mem.data();
    switch (dtype) {
    case HCRT_F32: return static_cast<const float *>(p)[i];
    case HCRT_F64: return static_cast<const double *>(p)[i];
    case HCRT_I64: return (double)static_cast<const int64_t *>(p)[i];
    case HCRT_I32: return static_cast<const int32_t *>(p)[i];
    default: {
      uint8_t b = static_cast<const uint8_t *>(p)[i];
      return b > 1 ? NAN : b;  // poison (not 0/1) reads as NaN
    }
    }
  }
};

int esizeOf(int32_t dt) { return dt == HCRT_F64 || dt == HCRT_I64 ? 8 : dt == HCRT_I1 ? 1 : 4; }

double roundTo(int32_t dt, double x) {
  switch (dt) {
  case HCRT_F32: return (double)(float)x;
  case HCRT_I1: return x != 0;
  case HCRT_I64:
  case HCRT_I32: return std::round(x);
  default: return x;
  }
}

void storeAt(void *p, int32_t dt, int64_t off, double x) {
  switch (dt) {
  case HCRT_F32: static_cast<float *>(p)[off] = (float)x; break;
  case HCRT_F64: static_cast<double *>(p)[off] = x; break;
  case HCRT_I64: static_cast<int64_t *>(p)[off] = (int64_t)x; break;
  case HCRT_I32: static_cast<int32_t *>(p)[off] = (int32_t)x; break;
  default: static_cast<uint8_t *>(p)[off] = x != 0; break;
  }
}

void fillPoison(TT &x, size_t bytes) {
  x.mem.assign((bytes + 7) / 8 + 1, 0.0);
  if (x.dtype == HCRT_F32) {
    float *f = reinterpret_cast<float *>(x.mem.data());
    std::fill(f, f + x.mem.size() * 2, std::numeric_limits<float>::quiet_NaN());
  } else if (x.dtype == HCRT_F64) {
    std::fill(x.mem.begin(), x.mem.end(), std::numeric_limits<double>::quiet_NaN());
  } else {
    std::memset(x.mem.data(), 0x7F, x.mem.size() * 8);
  }
}

void bindTensor(TT &x) {
  x.t = hcrt_tensor{};
  x.t.data = x.mem.data();
  x.t.dtype = x.dtype;
  x.t.rank = (int32_t)x.shape.size();
  for (size_t d = 0; d < x.shape.size(); ++d) {
    x.t.shape[d] = x.shape[d];
    x.t.strides[d] = x.strides[d];
  }
}

// Stores logical values `vals` in `layout`. kBroadcast needs values that
// are constant along the first dim of size > 1 (make() generates them so).
TT place(const Shape &shape, Layout layout, int32_t dtype, std::vector<double> vals) {
  TT x;
  x.shape = shape, x.dtype = dtype, x.layout = layout, x.v = std::move(vals);
  const int r = (int)shape.size();
  Shape st(r, 1);
  switch (layout) {
  case kContig: st = rowStrides(shape); break;
  case kTransposed: {
    Shape rev(shape.rbegin(), shape.rend());
    Shape rs = rowStrides(rev);
    for (int d = 0; d < r; ++d)
      st[d] = rs[r - 1 - d];
    break;
  }
  case kStrided:
  case kPadded:
    for (int d = r - 1; d >= 0; --d)
      st[d] = d == r - 1 ? (layout == kStrided ? 2 : 1) : st[d + 1] * shape[d + 1] + 3;
    break;
  case kBroadcast: {
    int bd = -1;
    for (int d = 0; d < r && bd < 0; ++d)
      if (shape[d] > 1)
        bd = d;
    Shape s2 = shape;
    if (bd >= 0)
      s2[bd] = 1;
    st = rowStrides(s2);
    if (bd >= 0)
      st[bd] = 0;
    break;
  }
  }
  x.strides = st;
  int64_t extent = 1;
  for (int d = 0; d < r; ++d)
    extent += (shape[d] - 1) * st[d];
  if (x.n() == 0)
    extent = 1;
  fillPoison(x, (size_t)extent * esizeOf(dtype));
  Shape idx(r, 0);
  for (int64_t i = 0; i < x.n(); ++i) {
    int64_t off = 0, rem = i;
    for (int d = r - 1; d >= 0; --d) {
      off += (rem % shape[d]) * st[d];
      rem /= shape[d];
    }
    x.v[i] = roundTo(dtype, x.v[i]);
    storeAt(x.mem.data(), dtype, off, x.v[i]);
  }
  bindTensor(x);
  return x;
}

// Uniform random values in [lo, hi] (integers for integer dtypes).
TT make(const Shape &shape, Layout layout, uint32_t seed, double lo = -1, double hi = 1,
        int32_t dtype = HCRT_F32) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  int64_t n = numelOf(shape);
  std::vector<double> v(n);
  const int r = (int)shape.size();
  int bd = -1;
  if (layout == kBroadcast)
    for (int d = 0; d < r && bd < 0; ++d)
      if (shape[d] > 1)
        bd = d;
  Shape st = rowStrides(shape);
  for (int64_t i = 0; i < n; ++i) {
    if (bd >= 0 && (i / st[bd]) % shape[bd] != 0) {
      v[i] = v[i - ((i / st[bd]) % shape[bd]) * st[bd]];
      continue;
    }
    double x = dist(rng);
    if (dtype == HCRT_I1)
      x = x > 0.5 * (lo + hi);
    v[i] = x;
  }
  return place(shape, layout, dtype, std::move(v));
}

TT output(const Shape &shape, int32_t dtype = HCRT_F32) {
  TT x;
  x.shape = shape, x.dtype = dtype, x.strides = rowStrides(shape);
  fillPoison(x, (size_t)std::max<int64_t>(x.n(), 1) * esizeOf(dtype));
  bindTensor(x);
  return x;
}

TT absent() {
  TT x;
  x.t = hcrt_tensor{};
  x.t.data = nullptr;
  return x;
}

hcrt_attrs attrs(std::initializer_list<int64_t> ints = {}, std::initializer_list<double> floats = {}) {
  hcrt_attrs a{};
  for (int64_t i : ints)
    a.ints[a.num_ints++] = i;
  for (double f : floats)
    a.floats[a.num_floats++] = f;
  return a;
}

void run(OpFn f, std::vector<const TT *> in, std::vector<TT *> out, const hcrt_attrs &a, int th) {
  std::vector<hcrt_tensor> ti, to;
  for (const TT *x : in)
    ti.push_back(x->t);
  for (TT *x : out)
    to.push_back(x->t);
  f(ti.data(), (int32_t)ti.size(), to.data(), (int32_t)to.size(), &a, hc_threads{0, th});
}

// NumPy broadcast of shapes.
Shape bcastShape(const std::vector<Shape> &s) {
  size_t r = 0;
  for (const Shape &x : s)
    r = std::max(r, x.size());
  Shape o(r, 1);
  for (const Shape &x : s)
    for (size_t i = 0; i < x.size(); ++i) {
      int64_t &d = o[r - x.size() + i];
      if (x[i] != 1)
        d = x[i];
    }
  return o;
}

// Value of x at output flat index `i` of broadcast shape `os`.
double bget(const TT &x, const Shape &os, int64_t i) {
  const int r = (int)os.size(), xr = (int)x.shape.size();
  int64_t off = 0, mult = 1;
  for (int d = r - 1; d >= 0; --d) {
    int64_t c = i % os[d];
    i /= os[d];
    int xd = d - (r - xr);
    if (xd >= 0) {
      off += (x.shape[xd] == 1 ? 0 : c) * mult;
      mult *= x.shape[xd];
    }
  }
  return x.v[off];
}

std::string tag(const char *op, int th, std::initializer_list<const TT *> ins) {
  std::string s = std::string(op) + " th=" + std::to_string(th);
  for (const TT *x : ins)
    s += " " + shapeStr(x->shape) + ":" + layoutName(x->layout);
  return s;
}

const int kThreads[] = {1, 0};  // one thread, the whole team

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
                     {{300, 151}, {1}},         {{3, 300, 61}, {0, 2}}};
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
  const Shape shapes[] = {{2, 7, 5}, {1, 1, 1}, {3, 19, 300}};
  uint32_t seed = 1000;
  for (const Shape &s : shapes)
    for (Layout l : kAllLayouts)
      for (int th : kThreads) {
        const int64_t B = s[0], N = s[1], D = s[2];
        TT x = make(s, l, seed++);
        TT sh = make({B, D}, l == kContig ? kContig : kBroadcast, seed++);
        TT sc = make({B, D}, l == kPadded ? kTransposed : kStrided, seed++);
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

// ------------------------------------------------------------- attention ----
// Forward: 8 (N + Dh + 16) u (1 + |o|). Backward: 16 (2N + Dh + 16) u
// (1 + sum |terms|) per element (README-kernels flash attention bounds).
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
        TT o = output({B, N, D});
        run(hcrt_op_attention, {&qkv}, {&o}, attrs({H}, {scale}), th);
        const Layout ldo[] = {kStrided, kPadded, kPadded, kContig, kBroadcast};  // by l
        TT dout = make({B, N, D}, ldo[l], seed++);
        TT g = output({B, N, 3 * D});
        run(hcrt_op_attention_grad, {&dout, &qkv}, {&g}, attrs({H}, {scale}), th);
        auto at = [&](int64_t b, int64_t n, int64_t which, int64_t h, int64_t d) {
          return (b * N + n) * 3 * D + which * D + h * Dh + d;
        };
        Checker c{tag("attention", th, {&qkv})}, cg{tag("attention_grad", th, {&dout, &qkv})};
        std::vector<double> want(B * N * 3 * D, 0.0), mag(B * N * 3 * D, 0.0);
        std::vector<double> P(N), dP(N), od(Dh);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < N; ++i) {
              double m = -INFINITY, sum = 0;
              for (int64_t j = 0; j < N; ++j) {
                double s = 0;
                for (int64_t d = 0; d < Dh; ++d)
                  s += qkv.v[at(b, i, 0, h, d)] * qkv.v[at(b, j, 1, h, d)];
                P[j] = s * scale;
                m = std::max(m, P[j]);
              }
              for (int64_t j = 0; j < N; ++j)
                sum += P[j] = std::exp(P[j] - m);
              for (int64_t j = 0; j < N; ++j)
                P[j] /= sum;
              double rowDot = 0;
              for (int64_t d = 0; d < Dh; ++d) {
                od[d] = 0;
                for (int64_t j = 0; j < N; ++j)
                  od[d] += P[j] * qkv.v[at(b, j, 2, h, d)];
                int64_t oi = (b * N + i) * D + h * Dh + d;
                c.check(o.out(oi), od[d], 8 * (N + Dh + 16) * kU * (1 + std::fabs(od[d])), oi);
                rowDot += dout.v[oi] * od[d];
              }
              for (int64_t j = 0; j < N; ++j) {
                double dp = 0;
                for (int64_t d = 0; d < Dh; ++d)
                  dp += dout.v[(b * N + i) * D + h * Dh + d] * qkv.v[at(b, j, 2, h, d)];
                double ds = P[j] * (dp - rowDot) * scale;
                for (int64_t d = 0; d < Dh; ++d) {
                  double gd = dout.v[(b * N + i) * D + h * Dh + d];
                  double qd = qkv.v[at(b, i, 0, h, d)], kd = qkv.v[at(b, j, 1, h, d)];
                  want[at(b, i, 0, h, d)] += ds * kd;
                  mag[at(b, i, 0, h, d)] += std::fabs(ds * kd) + 4 * P[j];
                  want[at(b, j, 1, h, d)] += ds * qd;
                  mag[at(b, j, 1, h, d)] += std::fabs(ds * qd) + 4 * P[j];
                  want[at(b, j, 2, h, d)] += P[j] * gd;
                  mag[at(b, j, 2, h, d)] += std::fabs(P[j] * gd);
                }
              }
            }
        const double f = 16 * (2 * N + Dh + 16) * kU;
        for (int64_t i = 0; i < g.n(); ++i)
          cg.check(g.out(i), want[i], f * (1 + mag[i]), i);
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
