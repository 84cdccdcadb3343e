// RUN: hc-opt %s --hc-autodiff -verify-diagnostics -split-input-file
// RUN: not hc-opt %s --hc-autodiff="freeze=q" -split-input-file 2>&1 | FileCheck %s --check-prefix=FREEZE
// FREEZE: error: --freeze leaves no parameter to train: every parameter of the model is frozen

func.func @not_scalar(%p: tensor<4xf32> {hc.param = "p"}) -> tensor<4xf32>
    attributes {hc.result_names = ["loss"]} {
  // expected-error @-2 {{the loss (first result) must be a float scalar}}
  return %p : tensor<4xf32>
}

// -----

func.func @no_rule(%p: tensor<4xf32> {hc.param = "p"}, %s: tensor<i64> {hc.input = "s"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %r = hc.random_uniform %s, %s, %s {op_id = 256 : i64, low = 0.0 : f64, high = 1.0 : f64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4xf32>
  %m = hc.mul %p, %r : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = hc.constant dense<[1, 2, 3, 0]> : tensor<4xi64>
  // expected-error @+1 {{no gradient rule for 'hc.scatter_add'}}
  %e = hc.scatter_add %m[%c] {axis = 0 : i64} : (tensor<4xf32>, tensor<4xi64>) -> tensor<4xf32>
  %l = hc.reduce_sum %e {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Nothing left to train: a step that updates no parameter is refused.
func.func @all_frozen(%p: tensor<4xf32> {hc.param = "p", hc.frozen}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  // expected-error @-2 {{the model has no trainable parameter}}
  %l = hc.reduce_sum %p {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// With freeze=q (second RUN line) this model has nothing left to train.
func.func @freeze_all(%q: tensor<4xf32> {hc.param = "q"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %l = hc.reduce_sum %q {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
