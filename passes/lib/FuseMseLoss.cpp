// mean((a - b)^2) over every element -> hc.mse_loss a, b
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEMSELOSS
#include "hc/Passes/Passes.h.inc"

namespace {

struct MeanSquaredDifference : OpRewritePattern<ReduceMeanOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceMeanOp op,
                                PatternRewriter &rewriter) const override {
    auto in = typeOf(op.getInput());
    if (op.getKeepdims() || op.getType().getRank() != 0 ||
        static_cast<int64_t>(op.getAxes().size()) != in.getRank())
      return failure();
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
      return failure();
    rewriter.replaceOpWithNewOp<MseLossOp>(op, op.getType(), sub.getLhs(),
                                           sub.getRhs());
    return success();
  }
};

HC_FUSION_PASS(FuseMseLoss, MeanSquaredDifference)

} // namespace
} // namespace hc
