// A flat 16-core machine (test/topologies/flat16.xml): no cache draws a
// line, so it is one cluster unless --clusters cuts it.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat16.xml" --hc-verify-plan | FileCheck %s
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat16.xml clusters=4" --hc-verify-plan | FileCheck %s --check-prefix=FOUR

// CHECK-LABEL: func.func @step()
// CHECK-SAME: ranks = [#hcs.rank_cores<clusters = [0], compute = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], comm = []>]
// CHECK-SAME: slices = [#hcs.slice<arena = "act", offset = 0, bytes = 262144, owner = 0, numa = [0]>, #hcs.slice<arena = "param", offset = 0, bytes = 131072, owner = 0, numa = [0]>]>
// CHECK-SAME: summary = "16 cores in 1 cluster of 16, NUMA 1xDRAM", split = 0

// Four clusters of 4 on the one node: four slices per arena.
// FOUR-LABEL: func.func @step()
// FOUR-SAME: ranks = [#hcs.rank_cores<clusters = [0, 1, 2, 3], compute = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], comm = []>]
// FOUR-SAME: #hcs.slice<arena = "act", offset = 196608, bytes = 65536, owner = 3, numa = [0]>,
// FOUR-SAME: #hcs.slice<arena = "param", offset = 98304, bytes = 32768, owner = 3, numa = [0]>]>
// FOUR-SAME: summary = "16 cores in 4 clusters of 4, NUMA 1xDRAM", split = 4
// FOUR-SAME: clusters = [#hcs.cluster<cores = [0, 1, 2, 3], numa = 0, near = [0]>, #hcs.cluster<cores = [4, 5, 6, 7], numa = 0, near = [0]>,
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<32768xf32>
  %a = hcs.buffer "act" : memref<32768xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<32768xf32>) -> memref<32768xf32>
  %b = hcs.buffer "act" : memref<32768xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<32768xf32>) -> memref<32768xf32>
  hcs.call "add"(%a, %b) -> (%p) {} : (memref<32768xf32>, memref<32768xf32>) -> memref<32768xf32>
  return
}
