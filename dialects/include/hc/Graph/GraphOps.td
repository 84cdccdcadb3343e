#ifndef HC_GRAPH_OPS
#define HC_GRAPH_OPS

include "hc/Graph/GraphDialect.td"
include "hc/Graph/GradientInterface.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def HC_ConstantOp : HC_Op<"constant", [Pure, ConstantLike,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a literal tensor (exporter constants; never a parameter)";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise with NumPy broadcasting
//===----------------------------------------------------------------------===//

class HC_BinaryOp<string mnemonic, string doc>
    : HC_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<HC_GradientOpInterface>]> {
  let summary = doc # " with NumPy broadcasting";
  let arguments = (ins HC_Tensor:$lhs, HC_Tensor:$rhs);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def HC_AddOp : HC_BinaryOp<"add", "lhs + rhs">;
def HC_SubOp : HC_BinaryOp<"sub", "lhs - rhs">;
def HC_MulOp : HC_BinaryOp<"mul", "lhs * rhs">;
def HC_DivOp : HC_BinaryOp<"div", "lhs / rhs">;
def HC_PowOp : HC_BinaryOp<"pow", "lhs ^ rhs">;
def HC_MaxOp : HC_BinaryOp<"max", "max(lhs, rhs)">;
def HC_MinOp : HC_BinaryOp<"min", "min(lhs, rhs)">;
def HC_LessOp : HC_BinaryOp<"less", "lhs < rhs (i1 result)">;
def HC_EqualOp : HC_BinaryOp<"equal", "lhs == rhs (i1 result)">;

def HC_WhereOp : HC_Op<"where", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "cond ? lhs : rhs with NumPy broadcasting";
  let arguments = (ins HC_BoolTensor:$cond, HC_Tensor:$lhs, HC_Tensor:$rhs);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = [{
    $cond `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

class HC_UnaryOp<string mnemonic, string doc, list<Trait> traits = []>
    : HC_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                   DeclareOpInterfaceMethods<HC_GradientOpInterface>], traits)> {
  let summary = doc;
  let arguments = (ins HC_FloatTensor:$input);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def HC_NegOp : HC_UnaryOp<"neg", "-x">;
def HC_SqrtOp : HC_UnaryOp<"sqrt", "square root">;
def HC_ExpOp : HC_UnaryOp<"exp", "e^x">;
def HC_LogOp : HC_UnaryOp<"log", "natural logarithm">;
def HC_TanhOp : HC_UnaryOp<"tanh", "hyperbolic tangent">;
def HC_SigmoidOp : HC_UnaryOp<"sigmoid", "1 / (1 + e^-x)">;
def HC_SinOp : HC_UnaryOp<"sin", "sine">;
def HC_CosOp : HC_UnaryOp<"cos", "cosine">;
def HC_ErfOp : HC_UnaryOp<"erf", "error function">;
def HC_ReciprocalOp : HC_UnaryOp<"reciprocal", "1 / x">;
def HC_SiluOp : HC_UnaryOp<"silu", "x * sigmoid(x)">;

def HC_GeluOp : HC_Op<"gelu", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "GELU, exact (erf) or tanh-approximated";
  let description = [{
    `approximate = "tanh"`: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as
    PyTorch's GELU(approximate="tanh"); `"none"`: 0.5·x·(1 + erf(x/√2)).
  }];
  let arguments = (ins HC_FloatTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "tanh">:$approximate);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def HC_StopGradientOp : HC_Op<"stop_gradient", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "identity forward, no gradient backward (ONNX hc::StopGradient)";
  let description = [{
    The exporter's `.detach()`: the value passes unchanged, and autodiff
    sends no adjoint through it. It has no folder on purpose: nothing may
    replace it by its operand before hc-autodiff has run, which erases it
    afterwards (the schedule level treats a survivor as an alias).
  }];
  let arguments = (ins HC_FloatTensor:$input);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def HC_CastOp : HC_Op<"cast", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, SameOperandsAndResultShape]> {
  let summary = "element type conversion (float <-> int truncates toward 0)";
  let arguments = (ins HC_Tensor:$input);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

class HC_ReduceOp<string mnemonic, string doc>
    : HC_Op<mnemonic, [Pure, InferTypeOpAdaptor, DeclareOpInterfaceMethods<HC_GradientOpInterface>]> {
  let summary = doc # " over `axes` (sorted, non-negative)";
  let arguments = (ins HC_FloatTensor:$input, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def HC_ReduceMeanOp : HC_ReduceOp<"reduce_mean", "mean">;
def HC_ReduceSumOp : HC_ReduceOp<"reduce_sum", "sum">;

def HC_SoftmaxOp : HC_Op<"softmax", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one axis";
  let arguments = (ins HC_FloatTensor:$input, I64Attr:$axis);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def HC_LayerNormOp : HC_Op<"layer_norm", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, AttrSizedOperandSegments]> {
  let summary = "layer norm over the dims from `axis` on, affine optional";
  let description = [{
    (x - mean) / sqrt(var + eps) · weight + bias, statistics over dims
    [axis, rank). `weight`/`bias`, when present, have the normalized shape.
  }];
  let arguments = (ins HC_FloatTensor:$input, Optional<HC_FloatTensor>:$weight,
                       Optional<HC_FloatTensor>:$bias, F64Attr:$epsilon,
                       I64Attr:$axis);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` $weight^)? (`shift` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_ModulateOp : HC_Op<"modulate", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure]> {
  let summary = "adaLN modulate: x·(1 + scale) + shift, per sample";
  let description = [{
    `input` is `[B, N, D]`, `shift` and `scale` are `[B, D]` broadcast over N.
  }];
  let arguments = (ins HC_FloatTensor:$input, HC_FloatTensor:$shift,
                       HC_FloatTensor:$scale);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $shift `,` $scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_ModulatedLayerNormOp : HC_Op<"modulated_layer_norm", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure]> {
  let summary = "adaLN: layer norm over D without affine, then ·(1 + scale) + shift";
  let description = [{
    `input` is `[B, N, D]`, `shift` and `scale` are `[B, D]` broadcast over
    N: DiT's `modulate(norm(x), shift, scale)` with the norm's
    elementwise_affine off, as one op (hc-fuse-modulated-layer-norm) whose
    kernel reads x once and never stores the normalized x.
  }];
  let arguments = (ins HC_FloatTensor:$input, HC_FloatTensor:$shift,
                       HC_FloatTensor:$scale, F64Attr:$epsilon);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $shift `,` $scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def HC_GatedResidualOp : HC_Op<"gated_residual", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure]> {
  let summary = "adaLN-Zero's residual: x + gate·h, gate per sample";
  let description = [{
    `input` and `branch` are `[B, N, D]`, `gate` is `[B, D]` broadcast over
    N: DiT's `x + gate.unsqueeze(1) * block(x)`, in float32 as PyTorch
    rounds it (the product, then the sum).
  }];
  let arguments = (ins HC_FloatTensor:$input, HC_FloatTensor:$gate,
                       HC_FloatTensor:$branch);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gate `,` $branch attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def HC_LinearOp : HC_Op<"linear", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure]> {
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

def HC_MatmulOp : HC_Op<"matmul", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "NumPy/ONNX matmul: batched, batch dims broadcast";
  let arguments = (ins HC_FloatTensor:$lhs, HC_FloatTensor:$rhs);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def HC_AttentionOp : HC_Op<"attention", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure]> {
  let summary = "multi-head attention: self from a packed qkv, or q, k, v";
  let description = [{
    Self-attention takes one input, `qkv` `[B, N, 3·D]` laid out as
    (3, heads, D/heads) along the last dim, as DiT's fused qkv linear
    produces it. Cross-attention takes three, `q` `[B, N, D]` and `k`, `v`
    `[B, L, D]` with any key length L (PixArt's queries from the image
    tokens, keys and values from a condition's). Returns softmax(q·kᵀ·scale)·v
    with heads merged back: `[B, N, D]`, and `lse` `[B, heads, N]`, each query
    row's log Σ exp(scores·scale): the backward rebuilds the probabilities
    from it and the result instead of running the forward again.
  }];
  let arguments = (ins Variadic<HC_FloatTensor>:$inputs, I64Attr:$num_heads,
                       F64Attr:$scale);
  let results = (outs HC_FloatTensor:$result, HC_FloatTensor:$lse);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // One packed qkv (self-attention) or q, k, v.
    bool isPacked() { return getInputs().size() == 1; }
  }];
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def HC_ReshapeOp : HC_Op<"reshape", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure]> {
  let summary = "same elements, new static shape (the result type)";
  let arguments = (ins HC_Tensor:$input);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def HC_BroadcastOp : HC_Op<"broadcast", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure]> {
  let summary = "NumPy broadcast to the result's shape";
  let arguments = (ins HC_Tensor:$input);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def HC_TransposeOp : HC_Op<"transpose", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "permute dims: result dim i = input dim perm[i]";
  let arguments = (ins HC_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def HC_SliceOp : HC_Op<"slice", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "strided slice, one (start, size, step) per dim, step > 0";
  let arguments = (ins HC_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$steps);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def HC_ConcatOp : HC_Op<"concat", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "concatenate along `axis`";
  let arguments = (ins Variadic<HC_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, results)
  }];
}

def HC_SplitOp : HC_Op<"split", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "split along `axis` into pieces of the given sizes";
  let arguments = (ins HC_Tensor:$input, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<HC_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
}

def HC_GatherOp : HC_Op<"gather", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "ONNX Gather: take slices of `input` along `axis` by index";
  let description = [{
    Result shape: input.shape[:axis] + indices.shape + input.shape[axis+1:].
    With axis 0 on a `[V, D]` table this is an embedding lookup. Indices
    out of [-V, V) are an error at run time.
  }];
  let arguments = (ins HC_Tensor:$input, HC_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs HC_Tensor:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Loss and randomness
//===----------------------------------------------------------------------===//

def HC_MseLossOp : HC_Op<"mse_loss", [DeclareOpInterfaceMethods<HC_GradientOpInterface>, Pure, InferTypeOpAdaptor]> {
  let summary = "mean((prediction - target)^2) over all elements, a scalar";
  let arguments = (ins HC_FloatTensor:$prediction, HC_FloatTensor:$target);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $prediction `,` $target attr-dict `:` functional-type(operands, results)
  }];
}

def HC_RandomUniformOp : HC_Op<"random_uniform", [Pure]> {
  let summary = "counter-based uniform draws in [low, high)";
  let description = [{
    Element (b, i...) of the result is a pure function of (seed, step,
    sample_offset + b, op_id, flat index within the sample): the same global
    sample draws the same numbers at any rank count. `seed`, `step` and
    `sample_offset` are 0-d i64 tensors.
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$seed, 0DTensorOf<[I64]>:$step,
                       0DTensorOf<[I64]>:$sample_offset, I64Attr:$op_id,
                       F64Attr:$low, F64Attr:$high);
  let results = (outs HC_FloatTensor:$result);
  let assemblyFormat = [{
    $seed `,` $step `,` $sample_offset attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

include "hc/Graph/GraphBackwardOps.td"
include "hc/Graph/GraphEpilogueOps.td"

#endif // HC_GRAPH_OPS
