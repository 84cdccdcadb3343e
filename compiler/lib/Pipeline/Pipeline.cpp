#include "hc/Compiler/Pipeline.h"

#include "hc/Passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

namespace hc {

bool runGraphPipeline(mlir::ModuleOp module, const PipelineOptions &options,
                      std::string &error) {
  mlir::PassManager pm(module.getContext());
  if (options.fuse)
    addFusionPipeline(pm);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(module.getContext(),
                                        [&](mlir::Diagnostic &d) {
                                          diagnostics += d.str() + "; ";
                                          return mlir::success();
                                        });
  if (mlir::failed(pm.run(module))) {
    error = "internal error in the graph pipeline: " + diagnostics;
    return false;
  }
  return true;
}

} // namespace hc
