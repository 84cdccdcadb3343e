// RUN: hc-opt %s --hc-extract-sampler -split-input-file -verify-diagnostics

func.func @no_noise(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  // expected-error @-2 {{--sampler: the graph has no 'noise' input}}
  %m = hc.reduce_mean %x {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<2x1x4x4xf32> -> tensor<f32>
  return %m : tensor<f32>
}

// -----

// The noise is compared with a tensor not shaped like x_t.
func.func @wrong_shape(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"},
                       %n: tensor<2x1x2x8xf32> {hc.input = "noise"},
                       %w: tensor<2x1x2x8xf32> {hc.param = "w"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  // expected-error @+1 {{--sampler: the tensor the loss compares with the noise is 'tensor<2x1x2x8xf32>', not a model output shaped like x_t}}
  %l = hc.mse_loss %w, %n : (tensor<2x1x2x8xf32>, tensor<2x1x2x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @noise_twice(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"},
                       %n: tensor<2x1x4x4xf32> {hc.input = "noise"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %a = hc.add %x, %n : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  // expected-error @+1 {{--sampler: the 'noise' input feeds more than one op ('hc.add' and 'hc.mse_loss')}}
  %l = hc.mse_loss %a, %n : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Already cut: a second run refuses instead of cutting again.
func.func @already(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"}) -> tensor<2x1x4x4xf32>
    attributes {hc.result_names = ["prediction"]} {
  // expected-error @-2 {{--sampler: the function's first result is not the loss}}
  return %x : tensor<2x1x4x4xf32>
}

// -----

// A label dropout left in the model would drop the sampler's labels.
func.func @random(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"},
                  %n: tensor<2x1x4x4xf32> {hc.input = "noise"},
                  %s: tensor<i64> {hc.input = "hc.rng_seed"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  // expected-error @+1 {{--sampler: the model draws random numbers other than a dropout between an input and a constant or learned null form}}
  %r = hc.random_uniform %s, %s, %s {op_id = 256 : i64, low = 0.0 : f64, high = 1.0 : f64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<2x1x4x4xf32>
  %o = hc.mul %x, %r : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  %l = hc.mse_loss %o, %n : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A flow target scaled by a full-size tensor (not a per-sample factor) is
// not looked through: the compared tensor is then a product the cut keeps,
// but a second use of the target is refused by name.
func.func @target_twice(%x: tensor<2x1x4x4xf32> {hc.input = "x_t"},
                        %g: tensor<2x1x4x4xf32> {hc.input = "target"}) -> tensor<f32>
    attributes {hc.result_names = ["loss"]} {
  %a = hc.add %x, %g : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
  // expected-error @+1 {{--sampler: the 'target' input feeds more than one op}}
  %l = hc.mse_loss %a, %g : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
