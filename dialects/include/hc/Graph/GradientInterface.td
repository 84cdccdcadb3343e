#ifndef HC_GRAPH_GRADIENT_INTERFACE
#define HC_GRAPH_GRADIENT_INTERFACE

include "mlir/IR/OpBase.td"

def HC_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let description = [{
    The reverse-mode rule of an op, declared next to the op. The autodiff
    pass calls it with one adjoint per result (null where a result has none)
    and receives one adjoint per operand (null where no gradient flows, e.g.
    into integer indices). Rules build hc ops at the builder's insertion
    point; fused ops build fused backward ops.
  }];
  let cppNamespace = "::hc::graph";
  let methods = [
    InterfaceMethod<
      "Builds the operands' adjoints from the results' adjoints.",
      "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$b, "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // HC_GRAPH_GRADIENT_INTERFACE
