// Reverse-mode rules of the hc graph ops (GradientOpInterface), one per op,
// kept beside the ops they differentiate. Fused ops use fused backward ops.
#include "hc/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"

#include <cmath>

using namespace mlir;
using namespace hc::graph;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

Value scalar(OpBuilder &b, Location loc, Type elem, double v) {
  auto type = RankedTensorType::get({}, elem);
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(
                                       type, b.getFloatAttr(elem, v)));
}

Value zeros(OpBuilder &b, Location loc, RankedTensorType type) {
  return b.create<ConstantOp>(
      loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), 0.0)));
}

// Sums a broadcast adjoint back to the shape of the operand it came from.
Value unbroadcast(OpBuilder &b, Location loc, Value g, Value operand) {
  auto target = typeOf(operand), from = typeOf(g);
  if (from == target)
    return g;
  int64_t lead = from.getRank() - target.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < from.getRank(); ++d)
    if (d < lead || (target.getDimSize(d - lead) == 1 && from.getDimSize(d) != 1))
      axes.push_back(d);
  Value r = g;
  if (!axes.empty())
    r = b.create<ReduceSumOp>(loc, r, b.getDenseI64ArrayAttr(axes),
                              b.getBoolAttr(true));
  if (r.getType() != target)
    r = b.create<ReshapeOp>(loc, target, r);
  return r;
}

// Expands the adjoint of a reduction back over the reduced dims.
Value expandReduced(OpBuilder &b, Location loc, Value g, Value input,
                    ArrayRef<int64_t> axes) {
  auto in = typeOf(input);
  SmallVector<int64_t> kept(in.getShape());
  for (int64_t a : axes)
    kept[a] = 1;
  auto keptType = RankedTensorType::get(kept, in.getElementType());
  Value r = g.getType() == keptType ? g : b.create<ReshapeOp>(loc, keptType, g);
  return r.getType() == in ? r : b.create<BroadcastOp>(loc, in, r);
}

Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return b.create<MulOp>(loc, x, y);
}

// Rules for elementwise binary ops: (g, a, b, y) -> (ga, gb) before unbroadcast.
template <typename Rule>
LogicalResult binaryGradients(Operation *op, OpBuilder &b, ValueRange rg,
                              SmallVectorImpl<Value> &og, Rule rule) {
  og.assign(2, Value());
  Value g = rg[0];
  if (!g)
    return success();
  Value a = op->getOperand(0), c = op->getOperand(1);
  auto [ga, gb] = rule(g, a, c, op->getResult(0));
  if (ga)
    og[0] = unbroadcast(b, op->getLoc(), ga, a);
  if (gb)
    og[1] = unbroadcast(b, op->getLoc(), gb, c);
  return success();
}

// Rules for unary float ops: (g, x, y) -> gx.
template <typename Rule>
LogicalResult unaryGradient(Operation *op, ValueRange rg,
                            SmallVectorImpl<Value> &og, Rule rule) {
  og.assign(1, Value());
  if (rg[0])
    og[0] = rule(rg[0], op->getOperand(0), op->getResult(0));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define BINARY_RULE(OP, ...)                                                   \
  LogicalResult OP::buildGradients(OpBuilder &b, ValueRange rg,                \
                                   SmallVectorImpl<Value> &og) {               \
    Location loc = getLoc();                                                   \
    (void)loc;                                                                 \
    return binaryGradients(getOperation(), b, rg, og,                          \
                           [&](Value g, Value a, Value c, Value y)             \
                               -> std::pair<Value, Value> { __VA_ARGS__ });           \
  }

BINARY_RULE(AddOp, return {g, g};)
BINARY_RULE(SubOp, return {g, b.create<NegOp>(loc, g.getType(), g)};)
BINARY_RULE(MulOp, return {mul(b, loc, g, c), mul(b, loc, g, a)};)
BINARY_RULE(DivOp, {
  Value ga = b.create<DivOp>(loc, g, c);
  Value gb = b.create<NegOp>(loc, ga.getType(),
                             b.create<DivOp>(loc, mul(b, loc, g, y), c));
  return {ga, gb};
})
BINARY_RULE(PowOp, {
  // d/da a^c = c·a^(c-1); d/dc a^c = a^c·log(a)
  Type elem = typeOf(a).getElementType();
  Value cm1 = b.create<SubOp>(loc, c, scalar(b, loc, elem, 1.0));
  Value ga = mul(b, loc, g, mul(b, loc, c, b.create<PowOp>(loc, a, cm1)));
  Value la = b.create<LogOp>(loc, a.getType(), a);
  Value gb = mul(b, loc, mul(b, loc, g, y), la);
  return {ga, gb};
})
// max/min: the adjoint goes to the winning operand; ties split it evenly,
// as torch.maximum/minimum do. `aWins` is a < c for min, c < a for max.
static std::pair<Value, Value> selectGradients(OpBuilder &b, Location loc,
                                               Value g, Value a, Value c,
                                               bool isMax) {
  Type elem = typeOf(g).getElementType();
  Value zero = scalar(b, loc, elem, 0.0);
  Value half = mul(b, loc, g, scalar(b, loc, elem, 0.5));
  Value onTie = b.create<WhereOp>(loc, b.create<EqualOp>(loc, a, c), half, zero);
  Value aWins = isMax ? b.create<LessOp>(loc, c, a) : b.create<LessOp>(loc, a, c);
  Value cWins = isMax ? b.create<LessOp>(loc, a, c) : b.create<LessOp>(loc, c, a);
  return {b.create<WhereOp>(loc, aWins, g, onTie),
          b.create<WhereOp>(loc, cWins, g, onTie)};
}
BINARY_RULE(MaxOp, (void)y; return selectGradients(b, loc, g, a, c, true);)
BINARY_RULE(MinOp, (void)y; return selectGradients(b, loc, g, a, c, false);)
BINARY_RULE(LessOp, (void)g; (void)a; (void)c; (void)y; return {Value(), Value()};)
BINARY_RULE(EqualOp, (void)g; (void)a; (void)c; (void)y; return {Value(), Value()};)
#undef BINARY_RULE

LogicalResult WhereOp::buildGradients(OpBuilder &b, ValueRange rg,
                                      SmallVectorImpl<Value> &og) {
  og.assign(3, Value());
  Value g = rg[0];
  if (!g || !isa<FloatType>(typeOf(g).getElementType()))
    return success();
  Value zero = scalar(b, getLoc(), typeOf(g).getElementType(), 0.0);
  og[1] = unbroadcast(b, getLoc(),
                      b.create<WhereOp>(getLoc(), getCond(), g, zero), getLhs());
  og[2] = unbroadcast(b, getLoc(),
                      b.create<WhereOp>(getLoc(), getCond(), zero, g), getRhs());
  return success();
}

#define UNARY_RULE(OP, ...)                                                    \
  LogicalResult OP::buildGradients(OpBuilder &b, ValueRange rg,                \
                                   SmallVectorImpl<Value> &og) {               \
    Location loc = getLoc();                                                   \
    Type elem = getType().getElementType();                                    \
    auto k = [&](double v) { return scalar(b, loc, elem, v); };                \
    (void)k;                                                                   \
    return unaryGradient(getOperation(), rg, og,                               \
                         [&](Value g, Value x, Value y) -> Value { __VA_ARGS__ });    \
  }

UNARY_RULE(NegOp, (void)x; (void)y; return b.create<NegOp>(loc, g.getType(), g);)
UNARY_RULE(SqrtOp, (void)x;
           return b.create<DivOp>(loc, mul(b, loc, g, k(0.5)), y);)
UNARY_RULE(ExpOp, (void)x; return mul(b, loc, g, y);)
UNARY_RULE(LogOp, (void)y; return b.create<DivOp>(loc, g, x);)
UNARY_RULE(TanhOp, (void)x;
           return mul(b, loc, g, b.create<SubOp>(loc, k(1.0), mul(b, loc, y, y)));)
UNARY_RULE(SigmoidOp, (void)x;
           return mul(b, loc, mul(b, loc, g, y),
                      b.create<SubOp>(loc, k(1.0), y));)
UNARY_RULE(SinOp, (void)y;
           return mul(b, loc, g, b.create<CosOp>(loc, x.getType(), x));)
UNARY_RULE(CosOp, (void)y;
           return b.create<NegOp>(
               loc, g.getType(),
               mul(b, loc, g, b.create<SinOp>(loc, x.getType(), x)));)
UNARY_RULE(ErfOp, (void)y; {
  Value e = b.create<ExpOp>(loc, x.getType(),
                            b.create<NegOp>(loc, x.getType(), mul(b, loc, x, x)));
  return mul(b, loc, g, mul(b, loc, e, k(2.0 / std::sqrt(M_PI))));
})
UNARY_RULE(ReciprocalOp, (void)x;
           return b.create<NegOp>(loc, g.getType(),
                                  mul(b, loc, g, mul(b, loc, y, y)));)
UNARY_RULE(SiluOp, (void)y; return b.create<SiluGradOp>(loc, g.getType(), g, x);)
#undef UNARY_RULE

// The point of the op: nothing flows back through it.
LogicalResult StopGradientOp::buildGradients(OpBuilder &, ValueRange,
                                             SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ValueRange rg,
                                     SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (rg[0])
    og[0] = b.create<GeluGradOp>(getLoc(), getType(), rg[0], getInput(),
                                 getApproximateAttr());
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &b, ValueRange rg,
                                     SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  auto in = getInput().getType();
  if (rg[0] && isa<FloatType>(in.getElementType()))
    og[0] = in == rg[0].getType() ? rg[0]
                                  : b.create<CastOp>(getLoc(), in, rg[0]).getResult();
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b, ValueRange rg,
                                          SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (rg[0])
    og[0] = expandReduced(b, getLoc(), rg[0], getInput(), getAxes());
  return success();
}

LogicalResult ReduceMeanOp::buildGradients(OpBuilder &b, ValueRange rg,
                                           SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (!rg[0])
    return success();
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= getInput().getType().getDimSize(a);
  Value scaled = mul(b, getLoc(), rg[0],
                     scalar(b, getLoc(), getType().getElementType(),
                            1.0 / static_cast<double>(count)));
  og[0] = expandReduced(b, getLoc(), scaled, getInput(), getAxes());
  return success();
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ValueRange rg,
                                        SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (rg[0])
    og[0] = b.create<SoftmaxGradOp>(getLoc(), getType(), rg[0], getResult(),
                                    getAxisAttr());
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ValueRange rg,
                                          SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  Value g = rg[0];
  if (!g)
    return success();
  Location loc = getLoc();
  og[0] = b.create<LayerNormGradOp>(loc, getType(), g, getInput(), getWeight(),
                                    getEpsilonAttr(), getAxisAttr());
  SmallVector<int64_t> lead;
  for (int64_t d = 0; d < static_cast<int64_t>(getAxis()); ++d)
    lead.push_back(d);
  unsigned next = 1;
  if (Value w = getWeight()) {
    Value normalized = b.create<LayerNormOp>(loc, getType(), getInput(), Value(),
                                             Value(), getEpsilonAttr(),
                                             getAxisAttr());
    Value s = b.create<ReduceSumOp>(loc, mul(b, loc, g, normalized),
                                    b.getDenseI64ArrayAttr(lead),
                                    b.getBoolAttr(false));
    og[next++] = s;
    (void)w;
  }
  if (getBias())
    og[next] = b.create<ReduceSumOp>(loc, g, b.getDenseI64ArrayAttr(lead),
                                     b.getBoolAttr(false));
  return success();
}

// (dx, dshift, dscale) of a modulation `op` (x, shift, scale) from one
// GradOp(dy, x, scale, extra...).
template <class GradOp, class Op, class... Extra>
static LogicalResult modulationGradients(Op op, OpBuilder &b, ValueRange rg,
                                         SmallVectorImpl<Value> &og,
                                         Extra... extra) {
  og.assign(3, Value());
  if (!rg[0])
    return success();
  auto grads = b.create<GradOp>(
      op.getLoc(),
      TypeRange{op.getType(), op.getShift().getType(), op.getScale().getType()},
      rg[0], op.getInput(), op.getScale(), extra...);
  og[0] = grads.getInputGrad();
  og[1] = grads.getShiftGrad();
  og[2] = grads.getScaleGrad();
  return success();
}

LogicalResult ModulateOp::buildGradients(OpBuilder &b, ValueRange rg,
                                         SmallVectorImpl<Value> &og) {
  return modulationGradients<ModulateGradOp>(*this, b, rg, og);
}

LogicalResult ModulatedLayerNormOp::buildGradients(OpBuilder &b, ValueRange rg,
                                                   SmallVectorImpl<Value> &og) {
  return modulationGradients<ModulatedLayerNormGradOp>(*this, b, rg, og,
                                                       getEpsilonAttr());
}

LogicalResult GatedResidualOp::buildGradients(OpBuilder &b, ValueRange rg,
                                              SmallVectorImpl<Value> &og) {
  og.assign(3, Value());
  if (!rg[0])
    return success();
  auto grads = b.create<GatedResidualGradOp>(
      getLoc(), TypeRange{getGate().getType(), getType()}, rg[0], getGate(),
      getBranch());
  og[0] = rg[0];
  og[1] = grads.getGateGrad();
  og[2] = grads.getBranchGrad();
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::buildGradients(OpBuilder &b, ValueRange rg,
                                       SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  Value g = rg[0];
  if (!g)
    return success();
  Location loc = getLoc();
  og[0] = b.create<LinearGradInputOp>(loc, getInput().getType(), g, getWeight());
  og[1] = b.create<LinearGradWeightOp>(loc, getWeight().getType(), g, getInput());
  if (getBias()) {
    SmallVector<int64_t> lead;
    for (int64_t d = 0; d + 1 < getType().getRank(); ++d)
      lead.push_back(d);
    og[2] = lead.empty() ? g
                         : b.create<ReduceSumOp>(loc, g, b.getDenseI64ArrayAttr(lead),
                                                 b.getBoolAttr(false))
                               .getResult();
  }
  return success();
}

LogicalResult MatmulOp::buildGradients(OpBuilder &b, ValueRange rg,
                                       SmallVectorImpl<Value> &og) {
  og.assign(2, Value());
  Value g = rg[0];
  if (!g)
    return success();
  Value a = getLhs(), c = getRhs();
  if (typeOf(a).getRank() < 2 || typeOf(c).getRank() < 2)
    return emitOpError("gradient of a matmul with a 1-D operand is not "
                       "implemented");
  Location loc = getLoc();
  auto swapLast = [&](Value v) {
    int64_t r = typeOf(v).getRank();
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < r; ++d)
      perm.push_back(d);
    std::swap(perm[r - 1], perm[r - 2]);
    return b.create<TransposeOp>(loc, v, b.getDenseI64ArrayAttr(perm)).getResult();
  };
  og[0] = unbroadcast(b, loc, b.create<MatmulOp>(loc, g, swapLast(c)), a);
  og[1] = unbroadcast(b, loc, b.create<MatmulOp>(loc, swapLast(a), g), c);
  return success();
}

LogicalResult AttentionOp::buildGradients(OpBuilder &b, ValueRange rg,
                                          SmallVectorImpl<Value> &og) {
  og.assign(getInputs().size(), Value());
  if (rg.size() > 1 && rg[1])
    return emitOpError("a loss that depends on attention's log-sum-exp has no "
                       "gradient rule");
  if (rg[0]) {
    auto grad = b.create<AttentionGradOp>(getLoc(), getInputs().getTypes(), rg[0],
                                          getResult(), getLse(), getInputs(),
                                          getNumHeadsAttr(), getScaleAttr());
    for (auto [i, g] : llvm::enumerate(grad.getGrads()))
      og[i] = g;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ValueRange rg,
                                        SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (rg[0] && isa<FloatType>(getType().getElementType()))
    og[0] = b.create<ReshapeOp>(getLoc(), getInput().getType(), rg[0]);
  return success();
}

LogicalResult BroadcastOp::buildGradients(OpBuilder &b, ValueRange rg,
                                          SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (rg[0] && isa<FloatType>(getType().getElementType()))
    og[0] = unbroadcast(b, getLoc(), rg[0], getInput());
  return success();
}

LogicalResult TransposeOp::buildGradients(OpBuilder &b, ValueRange rg,
                                          SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (!rg[0] || !isa<FloatType>(getType().getElementType()))
    return success();
  SmallVector<int64_t> inverse(getPerm().size());
  for (size_t i = 0; i < inverse.size(); ++i)
    inverse[getPerm()[i]] = static_cast<int64_t>(i);
  og[0] = b.create<TransposeOp>(getLoc(), rg[0], b.getDenseI64ArrayAttr(inverse));
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ValueRange rg,
                                      SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (rg[0] && isa<FloatType>(getType().getElementType()))
    og[0] = b.create<SliceGradOp>(getLoc(), getInput().getType(), rg[0],
                                  getStartsAttr(), getStepsAttr());
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, ValueRange rg,
                                       SmallVectorImpl<Value> &og) {
  og.assign(getNumOperands(), Value());
  if (!rg[0] || !isa<FloatType>(getType().getElementType()))
    return success();
  int64_t offset = 0, axis = getAxis();
  for (auto [i, in] : llvm::enumerate(getInputs())) {
    auto t = typeOf(in);
    SmallVector<int64_t> starts(t.getRank(), 0), steps(t.getRank(), 1);
    starts[axis] = offset;
    og[i] = b.create<SliceOp>(getLoc(), rg[0], b.getDenseI64ArrayAttr(starts),
                              b.getDenseI64ArrayAttr(t.getShape()),
                              b.getDenseI64ArrayAttr(steps));
    offset += t.getDimSize(axis);
  }
  return success();
}

LogicalResult SplitOp::buildGradients(OpBuilder &b, ValueRange rg,
                                      SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (!isa<FloatType>(getInput().getType().getElementType()) ||
      llvm::all_of(rg, [](Value v) { return !v; }))
    return success();
  SmallVector<Value> pieces;
  for (auto [i, g] : llvm::enumerate(rg))
    pieces.push_back(g ? g : zeros(b, getLoc(), typeOf(getResult(i))));
  og[0] = b.create<ConcatOp>(getLoc(), pieces, getAxisAttr());
  return success();
}

LogicalResult GatherOp::buildGradients(OpBuilder &b, ValueRange rg,
                                       SmallVectorImpl<Value> &og) {
  og.assign(2, Value());
  if (rg[0] && isa<FloatType>(getType().getElementType()))
    og[0] = b.create<ScatterAddOp>(getLoc(), getInput().getType(), rg[0],
                                   getIndices(), getAxisAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

LogicalResult MseLossOp::buildGradients(OpBuilder &b, ValueRange rg,
                                        SmallVectorImpl<Value> &og) {
  og.assign(2, Value());
  if (!rg[0])
    return success();
  Value dp = b.create<MseLossGradOp>(getLoc(), getPrediction().getType(), rg[0],
                                     getPrediction(), getTarget());
  og[0] = dp;
  og[1] = b.create<NegOp>(getLoc(), dp.getType(), dp);
  return success();
}
