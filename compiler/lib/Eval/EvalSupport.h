// Internal to the reference evaluator: tensor helpers shared by the forward
// and backward op implementations.
#ifndef HC_COMPILER_EVAL_EVALSUPPORT_H
#define HC_COMPILER_EVAL_EVALSUPPORT_H

#include "hc/Compiler/Evaluator.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hc::eval {

using mlir::Value;
using mlir::RankedTensorType;

using Shape = std::vector<int64_t>;

struct EvalError {
  std::string message;
};

[[noreturn]] inline void fail(const std::string &m) { throw EvalError{m}; }

inline Shape stridesOf(const Shape &s) {
  Shape st(s.size(), 1);
  for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d)
    st[d] = st[d + 1] * s[d + 1];
  return st;
}

inline Shape shapeOf(Value v) {
  auto t = mlir::cast<RankedTensorType>(v.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

inline int64_t product(const Shape &s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, s.size()); ++i)
    n *= s[i];
  return n;
}

// Strides of `in` read as if broadcast to `out` (0 on broadcast dims).
inline Shape broadcastStrides(const Shape &in, const Shape &out) {
  Shape st(out.size(), 0), own = stridesOf(in);
  for (size_t i = 0; i < in.size(); ++i) {
    size_t o = out.size() - in.size() + i;
    st[o] = in[i] == 1 ? 0 : own[i];
  }
  return st;
}

// Calls fn(flat output index, input offsets) over a broadcast iteration.
inline void forEachBroadcast(const Shape &out, const std::vector<Shape> &strides,
                      const std::function<void(int64_t, const int64_t *)> &fn) {
  int64_t n = product(out);
  Shape idx(out.size(), 0);
  std::vector<int64_t> off(strides.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(flat, off.data());
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      for (size_t k = 0; k < strides.size(); ++k)
        off[k] += strides[k][d];
      if (++idx[d] < out[d])
        break;
      for (size_t k = 0; k < strides.size(); ++k)
        off[k] -= strides[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

inline EvalTensor elementwise(const std::vector<const EvalTensor *> &in,
                       const Shape &out,
                       const std::function<double(const double *)> &fn) {
  EvalTensor r{out, std::vector<double>(product(out))};
  std::vector<Shape> strides;
  for (const EvalTensor *t : in)
    strides.push_back(broadcastStrides(t->shape, out));
  std::vector<double> args(in.size());
  forEachBroadcast(out, strides, [&](int64_t flat, const int64_t *off) {
    for (size_t k = 0; k < in.size(); ++k)
      args[k] = in[k]->data[off[k]];
    r.data[flat] = fn(args.data());
  });
  return r;
}


using Env = llvm::DenseMap<Value, EvalTensor>;

// Evaluates any graph op whose operands are in `env`, adding its results;
// throws EvalError on an unsupported op or bad data.
// x [..., in] W^T (+ b), W [out, in], into `shape` (float64).
inline EvalTensor linearD(const EvalTensor &x, const EvalTensor &w,
                          const EvalTensor *b, Shape shape) {
  const int64_t in = w.shape[1], out = w.shape[0],
                rows = x.numElements() / std::max<int64_t>(in, 1);
  EvalTensor r{std::move(shape), std::vector<double>(rows * out)};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < out; ++j) {
      double acc = b ? b->data[j] : 0.0;
      for (int64_t k = 0; k < in; ++k)
        acc += x.data[i * in + k] * w.data[j * in + k];
      r.data[i * out + j] = acc;
    }
  return r;
}

// dy [..., out] W, W [out, in], into `shape` (float64).
inline EvalTensor linearGradInputD(const EvalTensor &dy, const EvalTensor &w,
                                   Shape shape) {
  const int64_t out = w.shape[0], in = w.shape[1], rows = dy.numElements() / out;
  EvalTensor dx{std::move(shape), std::vector<double>(rows * in, 0.0)};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out; ++j)
      for (int64_t i = 0; i < in; ++i)
        dx.data[r * in + i] += dy.data[r * out + j] * w.data[j * in + i];
  return dx;
}

// x rounded to bf16 (8 significant bits, round to nearest even), from the
// float64 value directly: the bf16 semantics without a float32 step.
inline double bf16Round(double x) {
  if (!std::isfinite(x) || x == 0.0)
    return x;
  int e = 0;
  const double m = std::frexp(x, &e);  // |m| in [0.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
}

// Whether hc-bf16-gemms marked the op (precision = "bf16").
inline bool bf16Precision(mlir::Operation *op) {
  auto p = op->getAttrOfType<mlir::StringAttr>("precision");
  return p && p.getValue() == "bf16";
}

// hc.attention's inputs as q [B, N, D], k and v [B, L, D]: the three as
// given, or one packed qkv [B, N, 3D] split along its last dim; rounded to
// bf16 when `bf16` (the bf16 kernel's products read them so).
inline std::array<EvalTensor, 3> attentionInputs(const std::vector<EvalTensor> &in,
                                                 bool bf16 = false) {
  std::array<EvalTensor, 3> out;
  if (in.size() == 3) {
    out = {in[0], in[1], in[2]};
  } else {
    const EvalTensor &qkv = in.at(0);
    const int64_t rows = qkv.shape[0] * qkv.shape[1], D = qkv.shape[2] / 3;
    for (int64_t w = 0; w < 3; ++w) {
      out[w] = EvalTensor{{qkv.shape[0], qkv.shape[1], D}, std::vector<double>(rows * D)};
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(&qkv.data[r * 3 * D + w * D], D, &out[w].data[r * D]);
    }
  }
  if (bf16)
    for (EvalTensor &t : out)
      for (double &x : t.data)
        x = bf16Round(x);
  return out;
}

void evalOp(mlir::Operation *op, Env &env);

// Evaluates a backward or optimizer op into `env`; false if `op` is not one.
bool evalBackwardOp(mlir::Operation *op, Env &env);

} // namespace hc::eval

#endif // HC_COMPILER_EVAL_EVALSUPPORT_H
