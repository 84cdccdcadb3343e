// A 2-socket box (test/topologies/two-socket.xml): a DRAM NUMA node per
// socket, two L3 groups of 8 cores (SMT 2, one PU per core) per socket.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/two-socket.xml" --hc-verify-plan | FileCheck %s
// One rank per socket: each computes on its socket's two clusters, its
// slices homed on its own socket's node.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/two-socket.xml ranks-per-node=2" --hc-verify-plan | FileCheck %s --check-prefix=TWO

// CHECK-LABEL: func.func @step()
// CHECK-SAME: ranks = [{clusters = array<i32: 0, 1, 2, 3>, comm = array<i32>, compute = array<i32: 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62>}], ranks_per_node = 1 : i64}
// Clusters 0, 1 are socket 0's (NUMA 0), 2, 3 socket 1's (NUMA 1).
// CHECK-SAME: {arena = "act", bytes = 65536 : i64, numa = array<i32: 0>, offset = 0 : i64, owner = 0 : i64},
// CHECK-SAME: {arena = "act", bytes = 65536 : i64, numa = array<i32: 0>, offset = 65536 : i64, owner = 1 : i64},
// CHECK-SAME: {arena = "act", bytes = 65536 : i64, numa = array<i32: 1>, offset = 131072 : i64, owner = 2 : i64},
// CHECK-SAME: {arena = "act", bytes = 65536 : i64, numa = array<i32: 1>, offset = 196608 : i64, owner = 3 : i64},
// CHECK-SAME: {arena = "param", bytes = 32768 : i64, numa = array<i32: 1>, offset = 98304 : i64, owner = 3 : i64}]}
// CHECK-SAME: {cores = array<i32: 16, 18, 20, 22, 24, 26, 28, 30>, near = array<i32: 0>, numa = 0 : i64},
// CHECK-SAME: {cores = array<i32: 32, 34, 36, 38, 40, 42, 44, 46>, near = array<i32: 1>, numa = 1 : i64},
// CHECK-SAME: summary = "32 cores in 4 clusters of 8, NUMA 2xDRAM"

// TWO-LABEL: func.func @step()
// TWO-SAME: ranks = [{clusters = array<i32: 0, 1>, comm = array<i32>, compute = array<i32: 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30>}, {clusters = array<i32: 2, 3>, comm = array<i32>, compute = array<i32: 32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62>}], ranks_per_node = 2 : i64}
// TWO-SAME: {arena = "act", bytes = 131072 : i64, numa = array<i32: 0, 1>, offset = 0 : i64, owner = 0 : i64},
// TWO-SAME: {arena = "act", bytes = 131072 : i64, numa = array<i32: 0, 1>, offset = 131072 : i64, owner = 1 : i64},
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<32768xf32>
  %a = hcs.buffer "act" : memref<32768xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<32768xf32>) -> memref<32768xf32>
  %b = hcs.buffer "act" : memref<32768xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<32768xf32>) -> memref<32768xf32>
  hcs.call "add"(%a, %b) -> (%p) {} : (memref<32768xf32>, memref<32768xf32>) -> memref<32768xf32>
  return
}
