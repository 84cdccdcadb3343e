// A Xeon-Max-like node in flat mode, SNC4 (test/topologies/xeon-max.xml):
// 4 clusters of 4 cores, each with a DRAM node (0, 2, 4, 6; 32 GiB) and an
// HBM node (1, 3, 5, 7; 16 GiB) beside it.
// RUN: hc-opt %s --hc-plan-placement="topology=%S/../topologies/xeon-max.xml" --hc-verify-plan | FileCheck %s

// The cores' home is the DRAM node; data prefers the HBM node beside it.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: ranks = [{clusters = array<i32: 0, 1, 2, 3>, comm = array<i32>, compute = array<i32: 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30>}]
// An 80 GiB act arena: its 20 GiB slices do not fit a 16 GiB HBM node, so
// they go to the DRAM node beside it ...
// CHECK-SAME: {arena = "act", bytes = 21474836480 : i64, numa = array<i32: 0>, offset = 0 : i64, owner = 0 : i64},
// CHECK-SAME: {arena = "act", bytes = 21474836480 : i64, numa = array<i32: 2>, offset = 21474836480 : i64, owner = 1 : i64},
// CHECK-SAME: {arena = "act", bytes = 21474836480 : i64, numa = array<i32: 4>, offset = 42949672960 : i64, owner = 2 : i64},
// CHECK-SAME: {arena = "act", bytes = 21474836480 : i64, numa = array<i32: 6>, offset = 64424509440 : i64, owner = 3 : i64},
// ... while the parameters' slices fit the HBM.
// CHECK-SAME: {arena = "param", bytes = 32768 : i64, numa = array<i32: 1>, offset = 0 : i64, owner = 0 : i64},
// CHECK-SAME: {arena = "param", bytes = 32768 : i64, numa = array<i32: 3>, offset = 32768 : i64, owner = 1 : i64},
// CHECK-SAME: {arena = "param", bytes = 32768 : i64, numa = array<i32: 5>, offset = 65536 : i64, owner = 2 : i64},
// CHECK-SAME: {arena = "param", bytes = 32768 : i64, numa = array<i32: 7>, offset = 98304 : i64, owner = 3 : i64}]}
// CHECK-SAME: clusters = [{cores = array<i32: 0, 2, 4, 6>, near = array<i32: 1, 0>, numa = 0 : i64},
// CHECK-SAME: {bytes = 17179869184 : i64, kind = "HBM", os = 1 : i64},
// CHECK-SAME: summary = "16 cores in 4 clusters of 4, NUMA 4xDRAM+4xHBM"
func.func @step() attributes {hcs.arena_bytes = {act = 85899345920 : i64, param = 131072 : i64}} {
  return
}
