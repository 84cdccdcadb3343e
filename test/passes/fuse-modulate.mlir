// RUN: hc-opt %s --hc-fuse-modulate | FileCheck %s

// x·(1 + scale) + shift with [B, D] chunks reshaped to [B, 1, D].
// CHECK-LABEL: func.func @modulate
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x8xf32>, %[[SH:.*]]: tensor<2x8xf32>, %[[SC:.*]]: tensor<2x8xf32>)
// CHECK: %[[M:.*]] = hc.modulate %[[X]], %[[SH]], %[[SC]] : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
// CHECK-NEXT: return %[[M]]
func.func @modulate(%x: tensor<2x5x8xf32>, %shift: tensor<2x8xf32>, %scale: tensor<2x8xf32>) -> tensor<2x5x8xf32> {
  %sc = hc.reshape %scale : tensor<2x8xf32> -> tensor<2x1x8xf32>
  %one = hc.constant dense<1.000000e+00> : tensor<f32>
  %p = hc.add %sc, %one : (tensor<2x1x8xf32>, tensor<f32>) -> tensor<2x1x8xf32>
  %m = hc.mul %x, %p : (tensor<2x5x8xf32>, tensor<2x1x8xf32>) -> tensor<2x5x8xf32>
  %sh = hc.reshape %shift : tensor<2x8xf32> -> tensor<2x1x8xf32>
  %y = hc.add %m, %sh : (tensor<2x5x8xf32>, tensor<2x1x8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near misses: x·(2 + scale) + shift, and a gated residual x + gate·y.
// CHECK-LABEL: func.func @near_miss
// CHECK-NOT: hc.modulate
func.func @near_miss(%x: tensor<2x5x8xf32>, %sh: tensor<2x1x8xf32>, %sc: tensor<2x1x8xf32>, %y: tensor<2x5x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x8xf32>) {
  %two = hc.constant dense<2.000000e+00> : tensor<f32>
  %p = hc.add %sc, %two : (tensor<2x1x8xf32>, tensor<f32>) -> tensor<2x1x8xf32>
  %m = hc.mul %x, %p : (tensor<2x5x8xf32>, tensor<2x1x8xf32>) -> tensor<2x5x8xf32>
  %r = hc.add %m, %sh : (tensor<2x5x8xf32>, tensor<2x1x8xf32>) -> tensor<2x5x8xf32>
  %g = hc.mul %sc, %y : (tensor<2x1x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %res = hc.add %x, %g : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return %r, %res : tensor<2x5x8xf32>, tensor<2x5x8xf32>
}
