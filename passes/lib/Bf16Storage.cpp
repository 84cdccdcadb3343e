// hc-bf16-storage: with --precision bf16, the "act" buffers that one call
// writes at a bf16-capable output and only bf16 GEMMs read (kernels.def's
// HCRT_BF16_SLOTS) become bf16 buffers: the GEMMs round those operands to
// bf16 as they pack them, so the stored rounding changes no bit and halves
// the bytes every later pass (hc-automem, the buffer plan, hc-cftp) counts.
#include "hc/Passes/Passes.h"
#include "hc/Schedule/KernelRegistry.h"
#include "hc/Schedule/ScheduleOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {
#define GEN_PASS_DEF_BF16STORAGE
#include "hc/Passes/Passes.h.inc"

namespace {

// Whether operand `index` (of the call's inputs, or outputs) may be bf16.
bool slotAllows(hs::CallOp call, bool output, unsigned index) {
  const hs::KernelInfo *k = hs::KernelRegistry::active().lookup(call.getKernel());
  return k && hs::KernelRegistry::bf16Allowed(*k, call.getAttrs(), output, index);
}

// Every use of `v` and of the views of it, as (call, is output, index);
// false where a use is anything but an hcs.call operand.
bool collectUses(Value v, SmallVectorImpl<std::tuple<hs::CallOp, bool, unsigned>> &uses,
                 SmallVectorImpl<hs::ViewOp> &views) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (auto view = dyn_cast<hs::ViewOp>(user)) {
      views.push_back(view);
      if (!collectUses(view.getResult(), uses, views))
        return false;
      continue;
    }
    auto call = dyn_cast<hs::CallOp>(user);
    if (!call)
      return false;
    const unsigned n = use.getOperandNumber(), nin = call.getIns().size();
    uses.emplace_back(call, n >= nin, n >= nin ? n - nin : n);
  }
  return true;
}

// The buffer's uses allow bf16: exactly one write, at a slot that may
// write bf16, by a call that does not read it too, and every read at a
// slot that may read bf16.
bool storable(hs::BufferOp buffer, SmallVectorImpl<hs::ViewOp> &views) {
  if (buffer.getArena() != "act" || buffer.getName() ||
      !buffer.getType().getElementType().isF32())
    return false;
  SmallVector<std::tuple<hs::CallOp, bool, unsigned>> uses;
  if (!collectUses(buffer.getResult(), uses, views))
    return false;
  hs::CallOp writer;
  for (auto [call, output, index] : uses) {
    if (!slotAllows(call, output, index))
      return false;
    if (output) {
      if (writer)
        return false;
      writer = call;
    }
  }
  if (!writer)
    return false;
  for (auto [call, output, index] : uses)
    if (!output && call == writer)
      return false;
  return true;
}

MemRefType asBf16(MemRefType t) {
  return MemRefType::Builder(t).setElementType(BFloat16Type::get(t.getContext()));
}

struct Bf16Storage : impl::Bf16StorageBase<Bf16Storage> {
  void runOnOperation() override {
    getOperation().walk([&](hs::BufferOp buffer) {
      SmallVector<hs::ViewOp> views;
      if (!storable(buffer, views))
        return;
      buffer.getResult().setType(asBf16(buffer.getType()));
      for (hs::ViewOp view : views)
        view.getResult().setType(asBf16(view.getType()));
    });
  }
};

} // namespace
} // namespace hc
