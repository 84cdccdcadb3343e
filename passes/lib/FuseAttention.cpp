// heads -> softmax(q·kᵀ·scale)·v -> merged heads  =>  hc.attention
//
// Self-attention from one packed qkv becomes hc.attention qkv; attention whose
// q is a tensor of its own [B, N, H·Dh] and whose k and v are the two pieces
// of a packed kv [B, L, 2·H·Dh] (PixArt's cross-attention) or tensors of
// their own [B, L, H·Dh] becomes hc.attention q, k, v (a packed kv split
// into two views). The forms DiT code writes (docs: compiler/README.md,
// "Attention fusion"):
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

// One of q, k, v: piece `which` of `pieces` of a packed source [B, T,
// pieces·H·Dh] (qkv: 3, kv: 2), or a whole source [B, T, H·Dh] (pieces 1,
// which 0).
struct Head {
  Value src;
  int64_t which = -1;
  int64_t pieces = 0;
  int64_t heads = 0, headDim = 0;
};

bool sameHead(const Head &a, const Head &b) {
  return a.src == b.src && a.pieces == b.pieces && a.heads == b.heads &&
         a.headDim == b.headDim;
}

bool packedIn(const Head &h, int64_t pieces, int64_t which) {
  return h.pieces == pieces && h.which == which;
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

// The piece of `v` taken along `dim` into 2 or 3 equal parts of `part`
// elements: (source, index of the piece, number of pieces), from a Split
// into equal sizes or a Slice.
struct Piece {
  Value src;
  int64_t which, pieces;
};
std::optional<Piece> pieceOf(Value v, int64_t dim, int64_t part) {
  if (auto r = dyn_cast<OpResult>(v))
    if (auto s = dyn_cast<SplitOp>(r.getOwner())) {
      const int64_t n = static_cast<int64_t>(s.getSizes().size());
      if (static_cast<int64_t>(s.getAxis()) != dim || (n != 2 && n != 3) ||
          llvm::any_of(s.getSizes(), [&](int64_t k) { return k != part; }))
        return std::nullopt;
      return Piece{s.getInput(), int64_t(r.getResultNumber()), n};
    }
  if (auto s = v.getDefiningOp<SliceOp>()) {
    const int64_t whole = typeOf(s.getInput()).getDimSize(dim);
    if (!slicesOnly(s, dim) || s.getSizes()[dim] != part || part <= 0 ||
        s.getStarts()[dim] % part || (whole != 2 * part && whole != 3 * part))
      return std::nullopt;
    return Piece{s.getInput(), s.getStarts()[dim] / part, whole / part};
  }
  return std::nullopt;
}

// heads [P, B, H, T, Dh] = transpose(reshape(src, [B, T, P, H, Dh]),
// [2, 0, 3, 1, 4]) with src [B, T, P·H·Dh], P 3 (qkv) or 2 (kv).
std::optional<Head> packedHeads(Value heads) {
  auto split = heads.getDefiningOp<TransposeOp>();
  if (!split || split.getPerm() != ArrayRef<int64_t>{2, 0, 3, 1, 4})
    return std::nullopt;
  auto unpack = split.getInput().getDefiningOp<ReshapeOp>();
  if (!unpack)
    return std::nullopt;
  Value src = unpack.getInput();
  auto srcType = typeOf(src), unpacked = typeOf(unpack.getResult());
  if (srcType.getRank() != 3 || unpacked.getRank() != 5)
    return std::nullopt;
  int64_t B = srcType.getDimSize(0), T = srcType.getDimSize(1);
  int64_t P = unpacked.getDimSize(2), H = unpacked.getDimSize(3), Dh = unpacked.getDimSize(4);
  if ((P != 2 && P != 3) || unpacked.getShape() != ArrayRef<int64_t>{B, T, P, H, Dh})
    return std::nullopt;
  return Head{src, -1, P, H, Dh};
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
    h = packedHeads(piece->src);
    if (h && h->pieces != piece->pieces)
      return std::nullopt;
    if (h)
      h->which = piece->which;
  }
  if (!h || h->which < 0 || h->which >= h->pieces)
    return std::nullopt;
  return h;
}

// transpose(reshape(part, [B, T, H, Dh]), perm) with `part` a piece of a
// packed [B, T, P·H·Dh] along its last dim, or a whole tensor of its own.
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
  const int64_t H = split.getDimSize(2), Dh = split.getDimSize(3);
  if (auto piece = pieceOf(r.getInput(), 2, part.getDimSize(2)))
    return Head{piece->src, piece->which, piece->pieces, H, Dh};
  // Not cut from anything this pass knows: a q, k or v of its own, unless it
  // is a piece of something else (a Split or Slice this pass cannot read).
  if (r.getInput().getDefiningOp<SplitOp>() || r.getInput().getDefiningOp<SliceOp>())
    return std::nullopt;
  return Head{r.getInput(), 0, 1, H, Dh};
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
    if (!q || !k || !v || q->heads != k->heads || q->heads != v->heads ||
        q->headDim != k->headDim || q->headDim != v->headDim)
      return failure();
    const int64_t H = q->heads, Dh = q->headDim;
    // Self-attention from one packed qkv, or q of its own with k and v the
    // pieces of one packed kv or each of its own.
    const bool packed = packedIn(*q, 3, 0) && packedIn(*k, 3, 1) && packedIn(*v, 3, 2) &&
                        sameHead(*q, *k) && sameHead(*q, *v);
    const bool kvPacked = packedIn(*k, 2, 0) && packedIn(*v, 2, 1) && sameHead(*k, *v);
    const bool separate = packedIn(*k, 1, 0) && packedIn(*v, 1, 0);
    if (!packed && !(packedIn(*q, 1, 0) && (kvPacked || separate)))
      return failure();
    auto qType = typeOf(q->src), kType = typeOf(k->src), vType = typeOf(v->src);
    const int64_t B = qType.getDimSize(0), N = qType.getDimSize(1), L = kType.getDimSize(1);
    const int64_t D = H * Dh;
    if (qType.getDimSize(2) != (packed ? 3 : 1) * D ||
        kType.getDimSize(2) != (kvPacked ? 2 : packed ? 3 : 1) * D ||
        (!kvPacked && vType.getShape() != kType.getShape()) ||
        kType.getDimSize(0) != B || vType.getDimSize(0) != B ||
        typeOf(pv.getResult()).getShape() != ArrayRef<int64_t>{B, H, N, Dh} ||
        typeOf(softmax.getResult()).getShape() != ArrayRef<int64_t>{B, H, N, L})
      return failure();
    auto out = op.getType();
    auto elt = qType.getElementType();
    if (out.getShape() != ArrayRef<int64_t>{B, N, D} || out.getElementType() != elt ||
        kType.getElementType() != elt || vType.getElementType() != elt)
      return failure();
    SmallVector<Value, 3> inputs{q->src};
    if (!packed && kvPacked) {
      // k and v as the two halves of kv: views, no copy.
      auto half = RankedTensorType::get({B, L, D}, elt);
      auto split = rewriter.create<SplitOp>(op.getLoc(), TypeRange{half, half}, k->src,
                                            rewriter.getI64IntegerAttr(2),
                                            rewriter.getDenseI64ArrayAttr({D, D}));
      inputs.append({split.getResult(0), split.getResult(1)});
    } else if (!packed) {
      inputs.append({k->src, v->src});
    }
    auto lse = RankedTensorType::get({B, H, N}, elt);
    auto att = rewriter.create<AttentionOp>(op.getLoc(), out, lse, inputs,
                                            rewriter.getI64IntegerAttr(H),
                                            rewriter.getF64FloatAttr(scale));
    rewriter.replaceOp(op, att.getResult());
    return success();
  }
};

HC_FUSION_PASS(FuseAttention, MultiHeadAttention)

} // namespace
} // namespace hc
