// The suite must be able to fail: FileCheck against a deliberately wrong
// expectation (out dim 4 where the op produces 3) has to report a mismatch.
// RUN: hc-opt %s | not FileCheck %s
// RUN: hc-opt %s | FileCheck %s --check-prefix=RIGHT

// CHECK: hc.linear {{.*}} -> tensor<2x4xf32>
// RIGHT: hc.linear {{.*}} -> tensor<2x3xf32>
func.func @f(%x: tensor<2x7xf32>, %w: tensor<3x7xf32>) -> tensor<2x3xf32> {
  %0 = hc.linear %x, %w : (tensor<2x7xf32>, tensor<3x7xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
