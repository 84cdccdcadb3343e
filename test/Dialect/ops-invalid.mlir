// RUN: hc-opt %s -split-input-file -verify-diagnostics

func.func @broadcast_mismatch(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{shapes [2, 3] and [4] do not broadcast}}
  // expected-error @+1 {{'hc.add' op failed to infer returned types}}
  %0 = hc.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{'hc.mul' op failed to infer returned types}}
  // expected-error @+1 {{'hc.mul' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x3xf32>'}}
  %0 = hc.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<2x8xf32>, %g: tensor<7xf32>) {
  // expected-error @+1 {{scale/shift must have the normalized shape [8]}}
  %0 = hc.layer_norm %x scale %g {epsilon = 1.0e-6 : f64, axis = 1 : i64} : (tensor<2x8xf32>, tensor<7xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @modulate_shape(%x: tensor<2x5x8xf32>, %c: tensor<2x7xf32>) {
  // expected-error @+1 {{shift and scale must be [B, D] = [2, 8]}}
  %0 = hc.modulate %x, %c, %c : (tensor<2x5x8xf32>, tensor<2x7xf32>, tensor<2x7xf32>) -> tensor<2x5x8xf32>
  return
}

// -----

func.func @modulated_layer_norm_shape(%x: tensor<2x5x8xf32>, %c: tensor<2x7xf32>) {
  // expected-error @+1 {{shift and scale must be [B, D] = [2, 8]}}
  %0 = hc.modulated_layer_norm %x, %c, %c {epsilon = 1.0e-6 : f64} : (tensor<2x5x8xf32>, tensor<2x7xf32>, tensor<2x7xf32>) -> tensor<2x5x8xf32>
  return
}

// -----

func.func @modulated_layer_norm_epsilon(%x: tensor<2x5x8xf32>, %c: tensor<2x8xf32>) {
  // expected-error @+1 {{epsilon must be >= 0}}
  %0 = hc.modulated_layer_norm %x, %c, %c {epsilon = -1.0 : f64} : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  return
}

// -----

func.func @modulated_layer_norm_grad_shape(%x: tensor<2x5x8xf32>, %c: tensor<2x7xf32>) {
  // expected-error @+1 {{needs dy, x [B, N, D] and scale [B, D]}}
  %0:3 = hc.modulated_layer_norm_grad %x, %x, %c {epsilon = 1.0e-6 : f64} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x7xf32>) -> (tensor<2x5x8xf32>, tensor<2x7xf32>, tensor<2x7xf32>)
  return
}

// -----

func.func @attention_heads(%qkv: tensor<2x5x24xf32>) {
  // expected-error @+1 {{qkv's last dim 24 is not 3 * num_heads(5) * head_dim}}
  %0:2 = hc.attention %qkv {num_heads = 5 : i64, scale = 0.5 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x5xf32>)
  return
}

// -----

func.func @attention_lse(%qkv: tensor<2x5x24xf32>) {
  // expected-error @+1 {{lse must be [2, 2, 5], got 'tensor<2x5x2xf32>'}}
  %0:2 = hc.attention %qkv {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x2xf32>)
  return
}

// -----

func.func @attention_grad_lse(%dy: tensor<2x5x8xf32>, %qkv: tensor<2x5x24xf32>, %lse: tensor<2x5x2xf32>) {
  // expected-error @+1 {{needs the forward's out [B, N, D] and lse [B, heads, N]}}
  %0 = hc.attention_grad %dy, %dy, %lse, %qkv {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x5x2xf32>, tensor<2x5x24xf32>) -> tensor<2x5x24xf32>
  return
}

// -----

// Cross-attention: k and v must share q's batch and width.
func.func @attention_cross_kv(%q: tensor<2x5x8xf32>, %k: tensor<2x3x8xf32>, %v: tensor<2x3x6xf32>) {
  // expected-error @+1 {{k and v must be [B, L, D] with q's B and D, got q [2, 5, 8], k [2, 3, 8], v [2, 3, 6]}}
  %0:2 = hc.attention %q, %k, %v {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x6xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
  return
}

// -----

func.func @attention_two_inputs(%q: tensor<2x5x8xf32>, %kv: tensor<2x3x16xf32>) {
  // expected-error @+1 {{takes one packed qkv [B, N, 3*D] or q, k, v, got 2 inputs}}
  %0:2 = hc.attention %q, %kv {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x5x8xf32>, tensor<2x3x16xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
  return
}

// -----

// The lse of a cross-attention has one row per query (N = 5), not per key.
func.func @attention_cross_lse(%q: tensor<2x5x8xf32>, %k: tensor<2x3x8xf32>) {
  // expected-error @+1 {{lse must be [2, 2, 5], got 'tensor<2x2x3xf32>'}}
  %0:2 = hc.attention %q, %k, %k {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x3xf32>)
  return
}

// -----

func.func @attention_grad_count(%dy: tensor<2x5x8xf32>, %q: tensor<2x5x8xf32>, %k: tensor<2x3x8xf32>, %lse: tensor<2x2x5xf32>) {
  // expected-error @+1 {{returns one gradient per input, of its type}}
  %0:2 = hc.attention_grad %dy, %dy, %lse, %q, %k, %k {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x2x5xf32>, tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @reshape_count(%x: tensor<2x5xf32>) {
  // expected-error @+1 {{element count changes: 10 -> 12}}
  %0 = hc.reshape %x : tensor<2x5xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x5xf32>) {
  // expected-error @+2 {{perm is not a permutation}}
  // expected-error @+1 {{'hc.transpose' op failed to infer returned types}}
  %0 = hc.transpose %x {perm = array<i64: 0, 0>} : tensor<2x5xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @slice_past_end(%x: tensor<5xf32>) {
  // expected-error @+2 {{slice of dim 0 runs past its size 5}}
  // expected-error @+1 {{'hc.slice' op failed to infer returned types}}
  %0 = hc.slice %x {starts = array<i64: 3>, sizes = array<i64: 2>, steps = array<i64: 2>} : tensor<5xf32> -> tensor<2xf32>
  return
}

// -----

func.func @split_sum(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{split sizes sum to 7, dim is 8}}
  // expected-error @+1 {{'hc.split' op failed to infer returned types}}
  %0:2 = hc.split %x {axis = 1 : i64, sizes = array<i64: 3, 4>} : tensor<2x8xf32> -> tensor<2x3xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @gather_float_indices(%t: tensor<11x8xf32>, %i: tensor<2xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = hc.gather %t[%i] {axis = 0 : i64} : (tensor<11x8xf32>, tensor<2xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @matmul_k(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{contraction dims differ: [2, 3] x [4, 5]}}
  // expected-error @+1 {{'hc.matmul' op failed to infer returned types}}
  %0 = hc.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @gelu_mode(%x: tensor<4xf32>) {
  // expected-error @+1 {{approximate must be "tanh" or "none", got "fast"}}
  %0 = hc.gelu %x {approximate = "fast"} : tensor<4xf32>
  return
}

// -----

func.func @adam_arity(%r: tensor<f32>, %t: tensor<i64>, %x: tensor<3xf32>, %g: tensor<3xf32>, %v: tensor<3xf32>) {
  // expected-error @+1 {{needs 4N tensor operands (params, grads, first and second moments) and 3N results, got 3 and 3}}
  %0:3 = hc.adam %r, %t, %x, %g, %v {alpha = 0.9 : f64, beta = 0.999 : f64, epsilon = 1.0e-6 : f64, norm_coefficient = 0.0 : f64, norm_coefficient_post = 0.0 : f64} : (tensor<f32>, tensor<i64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adam_alpha(%r: tensor<f32>, %t: tensor<i64>, %x: tensor<3xf32>) {
  // expected-error @+1 {{needs 0 <= alpha < 1, 0 <= beta <= 1, finite epsilon >= 0 and finite norm coefficients}}
  %0:3 = hc.adam %r, %t, %x, %x, %x, %x {alpha = 1.0 : f64, beta = 0.999 : f64, epsilon = 1.0e-6 : f64, norm_coefficient = 0.0 : f64, norm_coefficient_post = 0.0 : f64} : (tensor<f32>, tensor<i64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

// A graph's draws keep out of hc-run's own op ids (hc/abi/random.h): 0x73 is
// its label dropout's.
func.func @random_op_id_of_the_trainer(%s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'hc.random_uniform' op op_id 115 is outside a graph's draws [256, 65536)}}
  %r = hc.random_uniform %s, %s, %s {op_id = 115 : i64, low = 0.0 : f64, high = 1.0 : f64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
