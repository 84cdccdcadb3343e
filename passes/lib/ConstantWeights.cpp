// hc-constant-weights: marks the GEMM calls whose weight no op of the
// module writes (a sampler's), so that the runtime packs it once and keeps
// the panels (kernels.def: HCRT_FLAG(weight, constant, varying, 0)). The
// writes are the access model's (hcs AccessOpInterface): whatever a later
// pass adds that writes a parameter is seen here, as long as this pass
// runs after it. What the runtime keeps for them counts in the memory plan:
// under --mem-budget only the weights whose panels fit what the plan leaves
// are marked, and the bytes they may keep are recorded for the verifier and
// for libhcrt, which holds the step to them.
#include "BufferLiveness.h"
#include "VerifyMemory.h"
#include "hc/Passes/Passes.h"
#include "hc/Schedule/KernelRegistry.h"
#include "hc/Schedule/Placement.h"
#include "hc/Schedule/ScheduleOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <limits>
#include <map>
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

// What the runtime keeps packed for a weight W [N, K] (the call's view of
// it): its floats with the columns rounded up to a whole micro-kernel
// sliver (no kernel's is wider than 64), one sliver more for a thread's
// columns ending mid-sliver, and slack for each panel's spare row. An
// estimate: libhcrt counts the bytes it really keeps against the same
// total (hcrt_gemm_limit_packed) and packs every call past it.
int64_t keptPanelBytes(MemRefType w) {
  const int64_t k = w.getRank() == 2 ? w.getDimSize(1) : w.getNumElements(),
                n = w.getRank() == 2 ? w.getDimSize(0) : 1;
  return ((n + 63) / 64 * 64 + 64) * k * static_cast<int64_t>(sizeof(float)) + 16384;
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
    for (auto f : module.getOps<func::FuncOp>())
      markFunction(f, written);
  }

  // Marks f's calls whose weight no op writes. Under a memory budget,
  // each weight in program order is marked if its kept panels fit what is
  // left of the room f's plan leaves (its budget less the arenas in memory
  // and the reserve), and the bytes they may keep are recorded on f
  // (hcs.kept_weights_bytes); without a budget every such weight is
  // marked and libhcrt's own cap alone applies.
  void markFunction(func::FuncOp f,
                    ArrayRef<std::pair<int64_t, int64_t>> written) {
    auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr);
    const bool budget = memory && memory.getBudget() > 0;
    int64_t room = std::numeric_limits<int64_t>::max();
    if (budget) {
      const int64_t inMemory = arenaBytesInMemory(f);
      if (inMemory < 0)
        return;  // no buffer plan: hc-verify-plan says so
      room = memory.getBudget() - memory.getReserve() - inMemory;
    }
    MLIRContext *ctx = f.getContext();
    // Each weight, counted once (its calls share the panels) or refused
    // once for want of room: its buffer's place in the arena and the view
    // the call reads (two slices of one buffer are two weights).
    std::map<std::pair<int64_t, const void *>, bool> kept;
    int64_t used = 0;
    f.walk([&](hs::CallOp call) {
      const hs::KernelInfo *k = hs::KernelRegistry::active().lookup(call.getKernel());
      if (!k || !k->hasSlot(kWeight) || call.getIns().size() <= kWeightOperand)
        return;
      Value wv = call.getIns()[kWeightOperand];
      auto w = paramBytes(baseBuffer(wv));
      if (!w || llvm::any_of(written, [&](const std::pair<int64_t, int64_t> &r) {
            return r.first < w->second && w->first < r.second;
          }))
        return;
      auto [it, first] = kept.try_emplace(
          std::make_pair(w->first, wv.getType().getAsOpaquePointer()), false);
      if (first) {
        const int64_t bytes = keptPanelBytes(cast<MemRefType>(wv.getType()));
        it->second = bytes <= room - used;
        if (it->second)
          used += bytes;
      }
      if (!it->second)
        return;
      NamedAttrList attrs(call.getAttrs());
      attrs.set(kWeight, StringAttr::get(ctx, kConstant));
      call.setAttrsAttr(attrs.getDictionary(ctx));
    });
    if (budget && used > 0)
      f->setAttr(hs::kKeptWeightsAttr, IntegerAttr::get(IntegerType::get(ctx, 64), used));
  }
};

} // namespace
} // namespace hc
