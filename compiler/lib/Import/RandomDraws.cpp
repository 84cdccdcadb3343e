// What an imported graph's random draws decide (OnnxImport.h,
// randomDrawsJson): for each hc.random_uniform, the step inputs that a
// `where` chooses between on a condition drawn from it. Upstream DiT's label
// dropout (token_drop: rand < p ? null : y) selects "y"; hc-run then leaves
// the labels to the graph instead of dropping them a second time.
#include "hc/Compiler/OnnxImport.h"
#include "hc/Graph/GraphOps.h"
#include "hc/abi/random.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <set>
#include <string>

using namespace mlir;

namespace hc {
namespace {

// Every op that uses `root`'s result, transitively.
llvm::SetVector<Operation *> usersOf(Operation *root) {
  llvm::SetVector<Operation *> seen;
  SmallVector<Operation *> work(root->getUsers().begin(), root->getUsers().end());
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!seen.insert(op))
      continue;
    for (Operation *u : op->getUsers())
      work.push_back(u);
  }
  return seen;
}

// The step inputs (arguments named hc.input, the random ops' own excepted)
// that `v` is computed from.
void inputsOf(Value v, func::FuncOp f, std::set<std::string> &names) {
  llvm::SetVector<Value> seen;
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x))
      continue;
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), graph::kInputAttr);
      if (name && name.getValue() != rt::kRngSeedInput &&
          name.getValue() != rt::kRngStepInput && name.getValue() != rt::kSampleOffsetInput)
        names.insert(name.getValue().str());
      continue;
    }
    for (Value operand : x.getDefiningOp()->getOperands())
      work.push_back(operand);
  }
}

} // namespace

std::string randomDrawsJson(func::FuncOp f) {
  llvm::json::Array draws;
  f.walk([&](graph::RandomUniformOp r) {
    llvm::SetVector<Operation *> drawn = usersOf(r);
    std::set<std::string> selects;
    for (Operation *op : drawn) {
      auto w = dyn_cast<graph::WhereOp>(op);
      Operation *cond = w ? w.getCond().getDefiningOp() : nullptr;
      if (!cond || (cond != r.getOperation() && !drawn.contains(cond)))
        continue;
      // The branches not themselves drawn: what the draw chooses between.
      for (Value branch : {w.getLhs(), w.getRhs()}) {
        Operation *def = branch.getDefiningOp();
        if (!def || (def != r.getOperation() && !drawn.contains(def)))
          inputsOf(branch, f, selects);
      }
    }
    llvm::json::Array names;
    for (const std::string &n : selects)
      names.push_back(n);
    draws.push_back(llvm::json::Object{{"op_id", r.getOpId()}, {"selects", std::move(names)}});
  });
  return llvm::formatv("{0}", llvm::json::Value(std::move(draws))).str();
}

} // namespace hc
