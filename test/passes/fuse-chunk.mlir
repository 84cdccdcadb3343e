// RUN: hc-opt %s --hc-fuse-chunk | FileCheck %s

// chunk(3) as three slices -> one split.
// CHECK-LABEL: func.func @chunk
// CHECK-NEXT: %[[S:.*]]:3 = hc.split %arg0 {axis = 1 : i64, sizes = array<i64: 4, 4, 4>} : tensor<2x12xf32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT: return %[[S]]#2, %[[S]]#0, %[[S]]#1
func.func @chunk(%v: tensor<2x12xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %c = hc.slice %v {starts = array<i64: 0, 8>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x12xf32> -> tensor<2x4xf32>
  %a = hc.slice %v {starts = array<i64: 0, 0>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x12xf32> -> tensor<2x4xf32>
  %b = hc.slice %v {starts = array<i64: 0, 4>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x12xf32> -> tensor<2x4xf32>
  return %c, %a, %b : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// Near miss: the slices leave a gap (8..11 missing): no split.
// CHECK-LABEL: func.func @gap
// CHECK-NOT: hc.split
// CHECK-COUNT-2: hc.slice
func.func @gap(%v: tensor<2x12xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %a = hc.slice %v {starts = array<i64: 0, 0>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x12xf32> -> tensor<2x4xf32>
  %b = hc.slice %v {starts = array<i64: 0, 4>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x12xf32> -> tensor<2x4xf32>
  return %a, %b : tensor<2x4xf32>, tensor<2x4xf32>
}
