// A Xeon-Max-like node in flat mode, SNC4 (test/topologies/xeon-max.xml):
// 4 clusters of 4 cores, each with a DRAM node (0, 2, 4, 6; 32 GiB) and an
// HBM node (1, 3, 5, 7; 16 GiB) beside it.
// RUN: hc-opt %s --hc-plan-placement="topology=%S/../topologies/xeon-max.xml" --hc-verify-plan | FileCheck %s

// The cores' home is the DRAM node; data prefers the HBM node beside it.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: ranks = [#hcs.rank_cores<clusters = [0, 1, 2, 3], compute = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30], comm = []>]
// An 80 GiB act arena: its 20 GiB slices do not fit a 16 GiB HBM node, so
// they go to the DRAM node beside it ...
// CHECK-SAME: #hcs.slice<arena = "act", offset = 0, bytes = 21474836480, owner = 0, numa = [0]>,
// CHECK-SAME: #hcs.slice<arena = "act", offset = 21474836480, bytes = 21474836480, owner = 1, numa = [2]>,
// CHECK-SAME: #hcs.slice<arena = "act", offset = 42949672960, bytes = 21474836480, owner = 2, numa = [4]>,
// CHECK-SAME: #hcs.slice<arena = "act", offset = 64424509440, bytes = 21474836480, owner = 3, numa = [6]>,
// ... while the parameters' slices fit the HBM.
// CHECK-SAME: #hcs.slice<arena = "param", offset = 0, bytes = 32768, owner = 0, numa = [1]>,
// CHECK-SAME: #hcs.slice<arena = "param", offset = 32768, bytes = 32768, owner = 1, numa = [3]>,
// CHECK-SAME: #hcs.slice<arena = "param", offset = 65536, bytes = 32768, owner = 2, numa = [5]>,
// CHECK-SAME: #hcs.slice<arena = "param", offset = 98304, bytes = 32768, owner = 3, numa = [7]>]>
// CHECK-SAME: summary = "16 cores in 4 clusters of 4, NUMA 4xDRAM+4xHBM"
// CHECK-SAME: clusters = [#hcs.cluster<cores = [0, 2, 4, 6], numa = 0, near = [1, 0]>,
// CHECK-SAME: #hcs.numa_node<os = 1, kind = "HBM", bytes = 17179869184>,
func.func @step() attributes {hcs.arena_bytes = {act = 85899345920 : i64, param = 131072 : i64}} {
  return
}
