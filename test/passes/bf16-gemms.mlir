// RUN: hc-opt %s --hc-bf16-gemms --split-input-file | FileCheck %s

// Every product op of a training step (the GEMMs, attention and its
// gradient) gets precision = "bf16"; the ops around them (GELU, layer
// norm, softmax, the loss) do not.
// (hc-compile-precision.test: lowering carries it onto the hcs.call.)
// CHECK-LABEL: func.func @step
// CHECK: hc.linear %{{.*}} {precision = "bf16"}
// CHECK-NEXT: hc.gelu %{{[0-9]+}} :
// CHECK-NEXT: hc.linear_gelu %{{.*}} {precision = "bf16"}
// CHECK-NEXT: hc.matmul %{{.*}} {precision = "bf16"}
// CHECK-NEXT: hc.softmax %{{.*}} {axis = 1 : i64} :
// CHECK-NEXT: hc.linear_grad_input %{{.*}} {precision = "bf16"}
// CHECK-NEXT: hc.linear_grad_input_gelu %{{.*}} {precision = "bf16"}
// CHECK-NEXT: hc.linear_grad_weight %{{.*}} {precision = "bf16"}
// CHECK-NEXT: hc.attention %{{.*}} {num_heads = 2 : i64, precision = "bf16", scale = 5.000000e-01 : f64}
// CHECK-NEXT: hc.attention_grad %{{.*}} {num_heads = 2 : i64, precision = "bf16", scale = 5.000000e-01 : f64}
// CHECK-NEXT: hc.attention %{{.*}} {num_heads = 1 : i64, precision = "bf16", scale = 5.000000e-01 : f64}
// CHECK-NEXT: hc.mse_loss
// CHECK-NOT: precision
func.func @step(%x: tensor<5x7xf32>, %w: tensor<9x7xf32>, %b: tensor<9xf32>, %w2: tensor<9x7xf32>, %dy: tensor<5x9xf32>, %h: tensor<5x7xf32>, %qkv: tensor<1x3x24xf32>, %q: tensor<1x3x4xf32>, %kv: tensor<1x5x4xf32>) -> (tensor<f32>) attributes {hc.result_names = ["loss"]} {
  %y = hc.linear %x, %w, %b : (tensor<5x7xf32>, tensor<9x7xf32>, tensor<9xf32>) -> tensor<5x9xf32>
  %g = hc.gelu %y {approximate = "tanh"} : tensor<5x9xf32>
  %a, %p = hc.linear_gelu %x, %w, %b : (tensor<5x7xf32>, tensor<9x7xf32>, tensor<9xf32>) -> (tensor<5x9xf32>, tensor<5x9xf32>)
  %s = hc.matmul %g, %w2 : (tensor<5x9xf32>, tensor<9x7xf32>) -> tensor<5x7xf32>
  %sm = hc.softmax %s {axis = 1 : i64} : tensor<5x7xf32>
  %dx = hc.linear_grad_input %dy, %w : (tensor<5x9xf32>, tensor<9x7xf32>) -> tensor<5x7xf32>
  %dh = hc.linear_grad_input_gelu %dy, %w, %h : (tensor<5x9xf32>, tensor<9x7xf32>, tensor<5x7xf32>) -> tensor<5x7xf32>
  %dw = hc.linear_grad_weight %dy, %dx : (tensor<5x9xf32>, tensor<5x7xf32>) -> tensor<9x7xf32>
  %o, %lse = hc.attention %qkv {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<1x3x24xf32>) -> (tensor<1x3x8xf32>, tensor<1x2x3xf32>)
  %dqkv = hc.attention_grad %o, %o, %lse, %qkv {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<1x3x8xf32>, tensor<1x3x8xf32>, tensor<1x2x3xf32>, tensor<1x3x24xf32>) -> tensor<1x3x24xf32>
  %xo, %xlse = hc.attention %q, %kv, %kv {num_heads = 1 : i64, scale = 0.5 : f64} : (tensor<1x3x4xf32>, tensor<1x5x4xf32>, tensor<1x5x4xf32>) -> (tensor<1x3x4xf32>, tensor<1x1x3xf32>)
  %l = hc.mse_loss %sm, %dh : (tensor<5x7xf32>, tensor<5x7xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Near miss: a float64 GEMM has no bf16 kernel; it stays unmarked.
// CHECK-LABEL: func.func @f64
// CHECK-NOT: precision
// CHECK: return
func.func @f64(%x: tensor<5x7xf64>, %w: tensor<9x7xf64>) -> tensor<5x9xf64> {
  %y = hc.linear %x, %w : (tensor<5x7xf64>, tensor<9x7xf64>) -> tensor<5x9xf64>
  return %y : tensor<5x9xf64>
}

// -----

// Near miss: a float64 attention has no bf16 kernel; it stays unmarked.
// CHECK-LABEL: func.func @f64_attention
// CHECK-NOT: precision
// CHECK: return
func.func @f64_attention(%qkv: tensor<1x3x24xf64>) -> tensor<1x3x8xf64> {
  %o, %lse = hc.attention %qkv {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<1x3x24xf64>) -> (tensor<1x3x8xf64>, tensor<1x2x3xf64>)
  return %o : tensor<1x3x8xf64>
}
