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

// The dynamo exporter (ReduceMean-18 keeps dims by default): the mean is
// [1, 1, 1], reshaped (Squeeze) to the scalar loss.
// CHECK-LABEL: func.func @mse_kept_dims
// CHECK-NEXT: %[[L:.*]] = hc.mse_loss %arg0, %arg1 : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[L]]
func.func @mse_kept_dims(%p: tensor<2x3x4xf32>, %t: tensor<2x3x4xf32>) -> tensor<f32> {
  %d = hc.sub %p, %t : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %two = hc.constant dense<2.000000e+00> : tensor<f32>
  %s = hc.pow %d, %two : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
  %m = hc.reduce_mean %s {axes = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<1x1x1xf32>
  %l = hc.reshape %m : tensor<1x1x1xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Near miss: the kept-dims mean is used besides the reshape: left alone (the
// [1, 1, 1] value is still needed).
// CHECK-LABEL: func.func @mse_kept_dims_used_twice
// CHECK-NOT: hc.mse_loss
// CHECK: hc.reduce_mean
func.func @mse_kept_dims_used_twice(%p: tensor<2x3x4xf32>, %t: tensor<2x3x4xf32>) -> (tensor<f32>, tensor<1x1x1xf32>) {
  %d = hc.sub %p, %t : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %s = hc.mul %d, %d : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %m = hc.reduce_mean %s {axes = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<1x1x1xf32>
  %l = hc.reshape %m : tensor<1x1x1xf32> -> tensor<f32>
  return %l, %m : tensor<f32>, tensor<1x1x1xf32>
}
