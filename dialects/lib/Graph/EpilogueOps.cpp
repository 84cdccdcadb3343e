// Verifiers of the ops the fusions after autodiff create (GraphEpilogueOps.td).
#include "hc/Graph/GraphOps.h"

using namespace mlir;
using namespace hc::graph;

LogicalResult LinearGeluOp::verify() {
  auto x = getInput().getType(), w = getWeight().getType(),
       y = getResult().getType(), pre = getPreact().getType();
  if (x.getRank() < 1 || w.getRank() != 2 || y != pre ||
      y.getRank() != x.getRank() ||
      y.getShape().drop_back() != x.getShape().drop_back() ||
      x.getShape().back() != w.getDimSize(1) ||
      y.getShape().back() != w.getDimSize(0))
    return emitOpError("needs X [..., in], W [out, in] -> two [..., out], got ")
           << x << ", " << w << " -> " << y << ", " << pre;
  if (Value b = getBias()) {
    auto bt = cast<RankedTensorType>(b.getType());
    if (bt.getRank() != 1 || bt.getDimSize(0) != w.getDimSize(0))
      return emitOpError("bias must be [") << w.getDimSize(0) << "], got " << bt;
  }
  return success();
}

LogicalResult LinearGradInputGeluOp::verify() {
  auto dy = getGrad().getType(), w = getWeight().getType(),
       pre = getPreact().getType(), dx = getResult().getType();
  if (w.getRank() != 2 || dy.getRank() < 1 || dx != pre ||
      dx.getRank() != dy.getRank() || dy.getShape().back() != w.getDimSize(0) ||
      dx.getShape().back() != w.getDimSize(1) ||
      dx.getShape().drop_back() != dy.getShape().drop_back())
    return emitOpError("needs dY [..., out], W [out, in], preact [..., in] -> "
                       "[..., in], got ")
           << dy << ", " << w << ", " << pre << " -> " << dx;
  return success();
}

LogicalResult LinearGradWeightBiasOp::verify() {
  auto dy = getGrad().getType(), x = getInput().getType(),
       dw = getWeightGrad().getType(), db = getBiasGrad().getType();
  if (dy.getRank() != x.getRank() || dy.getRank() < 1 ||
      dy.getShape().drop_back() != x.getShape().drop_back() ||
      dw.getShape() != ArrayRef<int64_t>{dy.getShape().back(), x.getShape().back()} ||
      db.getShape() != ArrayRef<int64_t>{dy.getShape().back()} ||
      db.getElementType() != dy.getElementType())
    return emitOpError("needs dY [..., out], X [..., in] -> dW [out, in], db [out], got ")
           << dy << ", " << x << " -> " << dw << ", " << db;
  return success();
}
