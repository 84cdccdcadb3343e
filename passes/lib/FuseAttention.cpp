// qkv -> heads -> softmax(q·kᵀ·scale)·v -> merged heads  =>  hc.attention qkv
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "hc/Passes/Passes.h.inc"

namespace {

// `v` is head tensor `which` (0: q, 1: k, 2: v) of `heads`, taken along dim 0
// by a Gather of a scalar constant or a unit Slice + Reshape.
bool isHead(Value v, Value heads, int64_t which) {
  if (auto g = v.getDefiningOp<GatherOp>())
    return g.getInput() == heads && g.getAxis() == 0 &&
           typeOf(g.getIndices()).getRank() == 0 &&
           isConstant(g.getIndices(), static_cast<double>(which), 0.0);
  auto r = v.getDefiningOp<ReshapeOp>();
  auto s = r ? r.getInput().getDefiningOp<SliceOp>() : SliceOp();
  if (!s || s.getInput() != heads || s.getStarts()[0] != which ||
      s.getSizes()[0] != 1)
    return false;
  for (size_t d = 0; d < s.getSteps().size(); ++d)
    if (s.getSteps()[d] != 1 ||
        (d > 0 && (s.getStarts()[d] != 0 ||
                   s.getSizes()[d] != typeOf(heads).getDimSize(d))))
      return false;
  return true;
}

struct MultiHeadAttention : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    // merge heads: [B, H, N, Dh] -> transpose [0, 2, 1, 3] -> [B, N, H·Dh]
    auto merge = op.getInput().getDefiningOp<TransposeOp>();
    if (!merge || merge.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3})
      return failure();
    auto pv = merge.getInput().getDefiningOp<MatmulOp>();
    auto softmax = pv ? pv.getLhs().getDefiningOp<SoftmaxOp>() : SoftmaxOp();
    if (!softmax || softmax.getAxis() != 3)
      return failure();
    // scores = (q·kᵀ)·s, (q·kᵀ)/c, or (q·s)·kᵀ
    Value scores = softmax.getInput();
    double scale = 1.0;
    MatmulOp qk;
    if (auto m = scores.getDefiningOp<MulOp>()) {
      for (auto [a, c] : {std::pair(m.getLhs(), m.getRhs()),
                          std::pair(m.getRhs(), m.getLhs())})
        if (auto s = splatConstant(c);
            s && typeOf(c).getNumElements() == 1 && a.getDefiningOp<MatmulOp>()) {
          scale = *s;
          qk = a.getDefiningOp<MatmulOp>();
        }
    } else if (auto d = scores.getDefiningOp<DivOp>()) {
      if (auto s = splatConstant(d.getRhs());
          s && *s != 0 && typeOf(d.getRhs()).getNumElements() == 1) {
        scale = 1.0 / *s;
        qk = d.getLhs().getDefiningOp<MatmulOp>();
      }
    } else {
      qk = scores.getDefiningOp<MatmulOp>();
    }
    if (!qk)
      return failure();
    Value q = qk.getLhs();
    if (auto m = q.getDefiningOp<MulOp>()) {  // scale applied to q
      for (auto [a, c] : {std::pair(m.getLhs(), m.getRhs()),
                          std::pair(m.getRhs(), m.getLhs())})
        if (auto s = splatConstant(c); s && typeOf(c).getNumElements() == 1) {
          scale *= *s;
          q = a;
          break;
        }
    }
    auto kT = qk.getRhs().getDefiningOp<TransposeOp>();
    if (!kT || kT.getPerm() != ArrayRef<int64_t>{0, 1, 3, 2})
      return failure();
    // heads = transpose(reshape(qkv, [B, N, 3, H, Dh]), [2, 0, 3, 1, 4])
    Value heads;
    if (auto g = q.getDefiningOp<GatherOp>())
      heads = g.getInput();
    else if (auto r = q.getDefiningOp<ReshapeOp>())
      if (auto s = r.getInput().getDefiningOp<SliceOp>())
        heads = s.getInput();
    if (!heads || !isHead(q, heads, 0) || !isHead(kT.getInput(), heads, 1) ||
        !isHead(pv.getRhs(), heads, 2))
      return failure();
    auto split = heads.getDefiningOp<TransposeOp>();
    if (!split || split.getPerm() != ArrayRef<int64_t>{2, 0, 3, 1, 4})
      return failure();
    auto unpack = split.getInput().getDefiningOp<ReshapeOp>();
    if (!unpack)
      return failure();
    Value qkv = unpack.getInput();
    auto qkvType = typeOf(qkv), unpacked = typeOf(unpack.getResult());
    int64_t B = qkvType.getDimSize(0), N = qkvType.getDimSize(1);
    if (qkvType.getRank() != 3 || unpacked.getRank() != 5 ||
        unpacked.getShape() !=
            ArrayRef<int64_t>{B, N, 3, unpacked.getDimSize(3),
                              unpacked.getDimSize(4)})
      return failure();
    int64_t H = unpacked.getDimSize(3), Dh = unpacked.getDimSize(4);
    auto out = op.getType();
    if (out.getShape() != ArrayRef<int64_t>{B, N, H * Dh})
      return failure();
    rewriter.replaceOpWithNewOp<AttentionOp>(
        op, out, qkv, rewriter.getI64IntegerAttr(H),
        rewriter.getF64FloatAttr(scale));
    return success();
  }
};

HC_FUSION_PASS(FuseAttention, MultiHeadAttention)

} // namespace
} // namespace hc
