// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [· w] [+ b] -> hc.layer_norm
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSELAYERNORM
#include "hc/Passes/Passes.h.inc"

namespace {

// The first normalized dim if `axes` are exactly the trailing dims of `rank`.
std::optional<int64_t> trailingAxis(ArrayRef<int64_t> axes, int64_t rank) {
  if (axes.empty())
    return std::nullopt;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size()) +
                       static_cast<int64_t>(i))
      return std::nullopt;
  return axes.front();
}

bool isSquareOf(Value v, Value d) {
  if (auto p = v.getDefiningOp<PowOp>())
    return p.getLhs() == d && isConstant(p.getRhs(), 2.0);
  auto m = v.getDefiningOp<MulOp>();
  return m && m.getLhs() == d && m.getRhs() == d;
}

struct DecomposedLayerNorm : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp op,
                                PatternRewriter &rewriter) const override {
    auto sub = op.getLhs().getDefiningOp<SubOp>();
    auto sqrt = op.getRhs().getDefiningOp<SqrtOp>();
    if (!sub || !sqrt)
      return failure();
    auto mean = sub.getRhs().getDefiningOp<ReduceMeanOp>();
    Value x = sub.getLhs();
    if (!mean || mean.getInput() != x || !mean.getKeepdims() ||
        x.getType() != op.getType())
      return failure();
    int64_t rank = typeOf(x).getRank();
    auto axis = trailingAxis(mean.getAxes(), rank);
    // var + eps, eps a non-negative scalar constant
    auto addEps = sqrt.getInput().getDefiningOp<AddOp>();
    if (!axis || !addEps)
      return failure();
    for (auto [varValue, epsValue] :
         {std::pair(addEps.getLhs(), addEps.getRhs()),
          std::pair(addEps.getRhs(), addEps.getLhs())}) {
      auto eps = splatConstant(epsValue);
      auto var = varValue.getDefiningOp<ReduceMeanOp>();
      if (!eps || *eps < 0 || typeOf(epsValue).getNumElements() != 1 || !var ||
          !var.getKeepdims() || var.getAxes() != mean.getAxes() ||
          !isSquareOf(var.getInput(), sub.getResult()))
        continue;
      rewriter.replaceOpWithNewOp<LayerNormOp>(
          op, op.getType(), x, Value(), Value(), rewriter.getF64FloatAttr(*eps),
          rewriter.getI64IntegerAttr(*axis));
      return success();
    }
    return failure();
  }
};

// A tensor of exactly the normalized shape of `ln`.
bool hasNormalizedShape(LayerNormOp ln, Value v) {
  ArrayRef<int64_t> shape = ln.getType().getShape().drop_front(ln.getAxis());
  return typeOf(v).getShape() == shape &&
         typeOf(v).getElementType() == ln.getType().getElementType();
}

// layer_norm(x) · w -> layer_norm(x) scale w (only without scale and shift).
struct AbsorbScale : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [a, w] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      auto ln = a.getDefiningOp<LayerNormOp>();
      if (!ln || ln.getWeight() || ln.getBias() || !hasOneUse(a) ||
          !hasNormalizedShape(ln, w) || op.getType() != ln.getType())
        continue;
      rewriter.replaceOpWithNewOp<LayerNormOp>(
          op, op.getType(), ln.getInput(), w, Value(), ln.getEpsilonAttr(),
          ln.getAxisAttr());
      return success();
    }
    return failure();
  }
};

// layer_norm(x) + b -> layer_norm(x) shift b (only without a shift).
struct AbsorbShift : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [a, b] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      auto ln = a.getDefiningOp<LayerNormOp>();
      if (!ln || ln.getBias() || !hasOneUse(a) || !hasNormalizedShape(ln, b) ||
          op.getType() != ln.getType())
        continue;
      rewriter.replaceOpWithNewOp<LayerNormOp>(
          op, op.getType(), ln.getInput(), ln.getWeight(), b,
          ln.getEpsilonAttr(), ln.getAxisAttr());
      return success();
    }
    return failure();
  }
};

HC_FUSION_PASS(FuseLayerNorm, DecomposedLayerNorm, AbsorbScale, AbsorbShift)

} // namespace
} // namespace hc
