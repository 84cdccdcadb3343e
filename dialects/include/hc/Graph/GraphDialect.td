#ifndef HC_GRAPH_DIALECT
#define HC_GRAPH_DIALECT

include "mlir/IR/OpBase.td"

def HC_Dialect : Dialect {
  let name = "hc";
  let summary = "hc graph level: pure tensor ops of a DiT training graph";
  let description = [{
    Graph-level ops are pure functions of ranked, statically or dynamically
    shaped tensors, at the granularity the fusion passes produce (linear,
    layer norm, attention, ...) plus the primitive ops the ONNX importer emits.
    Result types are inferred (InferTypeOpInterface), so building an op checks
    its shapes. Parameters and data inputs are arguments of the function,
    named by the `hc.param` / `hc.input` argument attributes. Buffers, kernels
    and communication belong to the schedule dialect.
  }];
  let cppNamespace = "::hc::graph";
}

class HC_Op<string mnemonic, list<Trait> traits = []>
    : Op<HC_Dialect, mnemonic, traits>;

def HC_FloatTensor : RankedTensorOf<[F32, F64]>;
def HC_IndexTensor : RankedTensorOf<[I32, I64]>;
def HC_BoolTensor : RankedTensorOf<[I1]>;
def HC_Tensor : RankedTensorOf<[F32, F64, I32, I64, I1]>;

#endif // HC_GRAPH_DIALECT
