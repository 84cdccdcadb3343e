// hc-plan-placement: the topology, core budget and arena placement on
// @step. One file per committed topology is in test/placement/; this one
// covers the pass's options and errors.
//
// An hwloc synthetic string (no memory kinds: DRAM): 2 sockets of 2 cores.
// RUN: hc-opt %s --hc-plan-placement="topology='pack:2 numa:1 core:2 pu:1'" --hc-verify-plan | FileCheck %s --check-prefix=SYN
// SYN-LABEL: func.func @step()
// SYN-SAME: ranks = [#hcs.rank_cores<clusters = [0, 1], compute = [0, 1, 2, 3], comm = []>]
// SYN-SAME: slices = [#hcs.slice<arena = "act", offset = 0, bytes = 8192, owner = 0, numa = [0]>, #hcs.slice<arena = "act", offset = 8192, bytes = 4096, owner = 1, numa = [1]>,
// A one-page arena is owned by the first cluster.
// SYN-SAME: #hcs.slice<arena = "state", offset = 0, bytes = 8, owner = 0, numa = [0]>]>
// SYN-SAME: source = "pack:2 numa:1 core:2 pu:1", summary = "4 cores in 2 clusters of 2, NUMA 2xDRAM", split = 0
//
// The default is this machine (native): whatever it is, every arena is
// placed and the plan verifies.
// RUN: hc-opt %s --hc-plan-placement --hc-verify-plan | FileCheck %s --check-prefix=NATIVE
// NATIVE-LABEL: func.func @step()
// NATIVE-SAME: hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "contiguous shares of the node's cores in cluster order; comm cores are the last of a share", ranks = [#hcs.rank_cores<clusters = [0
// NATIVE-SAME: #hcs.slice<arena = "state", offset = {{[0-9]+}}, bytes = 8,
// NATIVE-SAME: hcs.topology = #hcs.topology<source = "native", summary = "{{[0-9]+}} cores in
//
// A function without a buffer plan is left alone.
// NATIVE: func.func @helper() {
//
// Errors name the flag the driver maps the option to.
// RUN: not hc-opt %s --hc-plan-placement="topology=%S/../topologies/flat2.xml comm-cores=2" 2>&1 | FileCheck %s --check-prefix=COMM
// COMM: error: --comm-cores 2 leaves rank 0 no compute core: its share is 2 of the topology's 2 cores
// RUN: not hc-opt %s --hc-plan-placement="topology=%S/../topologies/flat2.xml ranks-per-node=3" 2>&1 | FileCheck %s --check-prefix=RANKS
// RANKS: error: --ranks-per-node 3 exceeds the 2 cores of the topology
// RUN: not hc-opt %s --hc-plan-placement="topology=%S/../topologies/two-socket.xml clusters=3" 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: error: --clusters 3 would put cluster 1 across NUMA nodes 0 and 1
// RUN: not hc-opt %s --hc-plan-placement="topology=%S/../topologies/flat2.xml clusters=3" 2>&1 | FileCheck %s --check-prefix=MANY
// MANY: error: --clusters 3 must be between 1 and the 2 cores of the topology
// RUN: not hc-opt %s --hc-plan-placement="topology=%t.missing.xml" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: --topology {{.*}}missing.xml: hwloc cannot load topology
func.func @step() attributes {hcs.arena_bytes = {act = 12288 : i64, state = 8 : i64}} {
  return
}
func.func @helper() {
  return
}
