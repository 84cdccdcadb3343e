// RUN: hc-opt %s -split-input-file -verify-diagnostics
// The schedule dialect's own checks: hcs.call names a kernel of the
// runtime's list (runtime/include/hc/runtime/kernels.def), so a typo in a
// lowering is an IR error here, not "the generated C++ failed to compile".

func.func @unknown_kernel(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{'hcs.call' op unknown runtime kernel 'tanhh' (runtime/include/hc/runtime/kernels.def lists them)}}
  hcs.call "tanhh"(%a) -> (%b) {} : (memref<4xf32>) -> memref<4xf32>
  return
}

// -----

// Every name of the list is accepted: the first, one from the middle, the
// last (the in-place optimizer), and the backward kernels.
func.func @known_kernels(%a: memref<4xf32>, %b: memref<4xf32>) {
  hcs.call "add"(%a, %a) -> (%b) {} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  hcs.call "gelu_grad"(%a, %a) -> (%b) {} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  hcs.call "sgd"(%a, %a) -> (%b) {} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  return
}
