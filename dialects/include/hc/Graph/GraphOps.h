#ifndef HC_GRAPH_GRAPHOPS_H
#define HC_GRAPH_GRAPHOPS_H

#include "hc/Graph/GraphDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "hc/Graph/GraphOps.h.inc"

#endif // HC_GRAPH_GRAPHOPS_H
