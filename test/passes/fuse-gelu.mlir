// RUN: hc-opt %s --hc-fuse-gelu | FileCheck %s

// The chain torch 1.13 exports for GELU(approximate="tanh").
// CHECK-LABEL: func.func @gelu
// CHECK-NEXT: %[[G:.*]] = hc.gelu %arg0 : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sq = hc.mul %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %cube = hc.mul %x, %sq : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %c = hc.constant dense<4.471500e-02> : tensor<f32>
  %m = hc.mul %c, %cube : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = hc.add %x, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %k = hc.constant dense<0.797884583> : tensor<f32>
  %u = hc.mul %k, %a : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %t = hc.tanh %u : tensor<2x8xf32>
  %one = hc.constant dense<1.000000e+00> : tensor<f32>
  %p = hc.add %one, %t : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %xp = hc.mul %x, %p : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = hc.constant dense<5.000000e-01> : tensor<f32>
  %y = hc.mul %half, %xp : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// Near miss: 0.05 instead of 0.044715 is some other function: left alone.
// CHECK-LABEL: func.func @other_constant
// CHECK-NOT: hc.gelu
// CHECK: hc.tanh
func.func @other_constant(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %sq = hc.mul %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %cube = hc.mul %x, %sq : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %c = hc.constant dense<5.000000e-02> : tensor<f32>
  %m = hc.mul %c, %cube : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = hc.add %x, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %k = hc.constant dense<0.797884583> : tensor<f32>
  %u = hc.mul %k, %a : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %t = hc.tanh %u : tensor<2x8xf32>
  %one = hc.constant dense<1.000000e+00> : tensor<f32>
  %p = hc.add %one, %t : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %xp = hc.mul %x, %p : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %half = hc.constant dense<5.000000e-01> : tensor<f32>
  %y = hc.mul %half, %xp : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// The dynamo exporter's order (PyTorch 2.x, opsets 18-19): x^3 as Pow, the
// constants first, and the 0.5 on the (1 + tanh) factor: x · (0.5 · (tanh(.) + 1)).
// CHECK-LABEL: func.func @gelu_dynamo
// CHECK-NEXT: %[[G:.*]] = hc.gelu %arg0 : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_dynamo(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %three = hc.constant dense<3.000000e+00> : tensor<f32>
  %cube = hc.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %c = hc.constant dense<4.471500e-02> : tensor<f32>
  %m = hc.mul %c, %cube : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = hc.add %x, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %k = hc.constant dense<0.797884583> : tensor<f32>
  %u = hc.mul %k, %a : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %t = hc.tanh %u : tensor<2x8xf32>
  %one = hc.constant dense<1.000000e+00> : tensor<f32>
  %p = hc.add %t, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %half = hc.constant dense<5.000000e-01> : tensor<f32>
  %hp = hc.mul %half, %p : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = hc.mul %x, %hp : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// Near miss: the same chain with the outer factor another tensor than x.
// CHECK-LABEL: func.func @gelu_dynamo_other_x
// CHECK-NOT: hc.gelu
// CHECK: hc.tanh
func.func @gelu_dynamo_other_x(%x: tensor<2x8xf32>, %z: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %three = hc.constant dense<3.000000e+00> : tensor<f32>
  %cube = hc.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %c = hc.constant dense<4.471500e-02> : tensor<f32>
  %m = hc.mul %c, %cube : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = hc.add %x, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %k = hc.constant dense<0.797884583> : tensor<f32>
  %u = hc.mul %k, %a : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %t = hc.tanh %u : tensor<2x8xf32>
  %one = hc.constant dense<1.000000e+00> : tensor<f32>
  %p = hc.add %t, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %half = hc.constant dense<5.000000e-01> : tensor<f32>
  %hp = hc.mul %half, %p : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = hc.mul %z, %hp : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
