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

def FuseModulatedLayerNorm : Pass<"hc-fuse-modulated-layer-norm", "mlir::func::FuncOp"> {
  let summary = "hc.layer_norm (no affine, last dim) then hc.modulate -> hc.modulated_layer_norm";
  let description = [{
    DiT's `modulate(norm(x), shift, scale)`: when the norm's only user is the
    modulate, both become one op. Its kernel reads x once and writes y (the
    normalized x is neither written nor kept for the backward), and its
    gradient reads dy and x once (`hc.modulated_layer_norm_grad`), where
    modulate_grad and layer_norm_grad stored dx_hat between two passes.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseGatedResidual : Pass<"hc-fuse-gated-residual", "mlir::func::FuncOp"> {
  let summary = "x + gate·h with a per-sample [B, 1, D] gate -> hc.gated_residual";
  let description = [{
    adaLN-Zero's gated residual `x + gate.unsqueeze(1) * h` (the product used
    once, either operand order) becomes `hc.gated_residual x, gate, h` with
    the gate as `[B, D]`.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseAttention : Pass<"hc-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "qkv split, q·kᵀ·scale, softmax, ·v, merge heads -> hc.attention";
  let description = [{
    From a packed `[B, N, 3·D]` qkv: q, k, v taken from the permute
    `transpose(reshape(qkv, [B, N, 3, H, Dh]), [2, 0, 3, 1, 4])` along dim 0
    (Gather of an index; unit Slice or a Split into [1, 1, 1], squeezed by a
    Reshape: index, unbind), or split from qkv's last dim (Split or Slices,
    each reshaped to `[B, N, H, Dh]` and transposed: chunk/split);
    `matmul(q, transpose(k))`, softmax over the last dim, `matmul(·, v)`,
    transpose `[0, 2, 1, 3]` and reshape to `[B, N, D]`. Multiplications
    and divisions by 1-element constants on the scores, q, k or kᵀ multiply
    into the scale (torch's SDPA puts √scale on q and on kᵀ). A mask, another
    softmax axis or a scale that is not a compile-time scalar constant stays
    unfused. compiler/README.md has the forms.
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

//===----------------------------------------------------------------------===//
// Training expansion
//===----------------------------------------------------------------------===//

def FuseGemmEpilogues : Pass<"hc-fuse-gemm-epilogues", "mlir::func::FuncOp"> {
  let summary = "after autodiff: GELU (and its gradient) into the GEMM's epilogue";
  let description = [{
    `gelu(linear(x, W, b))` (tanh form, f32) becomes `hc.linear_gelu`, whose
    second result, the pre-activation, replaces the linear's other uses (the
    GELU's backward reads it). `gelu_grad(linear_grad_input(dy, W), h)`, the
    intermediate used once, becomes `hc.linear_grad_input_gelu(dy, W, h)`.
    Runs after autodiff: the fused ops have no gradient rules.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def FuseBiasGrads : Pass<"hc-fuse-bias-grads", "mlir::func::FuncOp"> {
  let summary = "after autodiff: the bias gradient's sum into the weight gradient's GEMM";
  let description = [{
    `hc.linear_grad_weight %dy, %x` and `hc.reduce_sum %dy` over every dim
    but the last (keepdims false, float32) become one
    `hc.linear_grad_weight_bias %dy, %x` with both results: the GEMM adds up
    the bias gradient while it reads dY, in reduce_sum's order (the same
    bits, one pass over dY fewer). `hc-compile --fuse-bias-grads off` keeps
    them apart.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def Bf16Gemms : Pass<"hc-bf16-gemms", "mlir::func::FuncOp"> {
  let summary = "bf16 mixed precision: product ops take bf16-rounded inputs";
  let description = [{
    `hc-compile --precision bf16`, after autodiff, the optimizer and the
    fusions after it: every all-float32 op whose kernel has the `precision`
    flag in `kernels.def` (the GEMMs: `hc.linear`, its gradients, the fused
    weight-and-bias gradient, `hc.matmul`, the epilogue-fused GEMMs; flash
    attention and its gradient) gets `precision = "bf16"`: its products
    round their operands to bf16 (round to nearest even) and sum in
    float32. Lowering copies the attribute onto the `hcs.call`; the runtime
    then runs the bf16 kernels, the evaluators round the same operands.
    Everything else (norms, softmax, the loss, the optimizer, parameters and
    optimizer state, a bias gradient's sum) stays float32. An extension
    beyond the paper.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def Bf16Storage : Pass<"hc-bf16-storage", "mlir::ModuleOp"> {
  let summary = "bf16 buffers for the activations only bf16 GEMMs read";
  let description = [{
    `hc-compile --precision bf16` (`--bf16-storage on`, the default), on
    the schedule right after lowering, before hc-automem, the buffer plan
    and hc-cftp (which then count, move and cut the smaller buffers): an
    "act" buffer of float32 becomes bf16, and every view of it too, when
    one `hcs.call` writes it at an output `kernels.def`'s HCRT_BF16_SLOTS
    allows (`gelu`'s, `modulated_layer_norm`'s and `linear`'s y) and every
    other use, at least one, is a call reading it at an input the slots
    allow with precision bf16 (`linear`'s x, the weight gradients' x,
    attention's q, k, v). Those products round that operand to bf16 as they
    pack it, so storing the rounded value changes no bit of the step; its
    bytes halve. A writer without a bf16 slot (the SiLU of adaLN's
    conditioning) writes a float32 temporary that a `cast` rounds into the
    buffer, where the buffer is read more than once.
    Named buffers (the host reads them) and any other use keep float32.
    DiT: the adaLN-modulated norms before qkv and fc1, the GELU before fc2
    and qkv, the activations the backward keeps longest.
  }];
}

def Autodiff : Pass<"hc-autodiff", "mlir::ModuleOp"> {
  let summary = "reverse-mode gradients of the loss w.r.t. every trainable parameter";
  let description = [{
    On each function whose first result is the loss (`hc.result_names`):
    parameters (`hc.param` arguments) without `hc.frozen` are trainable;
    `freeze` names more. Adjoints are built in reverse op order by each op's
    GradientOpInterface rule and summed where a value has several uses.
    One result per trainable parameter is appended, named `grad:NAME`.
    An op on the active path without a rule is an error naming it.
  }];
  let options = [
    ListOption<"freeze", "freeze", "std::string",
               "parameters to freeze (no gradient, no update)">
  ];
  let dependentDialects = ["hc::graph::HCDialect"];
}

def Optimizer : Pass<"hc-optimizer", "mlir::ModuleOp"> {
  let summary = "one fused AdamW, Adam or SGD update of every parameter with a gradient";
  let description = [{
    Consumes the `grad:NAME` results of hc-autodiff. AdamW adds the state
    arguments `adamw.step` (completed steps, i64) and `adamw.m:NAME`,
    `adamw.v:NAME` (`hc.state` attribute) and returns the updated
    parameters (`param:NAME`) and state (`state:KEY`); gradients stay as
    results for inspection. AdamW and SGD hyper-parameters are those of
    torch.optim. `adam` is ONNX's ai.onnx.preview.training Adam with
    T = `adam.T` (completed steps) and moments `adam.V:NAME`, `adam.H:NAME`:
    lr, beta1, beta2, eps, weight-decay and weight-decay-post are its R,
    alpha, beta, epsilon, norm_coefficient and norm_coefficient_post, held
    at float32 as the operator's attributes are.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"", "adamw, adam or sgd">,
    Option<"lr", "lr", "double", "1e-4", "learning rate (Adam: R)">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1 (Adam: alpha)">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW beta2 (Adam: beta)">,
    Option<"eps", "eps", "double", "-1.0",
           "AdamW epsilon (default 1e-8) / Adam epsilon (default 1e-6, the operator's)">,
    Option<"weightDecay", "weight-decay", "double", "0.0",
           "decoupled (AdamW) or L2 (SGD; Adam: norm_coefficient) weight decay">,
    Option<"weightDecayPost", "weight-decay-post", "double", "0.0",
           "Adam's norm_coefficient_post: X <- (1 - it) X after the update">
  ];
  let dependentDialects = ["hc::graph::HCDialect"];
}

//===----------------------------------------------------------------------===//
// Schedule level
//===----------------------------------------------------------------------===//

def LowerToSchedule : Pass<"hc-lower-to-schedule", "mlir::ModuleOp"> {
  let summary = "the training step as buffers, views and kernel calls (hcs)";
  let description = [{
    Replaces the graph-level training function by `func.func @step()` of
    the schedule dialect, in the graph's op order. Parameters, gradients and
    AdamW moments live in flat persistent arenas laid out in the order
    backward produces the gradients (trainable first, frozen after), so the
    optimizer is one call over the arena and a gradient bucket is a slice.
    Reshape, transpose, slice, split and broadcast become views; everything
    else a runtime kernel call writing fresh "act" buffers (planned later),
    or in place for the optimizer. Each bucket's all-reduce starts right
    after its last gradient is written and is waited for right before the
    optimizer.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "1048576",
           "gradient bucket size in bytes (default chosen by hc-bench-allreduce)">
  ];
  let dependentDialects = ["hc::schedule::HCSDialect", "mlir::memref::MemRefDialect"];
}

def AutoMem : Pass<"hc-automem", "mlir::ModuleOp"> {
  let summary = "memory tiers and a budget: recompute or offload activations by cost";
  let description = [{
    Runs between lowering and buffer planning. Tiers: a fast one (HBM found
    in the topology, or `fast-mem` bytes of DRAM) holding the "act" arena,
    and DRAM holding the persistent arenas and "offload". While the planned
    activation peak exceeds the fast tier, or all arenas plus a reserve
    (host inputs + `reserve`, default 64 MiB) exceed `mem-budget`, the activation live across
    the peak that is cheapest per byte by the cost model is either
    recomputed (its producing call cloned, marked `hcs.recompute`, before
    its first use after the peak, when its inputs are live there anyway) or,
    toward the fast tier only, offloaded and prefetched before its next use
    (`hcs.offload` / `hcs.prefetch` + `hcs.wait`), each copy running beside
    the calls of its window (`lookahead`).
    Records the tiers, budget and decisions in `hcs.memory` on @step, which
    hc-verify-plan checks. With `offload-dir`, the "offload" arena is a
    disk tier (a file in that folder) and moves also serve the budget.
    With `segments` (default auto) it also plans after segment
    recomputation: the forward is cut where one activation carries the step
    (a DiT block's input), each segment keeps its cut and is run again
    (clones marked `hcs.recompute` and `hcs.segment`) just before the
    backward first reads what it saved; the cheaper plan that fits wins.
    With `recompute=off` nothing is recomputed: every byte freed is moved,
    whatever the rates (how hc-cftp's composition with the copies is
    measured without distorting the kernels' rates).
    Neither limit set and no HBM: does nothing.
  }];
  let options = [
    Option<"memBudget", "mem-budget", "int64_t", "0",
           "bytes the step's resident set may use (0: no budget)">,
    Option<"fastMem", "fast-mem", "int64_t", "0",
           "bytes of DRAM to plan as the fast tier (0: HBM from the topology)">,
    Option<"topology", "topology", "std::string", "\"native\"",
           "native, an hwloc XML file or an hwloc synthetic string">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", "1",
           "ranks sharing the node's fast memory">,
    Option<"lookahead", "lookahead", "std::string", "\"auto\"",
           "each tier copy's window: N kernel calls between an offload's start "
           "and its wait and between a prefetch's start and its use, or auto "
           "(as many calls as the cost model says the copy takes, at most 16, "
           "planned beside 2-call windows; the cheaper plan, its copies' "
           "exposed seconds counted, is kept)">,
    // Outside the arenas: the process's code, thread stacks, the GEMM's
    // packing buffers, the MPI library (DiT-S/2 measured: peak RSS 50 MB
    // above its arenas). The host's step inputs are added to it.
    Option<"processReserve", "reserve", "int64_t", "67108864",
           "bytes the process needs outside the arenas and inputs">,
    Option<"rates", "rates", "std::string", "\"\"",
           "machine rates: KEY=VALUE items or files of them (CostModel.h's parseRates); empty: built-in">,
    Option<"offloadDir", "offload-dir", "std::string", "\"\"",
           "a folder for the disk tier: moved activations go to a file there">,
    Option<"segments", "segments", "std::string", "\"auto\"",
           "segment recomputation (AutoMemSegments.cpp): auto (plan with and "
           "without, keep the cheaper), on or off">,
    Option<"recompute", "recompute", "std::string", "\"auto\"",
           "auto (recompute where the cost model prices it below a move) or "
           "off (never: every byte freed moves to a slower tier; no segments)">
  ];
}

def ConstantWeights : Pass<"hc-constant-weights", "mlir::ModuleOp"> {
  let summary = "GEMM weights no op writes keep their packed panels between calls";
  let description = [{
    On the schedule, after every pass that adds writes (hc-automem's tier
    copies, hc-cftp's cuts): each `hcs.call` whose kernel has the `weight`
    flag in `kernels.def` (`linear`, `linear_gelu`: operand 1 is W) and
    whose W is (a view of) a planned "param" buffer whose bytes no op of
    the module writes gets `weight = "constant"` in its attributes. The runtime then
    keeps W's packed (for bf16, rounded) GEMM panels from one call to the
    next instead of packing them again (hc_sgemm_args::b_constant); the
    executor drops them when the host sets a parameter. A sampler's weights
    qualify; a training step's do not (its optimizer writes them).

    Under a memory budget (`hcs.memory`) the kept panels are memory the
    plan counts. Each weight (a buffer's view) W [N, K] counts once, as
    ((N rounded up to 64) + 64) x K floats and 16 KiB; each in program
    order is marked if it fits what is left of the budget less the arenas
    in memory and the reserve. The total is recorded as
    `hcs.kept_weights_bytes` on the function: hc-verify-plan adds it to the
    plan's need, and the runtime holds the step's parameter arena to it
    (`hcrt_gemm_limit_packed`). Without a budget every such weight is
    marked and only libhcrt's own cap (`HC_GEMM_PACKED_MB`) applies.
  }];
}

def PlanBuffers : Pass<"hc-plan-buffers", "mlir::ModuleOp"> {
  let summary = "static offsets for activation buffers by liveness, peak per arena";
  let description = [{
    Every "act" buffer is live from the first to the last op that touches it
    (directly or through a view); first-fit assigns 64-byte aligned offsets,
    reusing space freed by dead buffers. The arena sizes (the peak per tier)
    are recorded in `hcs.arena_bytes` on the function.
  }];
}

def PlanPlacement : Pass<"hc-plan-placement", "mlir::ModuleOp"> {
  let summary = "the machine in the plan: topology, core budget, arena placement";
  let description = [{
    Reads the topology (hwloc: the machine, an XML file or a synthetic
    string; `--clusters K` re-cuts its cores into K clusters) and records on
    @step (hc/Schedule/Placement.h):
      hcs.topology     clusters (cores, home and near NUMA nodes) and NUMA
                       nodes with their memory kinds;
      hcs.core_budget  per local rank: ranks on a node take contiguous shares
                       of its cores in cluster order (the runtime team's
                       rule), the last `comm-cores` of a share reserved for
                       communication progress and copies, the rest compute;
      hcs.placement    every arena cut into page-aligned slices, one per
                       cluster of a rank (slice k owned, and first-touched,
                       by the rank's k-th cluster); per rank a home NUMA
                       node: the owner's nearest node, fastest kind first,
                       while its capacity lasts. Consecutive slices with one
                       home make one region per NUMA node.
    Needs hcs.arena_bytes (after hc-plan-buffers).
  }];
  let options = [
    Option<"topology", "topology", "std::string", "\"native\"",
           "native, an hwloc XML file or an hwloc synthetic string">,
    Option<"clusters", "clusters", "int64_t", "0",
           "re-cut the cores into this many clusters (0: as discovered)">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", "1",
           "ranks sharing one node (each takes a contiguous share)">,
    Option<"commCores", "comm-cores", "int64_t", "0",
           "cores per rank reserved for communication progress and copies">
  ];
}

def Cftp : Pass<"hc-cftp", "mlir::ModuleOp"> {
  let summary = "CFTP: one stream of calls per cluster, synchronized only where data crosses";
  let description = [{
    Communication-free tensor parallelism inside a rank (the paper's first
    technique). Reads the rank's clusters from hcs.core_budget (after
    hc-plan-placement; K = the fewest clusters of any rank, at most its
    compute cores) and, when K > 1, gives every hcs.call, allreduce_start
    and wait of @step a `cluster` attribute: the stream that runs it. A
    call whose kernel has a split rule (passes/lib/CftpRules.cpp: rows for
    row-wise kernels, GEMMs by rows of A, attention by sample, weight and
    bias gradients by output feature, optimizers by element) may instead
    become K sub-calls on hcs.view slices (`split = "rows"|"features"`).
    A cost model chooses per call: list scheduling of the K streams with
    durations from measured per-thread rates (option `rates`, hc-automem's
    syntax: KEY=VALUE items or files of them; built-in:
    bench/cftp-rates-zen5.txt) and a cost per
    blocking wait. hcs.cluster_wait is inserted wherever a byte read or
    written by one stream was written or read by another earlier in program
    order (CftpAccess.h; strided views count as their whole byte span).
    The liveness arenas are first laid out apart (every buffer its own
    bytes), so only data orders the streams, never a reuse of storage;
    hc-plan-stream-buffers packs them again afterwards.
    All-reduces and the call writing the loss stay on cluster 0. Records
    `hcs.cftp` on @step: clusters, threads per cluster, calls cut and whole,
    waits, and the model's predicted step time with and without the cut.
    With `partial-grads` (hc-compile --cftp-partial-grads on), a weight
    gradient whose other cuts would join the streams (its dY rows come from
    every cluster) is instead cut by rows into per-cluster
    partial sums (`split = "partial"`): cluster 0 writes the gradient,
    cluster k its own buffer in the "partial" arena, in program order while
    the arena stays within `partial-limit` (default: the gradients' own
    size, so K - 1 copies never multiply the step's memory at many
    clusters) and what a memory budget leaves. Folds (`add`, `split = "fold"`) sum them into the
    gradient before the next op reading it: conditional calls (`only_if`)
    before a bucket's grad_accumulate / all-reduce (if the step reduces
    per bucket) and before the update (if it does not). Sums come out in
    another order than the unsplit GEMM's (within rounding).
    A per-rank batch K does not divide is refused (names --clusters) under
    `strict-batch`; otherwise the step stays unsplit and hcs.cftp says why.
  }];
  let options = [
    Option<"rates", "rates", "std::string", "\"\"",
           "machine rates: KEY=VALUE items or files of them (CostModel.h's parseRates); empty: built-in">,
    Option<"strictBatch", "strict-batch", "bool", "true",
           "refuse a per-rank batch K does not divide (hc-compile: when "
           "--clusters is given); false: leave the step unsplit, saying why "
           "in hcs.cftp">,
    Option<"partialGrads", "partial-grads", "bool", "false",
           "cut weight gradients into per-cluster partial sums (the 'partial' arena) "
           "where the other cuts join the streams">,
    Option<"partialLimit", "partial-limit", "int64_t", "-1",
           "bytes the 'partial' arena may take (-1: the 'grad' arena's, one more copy "
           "of the gradients); a memory budget may leave less">
  ];
  let dependentDialects = ["hc::schedule::HCSDialect"];
}

def PlanStreamBuffers : Pass<"hc-plan-stream-buffers", "mlir::ModuleOp"> {
  let summary = "the liveness arenas packed again in the order of hc-cftp's streams";
  let description = [{
    After hc-cftp, which orders its streams against the liveness arenas
    laid out apart (each buffer its own bytes), so that only data makes a
    stream wait. First fit in program order, as hc-plan-buffers, except
    that a buffer takes the bytes of an earlier one only where every op
    touching the earlier one is ordered before every op touching it by the
    streams' program order and their unscoped hcs.cluster_waits. Where an
    hcs.memory budget or a tier's capacity leaves less room than that
    needs, a buffer may take the bytes of one dead in program order but not
    ordered before it, and the pass adds the hcs.cluster_wait that orders
    them (if the arena still overshoots: hc-plan-buffers' plan, with a wait
    for every such reuse). Updates hcs.arena_bytes, the arenas' slices in
    hcs.placement, and hcs.cftp's `waits` (`reuse_waits`: those it added).
    A step of one stream is left alone.
  }];
}

def VerifyPlan : Pass<"hc-verify-plan", "mlir::ModuleOp"> {
  let summary = "proves no two simultaneously live buffers overlap";
  let description = [{
    Recomputes liveness and fails, naming both buffers, if two buffers of an
    arena that are live at the same op share a byte, or if a buffer lies
    outside its arena or has no offset. Also fails if an op touches the
    bytes of a gradient bucket between its hcs.allreduce_start and hcs.wait
    (the asynchronous all-reduce owns them then). On a CFTP plan (ops with
    a `cluster` attribute) also fails where a stream reads or writes bytes
    another stream wrote or read earlier in program order with no
    hcs.cluster_wait ordering the two, or where a wait names an op that
    comes later in program order (a possible deadlock).
  }];
}

//===----------------------------------------------------------------------===//
// Sampling
//===----------------------------------------------------------------------===//

def ExtractSampler : Pass<"hc-extract-sampler", "mlir::ModuleOp"> {
  let summary = "cuts a DiT training graph at the model's full output";
  let description = [{
    Turns the training function (loss first) into the forward pass that a
    sampler calls: the model output that the loss compares with the `noise`
    input becomes the only result, named "prediction". Where the loss reads
    a slice of the output along the channel axis (`out[:, :C]`, DiT with
    learned sigma), the cut is made before the slice, so the variance
    channels survive. The loss, the `noise` input and everything only they
    used are removed; no gradient or optimizer is built afterwards. A graph
    without a `noise` input, or whose noise is not compared with a tensor
    shaped like `x_t` (up to the channel count), is refused, naming the op.
  }];
  let dependentDialects = ["hc::graph::HCDialect"];
}

#endif // HC_PASSES
