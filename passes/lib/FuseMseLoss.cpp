// mean((a - b)^2) over every element -> hc.mse_loss a, b (the mean a scalar,
// or kept dims [1, ..., 1] reshaped to one)
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEMSELOSS
#include "hc/Passes/Passes.h.inc"

namespace {

// (a - b) when `op` is the mean of its square over every element.
SubOp squaredDifference(ReduceMeanOp op) {
  auto in = typeOf(op.getInput());
  if (static_cast<int64_t>(op.getAxes().size()) != in.getRank())
    return SubOp();
  Value diff;
  if (auto m = op.getInput().getDefiningOp<MulOp>()) {
    if (m.getLhs() == m.getRhs())
      diff = m.getLhs();
  } else if (auto p = op.getInput().getDefiningOp<PowOp>()) {
    if (isConstant(p.getRhs(), 2.0))
      diff = p.getLhs();
  }
  auto sub = diff ? diff.getDefiningOp<SubOp>() : SubOp();
  if (!sub || sub.getLhs().getType() != sub.getRhs().getType() ||
      sub.getLhs().getType() != in)
    return SubOp();
  return sub;
}

struct MeanSquaredDifference : OpRewritePattern<ReduceMeanOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceMeanOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getKeepdims() || op.getType().getRank() != 0)
      return failure();
    SubOp sub = squaredDifference(op);
    if (!sub)
      return failure();
    rewriter.replaceOpWithNewOp<MseLossOp>(op, op.getType(), sub.getLhs(),
                                           sub.getRhs());
    return success();
  }
};

// The dynamo exporter's form: ReduceMean-18 keeps dims by default, so the
// mean is [1, ..., 1] and a Reshape (the exporter's Squeeze) makes it a
// scalar.
struct KeptDimsMeanSquaredDifference : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto mean = op.getInput().getDefiningOp<ReduceMeanOp>();
    if (!mean || !mean.getKeepdims() || op.getType().getRank() != 0 ||
        !mean.getResult().hasOneUse())
      return failure();
    SubOp sub = squaredDifference(mean);
    if (!sub)
      return failure();
    rewriter.replaceOpWithNewOp<MseLossOp>(op, op.getType(), sub.getLhs(),
                                           sub.getRhs());
    return success();
  }
};

HC_FUSION_PASS(FuseMseLoss, MeanSquaredDifference, KeptDimsMeanSquaredDifference)

} // namespace
} // namespace hc
