#ifndef HC_PASSES_PASSES_H
#define HC_PASSES_PASSES_H

#include "hc/Graph/GraphDialect.h"
#include "hc/Schedule/ScheduleOps.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace hc {

#define GEN_PASS_DECL
#include "hc/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "hc/Passes/Passes.h.inc"

// The fusion passes in the order hc-compile runs them, then canonicalize and
// CSE. Also registered as the pipeline `hc-fuse`.
// modulatedLayerNorm: hc-fuse-modulated-layer-norm after hc-fuse-modulate
// (hc-compile --fuse-modulated-layer-norm; on by default).
void addFusionPipeline(mlir::OpPassManager &pm, bool modulatedLayerNorm = true);
void registerPipelines();

// Reads machine rates in their one syntax (KEY=VALUE items or files of
// them; passes/lib/CostModel.h's parseRates, which hc-automem and hc-cftp
// read their `rates` option with) once, into `resolved`: every key with its
// value, as KEY=VALUE items, so the passes read no file. False + a
// one-line error naming the file, line or key.
// bf16Emulated: the machine has no bf16 dot product (the runtime emulates
// bf16 GEMMs through its fp32 kernels): the bf16 rates the spec does not
// give are its fp32 ones, not the built-in vdpbf16ps rates.
bool resolveMachineRates(const std::string &spec, std::string &resolved, std::string &error,
                         bool bf16Emulated = false);

} // namespace hc

#endif // HC_PASSES_PASSES_H
