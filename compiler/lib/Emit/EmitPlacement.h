// The machine part of the plan (hcs.topology, hcs.core_budget,
// hcs.placement) as description JSON and as the generated step's
// first-touch table.
#ifndef HC_COMPILER_EMIT_EMITPLACEMENT_H
#define HC_COMPILER_EMIT_EMITPLACEMENT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace hc {

// Adds "topology", "core_budget" and "placement" to `desc` and writes the
// C++ tables kTouch / kTouchNuma / kRanksPerNode to `tables`, using
// `arenaCode` for arena names. A step without the attributes (a schedule
// planned without hc-plan-placement) gets one slice per arena, owned by
// cluster 0, and no keys. False + error when an attribute is malformed.
bool emitMachinePlan(mlir::func::FuncOp f, int (*arenaCode)(llvm::StringRef),
                     llvm::json::Object &desc, std::string &tables,
                     std::string &error);

} // namespace hc

#endif
