// The optimizers a step can run: one table, read by hc-compile's flag
// parser, the hc-optimizer pass and the step description.
#ifndef HC_PASSES_OPTIMIZERS_H
#define HC_PASSES_OPTIMIZERS_H

#include "llvm/ADT/StringRef.h"

#include <iterator>
#include <string>

namespace hc {

enum class OptimizerKind { AdamW, Adam, Sgd };

struct OptimizerSpec {
  OptimizerKind kind;
  const char *name;   // the --optimizer value, hc.optimizer in checkpoints
  double defaultEps;  // when --eps is not given
};

// AdamW and SGD follow torch.optim; adam is ONNX's
// ai.onnx.preview.training Adam, whose epsilon defaults to 1e-6.
inline constexpr OptimizerSpec kOptimizers[] = {
    {OptimizerKind::AdamW, "adamw", 1e-8},
    {OptimizerKind::Adam, "adam", 1e-6},
    {OptimizerKind::Sgd, "sgd", 1e-8},  // reported, not used
};

// The entry named `name`, or nullptr.
inline const OptimizerSpec *findOptimizer(llvm::StringRef name) {
  for (const OptimizerSpec &s : kOptimizers)
    if (name == s.name)
      return &s;
  return nullptr;
}

// "adamw, adam or sgd", for messages.
inline std::string optimizerNames() {
  std::string s;
  constexpr std::size_t n = std::size(kOptimizers);
  for (std::size_t i = 0; i < n; ++i)
    s += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + kOptimizers[i].name;
  return s;
}

} // namespace hc

#endif // HC_PASSES_OPTIMIZERS_H
