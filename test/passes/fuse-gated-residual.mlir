// RUN: hc-opt %s --hc-fuse-gated-residual --split-input-file | FileCheck %s

// DiT's x + gate.unsqueeze(1) * attn(x): the reshape to [B, 1, D] is looked
// through, the product is gone.
// CHECK-LABEL: func.func @dit_residual
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x7xf32>, %[[G:.*]]: tensor<2x7xf32>, %[[H:.*]]: tensor<2x5x7xf32>)
// CHECK-NEXT: %[[Y:.*]] = hc.gated_residual %[[X]], %[[G]], %[[H]] : (tensor<2x5x7xf32>, tensor<2x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
// CHECK-NEXT: return %[[Y]]
func.func @dit_residual(%x: tensor<2x5x7xf32>, %g: tensor<2x7xf32>, %h: tensor<2x5x7xf32>) -> tensor<2x5x7xf32> {
  %g3 = hc.reshape %g : tensor<2x7xf32> -> tensor<2x1x7xf32>
  %p = hc.mul %g3, %h : (tensor<2x1x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  %y = hc.add %x, %p : (tensor<2x5x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  return %y : tensor<2x5x7xf32>
}

// -----

// The other operand orders, and a gate that is [B, 1, D] from the start
// (a reshape to [B, D] is made).
// CHECK-LABEL: func.func @swapped
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x7xf32>, %[[G:.*]]: tensor<2x1x7xf32>, %[[H:.*]]: tensor<2x5x7xf32>)
// CHECK-NEXT: %[[G2:.*]] = hc.reshape %[[G]] : tensor<2x1x7xf32> -> tensor<2x7xf32>
// CHECK-NEXT: %[[Y:.*]] = hc.gated_residual %[[X]], %[[G2]], %[[H]]
// CHECK-NEXT: return %[[Y]]
func.func @swapped(%x: tensor<2x5x7xf32>, %g: tensor<2x1x7xf32>, %h: tensor<2x5x7xf32>) -> tensor<2x5x7xf32> {
  %p = hc.mul %h, %g : (tensor<2x5x7xf32>, tensor<2x1x7xf32>) -> tensor<2x5x7xf32>
  %y = hc.add %p, %x : (tensor<2x5x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  return %y : tensor<2x5x7xf32>
}

// -----

// Near misses: the product has another use; the gate is per token
// ([B, N, D]), not per sample; the gate is a [1, 1, D] vector. Nothing fuses.
// CHECK-LABEL: func.func @near_misses
// CHECK-NOT: hc.gated_residual
// CHECK-COUNT-3: hc.add
func.func @near_misses(%x: tensor<2x5x7xf32>, %g: tensor<2x1x7xf32>, %t: tensor<2x5x7xf32>, %v: tensor<1x1x7xf32>, %h: tensor<2x5x7xf32>) -> (tensor<2x5x7xf32>, tensor<2x5x7xf32>, tensor<2x5x7xf32>, tensor<2x5x7xf32>) {
  %p = hc.mul %g, %h : (tensor<2x1x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  %y = hc.add %x, %p : (tensor<2x5x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  %q = hc.mul %t, %h : (tensor<2x5x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  %z = hc.add %x, %q : (tensor<2x5x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  %r = hc.mul %v, %h : (tensor<1x1x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  %w = hc.add %x, %r : (tensor<2x5x7xf32>, tensor<2x5x7xf32>) -> tensor<2x5x7xf32>
  return %y, %z, %w, %p : tensor<2x5x7xf32>, tensor<2x5x7xf32>, tensor<2x5x7xf32>, tensor<2x5x7xf32>
}
