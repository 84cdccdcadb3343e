// hc-constant-weights: marks the GEMM calls whose weight no op of the
// module writes (a sampler's), so that the runtime packs it once and keeps
// the panels (kernels.def: HCRT_FLAG(weight, constant, varying, 0)). The
// writes are the access model's (hcs AccessOpInterface): whatever a later
// pass adds that writes a parameter is seen here, as long as this pass
// runs after it.
#include "BufferLiveness.h"
#include "hc/Passes/Passes.h"
#include "hc/Schedule/KernelRegistry.h"
#include "hc/Schedule/ScheduleOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <optional>
#include <utility>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {
#define GEN_PASS_DEF_CONSTANTWEIGHTS
#include "hc/Passes/Passes.h.inc"

namespace {

// The attribute, its value (kernels.def) and which operand is the weight
// (ins: x, w, [b]).
constexpr const char *kWeight = "weight";
constexpr const char *kConstant = "constant";
constexpr unsigned kWeightOperand = 1;

// The bytes of the "param" arena a buffer spans, if it is planned there.
std::optional<std::pair<int64_t, int64_t>> paramBytes(hs::BufferOp b) {
  if (!b || b.getArena() != "param" || !b.getOffset())
    return std::nullopt;
  const int64_t at = static_cast<int64_t>(*b.getOffset());
  return std::make_pair(at, at + hs::byteSize(cast<MemRefType>(b.getType())));
}

struct ConstantWeights : impl::ConstantWeightsBase<ConstantWeights> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The parameter bytes any op of the module writes (the optimizer's
    // writes go through one buffer over the whole arena); every function
    // of the module shares the arena. A write through a view counts for
    // its whole buffer.
    SmallVector<std::pair<int64_t, int64_t>> written;
    bool unplanned = false;
    module.walk([&](Operation *op) {
      for (const hs::Access &a : hs::accessesOf(op)) {
        hs::BufferOp b = a.write ? baseBuffer(a.value) : hs::BufferOp();
        if (!b || b.getArena() != "param")
          continue;
        if (auto r = paramBytes(b))
          written.push_back(*r);
        else
          unplanned = true;
      }
    });
    if (unplanned)  // a write whose bytes are not known: nothing is constant
      return;
    MLIRContext *ctx = module.getContext();
    module.walk([&](hs::CallOp call) {
      const hs::KernelInfo *k = hs::KernelRegistry::active().lookup(call.getKernel());
      if (!k || !k->hasSlot(kWeight) || call.getIns().size() <= kWeightOperand)
        return;
      auto w = paramBytes(baseBuffer(call.getIns()[kWeightOperand]));
      if (!w || llvm::any_of(written, [&](const std::pair<int64_t, int64_t> &r) {
            return r.first < w->second && w->first < r.second;
          }))
        return;
      NamedAttrList attrs(call.getAttrs());
      attrs.set(kWeight, StringAttr::get(ctx, kConstant));
      call.setAttrsAttr(attrs.getDictionary(ctx));
    });
  }
};

} // namespace
} // namespace hc
