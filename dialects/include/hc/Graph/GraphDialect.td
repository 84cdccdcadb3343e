#ifndef HC_GRAPH_DIALECT
#define HC_GRAPH_DIALECT

include "mlir/IR/OpBase.td"

def HC_Dialect : Dialect {
  let name = "hc";
  let summary = "hc graph level: pure tensor ops of a DiT training graph";
  let description = [{
    Graph-level ops are pure functions of tensors, at the granularity the
    fusion passes produce (linear, layer norm, attention, ...). They carry
    shape verifiers; gradient rules attach to them through an interface.
    Buffers, kernels and communication belong to the schedule dialect.
  }];
  let cppNamespace = "::hc::graph";
}

class HC_Op<string mnemonic, list<Trait> traits = []>
    : Op<HC_Dialect, mnemonic, traits>;

def HC_FloatTensor : RankedTensorOf<[F32, F64]>;

#endif // HC_GRAPH_DIALECT
