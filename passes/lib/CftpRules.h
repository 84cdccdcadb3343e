// How each runtime kernel may be split across CFTP clusters: the one table
// of split rules (CftpRules.cpp), keyed by kernels.def's names. A kernel
// missing from it runs whole on one cluster.
#ifndef HC_PASSES_CFTPRULES_H
#define HC_PASSES_CFTPRULES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace hc::cftp {

enum class Rule {
  None,      // runs whole (a scalar result, per-call sample numbering, ...)
  Bcast,     // NumPy broadcasting: out dim 0 rows; an input of the output's
             // rank with that dim is cut too, any other is read whole
  Lead,      // dim 0 of every ranked operand is the sample: all cut
  Rows,      // dim 0 of the inputs in `mask` and of every output
  Features,  // linear_grad_weight: dw's rows = dy's last dim; x read whole
  Reduce,    // the first kept axis of the input, and of the output
  Matmul,    // NumPy matmul: A's rows (2-D) or the batch dim 0
};

struct SplitRule {
  const char *kernel;
  Rule rule;
  unsigned mask;      // Rows: inputs cut along dim 0
  bool axisNotFirst;  // the `axis` attribute must not be dim 0
};

// The rule of `kernel` (None when it has no entry).
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
