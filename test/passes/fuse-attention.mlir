// RUN: hc-opt %s --hc-fuse-attention | FileCheck %s

// torch 1.13's DiT attention: qkv [B, N, 3·H·Dh] -> heads via Gather, scaled
// scores, softmax, merge. B=2, N=5, H=2, Dh=4.
// CHECK-LABEL: func.func @attention
// CHECK-NEXT: %[[A:.*]] = hc.attention %arg0 {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<2x5x24xf32>) -> tensor<2x5x8xf32>
// CHECK-NEXT: return %[[A]]
func.func @attention(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %i0 = hc.constant dense<0> : tensor<i64>
  %q = hc.gather %t[%i0] {axis = 0 : i64} : (tensor<3x2x2x5x4xf32>, tensor<i64>) -> tensor<2x2x5x4xf32>
  %i1 = hc.constant dense<1> : tensor<i64>
  %k = hc.gather %t[%i1] {axis = 0 : i64} : (tensor<3x2x2x5x4xf32>, tensor<i64>) -> tensor<2x2x5x4xf32>
  %i2 = hc.constant dense<2> : tensor<i64>
  %v = hc.gather %t[%i2] {axis = 0 : i64} : (tensor<3x2x2x5x4xf32>, tensor<i64>) -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %c = hc.constant dense<5.000000e-01> : tensor<f32>
  %ss = hc.mul %s, %c : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
  %p = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: k and v swapped (softmax(q·vᵀ)·k) is not attention over this
// qkv layout: left alone.
// CHECK-LABEL: func.func @swapped
// CHECK-NOT: hc.attention
// CHECK: hc.softmax
func.func @swapped(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %i0 = hc.constant dense<0> : tensor<i64>
  %q = hc.gather %t[%i0] {axis = 0 : i64} : (tensor<3x2x2x5x4xf32>, tensor<i64>) -> tensor<2x2x5x4xf32>
  %i1 = hc.constant dense<1> : tensor<i64>
  %k = hc.gather %t[%i1] {axis = 0 : i64} : (tensor<3x2x2x5x4xf32>, tensor<i64>) -> tensor<2x2x5x4xf32>
  %i2 = hc.constant dense<2> : tensor<i64>
  %v = hc.gather %t[%i2] {axis = 0 : i64} : (tensor<3x2x2x5x4xf32>, tensor<i64>) -> tensor<2x2x5x4xf32>
  %vt = hc.transpose %v {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %vt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %c = hc.constant dense<5.000000e-01> : tensor<f32>
  %ss = hc.mul %s, %c : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
  %p = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %p, %k : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}
