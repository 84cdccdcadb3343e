// How a call is cut across CFTP clusters: each kernel's rule is the split
// column of the one registry (abi/include/hc/abi/kernels.def, read
// by hc/Schedule/KernelRegistry.h); planSplit applies it to shapes.
#ifndef HC_PASSES_CFTPRULES_H
#define HC_PASSES_CFTPRULES_H

#include "hc/Schedule/KernelRegistry.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace hc::cftp {

using Rule = hc::schedule::SplitRule;
using SplitRule = hc::schedule::KernelSplit;

// The rule of `kernel`: kernels.def's split column (None for a name the
// registry does not have).
const SplitRule &splitRuleOf(llvm::StringRef kernel);

// A partition of one call: the axis each operand is cut along (-1: read
// whole), and the extent of the cut dimension.
struct Part {
  llvm::SmallVector<int> inAxis, outAxis;
  int64_t extent = 0;
  const char *how = "whole";  // "rows", "features"
};

// Whether a call with these operand shapes and attributes can be cut by
// its rule into `parts` pieces; fills `part`.
bool planSplit(const SplitRule &r, llvm::ArrayRef<llvm::ArrayRef<int64_t>> ins,
               llvm::ArrayRef<llvm::ArrayRef<int64_t>> outs,
               mlir::DictionaryAttr attrs, int64_t parts, Part &part);

} // namespace hc::cftp

#endif // HC_PASSES_CFTPRULES_H
