// The throwaway extension's dialect: one op outside hc's dialect, defined
// as an out-of-tree op would be (its own ODS, verifier and gradient rule).
#ifndef HC_THROWAWAY_OPS
#define HC_THROWAWAY_OPS

include "hc/Graph/GradientInterface.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Throwaway_Dialect : Dialect {
  let name = "hct";
  let summary = "a throwaway op carried through every stage of hc-compile";
  let cppNamespace = "::hc::throwaway";
}

// Its mnemonic is the kernel's name: hc-lower-to-schedule calls the kernel
// named after the op (throwaway_kernel.def), with the op's attributes.
def Throwaway_AxpbOp : Op<Throwaway_Dialect, "throwaway_axpb",
    [Pure, SameOperandsAndResultType,
     DeclareOpInterfaceMethods<HC_GradientOpInterface>]> {
  let summary = "y = alpha * x + beta (x itself when mode = \"off\")";
  let arguments = (ins RankedTensorOf<[F32]>:$input, F64Attr:$alpha, F64Attr:$beta,
                       OptionalAttr<StrAttr>:$mode, OptionalAttr<StrAttr>:$note);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // HC_THROWAWAY_OPS
