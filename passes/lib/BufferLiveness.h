// Live ranges of the schedule's buffers and the first-fit arena plan, shared
// by hc-plan-buffers, hc-verify-plan and hc-automem (which plans trial
// layouts while it decides what to recompute or offload).
#ifndef HC_PASSES_BUFFERLIVENESS_H
#define HC_PASSES_BUFFERLIVENESS_H

#include "hc/Schedule/ScheduleOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <vector>

namespace hc {

struct LiveInterval {
  schedule::BufferOp buffer;
  unsigned first = ~0u, last = 0;  // positions of the ops touching it
  int64_t bytes = 0;
  int64_t align = 0;  // bytes its offset is a multiple of (0: the arena's)
  bool touched() const { return first != ~0u; }
};

// Calls fn(position, op, buffer) for each buffer every op of `f` touches,
// directly or through a view, in op order; positions are 1-based op
// indices in the body (buffer and view ops count but touch nothing). A tier
// copy's hcs.wait touches the copy's source and target: the copy is not
// done before it.
void forEachTouch(mlir::func::FuncOp f,
                  llvm::function_ref<void(unsigned, mlir::Operation *,
                                          schedule::BufferOp)> fn);

// Every buffer of `f` (in op order) with the positions (1-based op index in
// the body) of the first and last op that reads or writes it, directly or
// through a view. A tier copy's buffers stay live until its hcs.wait.
// Buffers never touched get first == ~0u.
std::vector<LiveInterval> bufferLiveness(mlir::func::FuncOp f);

// A disk tier's copies read and write with direct I/O, in place where the
// memory is block-aligned (copy_engine.cpp): the "act" buffers of 64 KiB
// or more that a tier copy reads or writes get 4096-byte offsets (the
// arenas themselves are page-aligned). hc-automem's trial layouts and
// hc-plan-buffers both apply it, so the plan's peak is the one laid out.
void alignForDirectIO(mlir::func::FuncOp f, std::vector<LiveInterval> &intervals);

// The buffer (or view chain's buffer) behind `v`; null for inputs and
// constants.
schedule::BufferOp baseBuffer(mlir::Value v);

// First fit at `align`-byte alignment (sizes rounded up to it; an
// interval's own larger `align` for its offset), in program order, of
// `intervals` (one arena's touched buffers): offsets[i] for intervals[i];
// returns the peak.
int64_t firstFit(const std::vector<const LiveInterval *> &intervals,
                 std::vector<int64_t> &offsets, int64_t align = 64);
// The alignment an arena is planned at: 4096 for "offload", which may be a
// file read and written with direct I/O; 64 (a cache line) otherwise.
inline int64_t arenaAlignment(llvm::StringRef arena) {
  return arena == "offload" ? 4096 : 64;
}

// Sets `arena`'s size in hcs.arena_bytes and, where hcs.placement has
// slices of it, cuts them again over the new size (the same owners and
// home nodes, equal shares of whole pages, as hc-plan-placement cuts).
void setArenaBytes(mlir::func::FuncOp f, llvm::StringRef arena, int64_t bytes);

// Every touched buffer of the liveness arenas at its own bytes, none shared
// (page-aligned, in op order), with hcs.arena_bytes to match: hc-cftp
// orders its streams against this layout, so only data, never a reuse of
// storage, makes one stream wait for another; hc-plan-stream-buffers then
// packs the arenas again in the streams' order.
void layOutApart(mlir::func::FuncOp f);

} // namespace hc

#endif // HC_PASSES_BUFFERLIVENESS_H
