// Reverse-mode differentiation of the loss w.r.t. the trainable parameters.
#include "StepNames.h"
#include "hc/Passes/Passes.h"

#include "llvm/ADT/DenseSet.h"

#include <set>

using namespace mlir;
using namespace hc::graph;

namespace hc {
#define GEN_PASS_DEF_AUTODIFF
#include "hc/Passes/Passes.h.inc"

namespace {

bool isFloat(Value v) {
  return isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
}

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    std::set<std::string> toFreeze(freeze.begin(), freeze.end());
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (!f->hasAttr(kResultNamesAttr))
        continue;
      if (failed(differentiate(f, toFreeze)))
        return signalPassFailure();
    }
    for (const std::string &name : toFreeze) {
      getOperation().emitError("--freeze names '")
          << name << "', which is not a parameter of the model";
      return signalPassFailure();
    }
  }

  LogicalResult differentiate(func::FuncOp f, std::set<std::string> &toFreeze) {
    Block &body = f.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() == 0)
      return f.emitError("a training graph returns its loss first");
    Value loss = ret.getOperand(0);
    auto lossType = cast<RankedTensorType>(loss.getType());
    if (lossType.getRank() != 0 || !isFloat(loss))
      return f.emitError("the loss (first result) must be a float scalar");

    // Trainable parameters, in argument order.
    Builder attrs(f.getContext());
    SmallVector<BlockArgument> trainable;
    for (BlockArgument arg : f.getArguments()) {
      auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttr);
      if (!name || !isFloat(arg))
        continue;
      if (toFreeze.erase(name.str()))
        f.setArgAttr(arg.getArgNumber(), kFrozenAttr, attrs.getUnitAttr());
      if (!f.getArgAttr(arg.getArgNumber(), kFrozenAttr))
        trainable.push_back(arg);
    }
    // A step that updates nothing is a mistake of the command line (every
    // parameter frozen) or of the export (weights baked into constants).
    if (trainable.empty())
      return f.emitError(toFreeze.empty() && !freeze.empty()
                             ? "--freeze leaves no parameter to train: every "
                               "parameter of the model is frozen"
                             : "the model has no trainable parameter (no float "
                               "initializer that is not frozen)");

    // Active: depends on a trainable parameter and is a float.
    llvm::DenseSet<Value> active(trainable.begin(), trainable.end());
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator()) {
      ops.push_back(&op);
      if (llvm::any_of(op.getOperands(), [&](Value v) { return active.count(v); }))
        for (Value r : op.getResults())
          if (isFloat(r))
            active.insert(r);
    }

    OpBuilder b(ret);
    llvm::DenseMap<Value, Value> adjoint;
    adjoint[loss] = b.create<ConstantOp>(
        f.getLoc(), DenseElementsAttr::get(
                        lossType, b.getFloatAttr(lossType.getElementType(), 1.0)));
    for (Operation *op : llvm::reverse(ops)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(adjoint.lookup(r));
        any |= static_cast<bool>(resultGrads.back());
      }
      if (!any || llvm::none_of(op->getOperands(),
                                [&](Value v) { return active.count(v); }))
        continue;
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule)
        return op->emitError("no gradient rule for '")
               << op->getName() << "' on the path from the parameters to the loss";
      b.setInsertionPoint(ret);
      SmallVector<Value> operandGrads;
      if (failed(rule.buildGradients(b, resultGrads, operandGrads)))
        return failure();
      for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!grad || !active.count(operand))
          continue;
        Value &acc = adjoint[operand];
        acc = acc ? b.create<AddOp>(op->getLoc(), acc, grad).getResult() : grad;
      }
    }

    b.setInsertionPoint(ret);
    SmallVector<Value> grads;
    SmallVector<std::string> names;
    for (BlockArgument p : trainable) {
      Value g = adjoint.lookup(p);
      if (!g) {  // the loss does not depend on it
        auto t = cast<RankedTensorType>(p.getType());
        g = b.create<ConstantOp>(
            f.getLoc(), DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0)));
      }
      grads.push_back(g);
      names.push_back(gradResultName(
          f.getArgAttrOfType<StringAttr>(p.getArgNumber(), kParamAttr).getValue()));
    }
    appendResults(f, grads, names);
    // Its work done, a stop-gradient is the identity: later passes (fusion,
    // lowering) see straight through it.
    f.walk([](StopGradientOp op) {
      op.getResult().replaceAllUsesWith(op.getInput());
      op.erase();
    });
    return success();
  }
};

} // namespace
} // namespace hc
