// RUN: hc-opt %s --hc-fuse-bias-grads --split-input-file | FileCheck %s

// A linear layer's gradients as autodiff writes them: dW, then db summed
// over every dim but the last. They become one linear_grad_weight_bias
// whose results replace both; dX stays apart.
// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x7xf32>, %[[W:.*]]: tensor<9x7xf32>, %[[DY:.*]]: tensor<2x5x9xf32>)
// CHECK-NEXT: %[[DX:.*]] = hc.linear_grad_input %[[DY]], %[[W]]
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = hc.linear_grad_weight_bias %[[DY]], %[[X]] : (tensor<2x5x9xf32>, tensor<2x5x7xf32>) -> (tensor<9x7xf32>, tensor<9xf32>)
// CHECK-NEXT: return %[[DX]], %[[DW]], %[[DB]]
// CHECK-NOT: hc.reduce_sum
func.func @layer(%x: tensor<2x5x7xf32>, %w: tensor<9x7xf32>, %dy: tensor<2x5x9xf32>) -> (tensor<2x5x7xf32>, tensor<9x7xf32>, tensor<9xf32>) {
  %dx = hc.linear_grad_input %dy, %w : (tensor<2x5x9xf32>, tensor<9x7xf32>) -> tensor<2x5x7xf32>
  %dw = hc.linear_grad_weight %dy, %x : (tensor<2x5x9xf32>, tensor<2x5x7xf32>) -> tensor<9x7xf32>
  %db = hc.reduce_sum %dy {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x5x9xf32> -> tensor<9xf32>
  return %dx, %dw, %db : tensor<2x5x7xf32>, tensor<9x7xf32>, tensor<9xf32>
}

// -----

// The sum first, a use of it before the weight gradient: the fused op stands
// where the later of the two stood, so the sum's use would come before it.
// Rows-only layers (rank 2) fuse too.
// CHECK-LABEL: func.func @order
// CHECK: hc.reduce_sum
// CHECK: hc.add
// CHECK: hc.linear_grad_weight %
// CHECK-NOT: hc.linear_grad_weight_bias
// CHECK-LABEL: func.func @rank2
// CHECK: hc.linear_grad_weight_bias %{{.*}}, %{{.*}} : (tensor<5x9xf32>, tensor<5x7xf32>) -> (tensor<9x7xf32>, tensor<9xf32>)
// CHECK-NOT: hc.reduce_sum
func.func @order(%x: tensor<5x7xf32>, %dy: tensor<5x9xf32>, %c: tensor<9xf32>) -> (tensor<9x7xf32>, tensor<9xf32>) {
  %db = hc.reduce_sum %dy {axes = array<i64: 0>, keepdims = false} : tensor<5x9xf32> -> tensor<9xf32>
  %u = hc.add %db, %c : (tensor<9xf32>, tensor<9xf32>) -> tensor<9xf32>
  %dw = hc.linear_grad_weight %dy, %x : (tensor<5x9xf32>, tensor<5x7xf32>) -> tensor<9x7xf32>
  return %dw, %u : tensor<9x7xf32>, tensor<9xf32>
}
func.func @rank2(%x: tensor<5x7xf32>, %dy: tensor<5x9xf32>) -> (tensor<9x7xf32>, tensor<9xf32>) {
  %dw = hc.linear_grad_weight %dy, %x : (tensor<5x9xf32>, tensor<5x7xf32>) -> tensor<9x7xf32>
  %db = hc.reduce_sum %dy {axes = array<i64: 0>, keepdims = false} : tensor<5x9xf32> -> tensor<9xf32>
  return %dw, %db : tensor<9x7xf32>, tensor<9xf32>
}

// -----

// Near misses, nothing fuses: a sum that keeps its dims; one over only some
// leading dims; a sum of another tensor than the weight gradient's dY; f64
// (the GEMM is f32).
// CHECK-LABEL: func.func @near_misses
// CHECK-NOT: hc.linear_grad_weight_bias
// CHECK-COUNT-4: hc.reduce_sum
func.func @near_misses(%x: tensor<2x5x7xf32>, %dy: tensor<2x5x9xf32>, %dz: tensor<2x5x9xf32>, %x64: tensor<5x7xf64>, %dy64: tensor<5x9xf64>) -> (tensor<9x7xf32>, tensor<1x1x9xf32>, tensor<5x9xf32>, tensor<9xf32>, tensor<9x7xf64>, tensor<9xf64>) {
  %dw = hc.linear_grad_weight %dy, %x : (tensor<2x5x9xf32>, tensor<2x5x7xf32>) -> tensor<9x7xf32>
  %keep = hc.reduce_sum %dy {axes = array<i64: 0, 1>, keepdims = true} : tensor<2x5x9xf32> -> tensor<1x1x9xf32>
  %part = hc.reduce_sum %dy {axes = array<i64: 0>, keepdims = false} : tensor<2x5x9xf32> -> tensor<5x9xf32>
  %other = hc.reduce_sum %dz {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x5x9xf32> -> tensor<9xf32>
  %dw64 = hc.linear_grad_weight %dy64, %x64 : (tensor<5x9xf64>, tensor<5x7xf64>) -> tensor<9x7xf64>
  %db64 = hc.reduce_sum %dy64 {axes = array<i64: 0>, keepdims = false} : tensor<5x9xf64> -> tensor<9xf64>
  return %dw, %keep, %part, %other, %dw64, %db64 : tensor<9x7xf32>, tensor<1x1x9xf32>, tensor<5x9xf32>, tensor<9xf32>, tensor<9x7xf64>, tensor<9xf64>
}
