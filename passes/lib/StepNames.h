// How a training step names its arguments and results (attributes on the
// function): shared by autodiff, optimizer and the tools that bind values.
#ifndef HC_PASSES_STEPNAMES_H
#define HC_PASSES_STEPNAMES_H

#include "hc/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace hc {

inline constexpr const char *kFrozenAttr = "hc.frozen";
inline constexpr const char *kStateAttr = "hc.state";

// Optimizer state keys: the step counter and the per-parameter prefixes of
// the first and second moments ("adamw.m:NAME"), which live in the "m"/"v"
// arenas beside the parameters.
inline constexpr const char *kAdamWStep = "adamw.step";
inline constexpr const char *kAdamWFirst = "adamw.m:";
inline constexpr const char *kAdamWSecond = "adamw.v:";
inline constexpr const char *kAdamStep = "adam.T";
inline constexpr const char *kAdamFirst = "adam.V:";
inline constexpr const char *kAdamSecond = "adam.H:";

inline std::string gradResultName(llvm::StringRef param) {
  return "grad:" + param.str();
}

// The module's one training function (the one with hc.result_names), or
// null after an error on the module naming what was found; `what` prefixes
// the message.
inline mlir::func::FuncOp trainingFunction(mlir::ModuleOp m, llvm::StringRef what) {
  llvm::SmallVector<mlir::func::FuncOp> fns;
  for (auto f : m.getOps<mlir::func::FuncOp>())
    if (f->hasAttr(graph::kResultNamesAttr))
      fns.push_back(f);
  if (fns.size() == 1)
    return fns[0];
  m.emitError(what) << "expected one training function, found " << fns.size();
  return {};
}

// The function's result names (hc.result_names) as strings.
inline llvm::SmallVector<std::string> resultNames(mlir::func::FuncOp f) {
  llvm::SmallVector<std::string> names;
  if (auto a = f->getAttrOfType<mlir::ArrayAttr>(graph::kResultNamesAttr))
    for (mlir::Attribute n : a)
      names.push_back(mlir::cast<mlir::StringAttr>(n).str());
  return names;
}

// Appends results (with names) to `f`'s return and signature.
inline void appendResults(mlir::func::FuncOp f, llvm::ArrayRef<mlir::Value> values,
                          llvm::ArrayRef<std::string> names) {
  auto ret = mlir::cast<mlir::func::ReturnOp>(f.getBody().front().getTerminator());
  llvm::SmallVector<mlir::Value> operands(ret.getOperands());
  operands.append(values.begin(), values.end());
  ret->setOperands(operands);
  llvm::SmallVector<mlir::Type> types;
  for (mlir::Value v : operands)
    types.push_back(v.getType());
  f.setFunctionType(mlir::FunctionType::get(f.getContext(), f.getArgumentTypes(),
                                            types));
  mlir::Builder b(f.getContext());
  llvm::SmallVector<mlir::Attribute> all;
  for (const std::string &n : resultNames(f))
    all.push_back(b.getStringAttr(n));
  for (const std::string &n : names)
    all.push_back(b.getStringAttr(n));
  f->setAttr(graph::kResultNamesAttr, b.getArrayAttr(all));
}

} // namespace hc

#endif // HC_PASSES_STEPNAMES_H
