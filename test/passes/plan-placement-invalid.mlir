// The hcs dialect's verifiers of #hcs.topology / #hcs.core_budget /
// #hcs.placement / #hcs.memory_plan (ScheduleAttrs.td, Placement.h): each
// near miss is refused with one message naming the attribute and what is
// wrong.
// RUN: hc-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{hcs.topology: core 1 is negative or in two clusters}}
func.func @step() attributes {hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0, 1], numa = 0, near = [0]>, #hcs.cluster<cores = [1], numa = 0, near = [0]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.topology: cluster 0's home NUMA node 0 is not among its near nodes}}
func.func @step() attributes {hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0], numa = 0, near = [1]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>, #hcs.numa_node<os = 1, kind = "HBM", bytes = 0>]>} {
  return
}

// -----

// The typed attribute checks its own lists.
// expected-error @+1 {{hcs.topology clusters must hold #hcs.cluster, not #hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>}}
func.func @step() attributes {hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.core_budget needs hcs.topology on the same op}}
func.func @step() attributes {hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "d", ranks = [#hcs.rank_cores<clusters = [0], compute = [0], comm = []>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.core_budget: rank 0 names core 7, which the topology does not have}}
func.func @step() attributes {hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0, 1], numa = 0, near = [0]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>]>, hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "d", ranks = [#hcs.rank_cores<clusters = [0], compute = [0], comm = [7]>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.core_budget: rank 1 uses core 1, which is already budgeted}}
func.func @step() attributes {hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0, 1], numa = 0, near = [0]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>]>, hcs.core_budget = #hcs.core_budget<ranks_per_node = 2, division = "d", ranks = [#hcs.rank_cores<clusters = [0], compute = [0], comm = [1]>, #hcs.rank_cores<clusters = [0], compute = [1], comm = []>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.core_budget: rank 0 lists clusters [0,1] but computes in [0]}}
func.func @step() attributes {hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0], numa = 0, near = [0]>, #hcs.cluster<cores = [1], numa = 0, near = [0]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>]>, hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "d", ranks = [#hcs.rank_cores<clusters = [0, 1], compute = [0], comm = [1]>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: slice of 'act' at 4096: expected offset 8192 (slices cover an arena in order, no gap or overlap)}}
func.func @step() attributes {hcs.arena_bytes = {act = 12288 : i64}, hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0], numa = 0, near = [0]>, #hcs.cluster<cores = [1], numa = 0, near = [0]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>]>, hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "d", ranks = [#hcs.rank_cores<clusters = [0, 1], compute = [0, 1], comm = []>]>, hcs.placement = #hcs.placement<page_bytes = 4096, slices = [#hcs.slice<arena = "act", offset = 0, bytes = 8192, owner = 0, numa = [0]>, #hcs.slice<arena = "act", offset = 4096, bytes = 8192, owner = 1, numa = [0]>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: arena 'act' is covered up to 8192 of its 12288 bytes}}
func.func @step() attributes {hcs.arena_bytes = {act = 12288 : i64}, hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0], numa = 0, near = [0]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>]>, hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "d", ranks = [#hcs.rank_cores<clusters = [0], compute = [0], comm = []>]>, hcs.placement = #hcs.placement<page_bytes = 4096, slices = [#hcs.slice<arena = "act", offset = 0, bytes = 8192, owner = 0, numa = [0]>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: slice of 'act' at 0: a slice other than the last is not whole pages}}
func.func @step() attributes {hcs.arena_bytes = {act = 12288 : i64}, hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0], numa = 0, near = [0]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>]>, hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "d", ranks = [#hcs.rank_cores<clusters = [0], compute = [0], comm = []>]>, hcs.placement = #hcs.placement<page_bytes = 4096, slices = [#hcs.slice<arena = "act", offset = 0, bytes = 100, owner = 0, numa = [0]>, #hcs.slice<arena = "act", offset = 100, bytes = 12188, owner = 0, numa = [0]>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: slice of 'act' at 0: rank 0's home NUMA node 1 is not near its owner, cluster 0}}
func.func @step() attributes {hcs.arena_bytes = {act = 4096 : i64}, hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0], numa = 0, near = [0]>, #hcs.cluster<cores = [1], numa = 1, near = [1]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>, #hcs.numa_node<os = 1, kind = "DRAM", bytes = 0>]>, hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "d", ranks = [#hcs.rank_cores<clusters = [0, 1], compute = [0, 1], comm = []>]>, hcs.placement = #hcs.placement<page_bytes = 4096, slices = [#hcs.slice<arena = "act", offset = 0, bytes = 4096, owner = 0, numa = [1]>]>} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: slice of 'act' at 0: owner 2 but rank 0 has 1 clusters}}
func.func @step() attributes {hcs.arena_bytes = {act = 4096 : i64}, hcs.topology = #hcs.topology<source = "t", summary = "s", split = 0, clusters = [#hcs.cluster<cores = [0], numa = 0, near = [0]>], numa = [#hcs.numa_node<os = 0, kind = "DRAM", bytes = 0>]>, hcs.core_budget = #hcs.core_budget<ranks_per_node = 1, division = "d", ranks = [#hcs.rank_cores<clusters = [0], compute = [0], comm = []>]>, hcs.placement = #hcs.placement<page_bytes = 4096, slices = [#hcs.slice<arena = "act", offset = 0, bytes = 4096, owner = 2, numa = [0]>]>} {
  return
}

// -----

// A plan fact of the wrong kind: hcs.memory must be the typed plan.
// expected-error @+1 {{'func.func' op hcs.memory must be #hcs.memory_plan}}
func.func @step() attributes {hcs.memory = {budget = 0 : i64}} {
  return
}

// -----

// expected-error @+1 {{hcs.memory: arena 'act' is in two tiers}}
func.func @step() attributes {hcs.memory = #hcs.memory_plan<budget = 0, reserve = 0, tiers = [#hcs.tier<name = "fast", kind = "HBM", capacity = 0, arenas = ["act"]>, #hcs.tier<name = "slow", kind = "DRAM", capacity = 0, arenas = ["act", "param"]>], recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  return
}
