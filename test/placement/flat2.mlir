// A flat 2-core machine (test/topologies/flat2.xml): one cluster, one node.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml" --hc-verify-plan | FileCheck %s
// One core reserved for communication leaves one to compute.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml comm-cores=1" --hc-verify-plan | FileCheck %s --check-prefix=COMM
// Two ranks: a core each.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml ranks-per-node=2" --hc-verify-plan | FileCheck %s --check-prefix=TWO

// CHECK-LABEL: func.func @step()
// CHECK-SAME: ranks_per_node = 1, division = "{{[^"]*}}", ranks = [#hcs.rank_cores<clusters = [0], compute = [0, 1], comm = []>]>
// One cluster: each arena is one slice, whole.
// CHECK-SAME: slices = [#hcs.slice<arena = "act", offset = 0, bytes = 262144, owner = 0, numa = [0]>, #hcs.slice<arena = "param", offset = 0, bytes = 131072, owner = 0, numa = [0]>]>
// CHECK-SAME: summary = "2 cores in 1 cluster of 2, NUMA 1xDRAM"

// COMM-LABEL: func.func @step()
// COMM-SAME: ranks = [#hcs.rank_cores<clusters = [0], compute = [0], comm = [1]>]

// TWO-LABEL: func.func @step()
// TWO-SAME: ranks_per_node = 2, division = "{{[^"]*}}", ranks = [#hcs.rank_cores<clusters = [0], compute = [0], comm = []>, #hcs.rank_cores<clusters = [0], compute = [1], comm = []>]>
// TWO-SAME: numa = [0, 0]
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<32768xf32>
  %a = hcs.buffer "act" : memref<32768xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<32768xf32>) -> memref<32768xf32>
  %b = hcs.buffer "act" : memref<32768xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<32768xf32>) -> memref<32768xf32>
  hcs.call "add"(%a, %b) -> (%p) {} : (memref<32768xf32>, memref<32768xf32>) -> memref<32768xf32>
  return
}
