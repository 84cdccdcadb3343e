// RUN: hc-opt %s | FileCheck %s
// RUN: hc-opt %s | hc-opt | FileCheck %s

// CHECK-LABEL: func.func @linear_3d
// CHECK: hc.linear %arg0, %arg1, %arg2 : (tensor<2x5x7xf32>, tensor<3x7xf32>, tensor<3xf32>) -> tensor<2x5x3xf32>
func.func @linear_3d(%x: tensor<2x5x7xf32>, %w: tensor<3x7xf32>, %b: tensor<3xf32>) -> tensor<2x5x3xf32> {
  %0 = hc.linear %x, %w, %b : (tensor<2x5x7xf32>, tensor<3x7xf32>, tensor<3xf32>) -> tensor<2x5x3xf32>
  return %0 : tensor<2x5x3xf32>
}

// CHECK-LABEL: func.func @linear_no_bias
// CHECK: hc.linear %arg0, %arg1 : (tensor<4x7xf64>, tensor<3x7xf64>) -> tensor<4x3xf64>
func.func @linear_no_bias(%x: tensor<4x7xf64>, %w: tensor<3x7xf64>) -> tensor<4x3xf64> {
  %0 = hc.linear %x, %w : (tensor<4x7xf64>, tensor<3x7xf64>) -> tensor<4x3xf64>
  return %0 : tensor<4x3xf64>
}

// Dynamic batch verifies against static feature dims.
// CHECK-LABEL: func.func @linear_dynamic
// CHECK: hc.linear %arg0, %arg1 : (tensor<?x7xf32>, tensor<3x7xf32>) -> tensor<?x3xf32>
func.func @linear_dynamic(%x: tensor<?x7xf32>, %w: tensor<3x7xf32>) -> tensor<?x3xf32> {
  %0 = hc.linear %x, %w : (tensor<?x7xf32>, tensor<3x7xf32>) -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
