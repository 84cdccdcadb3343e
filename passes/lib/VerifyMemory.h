// hc-verify-plan's memory proofs (VerifyMemory.cpp), on the hcs access
// model (AccessOpInterface): requests in flight, no buffer read before it
// is written, each tier within its budget.
#ifndef HC_PASSES_VERIFYMEMORY_H
#define HC_PASSES_VERIFYMEMORY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace hc {

// Between an asynchronous op (a tier copy, a bucket's all-reduce) and its
// hcs.wait, no op touches the bytes it writes or writes the bytes it reads
// (a bucket, read and written in place, is not touched at all, nor shared
// by another bucket); every request is waited for.
mlir::LogicalResult verifyRequestsInFlight(mlir::func::FuncOp f);
// The first op touching an "act" or "offload" buffer writes it (a call's
// output, a recomputation, a prefetch or offload's target).
mlir::LogicalResult verifyWrittenBeforeRead(mlir::func::FuncOp f);
// With hcs.memory (hc-automem): every tier's arenas fit its capacity and
// all arenas in memory (not a disk tier's) plus the reserve and the kept
// panels of constant weights (hcs.kept_weights_bytes) fit the budget.
mlir::LogicalResult verifyMemoryBudget(mlir::func::FuncOp f);
// The bytes of `f`'s arenas that hcs.memory keeps in memory (not a disk
// tier's, not an on-demand arena), by hcs.arena_bytes; -1 without either.
int64_t arenaBytesInMemory(mlir::func::FuncOp f);

} // namespace hc

#endif // HC_PASSES_VERIFYMEMORY_H
