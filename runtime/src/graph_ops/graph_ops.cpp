// Graph-op entry points (graph_ops.h), part 1: elementwise ops with NumPy
// broadcasting, casts and copies, reductions, data movement (concat, gather,
// scatter_add, slice_grad) and random_uniform. Semantics: the compiler's
// float64 evaluator (compiler/lib/Eval), in float32.
//
// Elementwise ops whose float32 result equals the correctly rounded double
// result (+ - * / max min neg sqrt reciprocal compare) compute in float;
// the others compute in double and round once. Everything runs over any
// strided input view through one N-d loop (graph_ops_util.h).
#include "graph_ops_util.h"

#include "hc/abi/random.h"

#include <cstring>
#include <cstdlib>
#include <cmath>
#include <type_traits>
#include <vector>

namespace hc::rt::gop {

namespace {
// dst <- src where src moves by 1 along dim `j` of L and dst by 1 along the
// innermost dim (a transpose of those two): 32 x 32 tiles, so that both
// sides stream through whole cache lines. L: operand 0 dst, 1 src.
template <class E>
void copyTransposed(const Loop &L, int j, char *dst, const char *src,
                    hc_threads t) {
  constexpr int64_t TB = 32;
  const int r = L.rank;
  const int64_t A = L.shape[j], B = L.shape[r - 1];
  const int64_t da = L.st[0][j], sb = L.st[1][r - 1];
  const int64_t outer = L.total / (A * B), na = (A + TB - 1) / TB;
  E *d0 = reinterpret_cast<E *>(dst);
  const E *s0 = reinterpret_cast<const E *>(src);
  parFor(t, outer * na, 1, static_cast<double>(TB * B), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      int64_t o = u / na, a0 = (u % na) * TB, a1 = std::min(A, a0 + TB);
      int64_t od = 0, os = 0;
      for (int k = r - 2; k >= 0; --k) {  // the other dims, row-major
        if (k == j)
          continue;
        const int64_t c = o % L.shape[k];
        o /= L.shape[k];
        od += c * L.st[0][k];
        os += c * L.st[1][k];
      }
      for (int64_t b0 = 0; b0 < B; b0 += TB) {
        const int64_t b1 = std::min(B, b0 + TB);
        for (int64_t a = a0; a < a1; ++a) {
          E *dp = d0 + od + a * da;
          const E *sp = s0 + os + a;
          for (int64_t i = b0; i < b1; ++i)
            dp[i] = sp[i * sb];
        }
      }
    }
  });
}
} // namespace

void copyStrided(int rank, const int64_t *shape, void *dst,
                 const int64_t *dstSt, const void *src, const int64_t *srcSt,
                 int esz, hc_threads t) {
  const int64_t *sts[2] = {dstSt, srcSt};
  Loop L = makeLoop(rank, shape, 2, sts);
  if (L.total <= 0)
    return;
  char *d = static_cast<char *>(dst);
  const char *s = static_cast<const char *>(src);
  const int64_t sd = L.st[0][L.rank - 1], ss = L.st[1][L.rank - 1];
  int tj = -1;  // a dim along which src is contiguous (transposing copy)
  if (sd == 1 && ss != 1 && L.shape[L.rank - 1] >= 8)
    for (int k = 0; k < L.rank - 1 && tj < 0; ++k)
      if (L.st[1][k] == 1 && L.shape[k] >= 8)
        tj = k;
  if (tj >= 0) {
    if (esz == 4)
      copyTransposed<uint32_t>(L, tj, d, s, t);
    else if (esz == 8)
      copyTransposed<uint64_t>(L, tj, d, s, t);
    else
      copyTransposed<uint8_t>(L, tj, d, s, t);
    return;
  }
  parFor(t, L.total, 64, 1.0, [&](int64_t b, int64_t e) {
    loopRange(L, b, e, [&](const int64_t *off, int64_t n) {
      char *dp = d + off[0] * esz;
      const char *sp = s + off[1] * esz;
      if (sd == 1 && ss == 1) {
        std::memcpy(dp, sp, static_cast<size_t>(n * esz));
        return;
      }
      auto run = [&](auto tag) {
        using E = decltype(tag);
        E *o = reinterpret_cast<E *>(dp);
        const E *i = reinterpret_cast<const E *>(sp);
        for (int64_t k = 0; k < n; ++k)
          o[k * sd] = i[k * ss];
      };
      if (esz == 4)
        run(uint32_t());
      else if (esz == 8)
        run(uint64_t());
      else
        run(uint8_t());
    });
  });
}

// ------------------------------------------------------- reductions ----
// x[o * so + r * ld + c] summed over rows r for each (o, c), c contiguous:
// every bias gradient (one o) and adaLN gate gradient (o = the batch). Rows
// are cut into chunks of a fixed size (not one per thread), each summed in
// double by the ISA's kernel, and the chunks' sums added in chunk order: the
// result does not depend on the thread count, and the pass runs at memory
// bandwidth (the generic loop below: 11 GB/s, too few units of work and
// scalar double adds).
void columnSums(const float *x, int64_t outer, int64_t so, int64_t rows,
                int64_t ld, int64_t cols, hcrt_tensor &out, double div,
                hc_threads th) {
  constexpr int64_t kRowChunk = HC_SUM_CHUNK, kColBlock = 512;
  const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk,
                blocks = (cols + kColBlock - 1) / kColBlock;
  std::vector<double> part(static_cast<size_t>(outer * chunks * cols), 0.0);
  const OpsTable &o = ops();
  parFor(th, outer * chunks * blocks, 1,
         static_cast<double>(std::min(rows, kRowChunk) *
                             std::min(cols, kColBlock)),
         [&](int64_t b, int64_t e) {
           // Last rows first: a bias gradient runs right after the GEMMs
           // that read its dY in row order, so dY's last rows are the ones
           // still in cache. (Each chunk's sum has its own slot: the order
           // chunks are taken in does not change the result.)
           for (int64_t u = e - 1; u >= b; --u) {
             const int64_t ok = u / blocks, c0 = (u % blocks) * kColBlock;
             const int64_t oi = ok / chunks, r0 = (ok % chunks) * kRowChunk;
             o.colsum_f64(std::min(rows, r0 + kRowChunk) - r0,
                          std::min(cols, c0 + kColBlock) - c0,
                          x + oi * so + r0 * ld + c0, ld,
                          &part[ok * cols + c0]);
           }
         });
  parFor(th, outer * cols, 64, static_cast<double>(chunks),
         [&](int64_t b, int64_t e) {
           for (int64_t u = b; u < e; ++u) {
             const int64_t oi = u / cols, c = u % cols;
             double s = 0;
             for (int64_t k = 0; k < chunks; ++k)
               s += part[(oi * chunks + k) * cols + c];
             storeD(out.data, out.dtype, u, s / div);
           }
         });
}

namespace {

// ---------------------------------------------------------- functors ----
// f(T...) with T = float when kF32 (the float result is the rounded double
// result), else T = double. kCost: relative cost per element (threading).
#define HC_UNARY(NAME, EXACT, COST, EXPR)                                      \
  struct NAME {                                                                \
    static constexpr bool kF32 = EXACT;                                        \
    static constexpr double kCost = COST;                                      \
    template <class T> static T f(T x) { return EXPR; }                        \
  };
#define HC_BINARY(NAME, EXACT, BOOL, COST, EXPR)                               \
  struct NAME {                                                                \
    static constexpr bool kF32 = EXACT;                                        \
    static constexpr bool kBool = BOOL;                                        \
    static constexpr double kCost = COST;                                      \
    template <class T> static T f(T a, T b) { return EXPR; }                   \
  };

HC_BINARY(Add, true, false, 1, a + b)
HC_BINARY(Sub, true, false, 1, a - b)
HC_BINARY(Mul, true, false, 1, a * b)
HC_BINARY(Div, true, false, 1, a / b)
HC_BINARY(Pow, false, false, 16, std::pow(a, b))
HC_BINARY(Max, true, false, 1, std::max(a, b))
HC_BINARY(Min, true, false, 1, std::min(a, b))
HC_BINARY(Less, true, true, 1, T(a < b))
HC_BINARY(Equal, true, true, 1, T(a == b))

HC_UNARY(Neg, true, 1, -x)
HC_UNARY(Sqrt, true, 2, std::sqrt(x))
HC_UNARY(Exp, false, 8, std::exp(x))
HC_UNARY(Log, false, 8, std::log(x))
HC_UNARY(Tanh, false, 8, std::tanh(x))
HC_UNARY(Sigmoid, false, 8, T(1) / (T(1) + std::exp(-x)))
HC_UNARY(Sin, false, 8, std::sin(x))
HC_UNARY(Cos, false, 8, std::cos(x))
HC_UNARY(Erf, false, 8, std::erf(x))
HC_UNARY(Reciprocal, true, 1, T(1) / x)
HC_UNARY(Identity, true, 1, x)
#undef HC_UNARY
#undef HC_BINARY

template <class Op, class... A> inline float evalF32(A... a) {
  if constexpr (Op::kF32)
    return Op::f(a...);
  else
    return static_cast<float>(Op::f(static_cast<double>(a)...));
}

// ------------------------------------------------------ elementwise ----
// Output (operand 0) contiguous; inputs broadcast to its shape.
template <int NIN>
Loop elementwiseLoop(const hcrt_tensor *const *in, const hcrt_tensor &out) {
  const int R = out.rank;
  int64_t st[NIN + 1][HCRT_MAX_RANK];
  const int64_t *sts[NIN + 1];
  contiguousStrides(R, out.shape, st[0]);
  sts[0] = st[0];
  for (int k = 0; k < NIN; ++k) {
    bcastStrides(*in[k], R, out.shape, st[k + 1]);
    sts[k + 1] = st[k + 1];
  }
  return makeLoop(R, out.shape, NIN + 1, sts);
}

template <int NIN, class F>
void genericElementwise(const Loop &L, const hcrt_tensor *const *in,
                        hcrt_tensor &out, double cost, hc_threads th, F &&f) {
  const int r = L.rank - 1;
  parFor(th, L.total, 64, cost, [&](int64_t b, int64_t e) {
    loopRange(L, b, e, [&](const int64_t *off, int64_t n) {
      double v[NIN > 0 ? NIN : 1];
      for (int64_t i = 0; i < n; ++i) {
        for (int k = 0; k < NIN; ++k)
          v[k] = loadD(in[k]->data, in[k]->dtype, off[k + 1] + i * L.st[k + 1][r]);
        storeD(out.data, out.dtype, off[0] + i, f(v));
      }
    });
  });
}

template <class Op> void unaryOp(const hcrt_tensor &x, hcrt_tensor &y, hc_threads th) {
  const hcrt_tensor *in[1] = {&x};
  Loop L = elementwiseLoop<1>(in, y);
  if (L.total <= 0)
    return;
  if (x.dtype == HCRT_F32 && y.dtype == HCRT_F32) {
    float *o = static_cast<float *>(y.data);
    const float *a = static_cast<const float *>(x.data);
    const int64_t s = L.st[1][L.rank - 1];
    parFor(th, L.total, 64, Op::kCost, [&](int64_t b, int64_t e) {
      loopRange(L, b, e, [&](const int64_t *off, int64_t n) {
        float *op = o + off[0];
        const float *ap = a + off[1];
        if (s == 1)
          for (int64_t i = 0; i < n; ++i)
            op[i] = evalF32<Op>(ap[i]);
        else
          for (int64_t i = 0; i < n; ++i)
            op[i] = evalF32<Op>(ap[i * s]);
      });
    });
    return;
  }
  genericElementwise<1>(L, in, y, Op::kCost, th,
                        [](const double *v) { return Op::f(v[0]); });
}

template <class Op>
void binaryOp(const hcrt_tensor &a, const hcrt_tensor &b, hcrt_tensor &y,
              hc_threads th) {
  const hcrt_tensor *in[2] = {&a, &b};
  Loop L = elementwiseLoop<2>(in, y);
  if (L.total <= 0)
    return;
  using OutT = std::conditional_t<Op::kBool, uint8_t, float>;
  const int32_t outType = Op::kBool ? HCRT_I1 : HCRT_F32;
  if (a.dtype == HCRT_F32 && b.dtype == HCRT_F32 && y.dtype == outType) {
    OutT *o = static_cast<OutT *>(y.data);
    const float *pa = static_cast<const float *>(a.data);
    const float *pb = static_cast<const float *>(b.data);
    const int64_t sa = L.st[1][L.rank - 1], sb = L.st[2][L.rank - 1];
    parFor(th, L.total, 64, Op::kCost, [&](int64_t b0, int64_t e0) {
      loopRange(L, b0, e0, [&](const int64_t *off, int64_t n) {
        OutT *op = o + off[0];
        const float *x = pa + off[1], *z = pb + off[2];
        if (sa == 1 && sb == 1) {
          for (int64_t i = 0; i < n; ++i)
            op[i] = static_cast<OutT>(evalF32<Op>(x[i], z[i]));
        } else if (sa == 1 && sb == 0) {
          const float zv = z[0];
          for (int64_t i = 0; i < n; ++i)
            op[i] = static_cast<OutT>(evalF32<Op>(x[i], zv));
        } else if (sa == 0 && sb == 1) {
          const float xv = x[0];
          for (int64_t i = 0; i < n; ++i)
            op[i] = static_cast<OutT>(evalF32<Op>(xv, z[i]));
        } else {
          for (int64_t i = 0; i < n; ++i)
            op[i] = static_cast<OutT>(evalF32<Op>(x[i * sa], z[i * sb]));
        }
      });
    });
    return;
  }
  genericElementwise<2>(L, in, y, Op::kCost, th,
                        [](const double *v) { return Op::f(v[0], v[1]); });
}

void whereOp(const hcrt_tensor &c, const hcrt_tensor &a, const hcrt_tensor &b,
             hcrt_tensor &y, hc_threads th) {
  const hcrt_tensor *in[3] = {&c, &a, &b};
  Loop L = elementwiseLoop<3>(in, y);
  if (L.total <= 0)
    return;
  if (c.dtype == HCRT_I1 && a.dtype == HCRT_F32 && b.dtype == HCRT_F32 &&
      y.dtype == HCRT_F32) {
    float *o = static_cast<float *>(y.data);
    const uint8_t *pc = static_cast<const uint8_t *>(c.data);
    const float *pa = static_cast<const float *>(a.data);
    const float *pb = static_cast<const float *>(b.data);
    const int r = L.rank - 1;
    const int64_t sc = L.st[1][r], sa = L.st[2][r], sb = L.st[3][r];
    parFor(th, L.total, 64, 1.0, [&](int64_t b0, int64_t e0) {
      loopRange(L, b0, e0, [&](const int64_t *off, int64_t n) {
        float *op = o + off[0];
        const uint8_t *cp = pc + off[1];
        const float *x = pa + off[2], *z = pb + off[3];
        for (int64_t i = 0; i < n; ++i)
          op[i] = cp[i * sc] ? x[i * sa] : z[i * sb];
      });
    });
    return;
  }
  genericElementwise<3>(L, in, y, 1.0, th, [](const double *v) {
    return v[0] != 0 ? v[1] : v[2];
  });
}


// Sum (or mean) over `red` dims of x; output: the kept dims, contiguous.
// Every output element sums its inputs in row-major order of the reduced
// dims, in double, on one thread: the result does not depend on the range.
template <class T>
void reduceImpl(const hcrt_tensor &x, const bool *red, hcrt_tensor &out,
                bool mean, hc_threads th) {
  int64_t kn[HCRT_MAX_RANK], ks[HCRT_MAX_RANK], rn[HCRT_MAX_RANK],
      rs[HCRT_MAX_RANK];
  int nk = 0, nr = 0;
  int64_t outN = 1, count = 1;
  for (int d = 0; d < x.rank; ++d) {
    const int64_t n = x.shape[d], s = x.strides[d];
    if (red[d])
      count *= n;
    else
      outN *= n;
    if (n == 1)
      continue;
    int64_t *ln = red[d] ? rn : kn, *ls = red[d] ? rs : ks;
    int &c = red[d] ? nr : nk;
    if (c > 0 && ls[c - 1] == s * n) {  // merges with the previous dim
      ln[c - 1] *= n;
      ls[c - 1] = s;
    } else {
      ln[c] = n;
      ls[c] = s;
      ++c;
    }
  }
  if (outN <= 0)
    return;
  const T *px = static_cast<const T *>(x.data);
  const double div = mean ? static_cast<double>(count) : 1.0;
  const int64_t *rsp[1] = {rs};
  const Loop RL = makeLoop(nr, rn, 1, rsp);
  const int64_t rsInner = RL.st[0][RL.rank - 1];
  // Offset in x of kept index o over kept dims [0, upto).
  auto keptOffset = [&](int64_t o, int upto) {
    int64_t off = 0;
    for (int d = upto - 1; d >= 0; --d) {
      off += (o % kn[d]) * ks[d];
      o /= kn[d];
    }
    return off;
  };
  const double cost = static_cast<double>(count > 0 ? count : 1);
  if constexpr (std::is_same_v<T, float>)
    if (nr == 1 && count > 0 && nk >= 1 && nk <= 2 && ks[nk - 1] == 1) {
      columnSums(px, nk == 2 ? kn[0] : 1, nk == 2 ? ks[0] : 0, count, rs[0],
                 kn[nk - 1], out, div, th);
      return;
    }
  if (nk > 0 && (nr == 0 || ks[nk - 1] <= rsInner)) {
    // Innermost kept dim innermost in memory: accumulate a block of output
    // columns while walking the reduced dims.
    constexpr int64_t CB = 256;
    const int64_t Lc = kn[nk - 1], sL = ks[nk - 1];
    const int64_t nb = (Lc + CB - 1) / CB, units = (outN / Lc) * nb;
    parFor(th, units, 1, cost * static_cast<double>(std::min(Lc, CB)),
           [&](int64_t b, int64_t e) {
             double acc[CB];
             for (int64_t u = b; u < e; ++u) {
               const int64_t o = u / nb, c0 = (u % nb) * CB,
                             c1 = std::min(Lc, c0 + CB), w = c1 - c0;
               const T *base = px + keptOffset(o, nk - 1) + c0 * sL;
               for (int64_t c = 0; c < w; ++c)
                 acc[c] = 0;
               loopRange(RL, 0, count, [&](const int64_t *off, int64_t n) {
                 for (int64_t i = 0; i < n; ++i) {
                   const T *p = base + off[0] + i * rsInner;
                   if (sL == 1)
                     for (int64_t c = 0; c < w; ++c)
                       acc[c] += static_cast<double>(p[c]);
                   else
                     for (int64_t c = 0; c < w; ++c)
                       acc[c] += static_cast<double>(p[c * sL]);
                 }
               });
               for (int64_t c = 0; c < w; ++c)
                 storeD(out.data, out.dtype, o * Lc + c0 + c, acc[c] / div);
             }
           });
    return;
  }
  // Reduced dims innermost: one output element at a time.
  parFor(th, outN, 1, cost, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const T *base = px + keptOffset(o, nk);
      double acc = 0;
      loopRange(RL, 0, count, [&](const int64_t *off, int64_t n) {
        const T *p = base + off[0];
        double s[4] = {0, 0, 0, 0};
        int64_t i = 0;
        if (rsInner == 1) {
          for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; ++j)
              s[j] += static_cast<double>(p[i + j]);
          for (; i < n; ++i)
            s[0] += static_cast<double>(p[i]);
        } else {
          for (; i < n; ++i)
            s[0] += static_cast<double>(p[i * rsInner]);
        }
        acc += (s[0] + s[1]) + (s[2] + s[3]);
      });
      storeD(out.data, out.dtype, o, acc / div);
    }
  });
}

void reduceOp(const hcrt_tensor *ins, hcrt_tensor *outs, const hcrt_attrs *a,
              bool mean, hc_threads th) {
  const hcrt_tensor &x = ins[0];
  bool red[HCRT_MAX_RANK] = {};
  for (int i = 0; a && i < a->num_ints; ++i) {
    int64_t ax = a->ints[i];
    if (ax < 0)
      ax += x.rank;
    if (ax >= 0 && ax < x.rank)
      red[ax] = true;
  }
  if (x.dtype == HCRT_F64)
    reduceImpl<double>(x, red, outs[0], mean, th);
  else
    reduceImpl<float>(x, red, outs[0], mean, th);
}

// Indices of a gather/scatter as a contiguous int64 array, negatives wrapped
// (as the evaluator does) and out-of-range ones set to -1.
std::vector<int64_t> normalizedIndices(const hcrt_tensor &idx, int64_t dim) {
  std::vector<int64_t> r(static_cast<size_t>(numel(idx)));
  int64_t st[HCRT_MAX_RANK];
  contiguousStrides(idx.rank, idx.shape, st);
  const int64_t *sts[2] = {st, idx.strides};
  Loop L = makeLoop(idx.rank, idx.shape, 2, sts);
  const int64_t s = L.st[1][L.rank - 1];
  loopRange(L, 0, L.total, [&](const int64_t *off, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = loadI(idx.data, idx.dtype, off[1] + i * s);
      if (k < 0)
        k += dim;
      r[off[0] + i] = (k >= 0 && k < dim) ? k : -1;
    }
  });
  return r;
}

// Element offsets of every point of dims [from, to) of t (row-major).
std::vector<int64_t> dimOffsets(const hcrt_tensor &t, int from, int to) {
  std::vector<int64_t> r(static_cast<size_t>(prod(t.shape, from, to)));
  int64_t st[HCRT_MAX_RANK];
  contiguousStrides(to - from, t.shape + from, st);
  const int64_t *sts[2] = {st, t.strides + from};
  Loop L = makeLoop(to - from, t.shape + from, 2, sts);
  const int64_t s = L.st[1][L.rank - 1];
  loopRange(L, 0, L.total, [&](const int64_t *off, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      r[off[0] + i] = off[1] + i * s;
  });
  return r;
}

// Adjoint of gather: out zero-filled, dy slices added at their indices in
// index order (deterministic; out-of-range indices are skipped).
template <class T>
void scatterAdd(const hcrt_tensor &dy, const std::vector<int64_t> &k, int a,
                int idxRank, hcrt_tensor &out, hc_threads threads) {
  const int64_t nI = static_cast<int64_t>(k.size()), dim = out.shape[a];
  T *o = static_cast<T *>(out.data);
  const T *g = static_cast<const T *>(dy.data);
  const int64_t outer = prod(out.shape, 0, a),
                inner = prod(out.shape, a + 1, out.rank);
  // dy dims: [0, a) outer, [a, a + idxRank) indices, the rest inner.
  const int ia = a + idxRank;
  const std::vector<int64_t> outerOff = dimOffsets(dy, 0, a),
                             idxOff = dimOffsets(dy, a, ia);
  int64_t innerN, innerS;
  std::vector<int64_t> innerOff;
  if (!foldDims(dy, ia, dy.rank, innerN, innerS))
    innerOff = dimOffsets(dy, ia, dy.rank);
  constexpr int64_t CB = 1024;
  const int64_t nb = (inner + CB - 1) / CB;
  parFor(threads, outer * nb, 1,
         static_cast<double>(std::min(inner, CB) * (nI + dim)),
         [&](int64_t b, int64_t e) {
           for (int64_t u = b; u < e; ++u) {
             const int64_t oi = u / nb, c0 = (u % nb) * CB,
                           c1 = std::min(inner, c0 + CB);
             for (int64_t r = 0; r < dim; ++r)
               for (int64_t c = c0; c < c1; ++c)
                 o[(oi * dim + r) * inner + c] = T(0);
             for (int64_t j = 0; j < nI; ++j) {
               if (k[j] < 0)
                 continue;
               T *d = o + (oi * dim + k[j]) * inner;
               const T *s = g + outerOff[oi] + idxOff[j];
               if (innerOff.empty())
                 for (int64_t c = c0; c < c1; ++c)
                   d[c] += s[c * innerS];
               else
                 for (int64_t c = c0; c < c1; ++c)
                   d[c] += s[innerOff[c]];
             }
           }
         });
}

} // namespace
} // namespace hc::rt::gop

using namespace hc::rt;
using namespace hc::rt::gop;

extern "C" {

#define BINARY_ENTRY(name, Op)                                                 \
  HCRT_OP_DEF(name) {                                                          \
    (void)nin, (void)nout, (void)attrs;                                        \
    binaryOp<Op>(ins[0], ins[1], outs[0], threads);                            \
  }
#define UNARY_ENTRY(name, Op)                                                  \
  HCRT_OP_DEF(name) {                                                          \
    (void)nin, (void)nout, (void)attrs;                                        \
    unaryOp<Op>(ins[0], outs[0], threads);                                     \
  }

BINARY_ENTRY(add, Add)
BINARY_ENTRY(sub, Sub)
BINARY_ENTRY(mul, Mul)
BINARY_ENTRY(div, Div)
BINARY_ENTRY(pow, Pow)
BINARY_ENTRY(max, Max)
BINARY_ENTRY(min, Min)
BINARY_ENTRY(less, Less)
BINARY_ENTRY(equal, Equal)
UNARY_ENTRY(neg, Neg)
UNARY_ENTRY(sqrt, Sqrt)
UNARY_ENTRY(exp, Exp)
UNARY_ENTRY(log, Log)
UNARY_ENTRY(tanh, Tanh)
UNARY_ENTRY(sigmoid, Sigmoid)
UNARY_ENTRY(sin, Sin)
UNARY_ENTRY(cos, Cos)
UNARY_ENTRY(erf, Erf)
UNARY_ENTRY(reciprocal, Reciprocal)
#undef BINARY_ENTRY
#undef UNARY_ENTRY

HCRT_OP_DEF(where) {
  (void)nin, (void)nout, (void)attrs;
  whereOp(ins[0], ins[1], ins[2], outs[0], threads);
}

// Any dtype to any dtype: float -> int truncates toward zero (saturating,
// NaN -> 0), -> i1 is `!= 0`.
HCRT_OP_DEF(cast) {
  (void)nin, (void)nout, (void)attrs;
  if (ins[0].dtype == outs[0].dtype) {
    copyToContiguous(ins[0], outs[0].data, threads);
    return;
  }
  if (ins[0].dtype == HCRT_F32 && outs[0].dtype == HCRT_BF16 && isContiguous(ins[0])) {
    const float *x = static_cast<const float *>(ins[0].data);
    uint16_t *y = static_cast<uint16_t *>(outs[0].data);
    parFor(threads, numel(outs[0]), 1024, 1.0,
           [&](int64_t b, int64_t e) { storeBf16(x + b, e - b, y + b); });
    return;
  }
  unaryOp<Identity>(ins[0], outs[0], threads);
}

HCRT_OP_DEF(copy) {
  (void)nin, (void)nout, (void)attrs;
  copyToContiguous(ins[0], outs[0].data, threads);
}

HCRT_OP_DEF(reduce_sum) {
  (void)nin, (void)nout;
  reduceOp(ins, outs, attrs, false, threads);
}

HCRT_OP_DEF(reduce_mean) {
  (void)nin, (void)nout;
  reduceOp(ins, outs, attrs, true, threads);
}

HCRT_OP_DEF(concat) {
  (void)nout;
  hcrt_tensor &out = outs[0];
  int64_t axis = attrInt(attrs, 0, 0);
  if (axis < 0)
    axis += out.rank;
  int64_t st[HCRT_MAX_RANK];
  contiguousStrides(out.rank, out.shape, st);
  const int esz = elemSize(out.dtype);
  int64_t start = 0;
  for (int32_t i = 0; i < nin; ++i) {
    const hcrt_tensor &t = ins[i];
    char *dst = static_cast<char *>(out.data) + start * st[axis] * esz;
    copyStrided(t.rank, t.shape, dst, st, t.data, t.strides, esz, threads);
    start += t.shape[axis];
  }
}

// ONNX Gather. Indices in [-dim, dim) (negatives wrap); an index out of
// range (an error in the evaluator) gives zeros.
HCRT_OP_DEF(gather) {
  (void)nin, (void)nout;
  const hcrt_tensor &data = ins[0], &idx = ins[1];
  hcrt_tensor &out = outs[0];
  int64_t axis = attrInt(attrs, 0, 0);
  if (axis < 0)
    axis += data.rank;
  const int a = static_cast<int>(axis);
  const int64_t dim = data.shape[a];
  std::vector<int64_t> k = normalizedIndices(idx, dim);
  const int64_t nI = static_cast<int64_t>(k.size());
  if (numel(out) <= 0)
    return;
  // Embedding lookup: rows of a 2-D table with contiguous rows.
  if (a == 0 && data.rank == 2 && data.dtype == HCRT_F32 &&
      (data.strides[1] == 1 || data.shape[1] == 1)) {
    hc_embedding_fwd(nI, k.data(), dim, data.shape[1],
                     static_cast<const float *>(data.data), data.strides[0],
                     static_cast<float *>(out.data), data.shape[1], threads);
    return;
  }
  const int esz = elemSize(data.dtype);
  const int64_t outer = prod(data.shape, 0, a),
                inner = prod(data.shape, a + 1, data.rank);
  // Inner slice: data dims (a, rank) -> contiguous.
  const int ir = data.rank - a - 1;
  int64_t ist[HCRT_MAX_RANK];
  contiguousStrides(ir, data.shape + a + 1, ist);
  const int64_t *sts[2] = {ist, data.strides + a + 1};
  const Loop IL = makeLoop(ir, data.shape + a + 1, 2, sts);
  const int64_t sd = IL.st[0][IL.rank - 1], ss = IL.st[1][IL.rank - 1];
  const std::vector<int64_t> outerOff = dimOffsets(data, 0, a);
  const char *src = static_cast<const char *>(data.data);
  char *dst = static_cast<char *>(out.data);
  parFor(threads, outer * nI, 1, static_cast<double>(inner),
         [&](int64_t b, int64_t e) {
           for (int64_t u = b; u < e; ++u) {
             const int64_t o = u / nI, j = u % nI;
             char *d = dst + u * inner * esz;
             if (k[j] < 0) {
               std::memset(d, 0, static_cast<size_t>(inner * esz));
               continue;
             }
             const char *s = src + (outerOff[o] + k[j] * data.strides[a]) * esz;
             loopRange(IL, 0, inner, [&](const int64_t *off, int64_t n) {
               char *dp = d + off[0] * esz;
               const char *sp = s + off[1] * esz;
               if (sd == 1 && ss == 1)
                 std::memcpy(dp, sp, static_cast<size_t>(n * esz));
               else
                 for (int64_t i = 0; i < n; ++i)
                   std::memcpy(dp + i * sd * esz, sp + i * ss * esz, esz);
             });
           }
         });
}

HCRT_OP_DEF(scatter_add) {
  (void)nin, (void)nout;
  const hcrt_tensor &dy = ins[0], &idx = ins[1];
  hcrt_tensor &out = outs[0];
  int64_t axis = attrInt(attrs, 0, 0);
  if (axis < 0)
    axis += out.rank;
  const int a = static_cast<int>(axis);
  std::vector<int64_t> k = normalizedIndices(idx, out.shape[a]);
  const int64_t nI = static_cast<int64_t>(k.size());
  if (numel(out) <= 0)
    return;
  Mat m;
  if (out.dtype == HCRT_F32 && a == 0 && out.rank == 2 &&
      rowView(dy, idx.rank, m) && m.rows == nI) {
    hc_embedding_bwd(nI, k.data(), out.shape[0], out.shape[1],
                     static_cast<const float *>(dy.data), m.rs,
                     static_cast<float *>(out.data), out.shape[1], 0, threads);
    return;
  }
  if (out.dtype == HCRT_F64)
    scatterAdd<double>(dy, k, a, idx.rank, out, threads);
  else
    scatterAdd<float>(dy, k, a, idx.rank, out, threads);
}

// out zero-filled, dy written at starts + i * steps.
HCRT_OP_DEF(slice_grad) {
  (void)nin, (void)nout;
  const hcrt_tensor &dy = ins[0];
  hcrt_tensor &out = outs[0];
  const int R = out.rank;
  const int esz = elemSize(out.dtype);
  const int64_t total = numel(out);
  if (total <= 0)
    return;
  char *o = static_cast<char *>(out.data);
  parFor(threads, total, 4096, 0.25, [&](int64_t b, int64_t e) {
    std::memset(o + b * esz, 0, static_cast<size_t>((e - b) * esz));
  });
  int64_t st[HCRT_MAX_RANK], dst[HCRT_MAX_RANK];
  contiguousStrides(R, out.shape, st);
  int64_t base = 0;
  for (int d = 0; d < R; ++d) {
    int64_t start = attrInt(attrs, d, 0), step = attrInt(attrs, R + d, 1);
    base += start * st[d];
    dst[d] = st[d] * step;
  }
  copyStrided(dy.rank, dy.shape, o + base * esz, dst, dy.data, dy.strides,
              esz, threads);
}

HCRT_OP_DEF(random_uniform) {
  (void)nin, (void)nout;
  hcrt_tensor &out = outs[0];
  const uint64_t seed = static_cast<uint64_t>(loadI(ins[0].data, ins[0].dtype, 0));
  const uint64_t step = static_cast<uint64_t>(loadI(ins[1].data, ins[1].dtype, 0));
  const uint64_t offset = static_cast<uint64_t>(loadI(ins[2].data, ins[2].dtype, 0));
  const uint64_t opId = static_cast<uint64_t>(attrInt(attrs, 0, 0));
  const double low = attrFloat(attrs, 0, 0.0), high = attrFloat(attrs, 1, 1.0);
  const int64_t total = numel(out);
  const int64_t perSample = out.rank > 0 ? prod(out.shape, 1, out.rank) : 1;
  if (total <= 0 || perSample <= 0)
    return;
  parFor(threads, total, 64, 4.0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      double u = uniform01(seed, step, offset + static_cast<uint64_t>(i / perSample),
                           opId, static_cast<uint64_t>(i % perSample));
      storeD(out.data, out.dtype, i, low + (high - low) * u);
    }
  });
}

} // extern "C"

extern "C" int64_t hcrt_first_nonfinite(const hcrt_tensor *t, double *value) {
  if (!t->data || (t->dtype != HCRT_F32 && t->dtype != HCRT_F64 && t->dtype != HCRT_BF16))
    return -1;
  int64_t n = 1;
  for (int32_t k = 0; k < t->rank; ++k)
    n *= t->shape[k];
  for (int64_t i = 0; i < n; ++i) {
    const double v = hc::rt::gop::loadD(t->data, t->dtype, i);
    if (!std::isfinite(v)) {
      *value = v;
      return i;
    }
  }
  return -1;
}
