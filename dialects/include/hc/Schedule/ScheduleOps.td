#ifndef HC_SCHEDULE_OPS
#define HC_SCHEDULE_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"
include "hc/Schedule/AccessInterface.td"

def HCS_Dialect : Dialect {
  let name = "hcs";
  let summary = "hc schedule level: buffers in arenas, views, kernel calls, async collectives";
  let description = [{
    The schedule level names memory: every value is a memref that is either
    a planned buffer (an offset in one of the step's arenas), a host input,
    a constant, or a strided view of one of those (reshape, transpose,
    slice and broadcast never copy). Work is a sequence of kernel calls in
    execution order; collectives are asynchronous (start returns a token,
    wait consumes it). Later passes (CFTP, AutoMem) rewrite this level.
  }];
  let cppNamespace = "::hc::schedule";
  let useDefaultTypePrinterParser = 1;
  // The plan facts (ScheduleAttrs.td).
  let useDefaultAttributePrinterParser = 1;
  // hcs.topology / hcs.core_budget / hcs.placement / hcs.memory: typed, and
  // consistent with each other (hc/Schedule/Placement.h)
  let hasOperationAttrVerify = 1;
}

class HCS_Op<string mnemonic, list<Trait> traits = []>
    : Op<HCS_Dialect, mnemonic, traits>;

def HCS_TokenType : TypeDef<HCS_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "an asynchronous request in flight";
}

def HCS_BufferOp : HCS_Op<"buffer", [Pure]> {
  let summary = "a contiguous buffer in an arena, at a planned offset";
  let description = [{
    `arena` is one of "act" (activations and temporaries, planned by
    liveness; the fast memory tier when the plan has one), "offload"
    (activations hc-automem moved to the slower tier between their forward
    and backward uses, planned by liveness), "param", "grad", "m", "v"
    (persistent, flat, trainable parameters in the order backward produces
    their gradients), "state" (scalars such as the optimizer step). `offset`
    is in bytes; absent until the buffer plan runs.
  }];
  let arguments = (ins StrAttr:$arena, OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<StrAttr>:$name);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "$arena attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def HCS_InputOp : HCS_Op<"input", [Pure]> {
  let summary = "the host's buffer for input `index` of the step";
  let arguments = (ins I64Attr:$index, StrAttr:$name);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def HCS_ConstantOp : HCS_Op<"constant", [Pure]> {
  let summary = "read-only data baked into the step";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

def HCS_ViewOp : HCS_Op<"view", [Pure]> {
  let summary = "a strided view (reshape/transpose/slice/broadcast), no copy";
  let description = [{
    The result's layout (strides and offset, in elements relative to the
    source's start) says everything; the source must be contiguous.
  }];
  let arguments = (ins AnyStaticShapeMemRef:$source);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `to` type($result)";
  let hasVerifier = 1;
}

def HCS_CallOp : HCS_Op<"call", [AttrSizedOperandSegments, DeclareOpInterfaceMethods<HCS_AccessOpInterface>]> {
  let summary = "a runtime kernel: hcrt_op_<kernel>(ins, outs, attrs)";
  let description = [{
    `kernel` names an entry point of the runtime, one of the list in
    abi/include/hc/abi/kernels.def (the verifier checks it); `attrs`
    are the graph op's attributes.
    Inputs may be strided views; outputs are contiguous buffers (they may
    alias inputs only for in-place optimizer kernels).
    `only_if` ("reduced" or "local", written by hc-cftp) makes the call
    conditional on the step at run time: "reduced" runs only when the step
    reduces its gradients per bucket (more than one rank or micro-batch),
    "local" only when it does not (hcrt_call_condition).
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<AnyStaticShapeMemRef>:$ins,
                       Variadic<AnyStaticShapeMemRef>:$outs,
                       DictionaryAttr:$attrs, OptionalAttr<StrAttr>:$only_if);
  let builders = [
    // An unconditional call.
    OpBuilder<(ins "::mlir::StringAttr":$kernel, "::mlir::ValueRange":$ins,
                   "::mlir::ValueRange":$outs, "::mlir::DictionaryAttr":$attrs), [{
      build($_builder, $_state, kernel, ins, outs, attrs, ::mlir::StringAttr());
    }]>
  ];
  let assemblyFormat = [{
    $kernel `(` $ins `)` `->` `(` $outs `)` $attrs attr-dict `:`
      functional-type($ins, $outs)
  }];
  // `kernel` must be one of abi/include/hc/abi/kernels.def.
  let hasVerifier = 1;
}

def HCS_AllReduceStartOp : HCS_Op<"allreduce_start", [DeclareOpInterfaceMethods<HCS_AccessOpInterface>]> {
  let summary = "start averaging a gradient bucket over ranks (in place)";
  let arguments = (ins AnyStaticShapeMemRef:$bucket, I64Attr:$bucket_id);
  let results = (outs HCS_TokenType:$token);
  let assemblyFormat = "$bucket attr-dict `:` type($bucket)";
}

def HCS_WaitOp : HCS_Op<"wait", [DeclareOpInterfaceMethods<HCS_AccessOpInterface>]> {
  let summary = "block until an asynchronous request completes";
  let arguments = (ins HCS_TokenType:$token);
  let assemblyFormat = "$token attr-dict";
}

// AutoMem's moves between memory tiers (passes/lib/AutoMem.cpp). Both start
// a copy of a whole buffer, or of the same contiguous hcs.view piece of
// both buffers (hc-cftp cuts a copy by clusters), and return its token; the
// copy is done when the token's hcs.wait returns. Until then nothing may
// touch the target, nor write the source (hc-verify-plan proves it).
class HCS_TierCopyOp<string mnemonic, string summaryText>
    : HCS_Op<mnemonic, [DeclareOpInterfaceMethods<HCS_AccessOpInterface>]> {
  let summary = summaryText;
  let arguments = (ins AnyStaticShapeMemRef:$source,
                       AnyStaticShapeMemRef:$target);
  let results = (outs HCS_TokenType:$token);
  let assemblyFormat = [{
    $source `to` $target attr-dict `:` type($source) `to` type($target)
  }];
  let hasVerifier = 1;
}

def HCS_OffloadOp : HCS_TierCopyOp<"offload",
    "start copying an `act` buffer to an `offload` buffer (fast to slow tier)">;
def HCS_PrefetchOp : HCS_TierCopyOp<"prefetch",
    "start copying an `offload` buffer back to an `act` buffer (slow to fast tier)">;

def HCS_ClusterWaitOp : HCS_Op<"cluster_wait"> {
  let summary = "CFTP: a cluster's stream waits for another cluster's progress";
  let description = [{
    Written by hc-cftp. Ops of @step that run work (hcs.call,
    hcs.allreduce_start, hcs.wait) carry `cluster = k`: the cluster whose
    stream runs them, in program order (absent: 0). This op, in the stream
    of `cluster`, blocks it until cluster `source` has completed its first
    `count` ops. hc-verify-plan proves that every byte one cluster reads or
    writes after another cluster wrote or read it is ordered by such a wait.

    `only_for` ("allreduce_start", "grad_accumulate", or "call_if_reduced"
    / "call_if_local": an hcs.call with that `only_if`) scopes the wait to
    the next op of its stream, which must be that op: an op that does
    nothing in some steps (one rank, one micro-batch), where the runtime
    skips the wait. It orders no later op (hc-verify-plan checks them
    against the unscoped waits alone).
  }];
  let arguments = (ins I64Attr:$cluster, I64Attr:$source, I64Attr:$count,
                       OptionalAttr<StrAttr>:$only_for);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def HCS_LossOp : HCS_Op<"loss", [DeclareOpInterfaceMethods<HCS_AccessOpInterface>]> {
  let summary = "marks the buffer holding this step's loss (0-d)";
  let arguments = (ins AnyStaticShapeMemRef:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // HC_SCHEDULE_OPS
