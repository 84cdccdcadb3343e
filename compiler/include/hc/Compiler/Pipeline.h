// Pipeline assembly: which passes run after import, shared by hc-compile and
// the test tools so they always see the same IR.
#ifndef HC_COMPILER_PIPELINE_H
#define HC_COMPILER_PIPELINE_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace hc {

struct PipelineOptions {
  bool fuse = true;  // the fusion passes (hc-fuse)
};

// Runs the graph-level passes on an imported module. False + one-line
// `error` if a pass fails (an hc bug: the module is left as it was).
bool runGraphPipeline(mlir::ModuleOp module, const PipelineOptions &options,
                      std::string &error);

} // namespace hc

#endif // HC_COMPILER_PIPELINE_H
