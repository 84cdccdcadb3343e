// After autodiff: a weight gradient and the bias gradient that sums the same
// dY become one call,
//   linear_grad_weight(dy, x), reduce_sum(dy, all but the last dim)
//     -> linear_grad_weight_bias(dy, x) (dw, db)
// whose GEMM adds up db while it reads dY for dW: the reduce_sum's own pass
// over dY (the widest gradient of a block, from memory) goes. The sums keep
// reduce_sum's order, so the step computes the same bits.
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEBIASGRADS
#include "hc/Passes/Passes.h.inc"

namespace {

// reduce_sum over every dim of a float32 dY but the last, to [out].
bool sumsAllButLast(ReduceSumOp r) {
  auto in = r.getInput().getType();
  if (in.getRank() < 2 || r.getKeepdims() || !in.getElementType().isF32() ||
      r.getType().getShape() != in.getShape().take_back())
    return false;
  ArrayRef<int64_t> axes = r.getAxes();
  if (static_cast<int64_t>(axes.size()) != in.getRank() - 1)
    return false;
  for (int64_t d = 0; d + 1 < in.getRank(); ++d)
    if (axes[d] != d)
      return false;
  return true;
}

struct WeightAndBiasGrad : OpRewritePattern<ReduceSumOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceSumOp sum,
                                PatternRewriter &rewriter) const override {
    if (!sumsAllButLast(sum))
      return failure();
    Value dy = sum.getInput();
    for (Operation *user : dy.getUsers()) {
      auto gw = dyn_cast<LinearGradWeightOp>(user);
      if (!gw || gw.getGrad() != dy || gw->getBlock() != sum->getBlock())
        continue;
      // At the later of the two (both operands are defined by then); every
      // use of the earlier one's result must come after it.
      Operation *first = gw->isBeforeInBlock(sum) ? gw.getOperation() : sum.getOperation();
      Operation *last = first == sum.getOperation() ? gw.getOperation() : sum.getOperation();
      bool usesAfter = llvm::all_of(first->getUsers(), [&](Operation *u) {
        return u->getBlock() == last->getBlock() && last->isBeforeInBlock(u);
      });
      if (!usesAfter)
        continue;
      rewriter.setInsertionPoint(last);
      auto fused = rewriter.create<LinearGradWeightBiasOp>(
          gw.getLoc(), TypeRange{gw.getType(), sum.getType()}, dy, gw.getInput());
      rewriter.replaceOp(gw, fused.getWeightGrad());
      rewriter.replaceOp(sum, fused.getBiasGrad());
      return success();
    }
    return failure();
  }
};

HC_FUSION_PASS(FuseBiasGrads, WeightAndBiasGrad)

} // namespace
} // namespace hc
