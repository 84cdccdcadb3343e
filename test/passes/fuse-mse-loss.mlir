// RUN: hc-opt %s --hc-fuse-mse-loss | FileCheck %s

// CHECK-LABEL: func.func @mse
// CHECK-NEXT: %[[L:.*]] = hc.mse_loss %arg0, %arg1 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[L]]
func.func @mse(%p: tensor<2x3x4xf32>, %t: tensor<2x3x4xf32>) -> tensor<f32> {
  %d = hc.sub %p, %t : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = hc.mul %d, %d : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %m = hc.reduce_mean %s {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
  return %m : tensor<f32>
}

// Near miss: the mean leaves out axis 0 (a per-sample loss), so it is not
// the scalar MSE.
// CHECK-LABEL: func.func @per_sample
// CHECK-NOT: hc.mse_loss
func.func @per_sample(%p: tensor<2x3x4xf32>, %t: tensor<2x3x4xf32>) -> tensor<2xf32> {
  %d = hc.sub %p, %t : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = hc.mul %d, %d : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %m = hc.reduce_mean %s {axes = array<i64: 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<2xf32>
  return %m : tensor<2xf32>
}
