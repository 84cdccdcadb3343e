// RUN: hc-opt %s --hc-fuse-silu | FileCheck %s

// CHECK-LABEL: func.func @silu
// CHECK-NEXT: %[[S:.*]] = hc.silu %arg0 : tensor<4x6xf32>
// CHECK-NEXT: return %[[S]]
func.func @silu(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %s = hc.sigmoid %x : tensor<4x6xf32>
  %y = hc.mul %s, %x : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// Near miss: x·sigmoid(z) with z != x is a gate, not SiLU.
// CHECK-LABEL: func.func @gate
// CHECK-NOT: hc.silu
// CHECK: hc.sigmoid
// CHECK: hc.mul
func.func @gate(%x: tensor<4x6xf32>, %z: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %s = hc.sigmoid %z : tensor<4x6xf32>
  %y = hc.mul %x, %s : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}
