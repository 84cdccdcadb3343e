// RUN: hc-opt %s --hc-lower-to-schedule | FileCheck %s

// A reshape is a view where NumPy's would be one (each run of dims it
// merges or splits is evenly strided) and a copy where not.
// x is NHWC [2, 2, 2, 3]; its NCHW transpose reshaped to [2, 3, 4] merges H
// and W (strides 6 and 3: a view), and transposed back it is x's own
// layout: the first add reads x through views alone. Reshaped to [2, 6, 2]
// instead, C and H merge (strides 1 and 6): that one is copied.
// CHECK-LABEL: func.func @step()
// CHECK: %[[X:.*]] = hcs.input "x_t" {index = 0 : i64} : memref<2x2x2x3xf32>
// CHECK-NOT: hcs.call "copy"
// CHECK: %[[U:.*]] = hcs.view %[[X]] : memref<2x2x2x3xf32> to memref<2x4x3xf32>
// CHECK-NOT: hcs.call "copy"
// CHECK: hcs.call "add"(%[[U]], %{{.*}}) -> (%[[Y:[0-9]+]])
// CHECK: %[[T:.*]] = hcs.view %[[X]] : memref<2x2x2x3xf32> to memref<2x3x2x2xf32, strided<[12, 1, 6, 3]>>
// CHECK-NEXT: hcs.call "copy"(%[[T]]) -> (%[[Z:[0-9]+]])
// CHECK-NEXT: %[[Z2:.*]] = hcs.view %[[Z]] : memref<2x3x2x2xf32> to memref<2x4x3xf32>
// CHECK-NOT: hcs.call "copy"
// CHECK: hcs.call "add"(%[[Y]], %[[Z2]])
// The output, copied into the buffer the host reads, as every output is.
// CHECK-NEXT: hcs.buffer "act" {name = "prediction"}
// CHECK-NEXT: hcs.call "copy"
func.func @forward(%x: tensor<2x2x2x3xf32> {hc.input = "x_t"},
                   %w: tensor<2x4x3xf32> {hc.param = "w"}) -> tensor<2x4x3xf32>
    attributes {hc.result_names = ["prediction"]} {
  %t = hc.transpose %x {perm = array<i64: 0, 3, 1, 2>} : tensor<2x2x2x3xf32> -> tensor<2x3x2x2xf32>
  %r = hc.reshape %t : tensor<2x3x2x2xf32> -> tensor<2x3x4xf32>
  %u = hc.transpose %r {perm = array<i64: 0, 2, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %y = hc.add %u, %w : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  %z = hc.reshape %t : tensor<2x3x2x2xf32> -> tensor<2x6x2xf32>
  %z2 = hc.reshape %z : tensor<2x6x2xf32> -> tensor<2x4x3xf32>
  %o = hc.add %y, %z2 : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
  return %o : tensor<2x4x3xf32>
}
