// RUN: hc-opt %s --hc-fuse-layer-norm | FileCheck %s

// The opset-13 decomposition, then an affine scale and shift.
// CHECK-LABEL: func.func @layer_norm
// CHECK-NEXT: %[[L:.*]] = hc.layer_norm %arg0 scale %arg1 shift %arg2 {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
// CHECK-NEXT: return %[[L]]
func.func @layer_norm(%x: tensor<2x5x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x5x8xf32> {
  %mean = hc.reduce_mean %x {axes = array<i64: 2>} : tensor<2x5x8xf32> -> tensor<2x5x1xf32>
  %d = hc.sub %x, %mean : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %two = hc.constant dense<2.000000e+00> : tensor<f32>
  %sq = hc.pow %d, %two : (tensor<2x5x8xf32>, tensor<f32>) -> tensor<2x5x8xf32>
  %var = hc.reduce_mean %sq {axes = array<i64: 2>} : tensor<2x5x8xf32> -> tensor<2x5x1xf32>
  %eps = hc.constant dense<9.99999997E-7> : tensor<f32>
  %ve = hc.add %var, %eps : (tensor<2x5x1xf32>, tensor<f32>) -> tensor<2x5x1xf32>
  %s = hc.sqrt %ve : tensor<2x5x1xf32>
  %n = hc.div %d, %s : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %nw = hc.mul %n, %w : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %y = hc.add %nw, %b : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: the variance is taken over a different axis than the mean.
// CHECK-LABEL: func.func @wrong_axes
// CHECK-NOT: hc.layer_norm
// CHECK: hc.sqrt
func.func @wrong_axes(%x: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %mean = hc.reduce_mean %x {axes = array<i64: 2>} : tensor<2x5x8xf32> -> tensor<2x5x1xf32>
  %d = hc.sub %x, %mean : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %sq = hc.mul %d, %d : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %var = hc.reduce_mean %sq {axes = array<i64: 1>} : tensor<2x5x8xf32> -> tensor<2x1x8xf32>
  %eps = hc.constant dense<1.0e-5> : tensor<f32>
  %ve = hc.add %var, %eps : (tensor<2x1x8xf32>, tensor<f32>) -> tensor<2x1x8xf32>
  %s = hc.sqrt %ve : tensor<2x1x8xf32>
  %n = hc.div %d, %s : (tensor<2x5x8xf32>, tensor<2x1x8xf32>) -> tensor<2x5x8xf32>
  return %n : tensor<2x5x8xf32>
}
