#include "hc/Passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace hc {

void addFusionPipeline(mlir::OpPassManager &pm, bool modulatedLayerNorm) {
  auto &fn = pm.nest<mlir::func::FuncOp>();
  fn.addPass(createFuseChunk());
  fn.addPass(createFuseLinear());
  fn.addPass(createFuseLayerNorm());
  fn.addPass(createFuseSilu());
  fn.addPass(createFuseGelu());
  fn.addPass(createFuseModulate());
  if (modulatedLayerNorm)
    fn.addPass(createFuseModulatedLayerNorm());
  fn.addPass(createFuseGatedResidual());
  fn.addPass(createFuseAttention());
  fn.addPass(createFuseMseLoss());
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(mlir::createCSEPass());
}

void registerPipelines() {
  mlir::PassPipelineRegistration<>(
      "hc-fuse", "all fusion passes in hc-compile's order, then cleanup",
      [](mlir::OpPassManager &pm) { addFusionPipeline(pm); });
}

} // namespace hc
