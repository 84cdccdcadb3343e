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
// CHECK-SAME: hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "{{[^"]*}}", ranks = [#hcs.rank_cores<clusters = [0, 1, 2, 3], compute = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31], comm = []>]>
// Slice k of each arena is owned by cluster k and homed on its HBM node k.
// CHECK-SAME: hcs.placement = #hcs.placement<page_bytes = 4096, slices = [
// CHECK-SAME: #hcs.slice<arena = "act", offset = 0, bytes = 65536, owner = 0, numa = [0]>,
// CHECK-SAME: #hcs.slice<arena = "act", offset = 65536, bytes = 65536, owner = 1, numa = [1]>,
// CHECK-SAME: #hcs.slice<arena = "act", offset = 131072, bytes = 65536, owner = 2, numa = [2]>,
// CHECK-SAME: #hcs.slice<arena = "act", offset = 196608, bytes = 65536, owner = 3, numa = [3]>,
// CHECK-SAME: #hcs.slice<arena = "param", offset = 0, bytes = 32768, owner = 0, numa = [0]>,
// CHECK-SAME: #hcs.slice<arena = "param", offset = 98304, bytes = 32768, owner = 3, numa = [3]>]>
// CHECK-SAME: hcs.topology = #hcs.topology<
// CHECK-SAME: summary = "32 cores in 4 clusters of 8, NUMA 4xHBM+1xDRAM", split = 0, clusters = [#hcs.cluster<cores = [0, 1, 2, 3, 4, 5, 6, 7], numa = 0, near = [0, 4]>,
// CHECK-SAME: #hcs.cluster<cores = [24, 25, 26, 27, 28, 29, 30, 31], numa = 3, near = [3, 4]>]
// CHECK-SAME: numa = [#hcs.numa_node<os = 0, kind = "HBM", bytes = 17179869184>,
// CHECK-SAME: #hcs.numa_node<os = 4, kind = "DRAM", bytes = 274877906944>]

// TWO-LABEL: func.func @step()
// TWO-SAME: ranks_per_node = 2, division = "{{[^"]*}}", ranks = [#hcs.rank_cores<clusters = [0, 1], compute = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], comm = [15]>, #hcs.rank_cores<clusters = [2, 3], compute = [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30], comm = [31]>]>
// Per slice one home per rank: owner 0 is cluster 0 for rank 0, 2 for rank 1.
// TWO-SAME: #hcs.slice<arena = "act", offset = 0, bytes = 131072, owner = 0, numa = [0, 2]>,
// TWO-SAME: #hcs.slice<arena = "act", offset = 131072, bytes = 131072, owner = 1, numa = [1, 3]>,
// TWO-SAME: #hcs.slice<arena = "param", offset = 0, bytes = 65536, owner = 0, numa = [0, 2]>,
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<32768xf32>
  %a = hcs.buffer "act" : memref<32768xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<32768xf32>) -> memref<32768xf32>
  %b = hcs.buffer "act" : memref<32768xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<32768xf32>) -> memref<32768xf32>
  hcs.call "add"(%a, %b) -> (%p) {} : (memref<32768xf32>, memref<32768xf32>) -> memref<32768xf32>
  return
}
