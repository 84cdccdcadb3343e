// hc.modulate of an affine-free hc.layer_norm over the last dim, used by
// nothing else -> hc.modulated_layer_norm: one pass over x forward (the
// normalized x is never stored) and one over dy and x backward, where the
// pair made two each and kept x_hat alive from forward to backward.
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEMODULATEDLAYERNORM
#include "hc/Passes/Passes.h.inc"

namespace {

struct NormThenModulate : OpRewritePattern<ModulateOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ModulateOp op,
                                PatternRewriter &rewriter) const override {
    auto norm = op.getInput().getDefiningOp<LayerNormOp>();
    // The gamma/beta form would need its own gradients (dgamma, dbeta);
    // a norm over more than D, or read elsewhere, stays as it is.
    if (!norm || norm.getWeight() || norm.getBias() ||
        !hasOneUse(norm.getResult()) ||
        static_cast<int64_t>(norm.getAxis()) != op.getType().getRank() - 1)
      return failure();
    rewriter.replaceOpWithNewOp<ModulatedLayerNormOp>(
        op, op.getType(), norm.getInput(), op.getShift(), op.getScale(),
        norm.getEpsilonAttr());
    rewriter.eraseOp(norm);
    return success();
  }
};

HC_FUSION_PASS(FuseModulatedLayerNorm, NormThenModulate)

} // namespace
} // namespace hc
