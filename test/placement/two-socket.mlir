// A 2-socket box (test/topologies/two-socket.xml): a DRAM NUMA node per
// socket, two L3 groups of 8 cores (SMT 2, one PU per core) per socket.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/two-socket.xml" --hc-verify-plan | FileCheck %s
// One rank per socket: each computes on its socket's two clusters, its
// slices homed on its own socket's node.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/two-socket.xml ranks-per-node=2" --hc-verify-plan | FileCheck %s --check-prefix=TWO

// CHECK-LABEL: func.func @step()
// CHECK-SAME: ranks_per_node = 1, division = "{{[^"]*}}", ranks = [#hcs.rank_cores<clusters = [0, 1, 2, 3], compute = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62], comm = []>]>
// Clusters 0, 1 are socket 0's (NUMA 0), 2, 3 socket 1's (NUMA 1).
// CHECK-SAME: #hcs.slice<arena = "act", offset = 0, bytes = 65536, owner = 0, numa = [0]>,
// CHECK-SAME: #hcs.slice<arena = "act", offset = 65536, bytes = 65536, owner = 1, numa = [0]>,
// CHECK-SAME: #hcs.slice<arena = "act", offset = 131072, bytes = 65536, owner = 2, numa = [1]>,
// CHECK-SAME: #hcs.slice<arena = "act", offset = 196608, bytes = 65536, owner = 3, numa = [1]>,
// CHECK-SAME: #hcs.slice<arena = "param", offset = 98304, bytes = 32768, owner = 3, numa = [1]>]>
// CHECK-SAME: summary = "32 cores in 4 clusters of 8, NUMA 2xDRAM"
// CHECK-SAME: #hcs.cluster<cores = [16, 18, 20, 22, 24, 26, 28, 30], numa = 0, near = [0]>,
// CHECK-SAME: #hcs.cluster<cores = [32, 34, 36, 38, 40, 42, 44, 46], numa = 1, near = [1]>,

// TWO-LABEL: func.func @step()
// TWO-SAME: ranks_per_node = 2, division = "{{[^"]*}}", ranks = [#hcs.rank_cores<clusters = [0, 1], compute = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30], comm = []>, #hcs.rank_cores<clusters = [2, 3], compute = [32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62], comm = []>]>
// TWO-SAME: #hcs.slice<arena = "act", offset = 0, bytes = 131072, owner = 0, numa = [0, 1]>,
// TWO-SAME: #hcs.slice<arena = "act", offset = 131072, bytes = 131072, owner = 1, numa = [0, 1]>,
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<32768xf32>
  %a = hcs.buffer "act" : memref<32768xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<32768xf32>) -> memref<32768xf32>
  %b = hcs.buffer "act" : memref<32768xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<32768xf32>) -> memref<32768xf32>
  hcs.call "add"(%a, %b) -> (%p) {} : (memref<32768xf32>, memref<32768xf32>) -> memref<32768xf32>
  return
}
