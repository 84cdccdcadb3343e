// RUN: hc-opt %s --hc-fuse-attention | FileCheck %s

// torch 1.13's DiT attention: qkv [B, N, 3·H·Dh] -> heads via Gather, scaled
// scores, softmax, merge. B=2, N=5, H=2, Dh=4.
// CHECK-LABEL: func.func @attention
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0 {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
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

// timm's `q, k, v = qkv.unbind(0)`: one Split of the [3, B, H, N, Dh] permute
// into [1, 1, 1] along dim 0, each piece squeezed (a Reshape).
// CHECK-LABEL: func.func @unbind
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0 {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
// CHECK-NEXT: return %[[A]]
func.func @unbind(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %p#1 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %c = hc.constant dense<5.000000e-01> : tensor<f32>
  %ss = hc.mul %c, %s : (tensor<f32>, tensor<2x2x5x5xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// `qkv[0:1]`-style unit slices of the permute, squeezed, taken in any order;
// scores divided by a constant (1 / 4 here).
// CHECK-LABEL: func.func @unit_slices
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0 {num_heads = 2 : i64, scale = 2.500000e-01 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
// CHECK-NEXT: return %[[A]]
func.func @unit_slices(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %vs = hc.slice %t {starts = array<i64: 2, 0, 0, 0, 0>, sizes = array<i64: 1, 2, 2, 5, 4>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>
  %qs = hc.slice %t {starts = array<i64: 0, 0, 0, 0, 0>, sizes = array<i64: 1, 2, 2, 5, 4>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>
  %ks = hc.slice %t {starts = array<i64: 1, 0, 0, 0, 0>, sizes = array<i64: 1, 2, 2, 5, 4>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>
  %q = hc.reshape %qs : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %ks : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %vs : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %c = hc.constant dense<4.000000e+00> : tensor<1xf32>
  %ss = hc.div %s, %c : (tensor<2x2x5x5xf32>, tensor<1xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// `q, k, v = qkv.chunk(3, dim=-1)` (or torch.split): the packed [B, N, 3·D]
// split along its last dim, each [B, N, D] piece reshaped to [B, N, H, Dh]
// and transposed to [B, H, N, Dh]; the scale on q (q * 0.5) and on the
// scores (* 0.25) multiply.
// CHECK-LABEL: func.func @chunk_last_dim
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0 {num_heads = 2 : i64, scale = 1.250000e-01 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
// CHECK-NEXT: return %[[A]]
func.func @chunk_last_dim(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %p:3 = hc.split %qkv {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : tensor<2x5x24xf32> -> tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>
  %qr = hc.reshape %p#0 : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %kr = hc.reshape %p#1 : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %vr = hc.reshape %p#2 : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %q = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %h = hc.constant dense<5.000000e-01> : tensor<f32>
  %qh = hc.mul %q, %h : (tensor<2x2x5x4xf32>, tensor<f32>) -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %c = hc.constant dense<2.500000e-01> : tensor<f32>
  %ss = hc.mul %s, %c : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// The same split written as three Slices of the last dim (what FuseChunk
// leaves when it cannot see all pieces), k transposed straight to
// [B, H, Dh, N] by one [0, 2, 3, 1] permute and scaled there (* 0.25).
// CHECK-LABEL: func.func @split_slices
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0 {num_heads = 2 : i64, scale = 2.500000e-01 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
// CHECK-NEXT: return %[[A]]
func.func @split_slices(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %qp = hc.slice %qkv {starts = array<i64: 0, 0, 0>, sizes = array<i64: 2, 5, 8>, steps = array<i64: 1, 1, 1>} : tensor<2x5x24xf32> -> tensor<2x5x8xf32>
  %kp = hc.slice %qkv {starts = array<i64: 0, 0, 8>, sizes = array<i64: 2, 5, 8>, steps = array<i64: 1, 1, 1>} : tensor<2x5x24xf32> -> tensor<2x5x8xf32>
  %vp = hc.slice %qkv {starts = array<i64: 0, 0, 16>, sizes = array<i64: 2, 5, 8>, steps = array<i64: 1, 1, 1>} : tensor<2x5x24xf32> -> tensor<2x5x8xf32>
  %qr = hc.reshape %qp : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %kr = hc.reshape %kp : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %vr = hc.reshape %vp : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %q = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %kr {perm = array<i64: 0, 2, 3, 1>} : tensor<2x5x2x4xf32> -> tensor<2x2x4x5xf32>
  %v = hc.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %c = hc.constant dense<2.500000e-01> : tensor<f32>
  %kts = hc.mul %kt, %c : (tensor<2x2x4x5xf32>, tensor<f32>) -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kts : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// torch's SDPA as the TorchScript exporter writes it (opset 14-17): after the
// importer folds 1 / Sqrt(Cast(Shape(q)[-1:])), q and kᵀ are each multiplied
// by √scale, a [1] constant (here √(1/4) = 0.5; the fused scale is the
// product 0.25).
// CHECK-LABEL: func.func @sdpa
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0 {num_heads = 2 : i64, scale = 2.500000e-01 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
// CHECK-NEXT: return %[[A]]
func.func @sdpa(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %p#1 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %sq = hc.constant dense<5.000000e-01> : tensor<1xf32>
  %qs = hc.mul %q, %sq : (tensor<2x2x5x4xf32>, tensor<1xf32>) -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %sk = hc.constant dense<5.000000e-01> : tensor<1xf32>
  %kts = hc.mul %kt, %sk : (tensor<2x2x4x5xf32>, tensor<1xf32>) -> tensor<2x2x4x5xf32>
  %s = hc.matmul %qs, %kts : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// √scale on k before its transpose instead (k * 0.5, q * 0.5).
// CHECK-LABEL: func.func @scale_on_k
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0 {num_heads = 2 : i64, scale = 2.500000e-01 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
// CHECK-NEXT: return %[[A]]
func.func @scale_on_k(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %p#1 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %sq = hc.constant dense<5.000000e-01> : tensor<f32>
  %qs = hc.mul %sq, %q : (tensor<f32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ks = hc.mul %k, %sq : (tensor<2x2x5x4xf32>, tensor<f32>) -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %ks {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %qs, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: a mask added to the scores (softmax(q·kᵀ·s + mask)) is not what
// hc.attention computes: left alone.
// CHECK-LABEL: func.func @masked
// CHECK-NOT: hc.attention
// CHECK: hc.add
// CHECK: hc.softmax
func.func @masked(%qkv: tensor<2x5x24xf32>, %mask: tensor<5x5xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %p#1 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %c = hc.constant dense<5.000000e-01> : tensor<f32>
  %ss = hc.mul %s, %c : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
  %sm = hc.add %ss, %mask : (tensor<2x2x5x5xf32>, tensor<5x5xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %sm {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: softmax over the query axis (2), not the key axis.
// CHECK-LABEL: func.func @softmax_query_axis
// CHECK-NOT: hc.attention
// CHECK: hc.softmax %{{.*}} {axis = 2 : i64}
func.func @softmax_query_axis(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %p#1 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %c = hc.constant dense<5.000000e-01> : tensor<f32>
  %ss = hc.mul %s, %c : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %ss {axis = 2 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: the scale is a run-time value (an argument), not a constant.
// CHECK-LABEL: func.func @runtime_scale
// CHECK-NOT: hc.attention
// CHECK: hc.mul %{{.*}}, %arg1
// CHECK: hc.softmax
func.func @runtime_scale(%qkv: tensor<2x5x24xf32>, %scale: tensor<f32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %p#1 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %ss = hc.mul %s, %scale : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: SDPA's √scale on q is a run-time value while kᵀ's is constant.
// CHECK-LABEL: func.func @runtime_scale_on_q
// CHECK-NOT: hc.attention
// CHECK: hc.mul %{{.*}}, %arg1
// CHECK: hc.softmax
func.func @runtime_scale_on_q(%qkv: tensor<2x5x24xf32>, %sq: tensor<1xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %p#1 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %qs = hc.mul %q, %sq : (tensor<2x2x5x4xf32>, tensor<1xf32>) -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %sk = hc.constant dense<5.000000e-01> : tensor<1xf32>
  %kts = hc.mul %kt, %sk : (tensor<2x2x4x5xf32>, tensor<1xf32>) -> tensor<2x2x4x5xf32>
  %s = hc.matmul %qs, %kts : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: a per-head (non-scalar) constant scale is not one scale.
// CHECK-LABEL: func.func @per_head_scale
// CHECK-NOT: hc.attention
// CHECK: hc.softmax
func.func @per_head_scale(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %p#1 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %c = hc.constant dense<[[[[5.000000e-01]], [[2.500000e-01]]]]> : tensor<1x2x1x1xf32>
  %ss = hc.mul %s, %c : (tensor<2x2x5x5xf32>, tensor<1x2x1x1xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: the chunk pieces taken out of order (q from the second third,
// k from the first) are another layout than hc.attention's.
// CHECK-LABEL: func.func @chunk_out_of_order
// CHECK-NOT: hc.attention
// CHECK: hc.softmax
func.func @chunk_out_of_order(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %p:3 = hc.split %qkv {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : tensor<2x5x24xf32> -> tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>
  %qr = hc.reshape %p#1 : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %kr = hc.reshape %p#0 : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %vr = hc.reshape %p#2 : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %q = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x5x4xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// torch's dynamo exporter (opset 18+) writes SDPA's kᵀ through 3-D:
// reshape(transpose(reshape(k, [B·H, N, Dh]), [0, 2, 1]), [B, H, Dh, N]),
// the heads taken by unit Slices + squeeze, √scale on q and on kᵀ.
// CHECK-LABEL: func.func @sdpa_dynamo
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0 {num_heads = 2 : i64, scale = 2.500000e-01 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
// CHECK-NEXT: return %[[A]]
func.func @sdpa_dynamo(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %k = hc.reshape %p#1 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %sq = hc.constant dense<5.000000e-01> : tensor<1xf32>
  %qs = hc.mul %q, %sq : (tensor<2x2x5x4xf32>, tensor<1xf32>) -> tensor<2x2x5x4xf32>
  %kf = hc.reshape %k : tensor<2x2x5x4xf32> -> tensor<4x5x4xf32>
  %kft = hc.transpose %kf {perm = array<i64: 0, 2, 1>} : tensor<4x5x4xf32> -> tensor<4x4x5xf32>
  %kt = hc.reshape %kft : tensor<4x4x5xf32> -> tensor<2x2x4x5xf32>
  %sk = hc.constant dense<5.000000e-01> : tensor<1xf32>
  %kts = hc.mul %kt, %sk : (tensor<2x2x4x5xf32>, tensor<1xf32>) -> tensor<2x2x4x5xf32>
  %s = hc.matmul %qs, %kts : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: the flattened "kᵀ" is piece 0 (q·qᵀ), not k: left unfused.
// CHECK-LABEL: func.func @sdpa_dynamo_q_as_k
// CHECK-NOT: hc.attention
// CHECK: hc.softmax
func.func @sdpa_dynamo_q_as_k(%qkv: tensor<2x5x24xf32>) -> tensor<2x5x8xf32> {
  %r = hc.reshape %qkv : tensor<2x5x24xf32> -> tensor<2x5x3x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x5x3x2x4xf32> -> tensor<3x2x2x5x4xf32>
  %p:3 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} : tensor<3x2x2x5x4xf32> -> tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>, tensor<1x2x2x5x4xf32>
  %q = hc.reshape %p#0 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %v = hc.reshape %p#2 : tensor<1x2x2x5x4xf32> -> tensor<2x2x5x4xf32>
  %kf = hc.reshape %q : tensor<2x2x5x4xf32> -> tensor<4x5x4xf32>
  %kft = hc.transpose %kf {perm = array<i64: 0, 2, 1>} : tensor<4x5x4xf32> -> tensor<4x4x5xf32>
  %kt = hc.reshape %kft : tensor<4x4x5xf32> -> tensor<2x2x4x5xf32>
  %s = hc.matmul %q, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %pr = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x5xf32>
  %o = hc.matmul %pr, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// ---- cross-attention: q [B, N, D] of its own, k and v [B, L, D]; N = 5, L = 3

// PixArt's cross-attention, torch 1.13 (index): q from its own linear, k and
// v the two heads of the packed kv [B, L, 2·H·Dh] -> two views of kv.
// CHECK-LABEL: func.func @cross_index
// CHECK-NEXT: %[[KV:.*]]:2 = hc.split %arg1 {axis = 2 : i64, sizes = array<i64: 8, 8>} : tensor<2x3x16xf32> -> tensor<2x3x8xf32>, tensor<2x3x8xf32>
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0, %[[KV]]#0, %[[KV]]#1 {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
// CHECK-NEXT: return %[[A]]
func.func @cross_index(%q: tensor<2x5x8xf32>, %kv: tensor<2x3x16xf32>) -> tensor<2x5x8xf32> {
  %qr = hc.reshape %q : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %r = hc.reshape %kv : tensor<2x3x16xf32> -> tensor<2x3x2x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x3x2x2x4xf32> -> tensor<2x2x2x3x4xf32>
  %i0 = hc.constant dense<0> : tensor<i64>
  %k = hc.gather %t[%i0] {axis = 0 : i64} : (tensor<2x2x2x3x4xf32>, tensor<i64>) -> tensor<2x2x3x4xf32>
  %i1 = hc.constant dense<1> : tensor<i64>
  %v = hc.gather %t[%i1] {axis = 0 : i64} : (tensor<2x2x2x3x4xf32>, tensor<i64>) -> tensor<2x2x3x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %s = hc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %c = hc.constant dense<5.000000e-01> : tensor<f32>
  %ss = hc.mul %s, %c : (tensor<2x2x5x3xf32>, tensor<f32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// timm-style unbind of the kv heads (a Split into [1, 1] along dim 0) and
// SDPA's √scale on q and on kᵀ.
// CHECK-LABEL: func.func @cross_unbind_sdpa
// CHECK-NEXT: %[[KV:.*]]:2 = hc.split %arg1 {axis = 2 : i64, sizes = array<i64: 8, 8>}
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0, %[[KV]]#0, %[[KV]]#1 {num_heads = 2 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
func.func @cross_unbind_sdpa(%q: tensor<2x5x8xf32>, %kv: tensor<2x3x16xf32>) -> tensor<2x5x8xf32> {
  %qr = hc.reshape %q : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %r = hc.reshape %kv : tensor<2x3x16xf32> -> tensor<2x3x2x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x3x2x2x4xf32> -> tensor<2x2x2x3x4xf32>
  %p2:2 = hc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1>} : tensor<2x2x2x3x4xf32> -> tensor<1x2x2x3x4xf32>, tensor<1x2x2x3x4xf32>
  %k = hc.reshape %p2#0 : tensor<1x2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %v = hc.reshape %p2#1 : tensor<1x2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %sq = hc.constant dense<5.000000e-01> : tensor<1xf32>
  %qs = hc.mul %qh, %sq : (tensor<2x2x5x4xf32>, tensor<1xf32>) -> tensor<2x2x5x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %kts = hc.mul %kt, %sq : (tensor<2x2x4x3xf32>, tensor<1xf32>) -> tensor<2x2x4x3xf32>
  %s = hc.matmul %qs, %kts : (tensor<2x2x5x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// diffusers-style separate to_k and to_v: k and v tensors of their own.
// CHECK-LABEL: func.func @cross_separate
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0, %arg1, %arg2 {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>)
// CHECK-NEXT: return %[[A]]
func.func @cross_separate(%q: tensor<2x5x8xf32>, %k0: tensor<2x3x8xf32>, %v0: tensor<2x3x8xf32>) -> tensor<2x5x8xf32> {
  %qr = hc.reshape %q : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %kr = hc.reshape %k0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %kt = hc.transpose %kr {perm = array<i64: 0, 2, 3, 1>} : tensor<2x3x2x4xf32> -> tensor<2x2x4x3xf32>
  %vr = hc.reshape %v0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %v = hc.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %s = hc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %c = hc.constant dense<5.000000e-01> : tensor<f32>
  %ss = hc.mul %s, %c : (tensor<2x2x5x3xf32>, tensor<f32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// k, v = kv.chunk(2, -1): halves of the packed kv along its last dim.
// CHECK-LABEL: func.func @cross_chunk_kv
// CHECK: hc.split %arg1 {axis = 2 : i64, sizes = array<i64: 8, 8>}
// CHECK: hc.attention %arg0, %{{.*}}#0, %{{.*}}#1 {num_heads = 2 : i64, scale = 5.000000e-01 : f64}
// CHECK-NOT: hc.softmax
func.func @cross_chunk_kv(%q: tensor<2x5x8xf32>, %kv: tensor<2x3x16xf32>) -> tensor<2x5x8xf32> {
  %qr = hc.reshape %q : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %h:2 = hc.split %kv {axis = 2 : i64, sizes = array<i64: 8, 8>} : tensor<2x3x16xf32> -> tensor<2x3x8xf32>, tensor<2x3x8xf32>
  %kr = hc.reshape %h#0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %k = hc.transpose %kr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %vr = hc.reshape %h#1 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %v = hc.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %s = hc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %c = hc.constant dense<5.000000e-01> : tensor<f32>
  %ss = hc.mul %s, %c : (tensor<2x2x5x3xf32>, tensor<f32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %ss {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// The dynamo exporter's SDPA: kv heads by unit slices + squeeze, kᵀ through
// the [B·H, L, Dh] flattening, √scale on q and on kᵀ.
// CHECK-LABEL: func.func @cross_dynamo
// CHECK-NEXT: %[[KV:.*]]:2 = hc.split %arg1 {axis = 2 : i64, sizes = array<i64: 8, 8>}
// CHECK-NEXT: %[[A:[^,]*]], %{{.*}} = hc.attention %arg0, %[[KV]]#0, %[[KV]]#1 {num_heads = 2 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
func.func @cross_dynamo(%q: tensor<2x5x8xf32>, %kv: tensor<2x3x16xf32>) -> tensor<2x5x8xf32> {
  %qr = hc.reshape %q : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %r = hc.reshape %kv : tensor<2x3x16xf32> -> tensor<2x3x2x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x3x2x2x4xf32> -> tensor<2x2x2x3x4xf32>
  %s0 = hc.slice %t {starts = array<i64: 0, 0, 0, 0, 0>, sizes = array<i64: 1, 2, 2, 3, 4>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<2x2x2x3x4xf32> -> tensor<1x2x2x3x4xf32>
  %s1 = hc.slice %t {starts = array<i64: 1, 0, 0, 0, 0>, sizes = array<i64: 1, 2, 2, 3, 4>, steps = array<i64: 1, 1, 1, 1, 1>} : tensor<2x2x2x3x4xf32> -> tensor<1x2x2x3x4xf32>
  %k = hc.reshape %s0 : tensor<1x2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %v = hc.reshape %s1 : tensor<1x2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %sq = hc.constant dense<5.000000e-01> : tensor<1xf32>
  %qs = hc.mul %qh, %sq : (tensor<2x2x5x4xf32>, tensor<1xf32>) -> tensor<2x2x5x4xf32>
  %kf = hc.reshape %k : tensor<2x2x3x4xf32> -> tensor<4x3x4xf32>
  %kft = hc.transpose %kf {perm = array<i64: 0, 2, 1>} : tensor<4x3x4xf32> -> tensor<4x4x3xf32>
  %kt = hc.reshape %kft : tensor<4x4x3xf32> -> tensor<2x2x4x3xf32>
  %kts = hc.mul %kt, %sq : (tensor<2x2x4x3xf32>, tensor<1xf32>) -> tensor<2x2x4x3xf32>
  %s = hc.matmul %qs, %kts : (tensor<2x2x5x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: the kv heads swapped (softmax(q·vᵀ)·k) are not this layout.
// CHECK-LABEL: func.func @cross_swapped_kv
// CHECK-NOT: hc.attention
// CHECK: hc.softmax
func.func @cross_swapped_kv(%q: tensor<2x5x8xf32>, %kv: tensor<2x3x16xf32>) -> tensor<2x5x8xf32> {
  %qr = hc.reshape %q : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %r = hc.reshape %kv : tensor<2x3x16xf32> -> tensor<2x3x2x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x3x2x2x4xf32> -> tensor<2x2x2x3x4xf32>
  %i0 = hc.constant dense<0> : tensor<i64>
  %v = hc.gather %t[%i0] {axis = 0 : i64} : (tensor<2x2x2x3x4xf32>, tensor<i64>) -> tensor<2x2x3x4xf32>
  %i1 = hc.constant dense<1> : tensor<i64>
  %k = hc.gather %t[%i1] {axis = 0 : i64} : (tensor<2x2x2x3x4xf32>, tensor<i64>) -> tensor<2x2x3x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %s = hc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: q is a third of a packed qkv while k and v are tensors of their
// own: neither form.
// CHECK-LABEL: func.func @cross_q_from_qkv
// CHECK-NOT: hc.attention
// CHECK: hc.softmax
func.func @cross_q_from_qkv(%qkv: tensor<2x5x24xf32>, %k0: tensor<2x3x8xf32>, %v0: tensor<2x3x8xf32>) -> tensor<2x5x8xf32> {
  %h:3 = hc.split %qkv {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : tensor<2x5x24xf32> -> tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>
  %qr = hc.reshape %h#0 : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %kr = hc.reshape %k0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %kt = hc.transpose %kr {perm = array<i64: 0, 2, 3, 1>} : tensor<2x3x2x4xf32> -> tensor<2x2x4x3xf32>
  %vr = hc.reshape %v0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %v = hc.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %s = hc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: one context for the whole batch (kv [1, L, 2D] broadcast by the
// matmuls) is not hc.attention's per-sample k and v.
// CHECK-LABEL: func.func @cross_broadcast_kv
// CHECK-NOT: hc.attention
// CHECK: hc.softmax
func.func @cross_broadcast_kv(%q: tensor<2x5x8xf32>, %kv: tensor<1x3x16xf32>) -> tensor<2x5x8xf32> {
  %qr = hc.reshape %q : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %r = hc.reshape %kv : tensor<1x3x16xf32> -> tensor<1x3x2x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<1x3x2x2x4xf32> -> tensor<2x1x2x3x4xf32>
  %i0 = hc.constant dense<0> : tensor<i64>
  %k = hc.gather %t[%i0] {axis = 0 : i64} : (tensor<2x1x2x3x4xf32>, tensor<i64>) -> tensor<1x2x3x4xf32>
  %i1 = hc.constant dense<1> : tensor<i64>
  %v = hc.gather %t[%i1] {axis = 0 : i64} : (tensor<2x1x2x3x4xf32>, tensor<i64>) -> tensor<1x2x3x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x3x4xf32> -> tensor<1x2x4x3xf32>
  %s = hc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<1x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<1x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: a mask added to the [B, H, N, L] scores (PixArt's padded text).
// CHECK-LABEL: func.func @cross_masked
// CHECK-NOT: hc.attention
// CHECK: hc.add
// CHECK: hc.softmax
func.func @cross_masked(%q: tensor<2x5x8xf32>, %kv: tensor<2x3x16xf32>, %mask: tensor<2x1x1x3xf32>) -> tensor<2x5x8xf32> {
  %qr = hc.reshape %q : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %r = hc.reshape %kv : tensor<2x3x16xf32> -> tensor<2x3x2x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x3x2x2x4xf32> -> tensor<2x2x2x3x4xf32>
  %i0 = hc.constant dense<0> : tensor<i64>
  %k = hc.gather %t[%i0] {axis = 0 : i64} : (tensor<2x2x2x3x4xf32>, tensor<i64>) -> tensor<2x2x3x4xf32>
  %i1 = hc.constant dense<1> : tensor<i64>
  %v = hc.gather %t[%i1] {axis = 0 : i64} : (tensor<2x2x2x3x4xf32>, tensor<i64>) -> tensor<2x2x3x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %s = hc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %sm = hc.add %s, %mask : (tensor<2x2x5x3xf32>, tensor<2x1x1x3xf32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %sm {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Near miss: k a half of the packed kv, v a tensor of its own.
// CHECK-LABEL: func.func @cross_mixed_kv
// CHECK-NOT: hc.attention
// CHECK: hc.softmax
func.func @cross_mixed_kv(%q: tensor<2x5x8xf32>, %kv: tensor<2x3x16xf32>, %v0: tensor<2x3x8xf32>) -> tensor<2x5x8xf32> {
  %qr = hc.reshape %q : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qh = hc.transpose %qr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %r = hc.reshape %kv : tensor<2x3x16xf32> -> tensor<2x3x2x2x4xf32>
  %t = hc.transpose %r {perm = array<i64: 2, 0, 3, 1, 4>} : tensor<2x3x2x2x4xf32> -> tensor<2x2x2x3x4xf32>
  %i0 = hc.constant dense<0> : tensor<i64>
  %k = hc.gather %t[%i0] {axis = 0 : i64} : (tensor<2x2x2x3x4xf32>, tensor<i64>) -> tensor<2x2x3x4xf32>
  %vr = hc.reshape %v0 : tensor<2x3x8xf32> -> tensor<2x3x2x4xf32>
  %v = hc.transpose %vr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x2x4xf32> -> tensor<2x2x3x4xf32>
  %kt = hc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x3x4xf32> -> tensor<2x2x4x3xf32>
  %s = hc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x5x3xf32>
  %p = hc.softmax %s {axis = 3 : i64} : tensor<2x2x5x3xf32>
  %o = hc.matmul %p, %v : (tensor<2x2x5x3xf32>, tensor<2x2x3x4xf32>) -> tensor<2x2x5x4xf32>
  %ot = hc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x5x4xf32> -> tensor<2x5x2x4xf32>
  %y = hc.reshape %ot : tensor<2x5x2x4xf32> -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}
