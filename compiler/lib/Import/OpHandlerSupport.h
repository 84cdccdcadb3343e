// Internal to the ONNX importer: helpers the op handlers share
// (OpHandlers.cpp: data movement and constants; OpHandlersMath.cpp: math).
#ifndef HC_COMPILER_IMPORT_OPHANDLERSUPPORT_H
#define HC_COMPILER_IMPORT_OPHANDLERSUPPORT_H

#include "hc/Compiler/GraphImporter.h"

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hc::import::detail {

std::string shapeStr(const std::vector<int64_t> &s);
std::vector<int64_t> ints(const Const &c);
Const makeConst(std::vector<int64_t> shape, int32_t dtype, std::vector<double> data);
// Elementwise fold of known constants with NumPy broadcasting.
Const foldBroadcast(GraphImporter &gi, const std::vector<const Const *> &in,
                    int32_t dtype, const std::function<double(const double *)> &fn);
bool allInputsConst(GraphImporter &gi);
// Materializes a constant operand in the element type of the other operand.
std::pair<mlir::Value, mlir::Value> matchedOperands(GraphImporter &gi);
std::vector<int64_t> shapeOfInput(GraphImporter &gi, int i);

void castTo(GraphImporter &gi, int32_t to);

// Adds the math handlers (elementwise, reductions, normalization, matrix
// products, patch-embedding conv, einsum, random draws) to `table`.
void addMathHandlers(std::map<std::string, OpHandler> &table);
// Adds the handlers of ops only the dynamo exporter (opsets 18..21) writes
// for DiT: CastLike, SplitToSequence/SequenceAt, Gelu.
void addOpset18Handlers(std::map<std::string, OpHandler> &table);

} // namespace hc::import::detail

#endif // HC_COMPILER_IMPORT_OPHANDLERSUPPORT_H
