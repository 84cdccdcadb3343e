// x·(1 + scale) + shift, per-sample [B, 1, D] scale/shift -> hc.modulate
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEMODULATE
#include "hc/Passes/Passes.h.inc"

namespace {

struct ScaleShift : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    auto type = op.getType();
    if (type.getRank() != 3)
      return failure();
    for (auto [product, shift] : {std::pair(op.getLhs(), op.getRhs()),
                                  std::pair(op.getRhs(), op.getLhs())}) {
      auto mul = product.getDefiningOp<MulOp>();
      if (!mul || !hasOneUse(product) || !isPerSample(shift, type))
        continue;
      for (auto [x, onePlus] : {std::pair(mul.getLhs(), mul.getRhs()),
                                std::pair(mul.getRhs(), mul.getLhs())}) {
        Value scale = withConstant<AddOp>(onePlus, 1.0);
        if (!scale || x.getType() != type || !isPerSample(scale, type))
          continue;
        Value shift2 = asPerSampleMatrix(rewriter, op.getLoc(), shift);
        Value scale2 = asPerSampleMatrix(rewriter, op.getLoc(), scale);
        rewriter.replaceOpWithNewOp<ModulateOp>(op, type, x, shift2, scale2);
        return success();
      }
    }
    return failure();
  }
};

HC_FUSION_PASS(FuseModulate, ScaleShift)

} // namespace
} // namespace hc
