// RUN: hc-opt %s --hc-lower-to-schedule | FileCheck %s --implicit-check-not=allreduce --implicit-check-not='"grad"' --implicit-check-not=adamw

// A sampler (after hc-extract-sampler): no gradients, so no grad arena,
// buckets or optimizer; the output, a transposed view here, is copied into
// the named "act" buffer "prediction" that the host reads after the step,
// and that buffer is the last thing written.
// CHECK-LABEL: func.func @step()
// CHECK: %[[X:.*]] = hcs.input "x_t" {index = 0 : i64} : memref<2x3xf32>
// CHECK: hcs.call "mul"(%[[X]], %{{.*}}) -> (%[[M:[0-9]+]])
// CHECK: %[[OUT:.*]] = hcs.buffer "act" {name = "prediction"} : memref<3x2xf32>
// CHECK-NEXT: %[[V:.*]] = hcs.view %[[M]] : memref<2x3xf32> to memref<3x2xf32, strided<[1, 3]>>
// CHECK-NEXT: hcs.call "copy"(%[[V]]) -> (%[[OUT]])
// CHECK-NEXT: hcs.loss %[[OUT]] : memref<3x2xf32>
// CHECK-NEXT: return
func.func @forward(%x: tensor<2x3xf32> {hc.input = "x_t"},
                   %w: tensor<2x3xf32> {hc.param = "w"}) -> tensor<3x2xf32>
    attributes {hc.result_names = ["prediction"]} {
  %m = hc.mul %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = hc.transpose %m {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return %t : tensor<3x2xf32>
}
