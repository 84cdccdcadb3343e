// RUN: hc-opt %s --hc-optimizer="lr=0.001 weight-decay=0.01" | FileCheck %s
// RUN: hc-opt %s --hc-optimizer="optimizer=sgd lr=0.5" | FileCheck %s --check-prefix=SGD
// RUN: not hc-opt %s --hc-optimizer="optimizer=lion" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: hc-opt %s --hc-optimizer="optimizer=adam lr=0.001 weight-decay=0.01 weight-decay-post=0.001" | FileCheck %s --check-prefix=ADAM
// RUN: not hc-opt %s --hc-optimizer="optimizer=adam beta1=1" 2>&1 | FileCheck %s --check-prefix=ADAMBAD

// One fused AdamW over both parameters; moments and the step counter are
// named state arguments and results.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<3x4xf32> {hc.param = "w"}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<3xf32> {hc.param = "b"}
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {hc.state = "adamw.step"}
// CHECK-SAME: {hc.state = "adamw.m:w"}
// CHECK-SAME: {hc.state = "adamw.m:b"}
// CHECK-SAME: {hc.state = "adamw.v:w"}
// CHECK-SAME: {hc.state = "adamw.v:b"}
// CHECK-SAME: hc.result_names = ["loss", "grad:w", "grad:b", "param:w", "param:b", "state:adamw.m:w", "state:adamw.m:b", "state:adamw.v:w", "state:adamw.v:b", "state:adamw.step"]
// CHECK: %[[U:.*]]:6 = hc.adamw %[[STEP]], %[[W]], %[[B]], %arg1, %arg2, {{.*}} {beta1 = 9.000000e-01 : f64, beta2 = 0.99899{{[0-9]*}} : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK: %[[NEXT:.*]] = hc.add %[[STEP]], %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: return %arg0, %arg1, %arg2, %[[U]]#0, %[[U]]#1, %[[U]]#2, %[[U]]#3, %[[U]]#4, %[[U]]#5, %[[NEXT]]
// SGD: %[[U:.*]]:2 = hc.sgd %arg3, %arg4, %arg1, %arg2 {lr = 5.000000e-01 : f64, weight_decay = 0.000000e+00 : f64}
// SGD: return %arg0, %arg1, %arg2, %[[U]]#0, %[[U]]#1
// BAD: unknown optimizer 'lion' (adamw, adam or sgd)

// ONNX Adam: R (a float32 constant), then T = adam.T, the completed steps;
// moments adam.V/adam.H; the attributes are the float32 values the ONNX
// operator's attributes hold (0.9f, 0.999f, epsilon 1e-6f by default).
// ADAM-LABEL: func.func @step
// ADAM-SAME: %[[W:[a-z0-9]+]]: tensor<3x4xf32> {hc.param = "w"}
// ADAM-SAME: %[[B:[a-z0-9]+]]: tensor<3xf32> {hc.param = "b"}
// ADAM-SAME: %[[T:[a-z0-9]+]]: tensor<i64> {hc.state = "adam.T"}
// ADAM-SAME: %[[VW:[a-z0-9]+]]: tensor<3x4xf32> {hc.state = "adam.V:w"}
// ADAM-SAME: %[[VB:[a-z0-9]+]]: tensor<3xf32> {hc.state = "adam.V:b"}
// ADAM-SAME: %[[HW:[a-z0-9]+]]: tensor<3x4xf32> {hc.state = "adam.H:w"}
// ADAM-SAME: %[[HB:[a-z0-9]+]]: tensor<3xf32> {hc.state = "adam.H:b"}
// ADAM-SAME: hc.result_names = ["loss", "grad:w", "grad:b", "param:w", "param:b", "state:adam.V:w", "state:adam.V:b", "state:adam.H:w", "state:adam.H:b", "state:adam.T"]
// ADAM: %[[R:.*]] = hc.constant dense<1.000000e-03> : tensor<f32>
// ADAM: %[[U:.*]]:6 = hc.adam %[[R]], %[[T]], %[[W]], %[[B]], %arg1, %arg2, %[[VW]], %[[VB]], %[[HW]], %[[HB]] {alpha = 0.89999997615814208 : f64, beta = 0.99900001287460327 : f64, epsilon = 9.9999999747524271E-7 : f64, norm_coefficient = 0.0099999997764825821 : f64, norm_coefficient_post = 0.0010000000474974513 : f64}
// ADAM: %[[NEXT:.*]] = hc.add %[[T]], %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i64>
// ADAM: return %arg0, %arg1, %arg2, %[[U]]#0, %[[U]]#1, %[[U]]#2, %[[U]]#3, %[[U]]#4, %[[U]]#5, %[[NEXT]]
// ADAMBAD: 'hc.adam' op needs 0 <= alpha < 1
func.func @step(%loss: tensor<f32> {hc.input = "loss"}, %gw: tensor<3x4xf32> {hc.input = "gw"},
                %gb: tensor<3xf32> {hc.input = "gb"}, %w: tensor<3x4xf32> {hc.param = "w"},
                %b: tensor<3xf32> {hc.param = "b"})
    -> (tensor<f32>, tensor<3x4xf32>, tensor<3xf32>)
    attributes {hc.result_names = ["loss", "grad:w", "grad:b"]} {
  return %loss, %gw, %gb : tensor<f32>, tensor<3x4xf32>, tensor<3xf32>
}
