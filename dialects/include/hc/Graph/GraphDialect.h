#ifndef HC_GRAPH_GRAPHDIALECT_H
#define HC_GRAPH_GRAPHDIALECT_H

#include "mlir/IR/Dialect.h"

#include "hc/Graph/GraphOpsDialect.h.inc"

#endif // HC_GRAPH_GRAPHDIALECT_H
