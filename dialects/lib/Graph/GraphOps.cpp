#include "hc/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace hc::graph;

namespace {
// Static dims must agree; a dynamic dim agrees with anything.
bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}
} // namespace

LogicalResult LinearOp::verify() {
  auto input = getInput().getType();
  auto weight = getWeight().getType();
  auto result = getResult().getType();
  if (input.getRank() < 1)
    return emitOpError("input must have rank >= 1, got rank 0");
  if (weight.getRank() != 2)
    return emitOpError("weight must be [out, in], got rank ")
           << weight.getRank();
  Type elem = input.getElementType();
  if (weight.getElementType() != elem || result.getElementType() != elem)
    return emitOpError("input, weight and result element types differ");
  int64_t in = input.getShape().back();
  int64_t out = weight.getDimSize(0);
  if (!dimsCompatible(in, weight.getDimSize(1)))
    return emitOpError("input's last dim ")
           << in << " does not match weight's in dim " << weight.getDimSize(1);
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || !dimsCompatible(biasType.getDimSize(0), out))
      return emitOpError("bias must be [") << out << "], got " << biasType;
    if (biasType.getElementType() != elem)
      return emitOpError("bias element type differs from input's");
  }
  if (result.getRank() != input.getRank())
    return emitOpError("result rank ")
           << result.getRank() << " differs from input rank "
           << input.getRank();
  for (int64_t d = 0; d + 1 < input.getRank(); ++d)
    if (!dimsCompatible(result.getDimSize(d), input.getDimSize(d)))
      return emitOpError("result dim ") << d << " does not match input's";
  if (!dimsCompatible(result.getShape().back(), out))
    return emitOpError("result's last dim ")
           << result.getShape().back() << " does not match weight's out dim "
           << out;
  return success();
}

#define GET_OP_CLASSES
#include "hc/Graph/GraphOps.cpp.inc"
