// RUN: hc-opt %s --hc-fuse-linear --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @linear_with_bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x7xf32>, %[[W:.*]]: tensor<3x7xf32>, %[[B:.*]]: tensor<3xf32>)
// CHECK-NEXT: %[[L:.*]] = hc.linear %[[X]], %[[W]], %[[B]] : (tensor<2x5x7xf32>, tensor<3x7xf32>, tensor<3xf32>) -> tensor<2x5x3xf32>
// CHECK-NEXT: return %[[L]]
func.func @linear_with_bias(%x: tensor<2x5x7xf32>, %w: tensor<3x7xf32>, %b: tensor<3xf32>) -> tensor<2x5x3xf32> {
  %t = hc.transpose %w {perm = array<i64: 1, 0>} : tensor<3x7xf32> -> tensor<7x3xf32>
  %m = hc.matmul %x, %t : (tensor<2x5x7xf32>, tensor<7x3xf32>) -> tensor<2x5x3xf32>
  %y = hc.add %b, %m : (tensor<3xf32>, tensor<2x5x3xf32>) -> tensor<2x5x3xf32>
  return %y : tensor<2x5x3xf32>
}

// -----

// Near miss: the weight is not transposed (x·W, not x·Wᵀ) and the added
// tensor is not a [out] vector: nothing fuses.
// CHECK-LABEL: func.func @near_miss
// CHECK: hc.matmul %arg0, %arg1
// CHECK-NEXT: %[[L:.*]] = hc.linear %arg0, %arg2 : (tensor<5x7xf32>, tensor<3x7xf32>) -> tensor<5x3xf32>
// CHECK-NEXT: hc.add %[[L]], %arg3
func.func @near_miss(%x: tensor<5x7xf32>, %w: tensor<7x3xf32>, %w2: tensor<3x7xf32>, %b: tensor<5x3xf32>) -> (tensor<5x3xf32>, tensor<5x3xf32>) {
  %m = hc.matmul %x, %w : (tensor<5x7xf32>, tensor<7x3xf32>) -> tensor<5x3xf32>
  %t = hc.transpose %w2 {perm = array<i64: 1, 0>} : tensor<3x7xf32> -> tensor<7x3xf32>
  %m2 = hc.matmul %x, %t : (tensor<5x7xf32>, tensor<7x3xf32>) -> tensor<5x3xf32>
  %y = hc.add %m2, %b : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
  return %m, %y : tensor<5x3xf32>, tensor<5x3xf32>
}
