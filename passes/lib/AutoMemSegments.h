// Segment recomputation, hc-automem's second planner (AutoMemSegments.cpp).
#ifndef HC_PASSES_AUTOMEMSEGMENTS_H
#define HC_PASSES_AUTOMEMSEGMENTS_H

#include "CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace hc::automem {

struct SegmentResult {
  int64_t segments = 0;   // segments recomputed
  int64_t calls = 0;      // calls cloned
  double seconds = 0;     // their predicted time (CostModel.h)
};

// Cuts the forward of `f` (the calls up to the one writing the hcs.loss
// buffer) where one activation carries the step, and recomputes every
// segment but the last: its calls run again, marked hcs.recompute, right
// before the backward first reads an activation it saved, and the backward
// reads the clones. What crosses a cut stays. Only the first `limit`
// segments that can be recomputed are (forward order). Does nothing
// without a loss.
SegmentResult recomputeSegments(mlir::func::FuncOp f, const MachineRates &machine,
                                int64_t limit);

// A cut's buffer carries at least this many times the bytes of everything
// else crossing the cut (a DiT at 256 tokens: the block's input against
// its conditioning vectors, 256 to ~8).
constexpr int64_t kCutShare = 8;

} // namespace hc::automem

#endif // HC_PASSES_AUTOMEMSEGMENTS_H
