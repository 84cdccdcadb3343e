// x + gate·h with a per-sample [B, 1, D] gate -> hc.gated_residual: adaLN-
// Zero's residual, one pass over x and h instead of a product tensor written
// and read back; its backward is one pass too (gated_residual_grad).
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEGATEDRESIDUAL
#include "hc/Passes/Passes.h.inc"

namespace {

struct GateThenAdd : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    auto type = op.getType();
    if (type.getRank() != 3)
      return failure();
    for (auto [x, product] : {std::pair(op.getLhs(), op.getRhs()),
                              std::pair(op.getRhs(), op.getLhs())}) {
      auto mul = product.getDefiningOp<MulOp>();
      if (!mul || !hasOneUse(product) || x.getType() != type)
        continue;
      for (auto [gate, h] : {std::pair(mul.getLhs(), mul.getRhs()),
                             std::pair(mul.getRhs(), mul.getLhs())}) {
        if (h.getType() != type || !isPerSample(gate, type))
          continue;
        Value g = asPerSampleMatrix(rewriter, op.getLoc(), gate);
        rewriter.replaceOpWithNewOp<GatedResidualOp>(op, type, x, g, h);
        return success();
      }
    }
    return failure();
  }
};

HC_FUSION_PASS(FuseGatedResidual, GateThenAdd)

} // namespace
} // namespace hc
