#ifndef HC_GRAPH_OPS
#define HC_GRAPH_OPS

include "hc/Graph/GraphDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def HC_LinearOp : HC_Op<"linear", [Pure]> {
  let summary = "x·Wᵀ + b over any leading dimensions (PyTorch nn.Linear)";
  let description = [{
    `input` is `[..., in]`, `weight` is `[out, in]` as PyTorch stores it, the
    optional `bias` is `[out]`; the result is `[..., out]`.
  }];
  let arguments = (ins HC_FloatTensor:$input, HC_FloatTensor:$weight,
                       Optional<HC_FloatTensor>:$bias);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // HC_GRAPH_OPS
