#ifndef HC_SCHEDULE_ACCESS_INTERFACE
#define HC_SCHEDULE_ACCESS_INTERFACE

include "mlir/IR/OpBase.td"

// The one model of what a schedule op touches. Buffer liveness
// (hc-plan-buffers), the plan's verifier (hc-verify-plan), hc-automem and
// hc-cftp all ask it, so an op's reads and writes are said once, here.
def HCS_AccessOpInterface : OpInterface<"AccessOpInterface"> {
  let cppNamespace = "::hc::schedule";
  let description = [{
    Every op of a planned @step answers which memrefs it reads and writes
    (buffers, views of them, host inputs, constants) and on which stream it
    runs. An asynchronous op (a tier copy, a bucket's all-reduce) starts
    accesses that are `pending`: they go on after the op until the hcs.wait
    on its token, which reports the same accesses again, complete. Ops that
    only name memory (buffer, view, input, constant) or order streams
    (cluster_wait) touch nothing.
  }];
  let methods = [
    InterfaceMethod<[{
        Appends this op's accesses to `out`.
      }], "void", "getAccesses",
      (ins "::llvm::SmallVectorImpl<::hc::schedule::Access> &":$out)>,
    InterfaceMethod<[{
        The CFTP cluster whose stream runs this op (0 without CFTP).
      }], "int64_t", "getStream", (ins), [{}], [{
        return ::hc::schedule::clusterOf($_op.getOperation());
      }]>,
  ];
}

#endif // HC_SCHEDULE_ACCESS_INTERFACE
