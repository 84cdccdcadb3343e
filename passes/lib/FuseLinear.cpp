// matmul(x, transpose(W)) [+ bias] -> hc.linear x, W [, bias]
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSELINEAR
#include "hc/Passes/Passes.h.inc"

namespace {

struct MatmulByTransposedWeight : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto t = op.getRhs().getDefiningOp<TransposeOp>();
    if (!t || t.getPerm() != ArrayRef<int64_t>{1, 0} ||
        typeOf(op.getLhs()).getRank() < 2)
      return failure();
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), op.getLhs(),
                                          t.getInput(), Value());
    return success();
  }
};

// add(linear-without-bias, b) with b of shape [out] -> linear with bias b.
struct AddBiasToLinear : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [a, b] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      auto linear = a.getDefiningOp<LinearOp>();
      if (!linear || linear.getBias() || !hasOneUse(a) ||
          linear.getType() != op.getType())
        continue;
      auto bias = typeOf(b);
      if (bias.getRank() != 1 ||
          bias.getDimSize(0) != linear.getWeight().getType().getDimSize(0))
        continue;
      rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), linear.getInput(),
                                            linear.getWeight(), b);
      return success();
    }
    return failure();
  }
};

HC_FUSION_PASS(FuseLinear, MatmulByTransposedWeight, AddBiasToLinear)

} // namespace
} // namespace hc
