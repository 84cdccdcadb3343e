// hc-opt: mlir-opt with the hc dialects and passes registered, so every pass
// can be run alone on textual IR (the lit tests drive it).
#include "hc/Graph/GraphDialect.h"
#include "hc/Passes/Passes.h"
#include "hc/Schedule/ScheduleOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<hc::graph::HCDialect, hc::schedule::HCSDialect,
                  mlir::memref::MemRefDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  mlir::registerTransformsPasses();
  hc::registerHCPasses();
  hc::registerPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "hc optimizer driver\n", registry));
}
