// What hc-automem's two planners (AutoMem.cpp, the per-buffer greedy, and
// AutoMemSegments.cpp, segment recomputation) share: where each buffer is
// touched, who writes it, and the rewrites that give a buffer's later uses
// a fresh copy.
#ifndef HC_PASSES_AUTOMEMREWRITE_H
#define HC_PASSES_AUTOMEMREWRITE_H

#include "hc/Schedule/ScheduleOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace hc::automem {

// Every op position (1-based, as bufferLiveness counts) touching each
// buffer, in order.
struct Uses {
  std::vector<mlir::Operation *> ops;                   // position - 1 -> op
  std::vector<schedule::BufferOp> buffers;              // in op order
  llvm::DenseMap<mlir::Operation *, std::vector<unsigned>> of;  // buffer -> positions
};
Uses usesOf(mlir::func::FuncOp f);

// Whether `op` (a call, or a tier copy's target) writes `b` or a view of it.
bool writes(mlir::Operation *op, schedule::BufferOp b);

// A producer may run again when it is a pure kernel (not an optimizer, not
// random) writing only fresh, unnamed activations.
bool isPureProducer(schedule::CallOp call);

// Uses of `from` at or after `start` read `to` instead; views of `from`
// are rebuilt on `to` right before each such use.
void redirect(schedule::BufferOp from, mlir::Value to, mlir::Operation *start);

schedule::BufferOp freshBuffer(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::MemRefType type, llvm::StringRef arena);

} // namespace hc::automem

#endif // HC_PASSES_AUTOMEMREWRITE_H
