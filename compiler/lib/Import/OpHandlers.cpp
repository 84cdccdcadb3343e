// One handler per ONNX op type (opsets 13..21) that torch emits for DiT:
// here shapes, data movement and constants (integer shape arithmetic on known
// constants is folded, so every hc op gets static shapes); the math ops are in
// OpHandlersMath.cpp.
#include "HcDomain.h"
#include "OpHandlerSupport.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace hc::graph;

namespace hc::import {
namespace detail {

using TP = onnx::TensorProto;

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += std::to_string(s[i]) + (i + 1 < s.size() ? ", " : "");
  return r + "]";
}

// Constants hold doubles: int64 values past 2^53 are rounded, and the
// exporters' INT64_MAX/INT64_MIN "to the end" markers (Slice ends) round to
// +-2^63, which is out of int64's range. Saturate instead of converting
// (undefined behaviour; x86 gives INT64_MIN, which turned `[-1:]` into an
// empty slice).
std::vector<int64_t> ints(const Const &c) {
  std::vector<int64_t> r;
  r.reserve(c.data.size());
  for (double d : c.data)
    r.push_back(d >= 0x1p63   ? std::numeric_limits<int64_t>::max()
                : d <= -0x1p63 ? std::numeric_limits<int64_t>::min()
                               : static_cast<int64_t>(d));
  return r;
}

Const makeConst(std::vector<int64_t> shape, int32_t dtype,
                std::vector<double> data) {
  Const c;
  c.shape = std::move(shape);
  c.dtype = dtype;
  c.data = std::move(data);
  return c;
}

// Elements of a shape read from a file, or a failure naming `what`: dims
// must be non-negative and the count at most `limit` (no int64 overflow on
// the way; fuzz.import found shapes whose products overflowed).
int64_t checkedElements(GraphImporter &gi, const std::vector<int64_t> &shape,
                        const std::string &what, int64_t limit) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      gi.fail("negative dim in " + what + " " + shapeStr(shape));
    if (__builtin_mul_overflow(n, d, &n) || n > limit)
      gi.fail(what + " " + shapeStr(shape) + " is too large");
  }
  return n;
}

// Row-major strides of `shape` aligned to a broadcast result of rank `rank`
// (stride 0 on broadcast dims).
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    size_t o = out.size() - shape.size() + i;
    strides[o] = shape[i] == 1 ? 0 : s;
    s *= shape[i];
  }
  return strides;
}

// Elementwise fold of known constants with NumPy broadcasting.
Const foldBroadcast(GraphImporter &gi, const std::vector<const Const *> &in,
                    int32_t dtype,
                    const std::function<double(const double *)> &fn) {
  std::vector<int64_t> out;
  for (const Const *c : in) {
    auto s = hc::graph::broadcastShapes(out, c->shape);
    if (!s)
      gi.fail("shapes " + shapeStr(out) + " and " + shapeStr(c->shape) +
              " do not broadcast");
    out.assign(s->begin(), s->end());
  }
  std::vector<std::vector<int64_t>> strides;
  for (const Const *c : in)
    strides.push_back(broadcastStrides(c->shape, out));
  // A folded constant: the same bound as a constant read from the file.
  int64_t n = checkedElements(gi, out, "folded constant", int64_t(1) << 26);
  std::vector<double> data(n), args(in.size());
  std::vector<int64_t> index(out.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    for (size_t k = 0; k < in.size(); ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < out.size(); ++d)
        off += index[d] * strides[k][d];
      args[k] = in[k]->data[off];
    }
    data[flat] = fn(args.data());
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      if (++index[d] < out[d])
        break;
      index[d] = 0;
    }
  }
  return makeConst(out, dtype, std::move(data));
}

bool allInputsConst(GraphImporter &gi) {
  for (int i = 0; i < gi.node->input_size(); ++i)
    if (gi.hasInput(i) && !gi.inputConst(i))
      return false;
  return true;
}

// Materializes a constant operand in the element type of the other operand
// (exporters mix e.g. a double literal with a float tensor).
std::pair<Value, Value> matchedOperands(GraphImporter &gi) {
  const Const *lc = gi.inputConst(0), *rc = gi.inputConst(1);
  if (lc && !rc) {
    Value r = gi.input(1);
    Const l = *lc;
    l.dtype = gi.typeOf(r).getElementType().isF64() ? TP::DOUBLE
              : gi.typeOf(r).getElementType().isF32() ? TP::FLOAT
                                                       : l.dtype;
    return {gi.materialize(l), r};
  }
  Value l = gi.input(0);
  if (rc && !lc) {
    Const r = *rc;
    r.dtype = gi.typeOf(l).getElementType().isF64() ? TP::DOUBLE
              : gi.typeOf(l).getElementType().isF32() ? TP::FLOAT
                                                       : r.dtype;
    return {l, gi.materialize(r)};
  }
  return {l, gi.input(1)};
}

std::vector<int64_t> shapeOfInput(GraphImporter &gi, int i) {
  if (const Const *c = gi.inputConst(i))
    return c->shape;
  return gi.staticShape(gi.input(i), "input");
}

// Cast's conversion (also CastLike's, with the type of its second input).
void castTo(GraphImporter &gi, int32_t to) {
  if (const Const *c = gi.inputConst(0)) {
    Const r = *c;
    r.dtype = to;
    gi.elementType(to);
    bool toInt = r.isInteger();
    for (double &v : r.data)
      v = to == TP::BOOL ? (v != 0) : toInt ? std::trunc(v)
          : to == TP::FLOAT ? static_cast<double>(static_cast<float>(v)) : v;
    gi.outputConst(0, r);
    return;
  }
  Value x = gi.input(0);
  auto type = RankedTensorType::get(gi.typeOf(x).getShape(), gi.elementType(to));
  gi.output(0, type == x.getType() ? x : gi.buildTyped<CastOp>(type, x));
}

} // namespace detail

using namespace detail;

namespace {

using TP = onnx::TensorProto;

Const tensorConst(GraphImporter &gi, const TP &t) {
  Const c;
  c.dtype = t.data_type();
  c.shape.assign(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (int64_t d : c.shape) {
    if (d < 0)
      gi.fail("constant tensor has a negative dimension " + std::to_string(d));
    if (d > 0 && n > (int64_t(1) << 26) / d)
      gi.fail("constant tensor is too large");
    n *= d;
  }
  c.data.resize(n);
  const std::string &raw = t.raw_data();
  // Without raw_data the values are in the typed field of the dtype; it must
  // hold exactly n of them before any is read (found by fuzz.import: an
  // int64 constant with fewer int64_data than its dims read past the field).
  if (!t.has_raw_data()) {
    int64_t have = c.dtype == TP::FLOAT    ? t.float_data_size()
                   : c.dtype == TP::DOUBLE ? t.double_data_size()
                   : c.dtype == TP::INT64  ? t.int64_data_size()
                   : c.dtype == TP::INT32 || c.dtype == TP::BOOL ? t.int32_data_size()
                                                                 : n;
    if (have != n)
      gi.fail("constant holds " + std::to_string(have) + " values, its dims need " +
              std::to_string(n));
  }
  auto need = [&](size_t item) {
    if (t.has_raw_data() && raw.size() != static_cast<size_t>(n) * item)
      gi.fail("constant holds " + std::to_string(raw.size()) +
              " bytes, its dims need " + std::to_string(n * item));
  };
  for (int64_t i = 0; i < n; ++i) {
    switch (c.dtype) {
    case TP::FLOAT:
      need(4);
      c.data[i] = t.has_raw_data() ? reinterpret_cast<const float *>(raw.data())[i]
                                   : t.float_data(i);
      break;
    case TP::DOUBLE:
      need(8);
      c.data[i] = t.has_raw_data() ? reinterpret_cast<const double *>(raw.data())[i]
                                   : t.double_data(i);
      break;
    case TP::INT64:
      need(8);
      c.data[i] = static_cast<double>(
          t.has_raw_data() ? reinterpret_cast<const int64_t *>(raw.data())[i]
                           : t.int64_data(i));
      break;
    case TP::INT32:
      need(4);
      c.data[i] = t.has_raw_data() ? reinterpret_cast<const int32_t *>(raw.data())[i]
                                   : t.int32_data(i);
      break;
    case TP::BOOL:
      need(1);
      c.data[i] = t.has_raw_data() ? raw[i] != 0 : t.int32_data(i) != 0;
      break;
    default:
      gi.elementType(c.dtype);  // fails with the type's name
    }
  }
  return c;
}

// --- shapes and data movement ---------------------------------------------


void outputReshaped(GraphImporter &gi, const std::vector<int64_t> &shape) {
  int64_t n = checkedElements(gi, shape, "target shape", int64_t(1) << 40);
  if (const Const *c = gi.inputConst(0)) {
    if (c->numElements() != n)
      gi.fail("cannot reshape " + shapeStr(c->shape) + " to " + shapeStr(shape));
    Const r = *c;
    r.shape = shape;
    gi.outputConst(0, r);
    return;
  }
  Value x = gi.input(0);
  auto in = gi.staticShape(x, "reshaped tensor");
  int64_t m = std::accumulate(in.begin(), in.end(), int64_t(1),
                              std::multiplies<int64_t>());
  if (m != n)
    gi.fail("cannot reshape " + shapeStr(in) + " to " + shapeStr(shape));
  gi.output(0, gi.reshape(x, shape));
}

void reshapeOp(GraphImporter &gi) {
  std::vector<int64_t> in = shapeOfInput(gi, 0);
  std::vector<int64_t> shape = ints(gi.requireConst(1, "target shape"));
  bool allowZero = gi.attrInt("allowzero", 0) != 0;
  int64_t known = 1, inferAt = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowZero) {
      if (i >= in.size())
        gi.fail("target shape copies dim " + std::to_string(i) +
                " the input does not have");
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (inferAt >= 0)
        gi.fail("target shape " + shapeStr(shape) + " has two -1 dims");
      inferAt = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      gi.fail("negative dim in target shape " + shapeStr(shape));
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      // A target shape from a file can hold anything (fuzz.import found
      // one whose product overflowed int64).
      gi.fail("target shape " + shapeStr(shape) + " has more elements than int64 holds");
    }
  }
  int64_t total = std::accumulate(in.begin(), in.end(), int64_t(1),
                                  std::multiplies<int64_t>());
  if (inferAt >= 0) {
    if (known == 0 || total % known)
      gi.fail("cannot reshape " + shapeStr(in) + " to " + shapeStr(shape));
    shape[inferAt] = total / known;
  }
  outputReshaped(gi, shape);
}

void squeezeLike(GraphImporter &gi, bool unsqueeze) {
  std::vector<int64_t> in = shapeOfInput(gi, 0);
  std::vector<int64_t> axes = gi.hasInput(1) ? ints(gi.requireConst(1, "axes"))
                                             : gi.attrInts("axes");
  std::vector<int64_t> out;
  if (unsqueeze) {
    int64_t rank = static_cast<int64_t>(in.size() + axes.size());
    std::vector<bool> inserted(rank, false);
    for (int64_t a : axes)
      inserted[gi.normalizeAxis(a, rank)] = true;
    size_t k = 0;
    for (int64_t d = 0; d < rank; ++d)
      out.push_back(inserted[d] ? 1 : in[k++]);
  } else {
    int64_t rank = static_cast<int64_t>(in.size());
    std::vector<bool> removed(rank, axes.empty());
    for (int64_t a : axes)
      removed[gi.normalizeAxis(a, rank)] = true;
    for (int64_t d = 0; d < rank; ++d) {
      if (removed[d] && in[d] != 1 && !axes.empty())
        gi.fail("cannot squeeze dim " + std::to_string(d) + " of size " +
                std::to_string(in[d]));
      if (!removed[d] || in[d] != 1)
        out.push_back(in[d]);
    }
  }
  outputReshaped(gi, out);
}

void flattenOp(GraphImporter &gi) {
  std::vector<int64_t> in = shapeOfInput(gi, 0);
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = gi.attrInt("axis", 1);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis > rank)
    gi.fail("axis out of range");
  int64_t a = 1, b = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? a : b) *= in[d];
  outputReshaped(gi, {a, b});
}

void transposeOp(GraphImporter &gi) {
  Value x = gi.input(0);
  int64_t rank = gi.typeOf(x).getRank();
  std::vector<int64_t> perm = gi.attrInts("perm");
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  gi.output(0, gi.transpose(x, perm));
}

void expandOp(GraphImporter &gi) {
  std::vector<int64_t> target = ints(gi.requireConst(1, "expand shape"));
  std::vector<int64_t> in = shapeOfInput(gi, 0);
  auto out = hc::graph::broadcastShapes(in, target);
  if (!out)
    gi.fail("cannot expand " + shapeStr(in) + " to " + shapeStr(target));
  std::vector<int64_t> shape(out->begin(), out->end());
  if (const Const *c = gi.inputConst(0)) {
    Const zeros = makeConst(shape, c->dtype, std::vector<double>(
                                                 std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<int64_t>()), 0.0));
    gi.outputConst(0, foldBroadcast(gi, {c, &zeros}, c->dtype,
                                    [](const double *v) { return v[0]; }));
    return;
  }
  Value x = gi.input(0);
  auto type = RankedTensorType::get(shape, gi.typeOf(x).getElementType());
  gi.output(0, type == x.getType() ? x : gi.buildTyped<BroadcastOp>(type, x));
}

void sliceOp(GraphImporter &gi) {
  std::vector<int64_t> in = shapeOfInput(gi, 0);
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts = ints(gi.requireConst(1, "slice starts"));
  std::vector<int64_t> ends = ints(gi.requireConst(2, "slice ends"));
  std::vector<int64_t> axes, steps;
  if (gi.hasInput(3))
    axes = ints(gi.requireConst(3, "slice axes"));
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (gi.hasInput(4))
    steps = ints(gi.requireConst(4, "slice steps"));
  else
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    gi.fail("slice starts, ends, axes and steps differ in length");
  std::vector<int64_t> begin(rank, 0), size(in), stride(rank, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = gi.normalizeAxis(axes[i], rank), dim = in[a];
    if (steps[i] <= 0)
      gi.fail("slice steps must be positive, got " + std::to_string(steps[i]));
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    s = std::clamp<int64_t>(s, 0, dim);
    e = std::clamp<int64_t>(e, 0, dim);
    begin[a] = s;
    stride[a] = steps[i];
    size[a] = e > s ? (e - s + steps[i] - 1) / steps[i] : 0;
  }
  if (const Const *c = gi.inputConst(0)) {
    Const r = makeConst(size, c->dtype, {});
    std::vector<int64_t> idx(rank, 0);
    int64_t n = r.numElements();
    std::vector<int64_t> inStrides(rank, 1);
    for (int64_t d = rank - 2; d >= 0; --d)
      inStrides[d] = inStrides[d + 1] * in[d + 1];
    for (int64_t flat = 0; flat < n; ++flat) {
      int64_t off = 0;
      for (int64_t d = 0; d < rank; ++d)
        off += (begin[d] + idx[d] * stride[d]) * inStrides[d];
      r.data.push_back(c->data[off]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < size[d])
          break;
        idx[d] = 0;
      }
    }
    gi.outputConst(0, r);
    return;
  }
  Value x = gi.input(0);
  if (size == in) {
    gi.output(0, x);
    return;
  }
  gi.output(0, gi.build<SliceOp>(
                   x, {gi.b.getNamedAttr("starts", gi.b.getDenseI64ArrayAttr(begin)),
                       gi.b.getNamedAttr("sizes", gi.b.getDenseI64ArrayAttr(size)),
                       gi.b.getNamedAttr("steps", gi.b.getDenseI64ArrayAttr(stride))}));
}

void concatOp(GraphImporter &gi) {
  int64_t axisAttr = gi.attrInt("axis", 0);
  if (allInputsConst(gi)) {
    const Const &first = *gi.inputConst(0);
    int64_t rank = static_cast<int64_t>(first.shape.size());
    int64_t axis = gi.normalizeAxis(axisAttr, rank);
    std::vector<int64_t> shape = first.shape;
    shape[axis] = 0;
    for (int i = 0; i < gi.node->input_size(); ++i)
      shape[axis] += gi.inputConst(i)->shape[axis];
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= shape[d];
    Const r = makeConst(shape, first.dtype, {});
    for (int64_t o = 0; o < outer; ++o)
      for (int i = 0; i < gi.node->input_size(); ++i) {
        const Const &c = *gi.inputConst(i);
        int64_t chunk = c.numElements() / std::max<int64_t>(outer, 1);
        r.data.insert(r.data.end(), c.data.begin() + o * chunk,
                      c.data.begin() + (o + 1) * chunk);
      }
    gi.outputConst(0, r);
    return;
  }
  std::vector<Value> inputs;
  for (int i = 0; i < gi.node->input_size(); ++i)
    inputs.push_back(gi.input(i));
  int64_t axis = gi.normalizeAxis(axisAttr, gi.typeOf(inputs[0]).getRank());
  gi.output(0, gi.build<ConcatOp>(
                   inputs, {gi.b.getNamedAttr("axis", gi.b.getI64IntegerAttr(axis))}));
}

void splitOp(GraphImporter &gi) {
  Value x = gi.input(0);
  auto type = gi.typeOf(x);
  int64_t axis = gi.normalizeAxis(gi.attrInt("axis", 0), type.getRank());
  int64_t dim = type.getDimSize(axis);
  std::vector<int64_t> sizes;
  if (gi.hasInput(1)) {
    sizes = ints(gi.requireConst(1, "split sizes"));
  } else if (gi.opset >= 18) {
    // Split-18: num_outputs pieces of ceil(dim / n), the last one smaller.
    int64_t n = gi.attrInt("num_outputs", 0);
    if (!gi.attr("num_outputs"))
      gi.fail("neither the 'split' input nor the 'num_outputs' attribute is "
              "given");
    if (n < 1 || n != gi.node->output_size())
      gi.fail("num_outputs is " + std::to_string(n) + " but the node has " +
              std::to_string(gi.node->output_size()) + " outputs");
    int64_t piece = (dim + n - 1) / n;
    if (piece * (n - 1) >= dim)
      gi.fail("dim " + std::to_string(dim) + " cannot be split into " +
              std::to_string(n) + " non-empty pieces");
    sizes.assign(n, piece);
    sizes.back() = dim - piece * (n - 1);
  } else {
    int64_t n = gi.node->output_size();
    if (dim % n)
      gi.fail("dim " + std::to_string(dim) + " does not split evenly into " +
              std::to_string(n));
    sizes.assign(n, dim / n);
  }
  if (static_cast<int>(sizes.size()) != gi.node->output_size())
    gi.fail("split has " + std::to_string(sizes.size()) + " sizes but " +
            std::to_string(gi.node->output_size()) + " outputs");
  Operation *op = gi.buildInferred<SplitOp>(
      x, {gi.b.getNamedAttr("axis", gi.b.getI64IntegerAttr(axis)),
          gi.b.getNamedAttr("sizes", gi.b.getDenseI64ArrayAttr(sizes))});
  for (int i = 0; i < gi.node->output_size(); ++i)
    gi.output(i, op->getResult(i));
}

void gatherOp(GraphImporter &gi) {
  std::vector<int64_t> dataShape = shapeOfInput(gi, 0);
  int64_t axis = gi.normalizeAxis(gi.attrInt("axis", 0),
                                  static_cast<int64_t>(dataShape.size()));
  const Const *idx = gi.inputConst(1);
  Const normalized;
  if (idx) {
    if (!idx->isInteger())
      gi.fail("indices must be int32 or int64");
    normalized = *idx;
    for (double &v : normalized.data) {
      if (v < -dataShape[axis] || v >= dataShape[axis])
        gi.fail("index " + std::to_string(static_cast<int64_t>(v)) +
                " out of range for dim " + std::to_string(dataShape[axis]));
      if (v < 0)
        v += dataShape[axis];
    }
  }
  if (const Const *data = gi.inputConst(0); data && idx) {
    std::vector<int64_t> shape(dataShape.begin(), dataShape.begin() + axis);
    shape.insert(shape.end(), idx->shape.begin(), idx->shape.end());
    shape.insert(shape.end(), dataShape.begin() + axis + 1, dataShape.end());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= dataShape[d];
    for (size_t d = axis + 1; d < dataShape.size(); ++d)
      inner *= dataShape[d];
    Const r = makeConst(shape, data->dtype, {});
    for (int64_t o = 0; o < outer; ++o)
      for (double i : normalized.data)
        for (int64_t k = 0; k < inner; ++k)
          r.data.push_back(
              data->data[(o * dataShape[axis] + static_cast<int64_t>(i)) * inner + k]);
    gi.outputConst(0, r);
    return;
  }
  Value data = gi.input(0);
  Value indices = idx ? gi.materialize(normalized) : gi.input(1);
  gi.output(0, gi.build<GatherOp>(
                   {data, indices},
                   {gi.b.getNamedAttr("axis", gi.b.getI64IntegerAttr(axis))}));
}

// GatherND as PyTorch's dynamo exporter writes `table[t]` (aten.index with
// one index tensor): batch_dims 0 and indices [..., 1], which is Gather on
// axis 0 with the indices' last dim dropped. Deeper index tuples and
// batch_dims are refused.
void gatherNdOp(GraphImporter &gi) {
  if (gi.attrInt("batch_dims", 0) != 0)
    gi.fail("batch_dims " + std::to_string(gi.attrInt("batch_dims", 0)) +
            " is not supported (only 0)");
  std::vector<int64_t> dataShape = shapeOfInput(gi, 0), idxShape = shapeOfInput(gi, 1);
  if (idxShape.empty() || idxShape.back() != 1)
    gi.fail("indices of shape [..., 1] only (one index into the first dim), "
            "got a last dim of " +
            (idxShape.empty() ? std::string("none") : std::to_string(idxShape.back())));
  if (dataShape.empty())
    gi.fail("data must have a dim to index");
  std::vector<int64_t> flat(idxShape.begin(), idxShape.end() - 1);
  const Const *idx = gi.inputConst(1);
  if (idx && !idx->isInteger())
    gi.fail("indices must be int32 or int64");
  if (const Const *data = gi.inputConst(0); data && idx) {
    int64_t inner = 1;
    for (size_t d = 1; d < dataShape.size(); ++d)
      inner *= dataShape[d];
    std::vector<int64_t> shape = flat;
    shape.insert(shape.end(), dataShape.begin() + 1, dataShape.end());
    Const r = makeConst(shape, data->dtype, {});
    for (double v : idx->data) {
      if (v < -dataShape[0] || v >= dataShape[0])
        gi.fail("index " + std::to_string(static_cast<int64_t>(v)) +
                " out of range for dim " + std::to_string(dataShape[0]));
      const int64_t i = static_cast<int64_t>(v < 0 ? v + dataShape[0] : v);
      for (int64_t k = 0; k < inner; ++k)
        r.data.push_back(data->data[i * inner + k]);
    }
    gi.outputConst(0, r);
    return;
  }
  Value indices = gi.reshape(gi.input(1), flat);
  gi.output(0, gi.build<GatherOp>(
                   {gi.input(0), indices},
                   {gi.b.getNamedAttr("axis", gi.b.getI64IntegerAttr(0))}));
}

void castOp(GraphImporter &gi) {
  castTo(gi, static_cast<int32_t>(gi.attrInt("to", TP::FLOAT)));
}

// --- constants ---------------------------------------------------------------

void constantOp(GraphImporter &gi) {
  if (const auto *a = gi.attr("value"))
    return gi.outputConst(0, tensorConst(gi, a->t()));
  if (const auto *a = gi.attr("value_float"))
    return gi.outputConst(0, makeConst({}, TP::FLOAT, {a->f()}));
  if (const auto *a = gi.attr("value_int"))
    return gi.outputConst(0, makeConst({}, TP::INT64, {double(a->i())}));
  if (const auto *a = gi.attr("value_floats"))
    return gi.outputConst(0, makeConst({a->floats_size()}, TP::FLOAT,
                                       {a->floats().begin(), a->floats().end()}));
  if (const auto *a = gi.attr("value_ints"))
    return gi.outputConst(0, makeConst({a->ints_size()}, TP::INT64,
                                       {a->ints().begin(), a->ints().end()}));
  gi.fail("Constant without a supported value attribute");
}

void shapeOp(GraphImporter &gi) {
  std::vector<int64_t> s = shapeOfInput(gi, 0);
  int64_t rank = static_cast<int64_t>(s.size());
  int64_t start = gi.attrInt("start", 0), end = gi.attrInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  gi.outputConst(0, makeConst({end - start}, TP::INT64,
                              {s.begin() + start, s.begin() + end}));
}

void constantOfShapeOp(GraphImporter &gi) {
  std::vector<int64_t> shape = ints(gi.requireConst(0, "shape"));
  Const fill = makeConst({1}, TP::FLOAT, {0.0});
  if (const auto *a = gi.attr("value"))
    fill = tensorConst(gi, a->t());
  int64_t n = checkedElements(gi, shape, "ConstantOfShape shape", int64_t(1) << 26);
  gi.outputConst(0, makeConst(shape, fill.dtype,
                              std::vector<double>(n, fill.data.at(0))));
}

void rangeOp(GraphImporter &gi) {
  const Const &s = gi.requireConst(0, "range start");
  double start = s.data.at(0),
         limit = gi.requireConst(1, "range limit").data.at(0),
         delta = gi.requireConst(2, "range delta").data.at(0);
  if (delta == 0)
    gi.fail("range delta is 0");
  int64_t n = std::max<int64_t>(
      0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = start + i * delta;
  gi.outputConst(0, makeConst({n}, s.dtype, v));
}

void identityOp(GraphImporter &gi) {
  if (const Const *c = gi.inputConst(0))
    gi.outputConst(0, *c);
  else
    gi.output(0, gi.input(0));
}

void dropoutOp(GraphImporter &gi) {
  double ratio = gi.hasInput(1) ? gi.requireConst(1, "dropout ratio").data.at(0)
                                : 0.5;
  bool training = gi.hasInput(2) &&
                  gi.requireConst(2, "dropout training_mode").data.at(0) != 0;
  if (training && ratio != 0)
    gi.fail("dropout with ratio " + std::to_string(ratio) +
            " in training mode is not supported (DiT uses ratio 0)");
  if (gi.outputUsed(1))
    gi.fail("dropout's mask output is not supported");
  identityOp(gi);
}

// If on a condition known at import: torch's squeeze of a dim the exporter
// could not see (dynamic batch) is If(Equal(Shape(x)[d], 1), Squeeze,
// Identity). The taken branch's nodes are imported in place; its outputs
// become the node's.
void ifOp(GraphImporter &gi) {
  const Const &cond = gi.requireConst(0, "If condition");
  if (cond.numElements() != 1)
    gi.fail("If condition has " + std::to_string(cond.numElements()) +
            " elements, expected 1");
  const char *taken = cond.data[0] != 0 ? "then_branch" : "else_branch";
  const auto *branch = gi.attr(taken);
  if (!branch || !branch->has_g())
    gi.fail(std::string("If has no ") + taken + " graph");
  const onnx::GraphProto &g = branch->g();
  const onnx::NodeProto *self = gi.node;
  if (g.output_size() != self->output_size())
    gi.fail(std::string(taken) + " has " + std::to_string(g.output_size()) +
            " outputs, the node " + std::to_string(self->output_size()));
  if (g.initializer_size() > 0 || g.sparse_initializer_size() > 0)
    gi.fail(std::string(taken) + " has initializers, which are not supported");
  for (const auto &n : g.node()) {
    gi.node = &n;
    const OpHandler *h = findHandler(n);
    if (!h)
      gi.fail(std::string(taken) + ": op " + n.op_type() + " is not supported");
    (*h)(gi);
  }
  gi.node = self;
  for (int i = 0; i < self->output_size(); ++i) {
    const std::string &from = g.output(i).name();
    if (const Const *c = gi.constOf(from))
      gi.outputConst(i, *c);
    else
      gi.output(i, gi.valueOf(from));
  }
}

} // namespace

namespace {
std::vector<OpDomain> &domainTable() {
  static std::vector<OpDomain> domains = {hcOpDomain()};
  return domains;
}
} // namespace

void registerOpDomain(OpDomain domain) {
  if (findOpDomain(domain.name))
    llvm::report_fatal_error(llvm::Twine("ONNX op domain '") + domain.name +
                             "' is registered twice");
  domainTable().push_back(std::move(domain));
}

const OpDomain *findOpDomain(const std::string &name) {
  for (const OpDomain &d : domainTable())
    if (d.name == name)
      return &d;
  return nullptr;
}

const std::vector<OpDomain> &opDomains() { return domainTable(); }

const OpHandler *findHandler(const onnx::NodeProto &n) {
  const std::map<std::string, OpHandler> *table = &opHandlers();
  if (!n.domain().empty() && n.domain() != "ai.onnx") {
    const OpDomain *d = findOpDomain(n.domain());
    if (!d)
      return nullptr;
    table = &d->handlers;
  }
  auto h = table->find(n.op_type());
  return h == table->end() ? nullptr : &h->second;
}

const std::map<std::string, OpHandler> &opHandlers() {
  static const std::map<std::string, OpHandler> table = [] {
    std::map<std::string, OpHandler> t = {
      {"Reshape", reshapeOp},
      {"Flatten", flattenOp},
      {"Squeeze", [](GraphImporter &gi) { squeezeLike(gi, false); }},
      {"Unsqueeze", [](GraphImporter &gi) { squeezeLike(gi, true); }},
      {"Transpose", transposeOp},
      {"Expand", expandOp},
      {"Slice", sliceOp},
      {"Concat", concatOp},
      {"Split", splitOp},
      {"Gather", gatherOp},
      {"GatherND", gatherNdOp},
      {"Cast", castOp},
      {"Constant", constantOp},
      {"ConstantOfShape", constantOfShapeOp},
      {"Shape", shapeOp},
      {"Range", rangeOp},
      {"Identity", identityOp},
      {"Dropout", dropoutOp},
      {"If", ifOp},
    };
    addMathHandlers(t);
    addOpset18Handlers(t);
    return t;
  }();
  return table;
}

} // namespace hc::import
