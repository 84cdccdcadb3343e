// RUN: hc-opt %s -split-input-file -verify-diagnostics

func.func @in_dim_mismatch(%x: tensor<2x6xf32>, %w: tensor<3x7xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{input's last dim 6 does not match weight's in dim 7}}
  %0 = hc.linear %x, %w : (tensor<2x6xf32>, tensor<3x7xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @weight_rank(%x: tensor<2x7xf32>, %w: tensor<7xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{weight must be [out, in], got rank 1}}
  %0 = hc.linear %x, %w : (tensor<2x7xf32>, tensor<7xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @bias_size(%x: tensor<2x7xf32>, %w: tensor<3x7xf32>, %b: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{bias must be [3]}}
  %0 = hc.linear %x, %w, %b : (tensor<2x7xf32>, tensor<3x7xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @out_dim(%x: tensor<2x7xf32>, %w: tensor<3x7xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{result's last dim 4 does not match weight's out dim 3}}
  %0 = hc.linear %x, %w : (tensor<2x7xf32>, tensor<3x7xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @elem_type(%x: tensor<2x7xf32>, %w: tensor<3x7xf64>) -> tensor<2x3xf32> {
  // expected-error @+1 {{input, weight and result element types differ}}
  %0 = hc.linear %x, %w : (tensor<2x7xf32>, tensor<3x7xf64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @leading_dims(%x: tensor<2x5x7xf32>, %w: tensor<3x7xf32>) -> tensor<2x4x3xf32> {
  // expected-error @+1 {{result dim 1 does not match input's}}
  %0 = hc.linear %x, %w : (tensor<2x5x7xf32>, tensor<3x7xf32>) -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

func.func @bias_grad_size(%x: tensor<5x7xf32>, %dy: tensor<5x9xf32>) -> (tensor<9x7xf32>, tensor<7xf32>) {
  // expected-error @+1 {{needs dY [..., out], X [..., in] -> dW [out, in], db [out]}}
  %dw, %db = hc.linear_grad_weight_bias %dy, %x : (tensor<5x9xf32>, tensor<5x7xf32>) -> (tensor<9x7xf32>, tensor<7xf32>)
  return %dw, %db : tensor<9x7xf32>, tensor<7xf32>
}
