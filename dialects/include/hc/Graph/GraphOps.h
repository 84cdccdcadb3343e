#ifndef HC_GRAPH_GRAPHOPS_H
#define HC_GRAPH_GRAPHOPS_H

#include "hc/Graph/GraphDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "hc/Graph/GradientInterface.h.inc"

namespace hc::graph {
// NumPy broadcast of two shapes; nullopt when they are incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

// The sizes of an attention's inputs: one packed qkv [B, N, 3·D], or q
// [B, N, D] with k and v [B, L, D] (L = N for the packed form). Dynamic
// sizes stay dynamic.
struct AttentionSizes {
  int64_t batch = 0, queries = 0, keys = 0, dim = 0;
};
// Emits the error on `op` and fails when `inputs` are neither form for
// `heads` heads.
mlir::FailureOr<AttentionSizes> attentionSizes(mlir::Operation *op, mlir::ValueRange inputs,
                                               int64_t heads);

// Argument attribute names that mark a function argument as a named model
// parameter (ONNX initializer / PyTorch state_dict name) or a data input.
inline constexpr const char *kParamAttr = "hc.param";
inline constexpr const char *kInputAttr = "hc.input";
// Function attribute naming each result: "loss" first, then extra outputs.
inline constexpr const char *kResultNamesAttr = "hc.result_names";
} // namespace hc::graph

#define GET_OP_CLASSES
#include "hc/Graph/GraphOps.h.inc"

#endif // HC_GRAPH_GRAPHOPS_H
