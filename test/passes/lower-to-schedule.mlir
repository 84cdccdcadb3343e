// RUN: hc-opt %s --hc-lower-to-schedule | FileCheck %s
// RUN: hc-opt %s --hc-lower-to-schedule="bucket-bytes=64" | FileCheck %s --check-prefix=BUCKETS

// A linear + loss step with AdamW. Views instead of copies for transpose;
// parameters and moments in flat arenas in gradient production order (b's
// gradient, a reduce_sum, comes after w's, a linear_grad_weight); one AdamW
// call over the flat trainable region, after waiting for the all-reduce.
// CHECK-LABEL: func.func @step()
// CHECK-DAG: %[[X:.*]] = hcs.input "x" {index = 0 : i64} : memref<4x3xf32>
// CHECK-DAG: hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<2x3xf32>
// CHECK-DAG: hcs.buffer "param" {name = "b", offset = 64 : i64} : memref<2xf32>
// CHECK-DAG: hcs.buffer "m" {name = "adamw.m:w", offset = 0 : i64}
// CHECK-DAG: hcs.buffer "grad" {name = "grad:b", offset = 64 : i64} : memref<2xf32>
// CHECK: %[[T:.*]] = hcs.view %[[X]] : memref<4x3xf32> to memref<3x4xf32, strided<[1, 3]>>
// CHECK: hcs.call "matmul"
// CHECK: hcs.call "linear"
// CHECK: hcs.call "mse_loss"
// CHECK: hcs.call "linear_grad_weight"({{.*}}) -> (%[[GW:[0-9]+]])
// CHECK: hcs.call "reduce_sum"({{.*}}) -> (%[[GB:[0-9]+]])
// The bucket joins its accumulator (one micro-batch as compiled: the
// hyperparameters micro_batch 0 of micro_batches 1) before its all-reduce.
// CHECK: %[[BUCKET:.*]] = hcs.buffer "grad" {offset = 0 : i64} : memref<32xf32>
// CHECK-NEXT: %[[ACC:.*]] = hcs.buffer "accum" {offset = 0 : i64} : memref<32xf32>
// CHECK-NEXT: hcs.call "grad_accumulate"(%[[BUCKET]], %[[ACC]]) -> (%[[BUCKET]], %[[ACC]]) {micro_batch = 0.000000e+00 : f64, micro_batches = 1.000000e+00 : f64}
// CHECK-NEXT: %[[TOK:.*]] = hcs.allreduce_start %[[BUCKET]] {bucket_id = 0 : i64}
// Clipping by global norm between the wait and the optimizer, in place on
// the flat gradients, off as compiled (max_grad_norm 0, a hyperparameter);
// the norm is a named 0-d slot past the trainable region.
// CHECK: %[[NORM:.*]] = hcs.buffer "grad" {name = "grad_norm", offset = 128 : i64} : memref<f32>
// CHECK-NEXT: hcs.wait %[[TOK]]
// CHECK-NEXT: hcs.call "grad_norm"(%[[G:[0-9]+]]) -> (%[[NORM]])
// CHECK-NEXT: hcs.call "grad_clip"(%[[NORM]], %[[G]]) -> (%[[G]]) {max_grad_norm = 0.000000e+00 : f64}
// CHECK-NEXT: hcs.call "adamw"(%{{.*}}, %[[P:[0-9]+]], %[[G]], %[[M:[0-9]+]], %[[V:[0-9]+]]) -> (%[[P]], %[[M]], %[[V]])
// CHECK: hcs.call "add"
// CHECK: hcs.loss
// Small buckets: one per gradient, each started right after its producer.
// BUCKETS: hcs.call "linear_grad_weight"
// BUCKETS-NEXT: hcs.buffer "grad" {offset = 0 : i64} : memref<16xf32>
// BUCKETS-NEXT: hcs.buffer "accum" {offset = 0 : i64} : memref<16xf32>
// BUCKETS-NEXT: hcs.call "grad_accumulate"
// BUCKETS-NEXT: hcs.allreduce_start {{.*}} {bucket_id = 0 : i64}
// BUCKETS: hcs.call "reduce_sum"
// BUCKETS-NEXT: hcs.buffer "grad" {offset = 64 : i64} : memref<16xf32>
// BUCKETS-NEXT: hcs.buffer "accum" {offset = 64 : i64} : memref<16xf32>
// BUCKETS-NEXT: hcs.call "grad_accumulate"
// BUCKETS-NEXT: hcs.allreduce_start {{.*}} {bucket_id = 1 : i64}
// BUCKETS: hcs.wait
// BUCKETS-NEXT: hcs.wait
// BUCKETS-NEXT: hcs.call "grad_norm"
// BUCKETS-NEXT: hcs.call "grad_clip"
// BUCKETS-NEXT: hcs.call "adamw"
func.func @forward(%x: tensor<4x3xf32> {hc.input = "x"}, %t: tensor<3x2xf32> {hc.input = "t"},
                   %w: tensor<2x3xf32> {hc.param = "w"}, %b: tensor<2xf32> {hc.param = "b"},
                   %step: tensor<i64> {hc.state = "adamw.step"},
                   %mw: tensor<2x3xf32> {hc.state = "adamw.m:w"}, %mb: tensor<2xf32> {hc.state = "adamw.m:b"},
                   %vw: tensor<2x3xf32> {hc.state = "adamw.v:w"}, %vb: tensor<2xf32> {hc.state = "adamw.v:b"})
    -> (tensor<f32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<i64>)
    attributes {hc.result_names = ["loss", "grad:w", "grad:b", "param:w", "param:b", "state:adamw.m:w", "state:adamw.m:b", "state:adamw.v:w", "state:adamw.v:b", "state:adamw.step"]} {
  %xt = hc.transpose %x {perm = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<3x4xf32>
  %xx = hc.matmul %xt, %x : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %y = hc.linear %xx, %w, %b : (tensor<3x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %l = hc.mse_loss %y, %t : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<f32>
  %one = hc.constant dense<1.0> : tensor<f32>
  %dy = hc.mse_loss_grad %one, %y, %t : (tensor<f32>, tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  %gw = hc.linear_grad_weight %dy, %xx : (tensor<3x2xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %gb = hc.reduce_sum %dy {axes = array<i64: 0>, keepdims = false} : tensor<3x2xf32> -> tensor<2xf32>
  %u:6 = hc.adamw %step, %w, %b, %gw, %gb, %mw, %mb, %vw, %vb {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<i64>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>)
  %c1 = hc.constant dense<1> : tensor<i64>
  %s1 = hc.add %step, %c1 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %l, %gw, %gb, %u#0, %u#1, %u#2, %u#3, %u#4, %u#5, %s1 : tensor<f32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<i64>
}
