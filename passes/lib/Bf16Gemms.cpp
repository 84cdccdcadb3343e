// hc-bf16-gemms: bf16 mixed precision (hc-compile --precision bf16; an
// extension beyond the paper). Marks the graph ops whose work is products
// with precision = "bf16": the GEMMs (their two operands, 0 and 1, rounded
// to bf16) and flash attention (Q, K, V, dO and the probability and dS
// tiles rounded, as PyTorch's CPU flash attention does under bf16
// autocast); every product accumulates in float32. Which ops is the
// registry's: a graph op lowers to the kernel of its mnemonic, and the
// kernels whose kernels.def layout has HCRT_FLAG(precision, ...) are the
// ones that read it. The tensors themselves stay float32 (fp32 arenas; the
// runtime rounds while it packs the operands), so nothing else in the
// pipeline changes: lowering copies the attribute onto the hcs.call, the
// evaluators and the runtime read it.
#include "hc/Graph/GraphOps.h"
#include "hc/Passes/Passes.h"
#include "hc/Schedule/KernelRegistry.h"

using namespace mlir;
using namespace hc::graph;

namespace hc {
#define GEN_PASS_DEF_BF16GEMMS
#include "hc/Passes/Passes.h.inc"

namespace {

// The attribute and the value this pass writes (kernels.def: HCRT_FLAG(precision, bf16, fp32, 0)).
constexpr const char *kPrecision = "precision";
constexpr const char *kBf16 = "bf16";

bool isF32Tensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32();
}

struct Bf16Gemms : impl::Bf16GemmsBase<Bf16Gemms> {
  void runOnOperation() override {
    getOperation().walk([&](Operation *op) {
      if (!op->getDialect() || op->getDialect()->getNamespace() != "hc")
        return;
      const hc::schedule::KernelInfo *k =
          hc::schedule::KernelRegistry::active().lookup(
              op->getName().stripDialect());
      if (!k || !k->hasSlot(kPrecision))
        return;
      // Every operand and result float32 (the kernels' type).
      if (op->getNumOperands() == 0 || !llvm::all_of(op->getOperands(), isF32Tensor) ||
          !llvm::all_of(op->getResults(), isF32Tensor))
        return;
      op->setAttr(kPrecision, StringAttr::get(op->getContext(), kBf16));
    });
  }
};

} // namespace
} // namespace hc
