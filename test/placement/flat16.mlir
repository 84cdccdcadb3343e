// A flat 16-core machine (test/topologies/flat16.xml): no cache draws a
// line, so it is one cluster unless --clusters cuts it.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat16.xml" --hc-verify-plan | FileCheck %s
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat16.xml clusters=4" --hc-verify-plan | FileCheck %s --check-prefix=FOUR

// CHECK-LABEL: func.func @step()
// CHECK-SAME: ranks = [{clusters = array<i32: 0>, comm = array<i32>, compute = array<i32: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15>}]
// CHECK-SAME: slices = [{arena = "act", bytes = 262144 : i64, numa = array<i32: 0>, offset = 0 : i64, owner = 0 : i64}, {arena = "param", bytes = 131072 : i64, numa = array<i32: 0>, offset = 0 : i64, owner = 0 : i64}]}
// CHECK-SAME: split = 0 : i64, summary = "16 cores in 1 cluster of 16, NUMA 1xDRAM"

// Four clusters of 4 on the one node: four slices per arena.
// FOUR-LABEL: func.func @step()
// FOUR-SAME: ranks = [{clusters = array<i32: 0, 1, 2, 3>, comm = array<i32>, compute = array<i32: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15>}]
// FOUR-SAME: {arena = "act", bytes = 65536 : i64, numa = array<i32: 0>, offset = 196608 : i64, owner = 3 : i64},
// FOUR-SAME: {arena = "param", bytes = 32768 : i64, numa = array<i32: 0>, offset = 98304 : i64, owner = 3 : i64}]}
// FOUR-SAME: clusters = [{cores = array<i32: 0, 1, 2, 3>, near = array<i32: 0>, numa = 0 : i64}, {cores = array<i32: 4, 5, 6, 7>, near = array<i32: 0>, numa = 0 : i64},
// FOUR-SAME: split = 4 : i64, summary = "16 cores in 4 clusters of 4, NUMA 1xDRAM"
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<32768xf32>
  %a = hcs.buffer "act" : memref<32768xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<32768xf32>) -> memref<32768xf32>
  %b = hcs.buffer "act" : memref<32768xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<32768xf32>) -> memref<32768xf32>
  hcs.call "add"(%a, %b) -> (%p) {} : (memref<32768xf32>, memref<32768xf32>) -> memref<32768xf32>
  return
}
