#ifndef HC_SCHEDULE_SCHEDULEOPS_H
#define HC_SCHEDULE_SCHEDULEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <iterator>

#include "hc/Schedule/ScheduleDialect.h.inc"

namespace hc::schedule {
// One access of a schedule op (AccessInterface.td): a memref it reads or
// writes. `pending`: the access starts here and goes on after the op, until
// the hcs.wait on its token, which reports it again with `completes`: the
// bytes are touched until then, but nothing new is read or written there.
struct Access {
  mlir::Value value;
  bool write = false;
  bool pending = false;
  bool completes = false;
};
// CFTP: the cluster whose stream runs `op` (its `cluster` attribute; 0
// when absent). See hcs.cluster_wait.
int64_t clusterOf(mlir::Operation *op);
// A scoped hcs.cluster_wait: the `only_for` name an op that does nothing in
// some steps answers to ("allreduce_start", "grad_accumulate",
// "call_if_reduced", "call_if_local"; empty: none),
// and the executor's scope of a name (hcrt_wait_scope; HCRT_WAIT_ORDERS_ALL
// for any other).
llvm::StringRef waitScopeFor(mlir::Operation *op);
int32_t waitScopeOf(llvm::StringRef onlyFor);
// An hcs.call's `only_if` as hcrt_call_condition (HCRT_RUNS_ALWAYS when
// absent; -1 for a value that is none).
int32_t callConditionOf(llvm::StringRef onlyIf);
} // namespace hc::schedule

#include "hc/Schedule/AccessInterface.h.inc"

#define GET_TYPEDEF_CLASSES
#include "hc/Schedule/ScheduleTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "hc/Schedule/ScheduleAttrs.h.inc"

#define GET_OP_CLASSES
#include "hc/Schedule/ScheduleOps.h.inc"

namespace hc::schedule {
// Strides (elements) and offset of a memref's layout.
bool stridesOf(mlir::MemRefType type, llvm::SmallVectorImpl<int64_t> &strides,
               int64_t &offset);
bool isContiguous(mlir::MemRefType type);
// Bytes a buffer of `type` occupies.
int64_t byteSize(mlir::MemRefType type);
// The arenas an hcs.buffer may name, in the order the generated step numbers
// them (EmitStep.cpp).
// "accum": the gradient accumulator (hc.grad_accumulate), the trainable
// region's size, allocated by the step only when the host asks for more
// than one micro-batch. "partial": hc-cftp's per-cluster partial weight
// gradients (clusters 1.. of a rank; cluster 0 writes the gradient).
inline constexpr const char *kArenaNames[] = {"act",   "param",   "grad",  "m",      "v",
                                              "state", "offload", "accum", "partial"};
inline constexpr int kNumArenas = 9;
// What a byte of each arena that no named tensor covers holds, in messages
// (--check-finite); the generated step carries it (arena_contents).
inline constexpr const char *kArenaContents[] = {
    "an activation",
    "a parameter",
    "a gradient",
    "a first moment",
    "a second moment",
    "optimizer state",
    "an activation (offloaded)",
    "the gradient accumulator",
    "a partial weight gradient (a CFTP cluster's share, folded into the gradient)"};
static_assert(std::size(kArenaNames) == kNumArenas && std::size(kArenaContents) == kNumArenas,
              "one name and one description per arena");
// Arenas planned by liveness (hc-plan-buffers); the others are persistent.
inline bool isLivenessArena(llvm::StringRef arena) {
  return arena == "act" || arena == "offload";
}
// Arenas the step allocates only when the host asks for them ("accum":
// gradient accumulation): not part of a memory budget's resident bytes.
inline bool isOnDemandArena(llvm::StringRef arena) { return arena == "accum"; }
// An op's accesses (empty for ops without AccessOpInterface, which touch
// nothing: buffer, view, input, constant, cluster_wait).
llvm::SmallVector<Access, 4> accessesOf(mlir::Operation *op);
} // namespace hc::schedule

#endif // HC_SCHEDULE_SCHEDULEOPS_H
