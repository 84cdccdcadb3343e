// The throwaway extension's dialect (ThrowawayOps.td).
#ifndef HC_TEST_EXTENSION_THROWAWAYOPS_H
#define HC_TEST_EXTENSION_THROWAWAYOPS_H

#include "hc/Graph/GraphOps.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ThrowawayDialect.h.inc"

#define GET_OP_CLASSES
#include "ThrowawayOps.h.inc"

#endif // HC_TEST_EXTENSION_THROWAWAYOPS_H
