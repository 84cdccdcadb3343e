#ifndef HC_GRAPH_EPILOGUE_OPS
#define HC_GRAPH_EPILOGUE_OPS

// Ops the fusions after autodiff create: a GEMM and the elementwise op after
// it, one kernel call, so the elementwise pass never reads the GEMM's output
// back from memory (passes/lib/FuseGemmEpilogues.cpp); a weight gradient and
// the bias gradient that sums the same dY (passes/lib/FuseBiasGrads.cpp).
// They have no gradient rules: the graph is differentiated before they
// exist.

def HC_LinearGeluOp : HC_Op<"linear_gelu", [Pure]> {
  let summary = "GELU(x·Wᵀ + b) (tanh form), the pre-activation kept";
  let description = [{
    `result` = GELU-tanh(`preact`), `preact` = x·Wᵀ + b, shapes as
    `hc.linear`'s result. `preact` is what the GELU's backward reads.
  }];
  let arguments = (ins HC_FloatTensor:$input, HC_FloatTensor:$weight,
                       Optional<HC_FloatTensor>:$bias);
  let results = (outs HC_FloatTensor:$result, HC_FloatTensor:$preact);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_LinearGradInputGeluOp : HC_Op<"linear_grad_input_gelu", [Pure]> {
  let summary = "(dY·W) ⊙ GELU-tanh'(preact): an input gradient through a GELU";
  let description = [{
    The gradient at the input of a GELU-tanh whose output fed a linear layer:
    `linear_grad_input` of that layer followed by `gelu_grad`. `preact` is the
    GELU's input, shaped as the result.
  }];
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$weight,
                       HC_FloatTensor:$preact);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $weight `,` $preact attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_LinearGradWeightBiasOp : HC_Op<"linear_grad_weight_bias", [Pure]> {
  let summary = "dW = dYᵀ·X and db = Σ dY over the leading dims, one pass over dY";
  let description = [{
    `hc.linear_grad_weight` and the bias gradient's `hc.reduce_sum` of the
    same `grad` over every dim but the last, as one kernel: the GEMM adds up
    db while it reads dY. `weight_grad` is `[out, in]`, `bias_grad` `[out]`.
    Under `precision = "bf16"` only the product rounds its operands: db sums
    dY in float32 as the reduce_sum did.
  }];
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$input);
  let results = (outs HC_FloatTensor:$weight_grad, HC_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $grad `,` $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // HC_GRAPH_EPILOGUE_OPS
