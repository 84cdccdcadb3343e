// RUN: hc-opt %s --hc-autodiff | FileCheck %s
// RUN: hc-opt %s --hc-autodiff="freeze=w" | FileCheck %s --check-prefix=FROZEN
// RUN: not hc-opt %s --hc-autodiff="freeze=nope" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// linear -> gelu -> mse: fused backward ops in reverse order; the gradient of
// every trainable parameter is appended as grad:NAME; the frozen one is not.
// CHECK-LABEL: func.func @step
// CHECK-SAME: -> (tensor<f32>, tensor<3x4xf32>, tensor<3xf32>)
// CHECK-SAME: hc.result_names = ["loss", "grad:w", "grad:b"]
// CHECK: %[[H:.*]] = hc.linear %arg0, %arg1, %arg2
// CHECK: %[[G:.*]] = hc.gelu %[[H]]
// CHECK: %[[L:.*]] = hc.mse_loss %[[G]], %arg3
// CHECK: %[[ONE:.*]] = hc.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DG:.*]] = hc.mse_loss_grad %[[ONE]], %[[G]], %arg3
// CHECK: %[[DH:.*]] = hc.gelu_grad %[[DG]], %[[H]]
// CHECK: %[[DW:.*]] = hc.linear_grad_weight %[[DH]], %arg0 : (tensor<2x5x3xf32>, tensor<2x5x4xf32>) -> tensor<3x4xf32>
// CHECK: %[[DB:.*]] = hc.reduce_sum %[[DH]] {axes = array<i64: 0, 1>, keepdims = false}
// CHECK: return %[[L]], %[[DW]], %[[DB]]
// FROZEN-LABEL: func.func @step
// FROZEN-SAME: hc.frozen
// FROZEN-SAME: hc.result_names = ["loss", "grad:b"]
// UNKNOWN: --freeze names 'nope', which is not a parameter of the model
func.func @step(%x: tensor<2x5x4xf32> {hc.input = "x"}, %w: tensor<3x4xf32> {hc.param = "w"},
                %b: tensor<3xf32> {hc.param = "b"}, %t: tensor<2x5x3xf32> {hc.input = "t"},
                %pe: tensor<3xf32> {hc.param = "pe", hc.frozen}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %h = hc.linear %x, %w, %b : (tensor<2x5x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x5x3xf32>
  %g = hc.gelu %h : tensor<2x5x3xf32>
  %l = hc.mse_loss %g, %t : (tensor<2x5x3xf32>, tensor<2x5x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}


// A parameter used twice gets the sum of both adjoints.
// CHECK-LABEL: func.func @fanout
// CHECK: hc.broadcast
// CHECK: %[[A:.*]] = hc.mul %{{.*}}, %arg0
// CHECK: %[[B:.*]] = hc.mul %{{.*}}, %arg0
// CHECK: %[[S:.*]] = hc.add %[[A]], %[[B]]
// CHECK: return %{{.*}}, %[[S]]
func.func @fanout(%p: tensor<4xf32> {hc.param = "p"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %sq = hc.mul %p, %p : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = hc.reduce_sum %sq {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}


// hc.stop_gradient: the loss is sum(p * stop(p)); only the unstopped factor
// sends an adjoint to p, so grad:p = stop(p) * 1 (one mul, no sum of two
// adjoints), and the op is gone afterwards (later passes see its operand).
// CHECK-LABEL: func.func @stopped
// CHECK-NOT: stop_gradient
// CHECK: %[[SQ:.*]] = hc.mul %arg0, %arg0
// CHECK: %[[G:.*]] = hc.mul %{{.*}}, %arg0
// CHECK-NOT: hc.add
// CHECK-NOT: stop_gradient
// CHECK: return %{{.*}}, %[[G]]
func.func @stopped(%p: tensor<4xf32> {hc.param = "p"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %s = hc.stop_gradient %p : tensor<4xf32>
  %sq = hc.mul %p, %s : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = hc.reduce_sum %sq {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
