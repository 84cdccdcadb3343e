// RUN: hc-opt %s --hc-fuse-gemm-epilogues --split-input-file | FileCheck %s

// DiT's MLP after autodiff: fc1 -> GELU -> fc2 forward, and the backward's
// dA = dY·W2 -> gelu_grad(dA, h). The forward pair becomes linear_gelu,
// whose pre-activation feeds the backward; the backward pair becomes
// linear_grad_input_gelu; the weight gradients keep reading the GELU's
// output and dH.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x7xf32>, %[[W1:.*]]: tensor<9x7xf32>, %[[B1:.*]]: tensor<9xf32>, %[[W2:.*]]: tensor<7x9xf32>, %[[DY:.*]]: tensor<2x5x7xf32>)
// CHECK-NEXT: %[[A:.*]], %[[H:.*]] = hc.linear_gelu %[[X]], %[[W1]], %[[B1]] : (tensor<2x5x7xf32>, tensor<9x7xf32>, tensor<9xf32>) -> (tensor<2x5x9xf32>, tensor<2x5x9xf32>)
// CHECK-NEXT: %[[Y:.*]] = hc.linear %[[A]], %[[W2]]
// CHECK-NEXT: %[[DH:.*]] = hc.linear_grad_input_gelu %[[DY]], %[[W2]], %[[H]] : (tensor<2x5x7xf32>, tensor<7x9xf32>, tensor<2x5x9xf32>) -> tensor<2x5x9xf32>
// CHECK-NEXT: %[[DW2:.*]] = hc.linear_grad_weight %[[DY]], %[[A]]
// CHECK-NEXT: %[[DW1:.*]] = hc.linear_grad_weight %[[DH]], %[[X]]
// CHECK-NEXT: return %[[Y]], %[[DW2]], %[[DW1]]
// CHECK-NOT: hc.gelu
func.func @mlp(%x: tensor<2x5x7xf32>, %w1: tensor<9x7xf32>, %b1: tensor<9xf32>, %w2: tensor<7x9xf32>, %dy: tensor<2x5x7xf32>) -> (tensor<2x5x7xf32>, tensor<7x9xf32>, tensor<9x7xf32>) {
  %h = hc.linear %x, %w1, %b1 : (tensor<2x5x7xf32>, tensor<9x7xf32>, tensor<9xf32>) -> tensor<2x5x9xf32>
  %a = hc.gelu %h {approximate = "tanh"} : tensor<2x5x9xf32>
  %y = hc.linear %a, %w2 : (tensor<2x5x9xf32>, tensor<7x9xf32>) -> tensor<2x5x7xf32>
  %da = hc.linear_grad_input %dy, %w2 : (tensor<2x5x7xf32>, tensor<7x9xf32>) -> tensor<2x5x9xf32>
  %dh = hc.gelu_grad %da, %h {approximate = "tanh"} : tensor<2x5x9xf32>
  %dw2 = hc.linear_grad_weight %dy, %a : (tensor<2x5x7xf32>, tensor<2x5x9xf32>) -> tensor<7x9xf32>
  %dw1 = hc.linear_grad_weight %dh, %x : (tensor<2x5x9xf32>, tensor<2x5x7xf32>) -> tensor<9x7xf32>
  return %y, %dw2, %dw1 : tensor<2x5x7xf32>, tensor<7x9xf32>, tensor<9x7xf32>
}

// -----

// Near misses: the exact (erf) GELU has no epilogue; a gelu_grad whose dA
// has another use would still need dA in memory; a gelu_grad of something
// that is not a linear_grad_input; f64 (the GEMM is f32). Nothing fuses.
// CHECK-LABEL: func.func @near_misses
// CHECK-NOT: hc.linear_gelu
// CHECK-NOT: hc.linear_grad_input_gelu
// CHECK: hc.gelu %{{.*}} {approximate = "none"}
// CHECK: hc.gelu_grad
// CHECK: hc.gelu_grad
// CHECK: hc.gelu %
func.func @near_misses(%x: tensor<5x7xf32>, %w: tensor<9x7xf32>, %w2: tensor<7x9xf32>, %dy: tensor<5x7xf32>, %g: tensor<5x9xf32>, %x64: tensor<5x7xf64>, %w64: tensor<9x7xf64>) -> (tensor<5x9xf32>, tensor<5x9xf32>, tensor<5x9xf32>, tensor<5x9xf32>, tensor<5x9xf64>) {
  %h = hc.linear %x, %w : (tensor<5x7xf32>, tensor<9x7xf32>) -> tensor<5x9xf32>
  %a = hc.gelu %h {approximate = "none"} : tensor<5x9xf32>
  %da = hc.linear_grad_input %dy, %w2 : (tensor<5x7xf32>, tensor<7x9xf32>) -> tensor<5x9xf32>
  %dh = hc.gelu_grad %da, %h {approximate = "tanh"} : tensor<5x9xf32>
  %dg = hc.gelu_grad %g, %h {approximate = "tanh"} : tensor<5x9xf32>
  %h64 = hc.linear %x64, %w64 : (tensor<5x7xf64>, tensor<9x7xf64>) -> tensor<5x9xf64>
  %a64 = hc.gelu %h64 {approximate = "tanh"} : tensor<5x9xf64>
  return %a, %dh, %da, %dg, %a64 : tensor<5x9xf32>, tensor<5x9xf32>, tensor<5x9xf32>, tensor<5x9xf32>, tensor<5x9xf64>
}
