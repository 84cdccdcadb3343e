// RUN: hc-opt %s --hc-extract-sampler -split-input-file | FileCheck %s
// Refusals: extract-sampler-invalid.mlir.

// Learned sigma: the loss reads channels [0, 2) of a 4-channel output; the
// cut keeps all 4, and the noise input and the loss are gone.
// CHECK-LABEL: func.func @learned_sigma
// CHECK-SAME: (%[[X:.*]]: tensor<2x2x4x4xf32> {hc.input = "x_t"}, %[[P:.*]]: tensor<2x4x4x4xf32> {hc.param = "w"})
// CHECK-SAME: -> tensor<2x4x4x4xf32> attributes {hc.result_names = ["prediction"]}
// CHECK-NEXT: %[[C:.*]] = hc.concat %[[X]], %[[X]] {axis = 1 : i64}
// CHECK-NEXT: %[[O:.*]] = hc.mul %[[C]], %[[P]]
// CHECK-NEXT: return %[[O]] : tensor<2x4x4x4xf32>
// CHECK-NEXT: }
func.func @learned_sigma(%x: tensor<2x2x4x4xf32> {hc.input = "x_t"},
                         %n: tensor<2x2x4x4xf32> {hc.input = "noise"},
                         %w: tensor<2x4x4x4xf32> {hc.param = "w"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %c = hc.concat %x, %x {axis = 1 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x4x4xf32>
  %o = hc.mul %c, %w : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %s = hc.slice %o {starts = array<i64: 0, 0, 0, 0>, sizes = array<i64: 2, 2, 4, 4>, steps = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x4xf32> -> tensor<2x2x4x4xf32>
  %l = hc.mse_loss %s, %n : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// No learned sigma, loss left unfused (sub, mul, mean): the output is the
// sub's other operand itself.
// CHECK-LABEL: func.func @unfused
// CHECK-SAME: (%[[X:.*]]: tensor<2x1x4x4xf32> {hc.input = "x_t"}, %[[W:.*]]: tensor<2x1x4x4xf32> {hc.param = "w"})
// CHECK-SAME: -> tensor<2x1x4x4xf32>
// CHECK-NEXT: %[[O:.*]] = hc.mul %[[X]], %[[W]]
// CHECK-NEXT: return %[[O]] : tensor<2x1x4x4xf32>
func.func @unfused(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"},
                   %n: tensor<2x1x4x4xf32> {hc.input = "noise"},
                   %w: tensor<2x1x4x4xf32> {hc.param = "w"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %o = hc.mul %x, %w : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %d = hc.sub %o, %n : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %s = hc.mul %d, %d : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %m = hc.reduce_mean %s {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<2x1x4x4xf32> -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// Near miss: the slice takes channels [1, 3), not a leading slice, so it is
// not the loss's [:, :C]; the cut stays at the sliced value, which is
// shaped like x_t and is what the loss compares.
// CHECK-LABEL: func.func @offset_slice
// CHECK: %[[S:.*]] = hc.slice
// CHECK-NEXT: return %[[S]] : tensor<2x2x4x4xf32>
func.func @offset_slice(%x: tensor<2x2x4x4xf32> {hc.input = "x_t"},
                        %n: tensor<2x2x4x4xf32> {hc.input = "noise"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %c = hc.concat %x, %x {axis = 1 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x4x4xf32>
  %s = hc.slice %c {starts = array<i64: 0, 1, 0, 0>, sizes = array<i64: 2, 2, 4, 4>, steps = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x4xf32> -> tensor<2x2x4x4xf32>
  %l = hc.mse_loss %s, %n : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The VLB objective: a second loss term reads the output's variance channels
// and the extra input x_start, and a stop_gradient sits on the eps half. The
// cut is the same, and x_start goes with the noise (t and y stay: they are
// the sampler's interface, read by the model).
// CHECK-LABEL: func.func @vlb
// CHECK-SAME: (%[[X:.*]]: tensor<2x2x4x4xf32> {hc.input = "x_t"}, %[[T:.*]]: tensor<2xi64> {hc.input = "t"}, %[[P:.*]]: tensor<2x4x4x4xf32> {hc.param = "w"})
// CHECK-SAME: -> tensor<2x4x4x4xf32> attributes {hc.result_names = ["prediction"]}
// CHECK-NOT: stop_gradient
// CHECK: return
func.func @vlb(%x: tensor<2x2x4x4xf32> {hc.input = "x_t"},
               %t: tensor<2xi64> {hc.input = "t"},
               %n: tensor<2x2x4x4xf32> {hc.input = "noise"},
               %x0: tensor<2x2x4x4xf32> {hc.input = "x_start"},
               %w: tensor<2x4x4x4xf32> {hc.param = "w"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %tf = hc.cast %t : tensor<2xi64> -> tensor<2xf32>
  %tr = hc.reshape %tf : tensor<2xf32> -> tensor<2x1x1x1xf32>
  %c = hc.concat %x, %x {axis = 1 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x4x4xf32>
  %m = hc.mul %c, %w : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %o = hc.mul %m, %tr : (tensor<2x4x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<2x4x4x4xf32>
  %e = hc.slice %o {starts = array<i64: 0, 0, 0, 0>, sizes = array<i64: 2, 2, 4, 4>, steps = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x4xf32> -> tensor<2x2x4x4xf32>
  %v = hc.slice %o {starts = array<i64: 0, 2, 0, 0>, sizes = array<i64: 2, 2, 4, 4>, steps = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x4xf32> -> tensor<2x2x4x4xf32>
  %mse = hc.mse_loss %e, %n : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<f32>
  %se = hc.stop_gradient %e : tensor<2x2x4x4xf32>
  %d = hc.sub %se, %x0 : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %k = hc.mul %d, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %vb = hc.reduce_mean %k {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<2x2x4x4xf32> -> tensor<f32>
  %l = hc.add %mse, %vb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A flow objective's score loss, mean((out * sigma_t + target)^2) with
// sigma_t per sample ([B,1,1,1], from the float t): the cut looks through
// the scale to the model output; t stays an input, the target goes.
// CHECK-LABEL: func.func @flow_score
// CHECK-SAME: (%[[X:.*]]: tensor<2x1x4x4xf32> {hc.input = "x_t"}, %[[T:.*]]: tensor<2xf32> {hc.input = "t"}, %[[W:.*]]: tensor<2x1x4x4xf32> {hc.param = "w"})
// CHECK-SAME: -> tensor<2x1x4x4xf32> attributes {hc.result_names = ["prediction"]}
// CHECK-NEXT: %[[O:.*]] = hc.mul %[[X]], %[[W]]
// CHECK-NEXT: return %[[O]] : tensor<2x1x4x4xf32>
func.func @flow_score(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"},
                      %t: tensor<2xf32> {hc.input = "t"},
                      %g: tensor<2x1x4x4xf32> {hc.input = "target"},
                      %w: tensor<2x1x4x4xf32> {hc.param = "w"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %o = hc.mul %x, %w : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %c = hc.cos %t : tensor<2xf32>
  %s = hc.reshape %c : tensor<2xf32> -> tensor<2x1x1x1xf32>
  %m = hc.mul %o, %s : (tensor<2x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<2x1x4x4xf32>
  %a = hc.add %m, %g : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %q = hc.mul %a, %a : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %l = hc.reduce_mean %q {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<2x1x4x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A flow velocity loss, mse_loss(out, target): the same cut as DDPM's.
// CHECK-LABEL: func.func @flow_velocity
// CHECK-SAME: -> tensor<2x1x4x4xf32> attributes {hc.result_names = ["prediction"]}
// CHECK-NOT: target
// CHECK: return
func.func @flow_velocity(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"},
                         %t: tensor<2xf32> {hc.input = "t"},
                         %g: tensor<2x1x4x4xf32> {hc.input = "target"},
                         %w: tensor<2x1x4x4xf32> {hc.param = "w"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %o = hc.mul %x, %w : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %l = hc.mse_loss %o, %g : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Label dropout in the graph (a training-mode export: rand < p ? null : y):
// the sampler keeps y's branch, so its labels are never dropped (its
// unconditional half feeds the null class itself); the draw and its keys
// are gone.
// CHECK-LABEL: func.func @label_dropout
// CHECK-SAME: (%[[X:.*]]: tensor<2x1x4x4xf32> {hc.input = "x_t"}, %[[Y:.*]]: tensor<2xi64> {hc.input = "y"}, %[[T:.*]]: tensor<4x16xf32> {hc.param = "table"})
// CHECK-SAME: -> tensor<2x1x4x4xf32>
// CHECK-NEXT: %[[E:.*]] = hc.gather %[[T]][%[[Y]]] {axis = 0 : i64}
// CHECK-NEXT: %[[R:.*]] = hc.reshape %[[E]]
// CHECK-NEXT: %[[O:.*]] = hc.mul %[[X]], %[[R]]
// CHECK-NEXT: return %[[O]] : tensor<2x1x4x4xf32>
func.func @label_dropout(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"},
                         %y: tensor<2xi64> {hc.input = "y"},
                         %n: tensor<2x1x4x4xf32> {hc.input = "noise"},
                         %table: tensor<4x16xf32> {hc.param = "table"},
                         %seed: tensor<i64> {hc.input = "hc.rng_seed"},
                         %step: tensor<i64> {hc.input = "hc.rng_step"},
                         %off: tensor<i64> {hc.input = "hc.sample_offset"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %r = hc.random_uniform %seed, %step, %off {high = 1.0 : f64, low = 0.0 : f64, op_id = 256 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<2xf32>
  %p = hc.constant dense<1.000000e-01> : tensor<f32>
  %drop = hc.less %r, %p : (tensor<2xf32>, tensor<f32>) -> tensor<2xi1>
  %null = hc.constant dense<3> : tensor<i64>
  %y2 = hc.where %drop, %null, %y : (tensor<2xi1>, tensor<i64>, tensor<2xi64>) -> tensor<2xi64>
  %e = hc.gather %table[%y2] {axis = 0 : i64} : (tensor<4x16xf32>, tensor<2xi64>) -> tensor<2x16xf32>
  %e4 = hc.reshape %e : tensor<2x16xf32> -> tensor<2x1x4x4xf32>
  %o = hc.mul %x, %e4 : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %l = hc.mse_loss %o, %n : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
