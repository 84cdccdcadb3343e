// Small matchers shared by the fusion patterns: constants, commutative
// operand pairs, single-use checks. Header-only and tiny on purpose.
#ifndef HC_PASSES_MATCHERS_H
#define HC_PASSES_MATCHERS_H

#include "hc/Graph/GraphOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <optional>

namespace hc::match {

// The value of a constant whose elements are all equal (a splat or a 1-element
// tensor), if `v` is one.
inline std::optional<double> splatConstant(mlir::Value v) {
  auto c = v.getDefiningOp<hc::graph::ConstantOp>();
  auto dense = c ? mlir::dyn_cast<mlir::DenseElementsAttr>(c.getValue())
                 : mlir::DenseElementsAttr();
  if (!dense || dense.empty())
    return std::nullopt;
  std::optional<double> first;
  auto same = [&](double x) {
    if (!first)
      first = x;
    return *first == x;
  };
  if (mlir::isa<mlir::FloatType>(dense.getElementType())) {
    for (const llvm::APFloat &x : dense.getValues<llvm::APFloat>())
      if (!same(x.convertToDouble()))
        return std::nullopt;
  } else if (dense.getElementType().isInteger(64) ||
             dense.getElementType().isInteger(32)) {
    for (const llvm::APInt &x : dense.getValues<llvm::APInt>())
      if (!same(static_cast<double>(x.getSExtValue())))
        return std::nullopt;
  } else {
    return std::nullopt;
  }
  return first;
}

inline bool isConstant(mlir::Value v, double expected, double rtol = 1e-6) {
  auto c = splatConstant(v);
  return c && (*c == expected ||
               std::abs(*c - expected) <= rtol * std::abs(expected));
}

// For a commutative binary op: the operand that is not `known`, if one is.
template <typename OpT>
mlir::Value otherOperand(OpT op, mlir::Value known) {
  if (op.getLhs() == known)
    return op.getRhs();
  if (op.getRhs() == known)
    return op.getLhs();
  return {};
}

// Matches a commutative `OpT` where one operand is a splat constant close to
// `c`; returns the other operand.
template <typename OpT>
mlir::Value withConstant(mlir::Value v, double c) {
  auto op = v.getDefiningOp<OpT>();
  if (!op)
    return {};
  if (isConstant(op.getRhs(), c))
    return op.getLhs();
  if (isConstant(op.getLhs(), c))
    return op.getRhs();
  return {};
}

inline bool hasOneUse(mlir::Value v) { return v && v.hasOneUse(); }

inline mlir::RankedTensorType typeOf(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType());
}

// `v` is [B, 1, D] for x of [B, N, D].
inline bool isPerSample(mlir::Value v, mlir::RankedTensorType x) {
  auto t = typeOf(v);
  return t.getRank() == 3 && t.getDimSize(0) == x.getDimSize(0) &&
         t.getDimSize(1) == 1 && t.getDimSize(2) == x.getDimSize(2) &&
         t.getElementType() == x.getElementType();
}

// The [B, D] form of a [B, 1, D] value: its reshape source, or a new reshape.
inline mlir::Value asPerSampleMatrix(mlir::PatternRewriter &rewriter,
                                     mlir::Location loc, mlir::Value v) {
  auto t = typeOf(v);
  auto matrix = mlir::RankedTensorType::get({t.getDimSize(0), t.getDimSize(2)},
                                            t.getElementType());
  if (auto r = v.getDefiningOp<hc::graph::ReshapeOp>())
    if (r.getInput().getType() == matrix)
      return r.getInput();
  return rewriter.create<hc::graph::ReshapeOp>(loc, matrix, v);
}

// The body of every fusion pass: apply `patterns` greedily to the function.
#define HC_FUSION_PASS(NAME, ...)                                              \
  struct NAME##Pass : impl::NAME##Base<NAME##Pass> {                           \
    void runOnOperation() override {                                           \
      mlir::RewritePatternSet patterns(&getContext());                         \
      patterns.add<__VA_ARGS__>(&getContext());                                \
      if (mlir::failed(mlir::applyPatternsAndFoldGreedily(                     \
              getOperation(), std::move(patterns))))                           \
        signalPassFailure();                                                   \
    }                                                                          \
  };

} // namespace hc::match

#endif // HC_PASSES_MATCHERS_H
