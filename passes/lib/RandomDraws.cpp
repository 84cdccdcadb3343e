// What a graph's random draws decide (hc/Passes/RandomDraws.h).
#include "hc/Passes/RandomDraws.h"
#include "hc/abi/random.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

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

// The step inputs `v` is computed from (the draws' own keys excepted).
std::set<std::string> inputsOf(Value v, func::FuncOp f) {
  std::set<std::string> names;
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
  return names;
}

} // namespace

std::vector<DrawnChoice> choicesOf(graph::RandomUniformOp draw) {
  auto f = draw->getParentOfType<func::FuncOp>();
  llvm::SetVector<Operation *> drawn = usersOf(draw);
  auto isDrawn = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && (def == draw.getOperation() || drawn.contains(def));
  };
  std::vector<DrawnChoice> choices;
  for (Operation *op : drawn) {
    auto w = dyn_cast<graph::WhereOp>(op);
    if (!w || !isDrawn(w.getCond()))
      continue;
    DrawnChoice c{w, {}, {}};
    if (!isDrawn(w.getLhs()))
      c.lhsInputs = inputsOf(w.getLhs(), f);
    if (!isDrawn(w.getRhs()))
      c.rhsInputs = inputsOf(w.getRhs(), f);
    choices.push_back(std::move(c));
  }
  return choices;
}

std::string randomDrawsJson(func::FuncOp f) {
  llvm::json::Array draws;
  f.walk([&](graph::RandomUniformOp r) {
    std::set<std::string> selects;
    for (const DrawnChoice &c : choicesOf(r)) {
      selects.insert(c.lhsInputs.begin(), c.lhsInputs.end());
      selects.insert(c.rhsInputs.begin(), c.rhsInputs.end());
    }
    llvm::json::Array names;
    for (const std::string &n : selects)
      names.push_back(n);
    draws.push_back(llvm::json::Object{{"op_id", r.getOpId()}, {"selects", std::move(names)}});
  });
  return llvm::formatv("{0}", llvm::json::Value(std::move(draws))).str();
}

} // namespace hc
