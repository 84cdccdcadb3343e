// RUN: hc-opt %s --hc-fuse-modulated-layer-norm | FileCheck %s

// DiT's modulate(norm(x), shift, scale), the norm without affine over D.
// CHECK-LABEL: func.func @fused
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x8xf32>, %[[SH:.*]]: tensor<2x8xf32>, %[[SC:.*]]: tensor<2x8xf32>)
// CHECK-NOT: hc.layer_norm
// CHECK: %[[Y:.*]] = hc.modulated_layer_norm %[[X]], %[[SH]], %[[SC]] {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
// CHECK-NOT: hc.modulate
// CHECK-NEXT: return %[[Y]]
func.func @fused(%x: tensor<2x5x8xf32>, %shift: tensor<2x8xf32>, %scale: tensor<2x8xf32>) -> tensor<2x5x8xf32> {
  %n = hc.layer_norm %x {epsilon = 1.0e-6 : f64, axis = 2 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %y = hc.modulate %n, %shift, %scale : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// Two norms of one x, each with its own modulate: each pair fuses, keeping
// its own epsilon, shift and scale.
// CHECK-LABEL: func.func @two
// CHECK: hc.modulated_layer_norm %arg0, %arg1, %arg2 {epsilon = 9.9999999999999995E-7 : f64}
// CHECK: hc.modulated_layer_norm %arg0, %arg2, %arg1 {epsilon = 1.000000e-05 : f64}
func.func @two(%x: tensor<2x5x8xf32>, %a: tensor<2x8xf32>, %b: tensor<2x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x8xf32>) {
  %n1 = hc.layer_norm %x {epsilon = 1.0e-6 : f64, axis = 2 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %y1 = hc.modulate %n1, %a, %b : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  %n2 = hc.layer_norm %x {epsilon = 1.0e-5 : f64, axis = 2 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %y2 = hc.modulate %n2, %b, %a : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  return %y1, %y2 : tensor<2x5x8xf32>, tensor<2x5x8xf32>
}

// Near misses, each left as it is:
// - the norm has a scale (gamma): its gradient is not the fused op's;
// - the normalized x is read by something else too;
// - the norm runs over N and D (axis 1), not D alone;
// - the modulate's input is not a norm.
// CHECK-LABEL: func.func @near_misses
// CHECK-NOT: hc.modulated_layer_norm
// CHECK: %[[A:.*]] = hc.layer_norm %arg0 scale %arg1
// CHECK-NEXT: hc.modulate %[[A]],
// CHECK-NEXT: %[[B:.*]] = hc.layer_norm %arg0 {axis = 2
// CHECK-NEXT: hc.modulate %[[B]],
// CHECK-NEXT: %[[C:.*]] = hc.layer_norm %arg0 {axis = 1
// CHECK-NEXT: hc.modulate %[[C]],
// CHECK-NEXT: hc.modulate %arg0,
// CHECK-NOT: hc.modulated_layer_norm
func.func @near_misses(%x: tensor<2x5x8xf32>, %g: tensor<8xf32>, %sh: tensor<2x8xf32>, %sc: tensor<2x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>) {
  %a = hc.layer_norm %x scale %g {epsilon = 1.0e-6 : f64, axis = 2 : i64} : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %ya = hc.modulate %a, %sh, %sc : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  %b = hc.layer_norm %x {epsilon = 1.0e-6 : f64, axis = 2 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %yb = hc.modulate %b, %sh, %sc : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  %c = hc.layer_norm %x {epsilon = 1.0e-6 : f64, axis = 1 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %yc = hc.modulate %c, %sh, %sc : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  %yd = hc.modulate %x, %sh, %sc : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  return %ya, %yb, %b, %yc, %yd : tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x8xf32>
}
