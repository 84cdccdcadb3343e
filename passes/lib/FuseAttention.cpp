// qkv -> heads -> softmax(q·kᵀ·scale)·v -> merged heads  =>  hc.attention qkv
//
// The forms DiT code writes (docs: compiler/README.md, "Attention fusion"):
// heads taken from the 5-D [3, B, H, N, Dh] permute by index (Gather), by
// unit slice or by unbind/chunk (Split into [1, 1, 1]) + squeeze, or q/k/v
// split from the packed [B, N, 3·D] along the last dim (chunk/split, Split or
// Slice) each reshaped to [B, N, H, Dh] and transposed; scaled by compile-time
// scalar constants on the scores, on q, on k (before or after its transpose)
// or any product of these (torch's SDPA: √scale on q and on kᵀ); kᵀ as a
// transpose of the last two dims, straight from the packed qkv, or through a
// [B·H, N, Dh] flattening (the dynamo exporter's SDPA).
#include "Matchers.h"
#include "hc/Passes/Passes.h"

using namespace mlir;
using namespace hc::graph;
using namespace hc::match;

namespace hc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "hc/Passes/Passes.h.inc"

namespace {

// One of q, k, v as a slice of the packed qkv [B, N, 3·H·Dh].
struct Head {
  Value qkv;
  int64_t which = -1;  // 0 q, 1 k, 2 v
  int64_t heads = 0, headDim = 0;
};

bool sameHead(const Head &a, const Head &b) {
  return a.qkv == b.qkv && a.heads == b.heads && a.headDim == b.headDim;
}

// Strips multiplications by (and divisions by) 1-element compile-time
// constants that leave the shape unchanged, accumulating them into `scale`.
Value stripScale(Value v, double &scale) {
  while (true) {
    if (auto m = v.getDefiningOp<MulOp>()) {
      bool found = false;
      for (auto [a, c] : {std::pair(m.getLhs(), m.getRhs()),
                          std::pair(m.getRhs(), m.getLhs())}) {
        auto s = splatConstant(c);
        if (s && typeOf(c).getNumElements() == 1 &&
            a.getType() == m.getType()) {
          scale *= *s;
          v = a;
          found = true;
          break;
        }
      }
      if (found)
        continue;
    } else if (auto d = v.getDefiningOp<DivOp>()) {
      auto s = splatConstant(d.getRhs());
      if (s && *s != 0 && typeOf(d.getRhs()).getNumElements() == 1 &&
          d.getLhs().getType() == d.getType()) {
        scale /= *s;
        v = d.getLhs();
        continue;
      }
    }
    return v;
  }
}

// Is `s` a unit-step slice that is full on every dim but `dim`?
bool slicesOnly(SliceOp s, int64_t dim) {
  auto in = typeOf(s.getInput());
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (s.getSteps()[d] != 1 ||
        (d != dim && (s.getStarts()[d] != 0 || s.getSizes()[d] != in.getDimSize(d))))
      return false;
  return true;
}

// The piece of `v` taken along `dim` into equal parts of `part` elements:
// (source, index of the piece), from a Split into equal sizes or a Slice.
std::optional<std::pair<Value, int64_t>> pieceOf(Value v, int64_t dim,
                                                 int64_t part) {
  if (auto r = dyn_cast<OpResult>(v))
    if (auto s = dyn_cast<SplitOp>(r.getOwner())) {
      if (s.getAxis() != dim || s.getSizes().size() != 3 ||
          llvm::any_of(s.getSizes(), [&](int64_t n) { return n != part; }))
        return std::nullopt;
      return std::pair(s.getInput(), int64_t(r.getResultNumber()));
    }
  if (auto s = v.getDefiningOp<SliceOp>()) {
    if (!slicesOnly(s, dim) || s.getSizes()[dim] != part ||
        s.getStarts()[dim] % part ||
        typeOf(s.getInput()).getDimSize(dim) != 3 * part)
      return std::nullopt;
    return std::pair(s.getInput(), s.getStarts()[dim] / part);
  }
  return std::nullopt;
}

// heads [3, B, H, N, Dh] = transpose(reshape(qkv, [B, N, 3, H, Dh]),
// [2, 0, 3, 1, 4]) with qkv [B, N, 3·H·Dh].
std::optional<Head> packedHeads(Value heads) {
  auto split = heads.getDefiningOp<TransposeOp>();
  if (!split || split.getPerm() != ArrayRef<int64_t>{2, 0, 3, 1, 4})
    return std::nullopt;
  auto unpack = split.getInput().getDefiningOp<ReshapeOp>();
  if (!unpack)
    return std::nullopt;
  Value qkv = unpack.getInput();
  auto qkvType = typeOf(qkv), unpacked = typeOf(unpack.getResult());
  if (qkvType.getRank() != 3 || unpacked.getRank() != 5)
    return std::nullopt;
  int64_t B = qkvType.getDimSize(0), N = qkvType.getDimSize(1);
  int64_t H = unpacked.getDimSize(3), Dh = unpacked.getDimSize(4);
  if (unpacked.getShape() != ArrayRef<int64_t>{B, N, 3, H, Dh})
    return std::nullopt;
  return Head{qkv, -1, H, Dh};
}

// A [B, H, N, Dh] head taken from the 5-D permute: Gather of a scalar index,
// or a unit Slice / a piece of a Split along dim 0, squeezed by a Reshape.
std::optional<Head> headFrom5d(Value v) {
  std::optional<Head> h;
  if (auto g = v.getDefiningOp<GatherOp>()) {
    auto idx = splatConstant(g.getIndices());
    if (g.getAxis() != 0 || typeOf(g.getIndices()).getRank() != 0 || !idx)
      return std::nullopt;
    h = packedHeads(g.getInput());
    if (h)
      h->which = static_cast<int64_t>(*idx);
  } else if (auto r = v.getDefiningOp<ReshapeOp>()) {
    auto piece = pieceOf(r.getInput(), 0, 1);
    if (!piece || typeOf(r.getResult()).getShape() !=
                      typeOf(r.getInput()).getShape().drop_front())
      return std::nullopt;
    h = packedHeads(piece->first);
    if (h)
      h->which = piece->second;
  }
  if (!h || h->which < 0 || h->which > 2)
    return std::nullopt;
  return h;
}

// transpose(reshape(part, [B, N, H, Dh]), perm) with `part` piece `which`
// of the packed qkv [B, N, 3·H·Dh] along its last dim.
std::optional<Head> headFromParts(Value v, ArrayRef<int64_t> perm) {
  auto t = v.getDefiningOp<TransposeOp>();
  auto r = t && t.getPerm() == perm ? t.getInput().getDefiningOp<ReshapeOp>()
                                    : ReshapeOp();
  if (!r)
    return std::nullopt;
  auto part = typeOf(r.getInput()), split = typeOf(r.getResult());
  if (part.getRank() != 3 || split.getRank() != 4 ||
      split.getShape() != ArrayRef<int64_t>{part.getDimSize(0), part.getDimSize(1),
                                            split.getDimSize(2), split.getDimSize(3)})
    return std::nullopt;
  auto piece = pieceOf(r.getInput(), 2, part.getDimSize(2));
  if (!piece)
    return std::nullopt;
  return Head{piece->first, piece->second, split.getDimSize(2), split.getDimSize(3)};
}

// q or v: a [B, H, N, Dh] head.
std::optional<Head> headOf(Value v) {
  if (auto h = headFrom5d(v))
    return h;
  return headFromParts(v, {0, 2, 1, 3});
}

// kᵀ: a [B, H, Dh, N] head, scaled before or after the transpose.
std::optional<Head> transposedHeadOf(Value v, double &scale) {
  if (auto t = v.getDefiningOp<TransposeOp>();
      t && t.getPerm() == ArrayRef<int64_t>{0, 1, 3, 2})
    if (auto h = headOf(stripScale(t.getInput(), scale)))
      return h;
  // torch's dynamo exporter decomposes SDPA's k.transpose(-2, -1) through
  // 3-D: reshape(transpose(reshape(k, [B·H, N, Dh]), [0, 2, 1]),
  // [B, H, Dh, N]), scaled before the flattening or after.
  if (auto outer = v.getDefiningOp<ReshapeOp>()) {
    auto t = outer.getInput().getDefiningOp<TransposeOp>();
    auto inner = t && t.getPerm() == ArrayRef<int64_t>{0, 2, 1}
                     ? t.getInput().getDefiningOp<ReshapeOp>()
                     : ReshapeOp();
    if (inner) {
      auto k = typeOf(inner.getInput());
      if (k.getRank() == 4) {
        int64_t B = k.getDimSize(0), H = k.getDimSize(1), N = k.getDimSize(2),
                Dh = k.getDimSize(3);
        if (typeOf(inner.getResult()).getShape() ==
                ArrayRef<int64_t>{B * H, N, Dh} &&
            typeOf(outer.getResult()).getShape() ==
                ArrayRef<int64_t>{B, H, Dh, N})
          if (auto h = headOf(stripScale(inner.getInput(), scale)))
            return h;
      }
    }
  }
  return headFromParts(v, {0, 2, 3, 1});
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
    if (!softmax || softmax.getAxis() != 3 ||
        typeOf(softmax.getResult()).getRank() != 4)
      return failure();
    double scale = 1.0;
    auto qk = stripScale(softmax.getInput(), scale).getDefiningOp<MatmulOp>();
    if (!qk)
      return failure();
    auto q = headOf(stripScale(qk.getLhs(), scale));
    auto k = transposedHeadOf(stripScale(qk.getRhs(), scale), scale);
    auto v = headOf(pv.getRhs());
    if (!q || !k || !v || q->which != 0 || k->which != 1 || v->which != 2 ||
        !sameHead(*q, *k) || !sameHead(*q, *v))
      return failure();
    auto qkvType = typeOf(q->qkv);
    int64_t B = qkvType.getDimSize(0), N = qkvType.getDimSize(1);
    int64_t H = q->heads, Dh = q->headDim;
    if (qkvType.getDimSize(2) != 3 * H * Dh ||
        typeOf(pv.getResult()).getShape() != ArrayRef<int64_t>{B, H, N, Dh} ||
        typeOf(softmax.getResult()).getShape() != ArrayRef<int64_t>{B, H, N, N})
      return failure();
    auto out = op.getType();
    if (out.getShape() != ArrayRef<int64_t>{B, N, H * Dh} ||
        out.getElementType() != qkvType.getElementType())
      return failure();
    auto lse = RankedTensorType::get({B, H, N}, out.getElementType());
    auto att = rewriter.create<AttentionOp>(op.getLoc(), out, lse, q->qkv,
                                            rewriter.getI64IntegerAttr(H),
                                            rewriter.getF64FloatAttr(scale));
    rewriter.replaceOp(op, att.getResult());
    return success();
  }
};

HC_FUSION_PASS(FuseAttention, MultiHeadAttention)

} // namespace
} // namespace hc
