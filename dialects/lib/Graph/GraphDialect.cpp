#include "hc/Graph/GraphDialect.h"
#include "hc/Graph/GraphOps.h"

using namespace hc::graph;

#include "hc/Graph/GraphOpsDialect.cpp.inc"
#include "hc/Graph/GradientInterface.cpp.inc"

void HCDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "hc/Graph/GraphOps.cpp.inc"
      >();
}
