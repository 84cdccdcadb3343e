// The throwaway op's own files: dialect, verifier and gradient rule.
#include "ThrowawayOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

#include "ThrowawayDialect.cpp.inc"

void hc::throwaway::ThrowawayDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ThrowawayOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "ThrowawayOps.cpp.inc"

namespace hc::throwaway {

LogicalResult AxpbOp::verify() {
  if (auto mode = getMode(); mode && *mode != "on" && *mode != "off")
    return emitOpError("mode must be \"on\" or \"off\", got \"") << *mode << "\"";
  return success();
}

// d(alpha x + beta)/dx = alpha: the adjoint is the op itself with beta 0.
LogicalResult AxpbOp::buildGradients(OpBuilder &b, ValueRange rg,
                                     SmallVectorImpl<Value> &og) {
  og.assign(1, Value());
  if (!rg[0])
    return success();
  if (getMode() && *getMode() == "off") {
    og[0] = rg[0];
    return success();
  }
  og[0] = b.create<AxpbOp>(getLoc(), rg[0].getType(), rg[0], getAlphaAttr(),
                           b.getF64FloatAttr(0.0), getModeAttr(), StringAttr());
  return success();
}

} // namespace hc::throwaway
