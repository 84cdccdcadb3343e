// Verifiers of the backward and optimizer ops (GraphBackwardOps.td).
#include "hc/Graph/GraphOps.h"

#include <cmath>

using namespace mlir;
using namespace hc::graph;

namespace {
RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}
} // namespace

LogicalResult LinearGradInputOp::verify() {
  auto dy = getGrad().getType(), w = getWeight().getType(),
       dx = getResult().getType();
  if (w.getRank() != 2 || dy.getRank() < 1 || dx.getRank() != dy.getRank() ||
      dy.getShape().back() != w.getDimSize(0) ||
      dx.getShape().back() != w.getDimSize(1) ||
      dx.getShape().drop_back() != dy.getShape().drop_back())
    return emitOpError("needs dY [..., out], W [out, in] -> dX [..., in], got ")
           << dy << ", " << w << " -> " << dx;
  return success();
}

LogicalResult LinearGradWeightOp::verify() {
  auto dy = getGrad().getType(), x = getInput().getType(),
       dw = getResult().getType();
  if (dy.getRank() != x.getRank() || dy.getRank() < 1 ||
      dy.getShape().drop_back() != x.getShape().drop_back() ||
      dw.getShape() != ArrayRef<int64_t>{dy.getShape().back(),
                                         x.getShape().back()})
    return emitOpError("needs dY [..., out], X [..., in] -> dW [out, in], got ")
           << dy << ", " << x << " -> " << dw;
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  auto x = getInput().getType();
  if (getGrad().getType() != x || getResult().getType() != x)
    return emitOpError("grad, input and result must have one type");
  int64_t axis = getAxis();
  if (axis < 0 || axis >= x.getRank())
    return emitOpError("axis out of range");
  if (Value w = getWeight())
    if (tensorType(w).getShape() != x.getShape().drop_front(getAxis()))
      return emitOpError("scale must have the normalized shape");
  return success();
}

// The adjoints of a modulation: dy and x [B, N, D], scale [B, D], and dx,
// dshift, dscale of their types.
template <class GradOp> static LogicalResult verifyModulationGrad(GradOp op) {
  auto x = op.getInput().getType();
  auto s = op.getScale().getType();
  if (x.getRank() != 3 || op.getGrad().getType() != x ||
      op.getInputGrad().getType() != x || s.getRank() != 2 ||
      s.getShape() != ArrayRef<int64_t>{x.getDimSize(0), x.getDimSize(2)} ||
      op.getShiftGrad().getType() != s || op.getScaleGrad().getType() != s)
    return op.emitOpError("needs dy, x [B, N, D] and scale [B, D]");
  return success();
}

LogicalResult ModulateGradOp::verify() { return verifyModulationGrad(*this); }

LogicalResult ModulatedLayerNormGradOp::verify() {
  if (getEpsilon().convertToDouble() < 0)
    return emitOpError("epsilon must be >= 0");
  return verifyModulationGrad(*this);
}

LogicalResult GatedResidualGradOp::verify() {
  auto h = getBranch().getType(), g = getGate().getType();
  if (h.getRank() != 3 || getGrad().getType() != h ||
      getBranchGrad().getType() != h || g.getRank() != 2 ||
      g.getShape() != ArrayRef<int64_t>{h.getDimSize(0), h.getDimSize(2)} ||
      getGateGrad().getType() != g)
    return emitOpError("needs dy, h [B, N, D] and gate [B, D]");
  return success();
}

LogicalResult AttentionGradOp::verify() {
  auto sizes = attentionSizes(*this, getInputs(), getNumHeads());
  if (failed(sizes))
    return failure();
  if (getGrads().size() != getInputs().size() ||
      llvm::any_of(llvm::zip(getGrads(), getInputs()),
                   [](auto p) { return std::get<0>(p).getType() != std::get<1>(p).getType(); }))
    return emitOpError("returns one gradient per input, of its type");
  auto dy = getGrad().getType();
  if (dy.getRank() != 3 ||
      dy.getShape() != ArrayRef<int64_t>{sizes->batch, sizes->queries, sizes->dim})
    return emitOpError("needs dOut [B, N, D]");
  auto lse = getLse().getType();
  if (getOut().getType().getShape() != dy.getShape() || lse.getRank() != 3 ||
      lse.getDimSize(0) != sizes->batch ||
      lse.getDimSize(1) != static_cast<int64_t>(getNumHeads()) ||
      lse.getDimSize(2) != sizes->queries)
    return emitOpError("needs the forward's out [B, N, D] and lse [B, heads, N]");
  return success();
}

LogicalResult MseLossGradOp::verify() {
  if (getPrediction().getType() != getTarget().getType() ||
      getResult().getType() != getPrediction().getType())
    return emitOpError("prediction, target and result must have one type");
  return success();
}

LogicalResult ScatterAddOp::verify() {
  auto table = getResult().getType(), dy = getGrad().getType(),
       idx = getIndices().getType();
  int64_t axis = getAxis();
  if (axis < 0 || axis >= table.getRank())
    return emitOpError("axis out of range");
  SmallVector<int64_t> expected(table.getShape().take_front(axis));
  expected.append(idx.getShape().begin(), idx.getShape().end());
  expected.append(table.getShape().begin() + axis + 1, table.getShape().end());
  if (dy.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("grad shape does not match a gather of the result");
  return success();
}

LogicalResult SliceGradOp::verify() {
  auto in = getResult().getType(), dy = getGrad().getType();
  if (in.getRank() != dy.getRank() ||
      static_cast<int64_t>(getStarts().size()) != in.getRank() ||
      static_cast<int64_t>(getSteps().size()) != in.getRank())
    return emitOpError("needs one start and step per dim");
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (getSteps()[d] <= 0 || getStarts()[d] < 0 ||
        (dy.getDimSize(d) > 0 &&
         getStarts()[d] + (dy.getDimSize(d) - 1) * getSteps()[d] >=
             in.getDimSize(d)))
      return emitOpError("slice of dim ") << d << " runs past the input";
  return success();
}

// Adam-family operands: 4N tensors (params, grads, first and second
// moments) and 3N results of the matching parameter's type.
static LogicalResult verifyAdamTensors(Operation *op, ValueRange tensors,
                                       ResultRange updated) {
  unsigned n = tensors.size();
  if (n == 0 || n % 4 || updated.size() != 3 * (n / 4))
    return op->emitOpError("needs 4N tensor operands (params, grads, first "
                           "and second moments) and 3N results, got ")
           << n << " and " << updated.size();
  unsigned p = n / 4;
  for (unsigned i = 0; i < p; ++i) {
    Type t = tensors[i].getType();
    for (unsigned k = 1; k < 4; ++k)
      if (tensors[k * p + i].getType() != t)
        return op->emitOpError("parameter ") << i << "'s grad/moments differ in type";
    for (unsigned k = 0; k < 3; ++k)
      if (updated[k * p + i].getType() != t)
        return op->emitOpError("parameter ") << i << "'s results differ in type";
  }
  return success();
}

LogicalResult AdamWOp::verify() {
  if (failed(verifyAdamTensors(*this, getTensors(), getUpdated())))
    return failure();
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1 &&
        getEps().convertToDouble() >= 0 && getLr().convertToDouble() >= 0))
    return emitOpError("needs 0 <= betas < 1, eps >= 0, lr >= 0");
  return success();
}

LogicalResult AdamOp::verify() {
  if (failed(verifyAdamTensors(*this, getTensors(), getUpdated())))
    return failure();
  double a = getAlpha().convertToDouble(), b = getBeta().convertToDouble(),
         eps = getEpsilon().convertToDouble(),
         nc = getNormCoefficient().convertToDouble(),
         post = getNormCoefficientPost().convertToDouble();
  // alpha = 1 would divide by 1 - alpha^T = 0 in the bias correction.
  if (!(a >= 0 && a < 1 && b >= 0 && b <= 1 && eps >= 0 && std::isfinite(eps) &&
        std::isfinite(nc) && std::isfinite(post)))
    return emitOpError("needs 0 <= alpha < 1, 0 <= beta <= 1, finite "
                       "epsilon >= 0 and finite norm coefficients");
  return success();
}

LogicalResult SgdOp::verify() {
  unsigned n = getTensors().size();
  if (n % 2 || getUpdated().size() != n / 2)
    return emitOpError("needs 2N operands (params, grads) and N results");
  for (unsigned i = 0; i < n / 2; ++i)
    if (getTensors()[n / 2 + i].getType() != getTensors()[i].getType() ||
        getUpdated()[i].getType() != getTensors()[i].getType())
      return emitOpError("parameter ") << i << "'s grad/result differ in type";
  return success();
}

LogicalResult GradNormOp::verify() {
  if (getGrads().empty())
    return emitOpError("needs at least one gradient");
  return success();
}

LogicalResult GradClipOp::verify() {
  if (getClipped().size() != getGrads().size())
    return emitOpError("needs one result per gradient, got ")
           << getClipped().size() << " for " << getGrads().size();
  for (auto [g, c] : llvm::zip(getGrads(), getClipped()))
    if (g.getType() != c.getType())
      return emitOpError("a clipped gradient's type differs from its gradient's");
  if (getMaxGradNorm().convertToDouble() < 0)
    return emitOpError("max_grad_norm must be 0 (off) or positive");
  return success();
}

LogicalResult GradAccumulateOp::verify() {
  if (getGrad().getType() != getAcc().getType() ||
      getNewGrad().getType() != getGrad().getType() ||
      getNewAcc().getType() != getGrad().getType())
    return emitOpError("gradient, accumulator and results must have one type");
  const double i = getMicroBatch().convertToDouble(), k = getMicroBatches().convertToDouble();
  if (!(k >= 1) || k != std::floor(k) || !(i >= 0) || i != std::floor(i) || i >= k)
    return emitOpError("micro_batch must be a whole number below micro_batches (>= 1), got ")
           << i << " of " << k;
  return success();
}
