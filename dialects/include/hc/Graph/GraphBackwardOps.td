#ifndef HC_GRAPH_BACKWARD_OPS
#define HC_GRAPH_BACKWARD_OPS

// Fused backward ops the gradient rules of fused forward ops build, and the
// optimizer updates. Each is one kernel at the schedule level.

def HC_LinearGradInputOp : HC_Op<"linear_grad_input", [Pure]> {
  let summary = "dX = dY·W for Y = X·Wᵀ + b: [..., out] x [out, in] -> [..., in]";
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$weight);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_LinearGradWeightOp : HC_Op<"linear_grad_weight", [Pure]> {
  let summary = "dW = dYᵀ·X summed over leading dims: -> [out, in]";
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$input);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_LayerNormGradOp : HC_Op<"layer_norm_grad", [Pure]> {
  let summary = "dX of layer norm, statistics recomputed from x";
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$input,
                       Optional<HC_FloatTensor>:$weight, F64Attr:$epsilon,
                       I64Attr:$axis);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input (`scale` $weight^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_ModulateGradOp : HC_Op<"modulate_grad", [Pure]> {
  let summary = "adjoints of x·(1 + scale) + shift: (dx, dshift, dscale)";
  let description = [{
    dx = dy·(1 + scale), dshift = Σ_N dy, dscale = Σ_N dy·x, with `grad` and
    `input` `[B, N, D]` and `scale` `[B, D]`.
  }];
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$input,
                       HC_FloatTensor:$scale);
  let results = (outs HC_FloatTensor:$input_grad, HC_FloatTensor:$shift_grad,
                      HC_FloatTensor:$scale_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_ModulatedLayerNormGradOp : HC_Op<"modulated_layer_norm_grad", [Pure]> {
  let summary = "adjoints of modulated_layer_norm: (dx, dshift, dscale)";
  let description = [{
    With x̂ = layer_norm(x) (statistics recomputed from `input`) and
    g = dy·(1 + scale): dx = rstd·(g - mean(g) - x̂·mean(g·x̂)),
    dshift = Σ_N dy, dscale = Σ_N dy·x̂; `grad` and `input` `[B, N, D]`,
    `scale` `[B, D]`.
  }];
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$input,
                       HC_FloatTensor:$scale, F64Attr:$epsilon);
  let results = (outs HC_FloatTensor:$input_grad, HC_FloatTensor:$shift_grad,
                      HC_FloatTensor:$scale_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_GatedResidualGradOp : HC_Op<"gated_residual_grad", [Pure]> {
  let summary = "adjoints of x + gate·h but x's (dy itself): (dgate, dh)";
  let description = [{
    dgate = Σ_N dy·h, dh = dy·gate, with `grad` and `branch` `[B, N, D]` and
    `gate` `[B, D]`.
  }];
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$gate,
                       HC_FloatTensor:$branch);
  let results = (outs HC_FloatTensor:$gate_grad, HC_FloatTensor:$branch_grad);
  let assemblyFormat = [{
    $grad `,` $gate `,` $branch attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class HC_PointwiseGradOp<string mnemonic, string doc>
    : HC_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = doc;
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$input);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($result)";
}

def HC_SiluGradOp : HC_PointwiseGradOp<"silu_grad", "dy·σ(x)·(1 + x·(1 - σ(x)))">;

def HC_GeluGradOp : HC_Op<"gelu_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "dy·gelu'(x), tanh-approximated or exact";
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "tanh">:$approximate);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($result)";
}

def HC_SoftmaxGradOp : HC_Op<"softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "y·(dy - Σ dy·y) along `axis`, from the softmax output y";
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$output,
                       I64Attr:$axis);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($result)";
}

def HC_AttentionGradOp : HC_Op<"attention_grad", [Pure]> {
  let summary = "d(inputs) of hc.attention, probabilities recomputed per tile";
  let description = [{
    Flash-attention style backward: the N×L probability matrix is never
    stored; each tile's probabilities are rebuilt from q, k and the
    forward's `lse`, and `out` (the forward's result) gives each row's
    Σ dO·O. `inputs` are the forward's (qkv, or q, k, v); one gradient each.
  }];
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$out,
                       HC_FloatTensor:$lse, Variadic<HC_FloatTensor>:$inputs,
                       I64Attr:$num_heads, F64Attr:$scale);
  let results = (outs Variadic<HC_FloatTensor>:$grads);
  let assemblyFormat = [{
    $grad `,` $out `,` $lse `,` $inputs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_MseLossGradOp : HC_Op<"mse_loss_grad", [Pure]> {
  let summary = "d prediction of mean((p - t)^2): dl·2·(p - t)/numel";
  let arguments = (ins 0DTensorOf<[F32, F64]>:$grad, HC_FloatTensor:$prediction,
                       HC_FloatTensor:$target);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $prediction `,` $target attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_ScatterAddOp : HC_Op<"scatter_add", [Pure]> {
  let summary = "adjoint of gather: zeros of the result type, dy rows added at indices";
  let arguments = (ins HC_FloatTensor:$grad, HC_IndexTensor:$indices,
                       I64Attr:$axis);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `[` $indices `]` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_SliceGradOp : HC_Op<"slice_grad", [Pure]> {
  let summary = "adjoint of slice: zeros of the result type, dy at the slice";
  let arguments = (ins HC_FloatTensor:$grad, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizers: one fused update over every trainable parameter.
//===----------------------------------------------------------------------===//

def HC_AdamWOp : HC_Op<"adamw", [Pure]> {
  let summary = "torch.optim.AdamW over N parameters in one op";
  let description = [{
    Operands: the step counter (completed steps, 0-d i64), then N params,
    N grads, N first moments, N second moments. Results: N updated params,
    N first moments, N second moments. With t = step + 1, exactly as
    torch.optim.AdamW: p ← p·(1 − lr·wd); m ← β1·m + (1−β1)·g;
    v ← β2·v + (1−β2)·g²; p ← p − lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + ε).
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$step, Variadic<HC_FloatTensor>:$tensors,
                       F64Attr:$lr, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs Variadic<HC_FloatTensor>:$updated);
  let assemblyFormat = [{
    $step `,` $tensors attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    unsigned getNumParams() { return getTensors().size() / 4; }
  }];
}

def HC_AdamOp : HC_Op<"adam", [Pure]> {
  let summary = "ONNX ai.onnx.preview.training Adam over N tensors in one op";
  let description = [{
    Exactly the ONNX operator: operands R (0-d float), T (0-d i64, the
    update count), then N X, N G, N V, N H; results N X_final, N V_new,
    N H_new. Per element, G' = norm_coefficient·X + G; V ← α·V + (1−α)·G';
    H ← β·H + (1−β)·G'²; R' = T > 0 ? R·√(1−βᵀ)/(1−αᵀ) : R;
    X ← (1 − norm_coefficient_post)·(X − R'·V / (√H + ε)). The attributes
    hold the operator's float32 attribute values.
  }];
  let arguments = (ins 0DTensorOf<[F32, F64]>:$r, 0DTensorOf<[I64]>:$t,
                       Variadic<HC_FloatTensor>:$tensors,
                       F64Attr:$alpha, F64Attr:$beta, F64Attr:$epsilon,
                       F64Attr:$norm_coefficient, F64Attr:$norm_coefficient_post);
  let results = (outs Variadic<HC_FloatTensor>:$updated);
  let assemblyFormat = [{
    $r `,` $t `,` $tensors attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    unsigned getNumParams() { return getTensors().size() / 4; }
  }];
}

def HC_SgdOp : HC_Op<"sgd", [Pure]> {
  let summary = "torch.optim.SGD without momentum over N parameters";
  let description = [{
    Operands: N params then N grads; results: N updated params,
    p ← p − lr·(g + wd·p).
  }];
  let arguments = (ins Variadic<HC_FloatTensor>:$tensors, F64Attr:$lr,
                       F64Attr:$weight_decay);
  let results = (outs Variadic<HC_FloatTensor>:$updated);
  let assemblyFormat = "$tensors attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def HC_GradNormOp : HC_Op<"grad_norm", [Pure]> {
  let summary = "the L2 norm of N gradients together, as clip_grad_norm_ measures it";
  let description = [{
    √(Σ over every element of every operand of x²), as a 0-d f32 tensor:
    the global norm torch.nn.utils.clip_grad_norm_ clips by. hc-lower-to-
    schedule computes it over the all-reduced gradients of every step.
  }];
  let arguments = (ins Variadic<HC_FloatTensor>:$grads);
  let results = (outs 0DTensorOf<[F32]>:$norm);
  let assemblyFormat = "$grads attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def HC_GradClipOp : HC_Op<"grad_clip", [Pure]> {
  let summary = "N gradients scaled as clip_grad_norm_ scales them";
  let description = [{
    Operands: the global norm (0-d, hc.grad_norm's), then N gradients;
    results: the N gradients times min(1, max_grad_norm / (norm + 1e-6))
    when max_grad_norm > 0, else unchanged. max_grad_norm is a
    hyperparameter of the step (hc-run --clip-grad-norm); the compiled value
    is 0, no clipping.
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$norm, Variadic<HC_FloatTensor>:$grads,
                       F64Attr:$max_grad_norm);
  let results = (outs Variadic<HC_FloatTensor>:$clipped);
  let assemblyFormat = [{
    $norm `,` $grads attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_GradAccumulateOp : HC_Op<"grad_accumulate", [Pure]> {
  let summary = "gradient accumulation over micro-batches, in float32";
  let description = [{
    Operands: a gradient and its accumulator; results: both, updated.
    With K = micro_batches and i = micro_batch (hyperparameters of the step,
    hc-run --accumulate K; compiled K = 1): K = 1 leaves both as they are;
    otherwise micro-batch 0 sets acc = g, the next ones add g to acc, and
    the last sets g = (acc + g) / K, the mean gradient of the K micro-
    batches, which the all-reduce and the optimizer then read.
  }];
  let arguments = (ins HC_FloatTensor:$grad, HC_FloatTensor:$acc,
                       F64Attr:$micro_batch, F64Attr:$micro_batches);
  let results = (outs HC_FloatTensor:$new_grad, HC_FloatTensor:$new_acc);
  let assemblyFormat = [{
    $grad `,` $acc attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // HC_GRAPH_BACKWARD_OPS
