// After autodiff: a GEMM and the GELU (or GELU gradient) after it become one
// kernel whose epilogue applies the elementwise op while each output tile
// is hot.
//   gelu(linear(x, W, b))                  -> linear_gelu (result, preact)
//   gelu_grad(linear_grad_input(dy, W), h) -> linear_grad_input_gelu(dy, W, h)
// Both are cheaper than the pair in every case (the cost model is that
// simple): the first saves the GELU pass's read of the pre-activation (the
// GEMM writes it beside the output, where the GELU's backward reads it),
// the second the dY·W intermediate's write and read.
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEGEMMEPILOGUES
#include "hc/Passes/Passes.h.inc"

namespace {

// The GEMM epilogue has the tanh form only.
bool isTanhGelu(StringRef approximate) { return approximate == "tanh"; }

struct LinearThenGelu : OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluOp gelu,
                                PatternRewriter &rewriter) const override {
    auto linear = gelu.getInput().getDefiningOp<LinearOp>();
    if (!linear || !isTanhGelu(gelu.getApproximate()) ||
        linear.getType() != gelu.getType() ||
        !linear.getType().getElementType().isF32())
      return failure();
    rewriter.setInsertionPoint(linear);
    auto fused = rewriter.create<LinearGeluOp>(
        linear.getLoc(), TypeRange{linear.getType(), linear.getType()},
        linear.getInput(), linear.getWeight(), linear.getBias());
    rewriter.replaceOp(gelu, fused.getResult());
    rewriter.replaceOp(linear, fused.getPreact());
    return success();
  }
};

struct GradInputThenGeluGrad : OpRewritePattern<GeluGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluGradOp op,
                                PatternRewriter &rewriter) const override {
    auto gi = op.getGrad().getDefiningOp<LinearGradInputOp>();
    if (!gi || !hasOneUse(op.getGrad()) || !isTanhGelu(op.getApproximate()) ||
        gi.getType() != op.getType() || op.getInput().getType() != op.getType() ||
        !op.getType().getElementType().isF32())
      return failure();
    rewriter.replaceOpWithNewOp<LinearGradInputGeluOp>(
        op, op.getType(), gi.getGrad(), gi.getWeight(), op.getInput());
    rewriter.eraseOp(gi);
    return success();
  }
};

HC_FUSION_PASS(FuseGemmEpilogues, LinearThenGelu, GradInputThenGeluGrad)

} // namespace
} // namespace hc
