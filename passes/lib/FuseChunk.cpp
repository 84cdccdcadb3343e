// Unit-step slices of one value that tile one dim -> a single hc.split.
#include "Matchers.h"
#include "hc/Passes/Passes.h"

#include <map>

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSECHUNK
#include "hc/Passes/Passes.h.inc"

namespace {

// The dim a slice cuts, if it is unit-step and full on every other dim.
std::optional<int64_t> cutDim(SliceOp s) {
  auto in = typeOf(s.getInput());
  std::optional<int64_t> cut;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (s.getSteps()[d] != 1)
      return std::nullopt;
    bool full = s.getStarts()[d] == 0 && s.getSizes()[d] == in.getDimSize(d);
    if (full)
      continue;
    if (cut)
      return std::nullopt;
    cut = d;
  }
  return cut;
}

struct SlicesToSplit : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp op,
                                PatternRewriter &rewriter) const override {
    auto axis = cutDim(op);
    if (!axis)
      return failure();
    Value src = op.getInput();
    // start -> size and the slices taking that piece
    std::map<int64_t, std::pair<int64_t, SmallVector<SliceOp>>> pieces;
    for (Operation *user : src.getUsers()) {
      auto s = dyn_cast<SliceOp>(user);
      if (!s || s.getInput() != src || cutDim(s) != axis)
        continue;
      int64_t start = s.getStarts()[*axis], size = s.getSizes()[*axis];
      auto [it, inserted] = pieces.try_emplace(start, size, SmallVector<SliceOp>());
      if (!inserted && it->second.first != size)
        return failure();  // overlapping pieces
      it->second.second.push_back(s);
    }
    if (pieces.size() < 2)
      return failure();
    SmallVector<int64_t> sizes;
    int64_t next = 0;
    for (auto &[start, piece] : pieces) {
      if (start != next)
        return failure();  // a gap or an overlap
      sizes.push_back(piece.first);
      next += piece.first;
    }
    if (next != typeOf(src).getDimSize(*axis))
      return failure();
    rewriter.setInsertionPointAfterValue(src);
    SmallVector<Type> types;
    for (auto &[start, piece] : pieces)
      types.push_back(piece.second.front().getType());
    auto split = rewriter.create<SplitOp>(
        op.getLoc(), types, src, rewriter.getI64IntegerAttr(*axis),
        rewriter.getDenseI64ArrayAttr(sizes));
    unsigned i = 0;
    for (auto &[start, piece] : pieces) {
      for (SliceOp s : piece.second)
        rewriter.replaceOp(s, split.getResult(i));
      ++i;
    }
    return success();
  }
};

HC_FUSION_PASS(FuseChunk, SlicesToSplit)

} // namespace
} // namespace hc
