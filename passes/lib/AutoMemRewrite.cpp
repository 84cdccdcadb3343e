#include "AutoMemRewrite.h"

#include "BufferLiveness.h"
#include "hc/Schedule/KernelRegistry.h"

using namespace mlir;
namespace hs = hc::schedule;

namespace hc::automem {

Uses usesOf(func::FuncOp f) {
  Uses u;
  for (Operation &op : f.getBody().front()) {
    u.ops.push_back(&op);
    if (auto b = dyn_cast<hs::BufferOp>(op))
      u.buffers.push_back(b);
  }
  forEachTouch(f, [&](unsigned pos, Operation *, hs::BufferOp b) {
    auto &list = u.of[b];
    if (list.empty() || list.back() != pos)
      list.push_back(pos);
  });
  return u;
}

bool writes(Operation *op, hs::BufferOp b) {
  // Where a write starts (a call's output, a copy's target), not the wait
  // that completes one.
  return llvm::any_of(hs::accessesOf(op), [&](const hs::Access &a) {
    return a.write && !a.completes && baseBuffer(a.value) == b;
  });
}

bool isPureProducer(hs::CallOp call) {
  // Only a pure kernel may run again: kernels.def's effect column.
  const hs::KernelInfo *k = hs::KernelRegistry::active().lookup(call.getKernel());
  if (!k || k->effect != hs::KernelEffect::Pure)
    return false;
  for (Value out : call.getOuts()) {
    auto b = out.getDefiningOp<hs::BufferOp>();
    if (!b || b.getArena() != "act" || b.getName())
      return false;
  }
  return true;
}

void redirect(hs::BufferOp from, Value to, Operation *start) {
  OpBuilder b(start);
  for (Operation *op = start; op; op = op->getNextNode()) {
    if (isa<hs::ViewOp, hs::BufferOp>(op))
      continue;
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      if (baseBuffer(v) != from)
        continue;
      SmallVector<hs::ViewOp> chain;
      for (Value w = v; w != from.getResult();) {
        auto view = w.getDefiningOp<hs::ViewOp>();
        chain.push_back(view);
        w = view.getSource();
      }
      Value rebuilt = to;
      b.setInsertionPoint(op);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it)
        rebuilt = b.create<hs::ViewOp>(it->getLoc(), TypeRange{it->getType()},
                                       ValueRange{rebuilt}, (*it)->getAttrs());
      operand.set(rebuilt);
    }
  }
}

hs::BufferOp freshBuffer(OpBuilder &b, Location loc, MemRefType type, StringRef arena) {
  return b.create<hs::BufferOp>(loc, type, b.getStringAttr(arena), IntegerAttr(),
                                StringAttr());
}

} // namespace hc::automem
