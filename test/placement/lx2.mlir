// The LX2-like die (test/topologies/lx2.xml): 4 clusters of 8 cores, each
// with its own on-package memory (HBM, NUMA 0-3), DDR (NUMA 4) behind.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/lx2.xml" --hc-verify-plan | FileCheck %s
// Two ranks on the die, one comm core each: rank 0 the first two clusters,
// rank 1 the last two; each arena in two slices per rank, homes on the
// owning cluster's HBM.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/lx2.xml ranks-per-node=2 comm-cores=1" --hc-verify-plan | FileCheck %s --check-prefix=TWO

// CHECK-LABEL: func.func @step()
// CHECK-SAME: hcs.arena_bytes = {act = 262144 : i64, param = 131072 : i64}
// One rank computes on all 32 cores of the 4 clusters, none reserved.
// CHECK-SAME: hcs.core_budget = {division = "{{[^"]*}}", ranks = [{clusters = array<i32: 0, 1, 2, 3>, comm = array<i32>, compute = array<i32: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31>}], ranks_per_node = 1 : i64}
// Slice k of each arena is owned by cluster k and homed on its HBM node k.
// CHECK-SAME: hcs.placement = {page_bytes = 4096 : i64, slices = [
// CHECK-SAME: {arena = "act", bytes = 65536 : i64, numa = array<i32: 0>, offset = 0 : i64, owner = 0 : i64},
// CHECK-SAME: {arena = "act", bytes = 65536 : i64, numa = array<i32: 1>, offset = 65536 : i64, owner = 1 : i64},
// CHECK-SAME: {arena = "act", bytes = 65536 : i64, numa = array<i32: 2>, offset = 131072 : i64, owner = 2 : i64},
// CHECK-SAME: {arena = "act", bytes = 65536 : i64, numa = array<i32: 3>, offset = 196608 : i64, owner = 3 : i64},
// CHECK-SAME: {arena = "param", bytes = 32768 : i64, numa = array<i32: 0>, offset = 0 : i64, owner = 0 : i64},
// CHECK-SAME: {arena = "param", bytes = 32768 : i64, numa = array<i32: 3>, offset = 98304 : i64, owner = 3 : i64}]}
// CHECK-SAME: hcs.topology = {clusters = [{cores = array<i32: 0, 1, 2, 3, 4, 5, 6, 7>, near = array<i32: 0, 4>, numa = 0 : i64},
// CHECK-SAME: {cores = array<i32: 24, 25, 26, 27, 28, 29, 30, 31>, near = array<i32: 3, 4>, numa = 3 : i64}]
// CHECK-SAME: numa = [{bytes = 17179869184 : i64, kind = "HBM", os = 0 : i64},
// CHECK-SAME: {bytes = 274877906944 : i64, kind = "DRAM", os = 4 : i64}]
// CHECK-SAME: summary = "32 cores in 4 clusters of 8, NUMA 4xHBM+1xDRAM"

// TWO-LABEL: func.func @step()
// TWO-SAME: ranks = [{clusters = array<i32: 0, 1>, comm = array<i32: 15>, compute = array<i32: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14>}, {clusters = array<i32: 2, 3>, comm = array<i32: 31>, compute = array<i32: 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30>}], ranks_per_node = 2 : i64}
// Per slice one home per rank: owner 0 is cluster 0 for rank 0, 2 for rank 1.
// TWO-SAME: {arena = "act", bytes = 131072 : i64, numa = array<i32: 0, 2>, offset = 0 : i64, owner = 0 : i64},
// TWO-SAME: {arena = "act", bytes = 131072 : i64, numa = array<i32: 1, 3>, offset = 131072 : i64, owner = 1 : i64},
// TWO-SAME: {arena = "param", bytes = 65536 : i64, numa = array<i32: 0, 2>, offset = 0 : i64, owner = 0 : i64},
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<32768xf32>
  %a = hcs.buffer "act" : memref<32768xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<32768xf32>) -> memref<32768xf32>
  %b = hcs.buffer "act" : memref<32768xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<32768xf32>) -> memref<32768xf32>
  hcs.call "add"(%a, %b) -> (%p) {} : (memref<32768xf32>, memref<32768xf32>) -> memref<32768xf32>
  return
}
