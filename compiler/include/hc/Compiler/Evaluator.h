// Reference evaluator of hc graph IR: naive loops, float64 throughout. It is
// the oracle later passes are checked against, not a fast path.
#ifndef HC_COMPILER_EVALUATOR_H
#define HC_COMPILER_EVALUATOR_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hc {

struct EvalTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major; integers and booleans as doubles
  int64_t numElements() const;
};

// Runs `fn` on `args` (one per function argument). Returns false with a
// one-line `error` on a shape mismatch, an unsupported op or a bad index.
bool evaluate(mlir::func::FuncOp fn, const std::vector<EvalTensor> &args,
              std::vector<EvalTensor> &results, std::string &error);

} // namespace hc

#endif // HC_COMPILER_EVALUATOR_H
