// What a graph's random draws (hc.random_uniform) decide: the `where`s whose
// condition is computed from a draw, and the step inputs each of their
// branches comes from. Upstream DiT's label dropout (token_drop: rand < p ?
// null : y) is one such choice, between a constant and the input y. The
// step description's "random_ops" (hc-run leaves those inputs to the graph)
// and the sampler's cut (it keeps the input's branch) both ask.
#ifndef HC_PASSES_RANDOMDRAWS_H
#define HC_PASSES_RANDOMDRAWS_H

#include "hc/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <set>
#include <string>
#include <vector>

namespace hc {

struct DrawnChoice {
  graph::WhereOp where;
  // Per branch (lhs, rhs): the step inputs (arguments named hc.input, the
  // draws' own keys excepted) it is computed from; empty for a branch of
  // constants and parameters only, and for a branch itself drawn.
  std::set<std::string> lhsInputs, rhsInputs;
};

// The choices `draw` decides.
std::vector<DrawnChoice> choicesOf(graph::RandomUniformOp draw);

// The description's "random_ops": one entry per draw of `f`, {"op_id": N,
// "selects": [the inputs of its choices' branches, sorted]}.
std::string randomDrawsJson(mlir::func::FuncOp f);

} // namespace hc

#endif // HC_PASSES_RANDOMDRAWS_H
