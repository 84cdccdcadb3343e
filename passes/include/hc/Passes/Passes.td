#ifndef HC_PASSES
#define HC_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Fusion: the exporter's decompositions become fused hc ops. Each pattern
// matches structure, shapes and constants (never node names); a near miss
// stays unfused.
//===----------------------------------------------------------------------===//

def FuseLinear : Pass<"hc-fuse-linear", "mlir::func::FuncOp"> {
  let summary = "MatMul by a transposed [out, in] weight (+ bias) -> hc.linear";
  let description = [{
    `matmul(x, transpose(W, [1, 0]))` becomes `hc.linear x, W`, and an add of
    a `[out]` vector to a bias-less linear folds in as its bias.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseLayerNorm : Pass<"hc-fuse-layer-norm", "mlir::func::FuncOp"> {
  let summary = "ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div -> hc.layer_norm";
  let description = [{
    The decomposed layer norm over trailing dims (opset < 17), with a scalar
    constant epsilon, becomes `hc.layer_norm`; a following multiply/add by
    tensors of the normalized shape fold in as its scale and shift.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseGelu : Pass<"hc-fuse-gelu", "mlir::func::FuncOp"> {
  let summary = "tanh-GELU chain (6 Mul, 2 Add, 1 Tanh) -> hc.gelu";
  let description = [{
    0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) in any operand order, with its
    constants within 1e-6 relative, becomes `hc.gelu {approximate = "tanh"}`.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseSilu : Pass<"hc-fuse-silu", "mlir::func::FuncOp"> {
  let summary = "x·sigmoid(x) -> hc.silu";
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseModulate : Pass<"hc-fuse-modulate", "mlir::func::FuncOp"> {
  let summary = "adaLN x·(1 + scale) + shift -> hc.modulate";
  let description = [{
    With `x` `[B, N, D]` and `scale`, `shift` per-sample `[B, 1, D]` (usually
    reshapes of `[B, D]` chunks of the conditioning vector).
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseAttention : Pass<"hc-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "qkv split, q·kᵀ·scale, softmax, ·v, merge heads -> hc.attention";
  let description = [{
    From a packed `[B, N, 3·D]` qkv: reshape to `[B, N, 3, H, Dh]`, transpose
    `[2, 0, 3, 1, 4]`, take q/k/v by index along dim 0 (Gather, or Slice +
    Reshape), `matmul(q, transpose(k))` scaled by a scalar constant, softmax
    over the last dim, `matmul(·, v)`, transpose `[0, 2, 1, 3]` and reshape
    to `[B, N, D]`.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseChunk : Pass<"hc-fuse-chunk", "mlir::func::FuncOp"> {
  let summary = "slices that partition one dim of a value -> one hc.split";
  let description = [{
    torch's `chunk` exports as one Slice per piece (with shape arithmetic the
    importer folds). Unit-step slices of one value, full on every other dim,
    that tile a dim exactly become a single `hc.split`.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseMseLoss : Pass<"hc-fuse-mse-loss", "mlir::func::FuncOp"> {
  let summary = "mean((a - b)^2) over all elements -> hc.mse_loss";
  let dependentDialects = ["hc::graph::HCDialect"];
}

#endif // HC_PASSES
