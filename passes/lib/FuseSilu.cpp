// x * sigmoid(x) -> hc.silu x
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSESILU
#include "hc/Passes/Passes.h.inc"

namespace {

struct MulBySigmoidOfSelf : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [x, s] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      auto sigmoid = s.getDefiningOp<SigmoidOp>();
      if (!sigmoid || sigmoid.getInput() != x || x.getType() != op.getType())
        continue;
      rewriter.replaceOpWithNewOp<SiluOp>(op, op.getType(), x);
      return success();
    }
    return failure();
  }
};

HC_FUSION_PASS(FuseSilu, MulBySigmoidOfSelf)

} // namespace
} // namespace hc
