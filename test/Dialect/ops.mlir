// RUN: hc-opt %s | FileCheck %s
// RUN: hc-opt %s | hc-opt | FileCheck %s
// Every graph op parses, verifies, infers its type and prints back.

// CHECK-LABEL: func.func @block
func.func @block(%x: tensor<2x5x8xf32>, %c: tensor<2x8xf32>, %wqkv: tensor<24x8xf32>,
                 %g: tensor<8xf32>, %y: tensor<2xi64>, %tab: tensor<11x8xf32>) -> tensor<f32> {
  // CHECK: hc.layer_norm %{{.*}} {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %n = hc.layer_norm %x {epsilon = 1.0e-6 : f64, axis = 2 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  // CHECK: hc.layer_norm %{{.*}} scale %{{.*}} shift %{{.*}} {{.*}}: (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %na = hc.layer_norm %x scale %g shift %g {epsilon = 1.0e-5 : f64, axis = 2 : i64} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  // CHECK: hc.modulate
  %m = hc.modulate %n, %c, %c : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  // CHECK: hc.modulated_layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  %mn = hc.modulated_layer_norm %x, %c, %c {epsilon = 1.0e-6 : f64} : (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x5x8xf32>
  // CHECK: hc.modulated_layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %mng:3 = hc.modulated_layer_norm_grad %mn, %x, %c {epsilon = 1.0e-6 : f64} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  %qkv = hc.linear %m, %wqkv : (tensor<2x5x8xf32>, tensor<24x8xf32>) -> tensor<2x5x24xf32>
  // CHECK: hc.attention %{{.*}} {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
  %a:2 = hc.attention %qkv {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x5x24xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
  // Cross-attention: q from the 5 image tokens, k and v from 3 others.
  // CHECK: hc.attention %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
  %kv:2 = hc.split %tab {axis = 0 : i64, sizes = array<i64: 6, 5>} : tensor<11x8xf32> -> tensor<6x8xf32>, tensor<5x8xf32>
  %k3 = hc.reshape %kv#0 : tensor<6x8xf32> -> tensor<2x3x8xf32>
  %ca:2 = hc.attention %a#0, %k3, %k3 {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x2x5xf32>)
  // CHECK: hc.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : ({{.*}}) -> (tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  %cg:3 = hc.attention_grad %ca#0, %ca#0, %ca#1, %a#0, %k3, %k3 {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<2x2x5xf32>, tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  // CHECK: hc.gelu %{{.*}} {approximate = "none"} : tensor<2x5x8xf32>
  %ge = hc.gelu %a#0 {approximate = "none"} : tensor<2x5x8xf32>
  %s = hc.silu %ge : tensor<2x5x8xf32>
  %sm = hc.softmax %s {axis = 2 : i64} : tensor<2x5x8xf32>
  // CHECK: hc.matmul %{{.*}}, %{{.*}} : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5xf32>
  %mv = hc.matmul %sm, %g : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5xf32>
  // CHECK: hc.transpose %{{.*}} {perm = array<i64: 1, 0>} : tensor<2x5xf32> -> tensor<5x2xf32>
  %t = hc.transpose %mv {perm = array<i64: 1, 0>} : tensor<2x5xf32> -> tensor<5x2xf32>
  // CHECK: hc.slice %{{.*}} {sizes = array<i64: 2, 2>, starts = array<i64: 1, 0>, steps = array<i64: 2, 1>} : tensor<5x2xf32> -> tensor<2x2xf32>
  %sl = hc.slice %t {starts = array<i64: 1, 0>, sizes = array<i64: 2, 2>, steps = array<i64: 2, 1>} : tensor<5x2xf32> -> tensor<2x2xf32>
  // CHECK: hc.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %cc = hc.concat %sl, %sl {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  // CHECK: hc.broadcast %{{.*}} : tensor<2x4xf32> -> tensor<3x2x4xf32>
  %bc = hc.broadcast %cc : tensor<2x4xf32> -> tensor<3x2x4xf32>
  %e = hc.gather %tab[%y] {axis = 0 : i64} : (tensor<11x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
  %parts:2 = hc.split %e {axis = 1 : i64, sizes = array<i64: 4, 4>} : tensor<2x8xf32> -> tensor<2x4xf32>, tensor<2x4xf32>
  // CHECK: hc.mse_loss %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %l = hc.mse_loss %parts#0, %parts#1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %lt = hc.less %l, %l : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %w = hc.where %lt, %l, %l : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
  %r = hc.reduce_sum %bc {axes = array<i64: 0, 2>, keepdims = true} : tensor<3x2x4xf32> -> tensor<1x2x1xf32>
  %ci = hc.cast %y : tensor<2xi64> -> tensor<2xf32>
  return %w : tensor<f32>
}
