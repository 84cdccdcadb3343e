// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) -> hc.gelu x {approximate = "tanh"},
// the 0.5 on the product, on x or on the (1 + tanh) factor
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEGELU
#include "hc/Passes/Passes.h.inc"

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;

// x³ as pow(x, 3), x·(x·x) or (x·x)·x.
bool isCube(Value v, Value x) {
  if (auto p = v.getDefiningOp<PowOp>())
    return p.getLhs() == x && isConstant(p.getRhs(), 3.0);
  auto m = v.getDefiningOp<MulOp>();
  if (!m)
    return false;
  auto isSquare = [&](Value s) {
    auto sq = s.getDefiningOp<MulOp>();
    return sq && sq.getLhs() == x && sq.getRhs() == x;
  };
  return (m.getLhs() == x && isSquare(m.getRhs())) ||
         (m.getRhs() == x && isSquare(m.getLhs()));
}

// 1 + tanh(√(2/π)·(x + 0.044715·x³)) for this x.
bool isOnePlusTanh(Value v, Value x) {
  Value t = withConstant<AddOp>(v, 1.0);
  auto tanh = t ? t.getDefiningOp<TanhOp>() : TanhOp();
  if (!tanh)
    return false;
  Value inner = withConstant<MulOp>(tanh.getInput(), kSqrt2OverPi);
  auto sum = inner ? inner.getDefiningOp<AddOp>() : AddOp();
  if (!sum)
    return false;
  Value cubeTerm = otherOperand(sum, x);
  Value cube = cubeTerm ? withConstant<MulOp>(cubeTerm, kCubic) : Value();
  return cube && isCube(cube, x);
}

struct TanhGeluChain : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    Value x;
    // 0.5 · (x · T)
    if (Value rest = withConstant<MulOp>(op.getResult(), 0.5)) {
      if (auto m = rest.getDefiningOp<MulOp>()) {
        if (isOnePlusTanh(m.getRhs(), m.getLhs()))
          x = m.getLhs();
        else if (isOnePlusTanh(m.getLhs(), m.getRhs()))
          x = m.getRhs();
      }
    }
    // (0.5 · x) · T
    for (auto [half, t] : {std::pair(op.getLhs(), op.getRhs()),
                           std::pair(op.getRhs(), op.getLhs())}) {
      if (x)
        break;
      Value candidate = withConstant<MulOp>(half, 0.5);
      if (candidate && isOnePlusTanh(t, candidate))
        x = candidate;
    }
    // x · (0.5 · T) (the dynamo exporter's order)
    for (auto [cand, t] : {std::pair(op.getLhs(), op.getRhs()),
                           std::pair(op.getRhs(), op.getLhs())}) {
      if (x)
        break;
      Value rest = withConstant<MulOp>(t, 0.5);
      if (rest && isOnePlusTanh(rest, cand))
        x = cand;
    }
    if (!x || x.getType() != op.getType())
      return failure();
    rewriter.replaceOpWithNewOp<GeluOp>(op, op.getType(), x,
                                        rewriter.getStringAttr("tanh"));
    return success();
  }
};

HC_FUSION_PASS(FuseGelu, TanhGeluChain)

} // namespace
} // namespace hc
