// libhcrt internals of the graph-op entry points (graph_ops*.cpp): strided
// N-d iteration, dtype-generic loads/stores, packing and partitioning.
// Not installed.
#ifndef HC_RUNTIME_GRAPH_OPS_UTIL_H
#define HC_RUNTIME_GRAPH_OPS_UTIL_H

#include "hc/runtime/graph_ops.h"
#include "internal.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

namespace hc::rt::gop {

constexpr int kMaxOps = 4;  // operands of one strided loop (output included)
// Elementwise work below this many elements stays on the calling thread.
constexpr int64_t kSerialElems = 1 << 15;

inline int64_t numel(const hcrt_tensor &t) {
  int64_t n = 1;
  for (int d = 0; d < t.rank; ++d)
    n *= t.shape[d];
  return n;
}

inline int64_t prod(const int64_t *s, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; ++d)
    n *= s[d];
  return n;
}

inline int elemSize(int32_t dtype) { return hcrt_dtype_bytes(dtype); }

inline bool isIntType(int32_t dtype) {
  return dtype == HCRT_I64 || dtype == HCRT_I32 || dtype == HCRT_I1;
}

inline void contiguousStrides(int rank, const int64_t *shape, int64_t *st) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    st[d] = s;
    s *= shape[d];
  }
}

// Row-major contiguous (size-1 dims may have any stride).
inline bool isContiguous(const hcrt_tensor &t) {
  int64_t s = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (t.shape[d] == 0)
      return true;
    if (t.shape[d] != 1 && t.strides[d] != s)
      return false;
    s *= t.shape[d];
  }
  return true;
}

// An uninitialized heap buffer.
template <class T> struct Buf {
  std::unique_ptr<T[]> p;
  T *alloc(int64_t n) {
    p.reset(new T[n > 0 ? n : 1]);
    return p.get();
  }
  T *get() const { return p.get(); }
};

// ---- dtype-generic element access (the evaluator's double semantics) ----
inline double loadD(const void *base, int32_t dt, int64_t off) {
  switch (dt) {
  case HCRT_F32:
    return static_cast<const float *>(base)[off];
  case HCRT_F64:
    return static_cast<const double *>(base)[off];
  case HCRT_I64:
    return static_cast<double>(static_cast<const int64_t *>(base)[off]);
  case HCRT_I32:
    return static_cast<const int32_t *>(base)[off];
  case HCRT_BF16:
    return bf16Widen(static_cast<const uint16_t *>(base)[off]);
  default:
    return static_cast<const uint8_t *>(base)[off] != 0 ? 1.0 : 0.0;
  }
}

// Truncates toward zero; NaN gives 0 and out-of-range values saturate (the
// evaluator keeps doubles; C++'s conversion would be undefined there).
template <class I> inline I truncToInt(double v) {
  if (!(v == v))
    return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (v <= lo)
    return std::numeric_limits<I>::min();
  if (v >= hi)
    return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

inline void storeD(void *base, int32_t dt, int64_t off, double v) {
  switch (dt) {
  case HCRT_F32:
    static_cast<float *>(base)[off] = static_cast<float>(v);
    break;
  case HCRT_F64:
    static_cast<double *>(base)[off] = v;
    break;
  case HCRT_I64:
    static_cast<int64_t *>(base)[off] = truncToInt<int64_t>(v);
    break;
  case HCRT_I32:
    static_cast<int32_t *>(base)[off] = truncToInt<int32_t>(v);
    break;
  case HCRT_BF16:  // the float32 value, rounded (as a kernel's float32 result)
    static_cast<uint16_t *>(base)[off] = bf16Bits(static_cast<float>(v));
    break;
  default:
    static_cast<uint8_t *>(base)[off] = v != 0 ? 1 : 0;
    break;
  }
}

// Integer read (indices, step counters); floats truncate.
inline int64_t loadI(const void *base, int32_t dt, int64_t off) {
  switch (dt) {
  case HCRT_I64:
    return static_cast<const int64_t *>(base)[off];
  case HCRT_I32:
    return static_cast<const int32_t *>(base)[off];
  case HCRT_I1:
    return static_cast<const uint8_t *>(base)[off] != 0;
  default:
    return truncToInt<int64_t>(loadD(base, dt, off));
  }
}

// ---- strided N-d loops ----
// An iteration space with per-operand element strides, size-1 dims dropped
// and compatible dims merged. Iterated in row-major order of `shape`.
struct Loop {
  int rank = 1, nops = 0;
  int64_t total = 1;
  int64_t shape[HCRT_MAX_RANK] = {1};
  int64_t st[kMaxOps][HCRT_MAX_RANK] = {};
};

inline Loop makeLoop(int rank, const int64_t *shape, int nops,
                     const int64_t *const *strides) {
  Loop L;
  L.nops = nops;
  L.total = prod(shape, 0, rank);
  int r = 0;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    if (r > 0) {
      bool merge = true;
      for (int k = 0; k < nops; ++k)
        merge = merge && L.st[k][r - 1] == strides[k][d] * shape[d];
      if (merge) {
        L.shape[r - 1] *= shape[d];
        for (int k = 0; k < nops; ++k)
          L.st[k][r - 1] = strides[k][d];
        continue;
      }
    }
    L.shape[r] = shape[d];
    for (int k = 0; k < nops; ++k)
      L.st[k][r] = strides[k][d];
    ++r;
  }
  if (r == 0) {
    L.shape[0] = 1;
    for (int k = 0; k < nops; ++k)
      L.st[k][0] = 0;
    r = 1;
  }
  L.rank = r;
  return L;
}

// Calls inner(off, n) for the flat range [b, e) of L: `off` holds each
// operand's element offset of the first of n consecutive points along the
// innermost dim (operand k moves by L.st[k][L.rank - 1] per point).
template <class F>
inline void loopRange(const Loop &L, int64_t b, int64_t e, F &&inner) {
  if (b >= e)
    return;
  const int r = L.rank, nops = L.nops;
  int64_t idx[HCRT_MAX_RANK], off[kMaxOps] = {0, 0, 0, 0};
  int64_t rem = b;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % L.shape[d];
    rem /= L.shape[d];
    for (int k = 0; k < nops; ++k)
      off[k] += idx[d] * L.st[k][d];
  }
  int64_t pos = b;
  while (pos < e) {
    int64_t n = std::min(L.shape[r - 1] - idx[r - 1], e - pos);
    inner(static_cast<const int64_t *>(off), n);
    pos += n;
    if (pos >= e)
      break;
    idx[r - 1] += n;
    for (int k = 0; k < nops; ++k)
      off[k] += n * L.st[k][r - 1];
    for (int d = r - 1; d > 0 && idx[d] == L.shape[d]; --d) {
      idx[d] = 0;
      idx[d - 1]++;
      for (int k = 0; k < nops; ++k)
        off[k] += L.st[k][d - 1] - L.shape[d] * L.st[k][d];
    }
  }
}

// Strides of `in` read as if NumPy-broadcast to an output of rank `rank`
// (right-aligned; 0 on broadcast and missing dims).
inline void bcastStrides(const hcrt_tensor &in, int rank, const int64_t *shape,
                         int64_t *st) {
  for (int d = 0; d < rank; ++d)
    st[d] = 0;
  for (int i = 0; i < in.rank; ++i) {
    int d = rank - in.rank + i;
    if (d >= 0)
      st[d] = (in.shape[i] == 1 && shape[d] != 1) ? 0 : in.strides[i];
  }
}

// Static partition of [0, total) over the thread range in multiples of
// `grain`: f(b, e) per part, serial when total * cost < kSerialElems.
template <class F>
inline void parFor(hc_threads t, int64_t total, int64_t grain, double cost,
                   F &&f) {
  if (total <= 0)
    return;
  Range r = resolve(t);
  if (static_cast<double>(total) * cost < static_cast<double>(kSerialElems))
    r.count = 1;
  int64_t units = (total + grain - 1) / grain;
  if (r.count > units)
    r.count = static_cast<int>(units);
  // A one-thread CFTP stream: parts offered to waiting streams (results
  // never depend on the partition).
  if (const int64_t offered = r.count <= 1 ? offeredPieces(
                                                 units, static_cast<double>(total) * cost)
                                           : 0) {
    runOfferedSplit(total, offered, grain, f);
    return;
  }
  parallel(r, [&](int i, int cnt) {
    int64_t b, e;
    split(total, i, cnt, grain, b, e);
    if (e > b)
      f(b, e);
  });
}

// dst <- src elementwise over `shape`, both with any strides, same dtype.
void copyStrided(int rank, const int64_t *shape, void *dst,
                 const int64_t *dstSt, const void *src, const int64_t *srcSt,
                 int esz, hc_threads t);

// out[o, c] = sum over rows r of x[o * so + r * ld + c] / div, c contiguous
// (bias and adaLN gate gradients): double sums over HC_SUM_CHUNK row
// chunks added in order, the same bits at any thread count.
void columnSums(const float *x, int64_t outer, int64_t so, int64_t rows,
                int64_t ld, int64_t cols, hcrt_tensor &out, double div,
                hc_threads th);

// Copies the strided view `t` into contiguous `dst` (same dtype).
inline void copyToContiguous(const hcrt_tensor &t, void *dst, hc_threads th) {
  int64_t st[HCRT_MAX_RANK];
  contiguousStrides(t.rank, t.shape, st);
  copyStrided(t.rank, t.shape, dst, st, t.data, t.strides, elemSize(t.dtype),
              th);
}

// The data of float32 `t` as a contiguous array: t.data itself when it is
// contiguous, else packed into `buf`.
inline const float *contiguousF32(const hcrt_tensor &t, Buf<float> &buf,
                                  hc_threads th) {
  if (isContiguous(t))
    return static_cast<const float *>(t.data);
  float *p = buf.alloc(numel(t));
  copyToContiguous(t, p, th);
  return p;
}

// An optimizer's state `in` (parameter or moment) in its output buffer:
// copied there first unless they alias (the in-place case).
inline float *inPlaceState(const hcrt_tensor &in, hcrt_tensor &out,
                           hc_threads th) {
  if (in.data != out.data)
    copyToContiguous(in, out.data, th);
  return static_cast<float *>(out.data);
}

// The Adam family's loop: ins[first..] are N params, N grads, N first and N
// second moments, outs N params, N first, N second moments (in place when
// they alias). chunk(b, e, p, g, m, v) updates elements [b, e) of one.
template <class F>
inline void adamLikeUpdate(const hcrt_tensor *ins, int32_t first, int32_t n,
                           hcrt_tensor *outs, hc_threads th, F &&chunk) {
  for (int32_t i = 0; i < n; ++i) {
    const hcrt_tensor &p = ins[first + i];
    float *op = inPlaceState(p, outs[i], th);
    float *om = inPlaceState(ins[first + 2 * n + i], outs[n + i], th);
    float *ov = inPlaceState(ins[first + 3 * n + i], outs[2 * n + i], th);
    Buf<float> bg;
    const float *pg = contiguousF32(ins[first + n + i], bg, th);
    parFor(th, numel(p), 64, 2.0, [&](int64_t b, int64_t e) {
      chunk(b, e, op, pg, om, ov);
    });
  }
}

// A view with its contiguous row-major strides (after packing).
inline hcrt_tensor asContiguous(const hcrt_tensor &t, void *data) {
  hcrt_tensor r = t;
  r.data = data;
  contiguousStrides(t.rank, t.shape, r.strides);
  return r;
}

// Dims [from, to) of `t` folded into one (n, stride); false when their
// strides do not allow it. Size-1 dims are ignored.
inline bool foldDims(const hcrt_tensor &t, int from, int to, int64_t &n,
                     int64_t &stride) {
  n = 1;
  stride = 1;
  bool have = false;
  for (int d = from; d < to; ++d) {
    n *= t.shape[d];
    if (t.shape[d] == 1)
      continue;
    if (have && stride != t.strides[d] * t.shape[d])
      return false;
    stride = t.strides[d];
    have = true;
  }
  if (n == 0)
    stride = 1;
  return true;
}

// `t` as a matrix: rows = dims [0, split), cols = dims [split, rank).
struct Mat {
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
};
inline bool matView(const hcrt_tensor &t, int split, Mat &m) {
  return foldDims(t, 0, split, m.rows, m.rs) &&
         foldDims(t, split, t.rank, m.cols, m.cs);
}

// A row-wise matrix (contiguous rows, any row stride): for row kernels.
inline bool rowView(const hcrt_tensor &t, int split, Mat &m) {
  if (!matView(t, split, m))
    return false;
  if (m.cols <= 1)
    m.cs = 1;
  if (m.rows <= 1)
    m.rs = m.cols;
  return m.cs == 1 && m.rs >= 0;
}

// float32 `t` as the rows of a row kernel (dims [split, rank) one row): its
// own storage where rowView allows, else a contiguous copy, in `spare` (an
// output the kernel may write in place over its input) or in `buf`. ld: the
// rows' stride.
inline const float *rowSource(const hcrt_tensor &t, int split, void *spare,
                           hc_threads th, int64_t &ld) {
  Mat m;
  if (rowView(t, split, m)) {
    ld = m.rs;
    return static_cast<const float *>(t.data);
  }
  copyToContiguous(t, spare, th);
  ld = prod(t.shape, split, t.rank);
  return static_cast<const float *>(spare);
}
inline const float *rowSource(const hcrt_tensor &t, int split, Buf<float> &buf,
                           hc_threads th, int64_t &ld) {
  Mat m;
  if (rowView(t, split, m)) {
    ld = m.rs;
    return static_cast<const float *>(t.data);
  }
  return rowSource(t, split, buf.alloc(numel(t)), th, ld);
}

// Positional attributes (read whatever num_ints/num_floats say: the op
// defines which entries it uses).
inline int64_t attrInt(const hcrt_attrs *a, int i, int64_t dflt) {
  return a ? a->ints[i] : dflt;
}
inline double attrFloat(const hcrt_attrs *a, int i, double dflt) {
  return a ? a->floats[i] : dflt;
}

} // namespace hc::rt::gop

// The signature of every graph-op entry point (graph_ops.h).
#define HCRT_OP_DEF(name)                                                      \
  void hcrt_op_##name(const hcrt_tensor *ins, int32_t nin, hcrt_tensor *outs,  \
                      int32_t nout, const hcrt_attrs *attrs, hc_threads threads)

#endif // HC_RUNTIME_GRAPH_OPS_UTIL_H
