// One fused optimizer update of every parameter that has a gradient.
#include "StepNames.h"
#include "hc/Passes/Optimizers.h"
#include "hc/Passes/Passes.h"

#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace hc::graph;

namespace hc {
#define GEN_PASS_DEF_OPTIMIZER
#include "hc/Passes/Passes.h.inc"

namespace {

struct OptimizerPass : impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override {
    spec = findOptimizer(optimizer);
    if (!spec) {
      getOperation().emitError("unknown optimizer '")
          << optimizer << "' (" << optimizerNames() << ")";
      return signalPassFailure();
    }
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (f->hasAttr(kResultNamesAttr) && failed(update(f)))
        return signalPassFailure();
  }

  const OptimizerSpec *spec = nullptr;

  BlockArgument addState(func::FuncOp f, Type type, const std::string &key) {
    unsigned index = f.getNumArguments();
    Builder b(f.getContext());
    f.insertArgument(index, type,
                     b.getDictionaryAttr(b.getNamedAttr(kStateAttr,
                                                        b.getStringAttr(key))),
                     f.getLoc());
    return f.getArgument(index);
  }

  LogicalResult update(func::FuncOp f) {
    // Parameters by name, and the gradient results autodiff appended.
    llvm::StringMap<BlockArgument> params;
    for (BlockArgument arg : f.getArguments())
      if (auto n = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamAttr))
        params[n.getValue()] = arg;
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    SmallVector<std::string> names = resultNames(f);
    SmallVector<Value> ps, gs;
    SmallVector<std::string> paramNames;
    for (auto [i, name] : llvm::enumerate(names)) {
      if (llvm::StringRef(name).starts_with("grad:")) {
        std::string p = name.substr(5);
        if (!params.count(p))
          return f.emitError("gradient result '") << name << "' has no parameter";
        ps.push_back(params[p]);
        gs.push_back(ret.getOperand(i));
        paramNames.push_back(p);
      }
    }
    if (ps.empty())
      return f.emitError("no gradients to apply: run hc-autodiff first");

    OpBuilder b(ret);
    Location loc = f.getLoc();
    SmallVector<Value> results;
    SmallVector<std::string> resultKeys;
    SmallVector<Type> paramTypes;
    for (Value p : ps)
      paramTypes.push_back(p.getType());
    if (spec->kind == OptimizerKind::Sgd) {
      SmallVector<Value> operands(ps);
      operands.append(gs);
      auto op = b.create<SgdOp>(loc, paramTypes, operands, b.getF64FloatAttr(lr),
                                b.getF64FloatAttr(weightDecay));
      results.append(op.getResults().begin(), op.getResults().end());
      for (const std::string &p : paramNames)
        resultKeys.push_back("param:" + p);
    } else {
      // AdamW and Adam: a step counter and two moments per parameter.
      bool onnx = spec->kind == OptimizerKind::Adam;
      double epsilon = eps >= 0 ? double(eps) : spec->defaultEps;
      std::string counter = onnx ? kAdamStep : kAdamWStep;
      std::string first = onnx ? kAdamFirst : kAdamWFirst;
      std::string second = onnx ? kAdamSecond : kAdamWSecond;
      auto stepType = RankedTensorType::get({}, b.getI64Type());
      Value step = addState(f, stepType, counter);
      SmallVector<Value> ms, vs;
      for (auto [p, name] : llvm::zip(ps, paramNames))
        ms.push_back(addState(f, p.getType(), first + name));
      for (auto [p, name] : llvm::zip(ps, paramNames))
        vs.push_back(addState(f, p.getType(), second + name));
      SmallVector<Value> operands(ps);
      operands.append(gs);
      operands.append(ms);
      operands.append(vs);
      SmallVector<Type> types;
      for (int k = 0; k < 3; ++k)
        types.append(paramTypes);
      Operation *op;
      if (onnx) {
        // The operator's attributes are float32, and so is R here.
        auto f32 = [&](double x) { return b.getF64FloatAttr(static_cast<float>(x)); };
        auto rType = RankedTensorType::get({}, b.getF32Type());
        Value r = b.create<ConstantOp>(
            loc, DenseElementsAttr::get(rType, b.getF32FloatAttr(static_cast<float>(lr))));
        op = b.create<AdamOp>(loc, types, r, step, operands, f32(beta1), f32(beta2),
                              f32(epsilon), f32(weightDecay), f32(weightDecayPost));
      } else {
        op = b.create<AdamWOp>(loc, types, step, operands, b.getF64FloatAttr(lr),
                               b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
                               b.getF64FloatAttr(epsilon), b.getF64FloatAttr(weightDecay));
      }
      if (failed(verify(op)))
        return failure();
      results.append(op->getResults().begin(), op->getResults().end());
      for (const std::string &prefix : {std::string("param:"), "state:" + first,
                                        "state:" + second})
        for (const std::string &p : paramNames)
          resultKeys.push_back(prefix + p);
      Value one = b.create<ConstantOp>(
          loc, DenseElementsAttr::get(stepType, b.getI64IntegerAttr(1)));
      results.push_back(b.create<AddOp>(loc, step, one));
      resultKeys.push_back("state:" + counter);
    }
    appendResults(f, results, resultKeys);
    return success();
  }
};

} // namespace
} // namespace hc
