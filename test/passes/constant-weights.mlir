// RUN: hc-opt %s --split-input-file --hc-constant-weights | FileCheck %s

// A sampler: no op writes a parameter, so every linear whose W is a
// "param" buffer (or a view of one) keeps its packed panels; W from an
// "act" buffer (computed) does not, nor does matmul (no `weight` slot).
// No memory budget: nothing is recorded, libhcrt's own cap applies.
// CHECK-LABEL: func.func @sampler() {
// CHECK: hcs.call "linear"(%{{.*}}, %[[W:.*]], %{{.*}}) -> (%{{.*}}) {precision = "bf16", weight = "constant"}
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {weight = "constant"}
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {} :
// CHECK: hcs.call "matmul"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {} :
// CHECK: hcs.call "linear_gelu"(%{{.*}}, %{{.*}}) -> (%{{.*}}, %{{.*}}) {weight = "constant"}
func.func @sampler() {
  %x = hcs.buffer "act" {offset = 0 : i64} : memref<4x8xf32>
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<16x8xf32>
  %b = hcs.buffer "param" {name = "b", offset = 512 : i64} : memref<16xf32>
  %y = hcs.buffer "act" {offset = 128 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %w, %b) -> (%y) {precision = "bf16"} : (memref<4x8xf32>, memref<16x8xf32>, memref<16xf32>) -> memref<4x16xf32>
  %flat = hcs.buffer "param" {name = "w2", offset = 576 : i64} : memref<128xf32>
  %w2 = hcs.view %flat : memref<128xf32> to memref<16x8xf32>
  %y2 = hcs.buffer "act" {offset = 384 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %w2) -> (%y2) {} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  %wa = hcs.buffer "act" {offset = 640 : i64} : memref<16x8xf32>
  hcs.call "tanh"(%w) -> (%wa) {} : (memref<16x8xf32>) -> memref<16x8xf32>
  %y3 = hcs.buffer "act" {offset = 1152 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %wa) -> (%y3) {} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  %wt = hcs.view %w : memref<16x8xf32> to memref<8x16xf32, strided<[1, 8]>>
  %y4 = hcs.buffer "act" {offset = 1408 : i64} : memref<4x16xf32>
  hcs.call "matmul"(%x, %wt) -> (%y4) {} : (memref<4x8xf32>, memref<8x16xf32, strided<[1, 8]>>) -> memref<4x16xf32>
  %g = hcs.buffer "act" {offset = 1664 : i64} : memref<4x16xf32>
  %h = hcs.buffer "act" {offset = 1920 : i64} : memref<4x16xf32>
  hcs.call "linear_gelu"(%x, %w) -> (%g, %h) {} : (memref<4x8xf32>, memref<16x8xf32>) -> (memref<4x16xf32>, memref<4x16xf32>)
  return
}

// -----

// A training step: the optimizer writes the parameters through one
// unnamed buffer over the arena, so no linear reading them is marked; a
// frozen parameter outside the bytes it writes still is.
// CHECK-LABEL: func.func @train() {
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {} :
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {weight = "constant"}
// CHECK-NOT: weight = "constant"
func.func @train() {
  %x = hcs.buffer "act" {offset = 0 : i64} : memref<4x8xf32>
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<16x8xf32>
  %frozen = hcs.buffer "param" {name = "frozen", offset = 512 : i64} : memref<16x8xf32>
  %y = hcs.buffer "act" {offset = 128 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %w) -> (%y) {} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  %y2 = hcs.buffer "act" {offset = 384 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %frozen) -> (%y2) {} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  %all = hcs.buffer "param" {offset = 0 : i64} : memref<128xf32>
  %g = hcs.buffer "grad" {offset = 0 : i64} : memref<128xf32>
  hcs.call "sgd"(%g, %all) -> (%all) {lr = 1.0e-01 : f64, weight_decay = 0.0 : f64} : (memref<128xf32>, memref<128xf32>) -> memref<128xf32>
  return
}

// -----

// Another function of the module writes the parameter: the module shares
// the arena, so the first function's linear is not marked either.
// CHECK-LABEL: func.func @reads() {
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {} :
// CHECK-NOT: weight = "constant"
func.func @reads() {
  %x = hcs.buffer "act" {offset = 0 : i64} : memref<4x8xf32>
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<16x8xf32>
  %y = hcs.buffer "act" {offset = 128 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %w) -> (%y) {} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  return
}
func.func @writes() {
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<16x8xf32>
  %v = hcs.view %w : memref<16x8xf32> to memref<128xf32>
  %t = hcs.buffer "act" {offset = 0 : i64} : memref<128xf32>
  hcs.call "tanh"(%t) -> (%v) {} : (memref<128xf32>) -> memref<128xf32>
  return
}

// -----

// A write to the param arena whose bytes are not planned (no offset): no
// weight can be shown constant, none is marked.
// CHECK-LABEL: func.func @unplanned() {
// CHECK-NOT: weight = "constant"
func.func @unplanned() {
  %x = hcs.buffer "act" {offset = 0 : i64} : memref<4x8xf32>
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<16x8xf32>
  %y = hcs.buffer "act" {offset = 128 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %w) -> (%y) {} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  %other = hcs.buffer "param" {name = "other"} : memref<16xf32>
  %t = hcs.buffer "act" {offset = 384 : i64} : memref<16xf32>
  hcs.call "tanh"(%t) -> (%other) {} : (memref<16xf32>) -> memref<16xf32>
  return
}

// -----

// Under a memory budget: the room is the budget less the arenas and the
// reserve, 3072 + 20480 + 100 - 3072. A weight of 16 x 8 counts as
// ((64 + 64) x 8) floats and 16 KiB: the first weight's panels fit and
// every call reading it is marked; the second's do not, its call is left.
// A third weight, a slice of the second's buffer at another offset, is
// another weight: no room for it either.
// CHECK-LABEL: func.func @budget
// CHECK-SAME: hcs.kept_weights_bytes = 20480 : i64
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {weight = "constant"}
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {} :
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {weight = "constant"}
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%{{.*}}) {} :
func.func @budget() attributes {hcs.arena_bytes = {act = 2048 : i64, param = 1024 : i64}, hcs.memory = #hcs.memory_plan<budget = 23652, reserve = 0, tiers = [#hcs.tier<arenas = ["act", "param"], capacity = 0, kind = "DRAM", name = "slow">], recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  %x = hcs.buffer "act" {offset = 0 : i64} : memref<4x8xf32>
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<16x8xf32>
  %w2 = hcs.buffer "param" {name = "w2", offset = 512 : i64} : memref<16x8xf32>
  %y = hcs.buffer "act" {offset = 128 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %w) -> (%y) {} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  %y2 = hcs.buffer "act" {offset = 384 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %w2) -> (%y2) {} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  %y3 = hcs.buffer "act" {offset = 640 : i64} : memref<4x16xf32>
  hcs.call "linear"(%x, %w) -> (%y3) {} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  %w3 = hcs.view %w2 : memref<16x8xf32> to memref<8x8xf32, strided<[8, 1], offset: 64>>
  %y4 = hcs.buffer "act" {offset = 896 : i64} : memref<4x8xf32>
  hcs.call "linear"(%x, %w3) -> (%y4) {} : (memref<4x8xf32>, memref<8x8xf32, strided<[8, 1], offset: 64>>) -> memref<4x8xf32>
  return
}
