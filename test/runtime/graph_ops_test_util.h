// Shared by the graph-op gtests: tensors in several storage layouts with
// NaN in the gaps, poisoned outputs, float64 reference helpers.
#ifndef HC_TEST_RUNTIME_GRAPH_OPS_TEST_UTIL_H
#define HC_TEST_RUNTIME_GRAPH_OPS_TEST_UTIL_H

#include "hc/runtime/graph_ops.h"
#include "hc/abi/random.h"

#include "kernel_test_util.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

namespace graph_ops_test {

using namespace hctest;

using OpFn = void (*)(const hcrt_tensor *, int32_t, hcrt_tensor *, int32_t,
                      const hcrt_attrs *, hc_threads);
using Shape = std::vector<int64_t>;

enum Layout { kContig, kTransposed, kStrided, kPadded, kBroadcast };
inline constexpr Layout kAllLayouts[] = {kContig, kTransposed, kStrided, kPadded, kBroadcast};
inline const char *layoutName(Layout l) {
  static const char *n[] = {"contig", "transposed", "strided", "padded", "broadcast"};
  return n[l];
}

inline int64_t numelOf(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

inline Shape rowStrides(const Shape &s) {
  Shape st(s.size(), 1);
  for (int d = (int)s.size() - 2; d >= 0; --d)
    st[d] = st[d + 1] * s[d + 1];
  return st;
}

inline std::string shapeStr(const Shape &s) {
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

inline int esizeOf(int32_t dt) { return dt == HCRT_F64 || dt == HCRT_I64 ? 8 : dt == HCRT_I1 ? 1 : 4; }

inline double roundTo(int32_t dt, double x) {
  switch (dt) {
  case HCRT_F32: return (double)(float)x;
  case HCRT_I1: return x != 0;
  case HCRT_I64:
  case HCRT_I32: return std::round(x);
  default: return x;
  }
}

inline void storeAt(void *p, int32_t dt, int64_t off, double x) {
  switch (dt) {
  case HCRT_F32: static_cast<float *>(p)[off] = (float)x; break;
  case HCRT_F64: static_cast<double *>(p)[off] = x; break;
  case HCRT_I64: static_cast<int64_t *>(p)[off] = (int64_t)x; break;
  case HCRT_I32: static_cast<int32_t *>(p)[off] = (int32_t)x; break;
  default: static_cast<uint8_t *>(p)[off] = x != 0; break;
  }
}

inline void fillPoison(TT &x, size_t bytes) {
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

inline void bindTensor(TT &x) {
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
inline TT place(const Shape &shape, Layout layout, int32_t dtype, std::vector<double> vals) {
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
inline TT make(const Shape &shape, Layout layout, uint32_t seed, double lo = -1, double hi = 1,
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

inline TT output(const Shape &shape, int32_t dtype = HCRT_F32) {
  TT x;
  x.shape = shape, x.dtype = dtype, x.strides = rowStrides(shape);
  fillPoison(x, (size_t)std::max<int64_t>(x.n(), 1) * esizeOf(dtype));
  bindTensor(x);
  return x;
}

inline TT absent() {
  TT x;
  x.t = hcrt_tensor{};
  x.t.data = nullptr;
  return x;
}

inline hcrt_attrs attrs(std::initializer_list<int64_t> ints = {}, std::initializer_list<double> floats = {}) {
  hcrt_attrs a{};
  for (int64_t i : ints)
    a.ints[a.num_ints++] = i;
  for (double f : floats)
    a.floats[a.num_floats++] = f;
  return a;
}

inline void run(OpFn f, std::vector<const TT *> in, std::vector<TT *> out, const hcrt_attrs &a, int th) {
  std::vector<hcrt_tensor> ti, to;
  for (const TT *x : in)
    ti.push_back(x->t);
  for (TT *x : out)
    to.push_back(x->t);
  f(ti.data(), (int32_t)ti.size(), to.data(), (int32_t)to.size(), &a, hc_threads{0, th});
}

// NumPy broadcast of shapes.
inline Shape bcastShape(const std::vector<Shape> &s) {
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
inline double bget(const TT &x, const Shape &os, int64_t i) {
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

inline std::string tag(const char *op, int th, std::initializer_list<const TT *> ins) {
  std::string s = std::string(op) + " th=" + std::to_string(th);
  for (const TT *x : ins)
    s += " " + shapeStr(x->shape) + ":" + layoutName(x->layout);
  return s;
}

inline constexpr int kThreads[] = {1, 0};  // one thread, the whole team

} // namespace graph_ops_test

#endif // HC_TEST_RUNTIME_GRAPH_OPS_TEST_UTIL_H
