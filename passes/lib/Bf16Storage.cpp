// hc-bf16-storage: with --precision bf16, the "act" buffers that only bf16
// products read (kernels.def's HCRT_BF16_SLOTS) become bf16 buffers: the
// products round those operands to bf16 as they pack them, so the stored
// rounding changes no bit and halves the bytes every later pass
// (hc-automem, the buffer plan, hc-cftp) counts. A writer that can store
// bf16 does (GELU, modulated layer norm, and the linear before attention,
// whose GEMM rounds as it stores); another (the SiLU of adaLN's
// conditioning) writes a float32 temporary that a cast rounds into the
// buffer, where the buffer is read more than once: the temporary lives one
// call, the bf16 copy until its last reader.
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

// How a buffer may become bf16.
enum class Storage { Keep, Direct, Cast };

// The buffer's uses allow bf16: exactly one write, by a call that does not
// read it too, at least one read, and every read at a slot that may read
// bf16. Direct: the write's slot may write bf16. Cast: it may not, the
// writer writes the buffer itself (not a view of it), and the buffer is
// read more than once.
Storage storable(hs::BufferOp buffer, SmallVectorImpl<hs::ViewOp> &views,
                 hs::CallOp &writer) {
  if (buffer.getArena() != "act" || buffer.getName() ||
      !buffer.getType().getElementType().isF32())
    return Storage::Keep;
  SmallVector<std::tuple<hs::CallOp, bool, unsigned>> uses;
  if (!collectUses(buffer.getResult(), uses, views))
    return Storage::Keep;
  bool direct = false;
  int reads = 0;
  for (auto [call, output, index] : uses) {
    if (output) {
      if (writer)
        return Storage::Keep;
      writer = call;
      direct = slotAllows(call, true, index);
      continue;
    }
    if (!slotAllows(call, false, index))
      return Storage::Keep;
    ++reads;
  }
  if (!writer || reads == 0)
    return Storage::Keep;
  for (auto [call, output, index] : uses)
    if (!output && call == writer)
      return Storage::Keep;
  if (direct)
    return Storage::Direct;
  const bool writesBuffer = llvm::is_contained(writer.getOuts(), buffer.getResult());
  return reads > 1 && writesBuffer ? Storage::Cast : Storage::Keep;
}

MemRefType asBf16(MemRefType t) {
  return MemRefType::Builder(t).setElementType(BFloat16Type::get(t.getContext()));
}

struct Bf16Storage : impl::Bf16StorageBase<Bf16Storage> {
  void runOnOperation() override {
    SmallVector<hs::BufferOp> buffers;  // before the temporaries are added
    getOperation().walk([&](hs::BufferOp buffer) { buffers.push_back(buffer); });
    for (hs::BufferOp buffer : buffers) {
      SmallVector<hs::ViewOp> views;
      hs::CallOp writer;
      const Storage how = storable(buffer, views, writer);
      if (how == Storage::Keep)
        continue;
      if (how == Storage::Cast) {
        // The writer's float32 result in a temporary beside it, rounded
        // into the buffer right after.
        OpBuilder b(writer);
        auto temp = b.create<hs::BufferOp>(buffer.getLoc(), buffer.getType(),
                                           b.getStringAttr("act"), IntegerAttr(), StringAttr());
        writer->replaceUsesOfWith(buffer.getResult(), temp.getResult());
        b.setInsertionPointAfter(writer);
        b.create<hs::CallOp>(writer.getLoc(), b.getStringAttr("cast"),
                             ValueRange{temp.getResult()}, ValueRange{buffer.getResult()},
                             b.getDictionaryAttr({}));
      }
      buffer.getResult().setType(asBf16(buffer.getType()));
      for (hs::ViewOp view : views)
        view.getResult().setType(asBf16(view.getType()));
    }
  }
};

} // namespace
} // namespace hc
