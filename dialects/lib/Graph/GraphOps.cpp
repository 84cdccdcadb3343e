#include "hc/Graph/GraphOps.h"
#include "hc/abi/random.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace hc::graph;

namespace {
// Static dims must agree; a dynamic dim agrees with anything.
bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

LogicalResult fail(std::optional<Location> loc, const Twine &message) {
  return emitOptionalError(loc, message);
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += ShapedType::isDynamic(shape[i]) ? "?" : std::to_string(shape[i]);
    if (i + 1 < shape.size())
      s += ", ";
  }
  return s + "]";
}

LogicalResult inferBroadcast(std::optional<Location> loc, Value lhs, Value rhs,
                             bool compare,
                             SmallVectorImpl<Type> &inferred) {
  auto a = tensorType(lhs), b = tensorType(rhs);
  if (a.getElementType() != b.getElementType())
    return fail(loc, "operand element types differ");
  auto shape = broadcastShapes(a.getShape(), b.getShape());
  if (!shape)
    return fail(loc, "shapes " + shapeString(a.getShape()) + " and " +
                         shapeString(b.getShape()) + " do not broadcast");
  Type elem = compare ? IntegerType::get(lhs.getContext(), 1)
                      : a.getElementType();
  inferred.push_back(RankedTensorType::get(*shape, elem));
  return success();
}
} // namespace

std::optional<SmallVector<int64_t>>
hc::graph::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == 1)
      out[i] = db;
    else if (db == 1)
      out[i] = da;
    else if (ShapedType::isDynamic(da))
      out[i] = db;
    else if (ShapedType::isDynamic(db) || da == db)
      out[i] = da;
    else
      return std::nullopt;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define HC_BROADCAST_INFER(OP, COMPARE)                                        \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> l, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferBroadcast(l, adaptor.getLhs(), adaptor.getRhs(), COMPARE,      \
                          inferred);                                           \
  }
HC_BROADCAST_INFER(AddOp, false)
HC_BROADCAST_INFER(SubOp, false)
HC_BROADCAST_INFER(MulOp, false)
HC_BROADCAST_INFER(DivOp, false)
HC_BROADCAST_INFER(PowOp, false)
HC_BROADCAST_INFER(MaxOp, false)
HC_BROADCAST_INFER(MinOp, false)
HC_BROADCAST_INFER(LessOp, true)
HC_BROADCAST_INFER(EqualOp, true)
#undef HC_BROADCAST_INFER

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  SmallVector<Type> valueType;
  if (failed(inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), false,
                            valueType)))
    return failure();
  auto shape = broadcastShapes(tensorType(adaptor.getCond()).getShape(),
                               cast<RankedTensorType>(valueType[0]).getShape());
  if (!shape)
    return fail(loc, "condition does not broadcast with the values");
  inferred.push_back(RankedTensorType::get(
      *shape, cast<RankedTensorType>(valueType[0]).getElementType()));
  return success();
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "tanh" && getApproximate() != "none")
    return emitOpError("approximate must be \"tanh\" or \"none\", got \"")
           << getApproximate() << "\"";
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

namespace {
LogicalResult inferReduce(std::optional<Location> loc, Value input,
                          ArrayRef<int64_t> axes, bool keepdims,
                          SmallVectorImpl<Type> &inferred) {
  auto type = tensorType(input);
  int64_t rank = type.getRank();
  int64_t previous = -1;
  for (int64_t a : axes) {
    if (a < 0 || a >= rank || a <= previous)
      return fail(loc, "axes must be sorted, unique and in [0, " +
                           std::to_string(rank) + ")");
    previous = a;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced)
      shape.push_back(type.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}
} // namespace

LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor a,
                                             SmallVectorImpl<Type> &inferred) {
  return inferReduce(loc, a.getInput(), a.getAxes(), a.getKeepdims(), inferred);
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &inferred) {
  return inferReduce(loc, a.getInput(), a.getAxes(), a.getKeepdims(), inferred);
}

LogicalResult SoftmaxOp::verify() {
  int64_t axis = getAxis();
  if (axis < 0 || axis >= getInput().getType().getRank())
    return emitOpError("axis ") << axis << " out of range for rank "
                                << getInput().getType().getRank();
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto type = getInput().getType();
  int64_t axis = getAxis();
  if (axis < 0 || axis >= type.getRank())
    return emitOpError("axis ") << axis << " out of range for rank "
                                << type.getRank();
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError("epsilon must be >= 0");
  if (getResult().getType() != type)
    return emitOpError("result type must equal the input type");
  ArrayRef<int64_t> normalized = type.getShape().drop_front(axis);
  for (Value affine : {getWeight(), getBias()}) {
    if (!affine)
      continue;
    auto at = tensorType(affine);
    if (at.getElementType() != type.getElementType() ||
        at.getRank() != static_cast<int64_t>(normalized.size()))
      return emitOpError("scale/shift must have the normalized shape ")
             << shapeString(normalized) << ", got " << at;
    for (size_t i = 0; i < normalized.size(); ++i)
      if (!dimsCompatible(at.getDimSize(i), normalized[i]))
        return emitOpError("scale/shift must have the normalized shape ")
               << shapeString(normalized) << ", got " << at;
  }
  return success();
}

// modulate's operands: x [B, N, D], shift and scale [B, D], y of x's type.
static LogicalResult verifyModulation(Operation *op, Value input, Value shift,
                                      Value scale, Value result) {
  auto x = tensorType(input);
  if (x.getRank() != 3)
    return op->emitOpError("input must be [B, N, D], got ") << x;
  for (Value v : {shift, scale}) {
    auto t = tensorType(v);
    if (t.getRank() != 2 || !dimsCompatible(t.getDimSize(0), x.getDimSize(0)) ||
        !dimsCompatible(t.getDimSize(1), x.getDimSize(2)) ||
        t.getElementType() != x.getElementType())
      return op->emitOpError("shift and scale must be [B, D] = [")
             << x.getDimSize(0) << ", " << x.getDimSize(2) << "], got " << t;
  }
  if (result.getType() != x)
    return op->emitOpError("result type must equal the input type");
  return success();
}

LogicalResult ModulateOp::verify() {
  return verifyModulation(*this, getInput(), getShift(), getScale(),
                          getResult());
}

LogicalResult ModulatedLayerNormOp::verify() {
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError("epsilon must be >= 0");
  return verifyModulation(*this, getInput(), getShift(), getScale(),
                          getResult());
}

LogicalResult GatedResidualOp::verify() {
  auto x = getInput().getType(), g = tensorType(getGate());
  if (x.getRank() != 3 || getBranch().getType() != x || getResult().getType() != x)
    return emitOpError("input, branch and result must be one [B, N, D] type, got ")
           << x << ", " << getBranch().getType() << " -> " << getResult().getType();
  if (g.getRank() != 2 || g.getDimSize(0) != x.getDimSize(0) ||
      g.getDimSize(1) != x.getDimSize(2) || g.getElementType() != x.getElementType())
    return emitOpError("gate must be [B, D] = [")
           << x.getDimSize(0) << ", " << x.getDimSize(2) << "], got " << g;
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  auto input = getInput().getType();
  auto weight = getWeight().getType();
  auto result = getResult().getType();
  if (input.getRank() < 1)
    return emitOpError("input must have rank >= 1, got rank 0");
  if (weight.getRank() != 2)
    return emitOpError("weight must be [out, in], got rank ")
           << weight.getRank();
  Type elem = input.getElementType();
  if (weight.getElementType() != elem || result.getElementType() != elem)
    return emitOpError("input, weight and result element types differ");
  int64_t in = input.getShape().back();
  int64_t out = weight.getDimSize(0);
  if (!dimsCompatible(in, weight.getDimSize(1)))
    return emitOpError("input's last dim ")
           << in << " does not match weight's in dim " << weight.getDimSize(1);
  if (Value bias = getBias()) {
    auto biasType = tensorType(bias);
    if (biasType.getRank() != 1 || !dimsCompatible(biasType.getDimSize(0), out))
      return emitOpError("bias must be [") << out << "], got " << biasType;
    if (biasType.getElementType() != elem)
      return emitOpError("bias element type differs from input's");
  }
  if (result.getRank() != input.getRank())
    return emitOpError("result rank ")
           << result.getRank() << " differs from input rank "
           << input.getRank();
  for (int64_t d = 0; d + 1 < input.getRank(); ++d)
    if (!dimsCompatible(result.getDimSize(d), input.getDimSize(d)))
      return emitOpError("result dim ") << d << " does not match input's";
  if (!dimsCompatible(result.getShape().back(), out))
    return emitOpError("result's last dim ")
           << result.getShape().back() << " does not match weight's out dim "
           << out;
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto a = tensorType(adaptor.getLhs()), b = tensorType(adaptor.getRhs());
  if (a.getElementType() != b.getElementType())
    return fail(loc, "operand element types differ");
  if (a.getRank() < 1 || b.getRank() < 1)
    return fail(loc, "matmul operands must have rank >= 1");
  // 1-D operands are promoted as NumPy does and the added dim removed.
  SmallVector<int64_t> as(a.getShape()), bs(b.getShape());
  bool vecA = as.size() == 1, vecB = bs.size() == 1;
  if (vecA)
    as.insert(as.begin(), 1);
  if (vecB)
    bs.push_back(1);
  int64_t k = as.back(), k2 = bs[bs.size() - 2];
  if (!dimsCompatible(k, k2))
    return fail(loc, "contraction dims differ: " + shapeString(a.getShape()) +
                         " x " + shapeString(b.getShape()));
  auto batch = broadcastShapes(ArrayRef<int64_t>(as).drop_back(2),
                               ArrayRef<int64_t>(bs).drop_back(2));
  if (!batch)
    return fail(loc, "batch dims do not broadcast");
  SmallVector<int64_t> shape(*batch);
  if (!vecA)
    shape.push_back(as[as.size() - 2]);
  if (!vecB)
    shape.push_back(bs.back());
  inferred.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

FailureOr<AttentionSizes> hc::graph::attentionSizes(Operation *op, ValueRange inputs,
                                                    int64_t heads) {
  auto fail = [&](const Twine &m) -> FailureOr<AttentionSizes> {
    op->emitOpError(m);
    return failure();
  };
  if (inputs.size() != 1 && inputs.size() != 3)
    return fail("takes one packed qkv [B, N, 3*D] or q, k, v, got " +
                Twine(inputs.size()) + " inputs");
  SmallVector<RankedTensorType> t;
  for (Value v : inputs)
    t.push_back(cast<RankedTensorType>(v.getType()));
  for (auto x : t)
    if (x.getRank() != 3 || x.getElementType() != t[0].getElementType())
      return fail("inputs must be rank-3 tensors of one element type");
  if (heads <= 0)
    return fail("num_heads must be positive");
  AttentionSizes s{t[0].getDimSize(0), t[0].getDimSize(1), t[0].getDimSize(1),
                   t[0].getDimSize(2)};
  if (inputs.size() == 1) {
    const int64_t threeD = s.dim;
    if (!ShapedType::isDynamic(threeD) && threeD % (3 * heads))
      return fail("qkv's last dim " + Twine(threeD) + " is not 3 * num_heads(" +
                  Twine(heads) + ") * head_dim");
    s.dim = ShapedType::isDynamic(threeD) ? ShapedType::kDynamic : threeD / 3;
    return s;
  }
  s.keys = t[1].getDimSize(1);
  if (!ShapedType::isDynamic(s.dim) && s.dim % heads)
    return fail("q's last dim " + Twine(s.dim) + " is not num_heads(" + Twine(heads) +
                ") * head_dim");
  for (int i = 1; i < 3; ++i)
    if (!dimsCompatible(t[i].getDimSize(0), s.batch) ||
        !dimsCompatible(t[i].getDimSize(1), s.keys) ||
        !dimsCompatible(t[i].getDimSize(2), s.dim))
      return fail("k and v must be [B, L, D] with q's B and D, got q " +
                  shapeString(t[0].getShape()) + ", k " + shapeString(t[1].getShape()) +
                  ", v " + shapeString(t[2].getShape()));
  return s;
}

LogicalResult AttentionOp::verify() {
  const int64_t heads = getNumHeads();
  auto sizes = attentionSizes(*this, getInputs(), heads);
  if (failed(sizes))
    return failure();
  auto elt = cast<RankedTensorType>(getInputs()[0].getType()).getElementType();
  auto result = getResult().getType();
  SmallVector<int64_t> expected{sizes->batch, sizes->queries, sizes->dim};
  if (result.getRank() != 3 || result.getElementType() != elt)
    return emitOpError("result must be [B, N, D]");
  for (int i = 0; i < 3; ++i)
    if (!dimsCompatible(result.getDimSize(i), expected[i]))
      return emitOpError("result must be ")
             << shapeString(expected) << ", got " << result;
  auto lse = getLse().getType();
  SmallVector<int64_t> lseShape{sizes->batch, heads, sizes->queries};
  if (lse.getRank() != 3 || lse.getElementType() != elt)
    return emitOpError("lse must be [B, num_heads, N]");
  for (int i = 0; i < 3; ++i)
    if (!dimsCompatible(lse.getDimSize(i), lseShape[i]))
      return emitOpError("lse must be ")
             << shapeString(lseShape) << ", got " << lse;
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("reshape cannot change the element type");
  if (in.hasStaticShape() && out.hasStaticShape() &&
      in.getNumElements() != out.getNumElements())
    return emitOpError("element count changes: ")
           << in.getNumElements() << " -> " << out.getNumElements();
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  if (auto c = llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return c.reshape(getResult().getType());
  return {};
}

LogicalResult BroadcastOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("broadcast cannot change the element type");
  auto shape = broadcastShapes(in.getShape(), out.getShape());
  if (!shape || in.getRank() > out.getRank())
    return emitOpError("cannot broadcast ")
           << shapeString(in.getShape()) << " to "
           << shapeString(out.getShape());
  for (size_t i = 0; i < shape->size(); ++i)
    if (!dimsCompatible((*shape)[i], out.getDimSize(i)))
      return emitOpError("cannot broadcast ")
             << shapeString(in.getShape()) << " to "
             << shapeString(out.getShape());
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto type = tensorType(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (static_cast<int64_t>(perm.size()) != type.getRank())
    return fail(loc, "perm has " + std::to_string(perm.size()) +
                         " entries for rank " + std::to_string(type.getRank()));
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= type.getRank() || seen[p])
      return fail(loc, "perm is not a permutation");
    seen[p] = true;
    shape.push_back(type.getDimSize(p));
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto type = tensorType(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), sizes = adaptor.getSizes(),
                    steps = adaptor.getSteps();
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(sizes.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank)
    return fail(loc, "starts, sizes and steps need one entry per dim");
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = type.getDimSize(d);
    if (steps[d] <= 0 || starts[d] < 0 || sizes[d] < 0)
      return fail(loc, "slice needs start >= 0, size >= 0, step > 0");
    if (!ShapedType::isDynamic(dim) && sizes[d] > 0 &&
        starts[d] + (sizes[d] - 1) * steps[d] >= dim)
      return fail(loc, "slice of dim " + std::to_string(d) +
                           " runs past its size " + std::to_string(dim));
  }
  inferred.push_back(RankedTensorType::get(sizes, type.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return fail(loc, "concat needs at least one input");
  auto first = tensorType(adaptor.getInputs()[0]);
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return fail(loc, "axis out of range");
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : adaptor.getInputs()) {
    auto t = tensorType(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return fail(loc, "concat inputs differ in rank or element type");
    for (int64_t d = 0; d < t.getRank(); ++d) {
      if (d == axis) {
        if (ShapedType::isDynamic(t.getDimSize(d)) ||
            ShapedType::isDynamic(shape[d]))
          shape[d] = ShapedType::kDynamic;
        else
          shape[d] += t.getDimSize(d);
      } else if (!dimsCompatible(t.getDimSize(d), shape[d])) {
        return fail(loc, "concat inputs differ in dim " + std::to_string(d));
      }
    }
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto type = tensorType(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= type.getRank())
    return fail(loc, "axis out of range");
  int64_t total = 0;
  for (int64_t size : adaptor.getSizes()) {
    if (size < 0)
      return fail(loc, "split sizes must be >= 0");
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = size;
    inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
    total += size;
  }
  if (!ShapedType::isDynamic(type.getDimSize(axis)) &&
      total != type.getDimSize(axis))
    return fail(loc, "split sizes sum to " + std::to_string(total) +
                         ", dim is " + std::to_string(type.getDimSize(axis)));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto type = tensorType(adaptor.getInput());
  auto indices = tensorType(adaptor.getIndices());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= type.getRank())
    return fail(loc, "axis out of range");
  SmallVector<int64_t> shape(type.getShape().take_front(axis));
  shape.append(indices.getShape().begin(), indices.getShape().end());
  shape.append(type.getShape().begin() + axis + 1, type.getShape().end());
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Loss and randomness
//===----------------------------------------------------------------------===//

LogicalResult MseLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto p = tensorType(adaptor.getPrediction()),
       t = tensorType(adaptor.getTarget());
  if (p.getElementType() != t.getElementType() || p.getRank() != t.getRank())
    return fail(loc, "prediction and target differ in rank or element type");
  for (int64_t d = 0; d < p.getRank(); ++d)
    if (!dimsCompatible(p.getDimSize(d), t.getDimSize(d)))
      return fail(loc, "prediction and target shapes differ");
  inferred.push_back(RankedTensorType::get({}, p.getElementType()));
  return success();
}

LogicalResult RandomUniformOp::verify() {
  if (!(getLow().convertToDouble() < getHigh().convertToDouble()))
    return emitOpError("needs low < high");
  if (getResult().getType().getRank() < 1)
    return emitOpError("result needs a leading sample dim");
  // A graph's draws keep out of the trainer's op ids (hc/abi/random.h).
  if (getOpId() < static_cast<int64_t>(hc::rt::kGraphDrawFirst) ||
      getOpId() >= static_cast<int64_t>(hc::rt::kGraphDrawEnd))
    return emitOpError("op_id ") << getOpId() << " is outside a graph's draws ["
                                 << hc::rt::kGraphDrawFirst << ", " << hc::rt::kGraphDrawEnd
                                 << ")";
  return success();
}

#define GET_OP_CLASSES
#include "hc/Graph/GraphOps.cpp.inc"
