// The hcs dialect's verifier of hcs.topology / hcs.core_budget /
// hcs.placement (hc/Schedule/Placement.h): each near miss is refused with
// one message naming the attribute and what is wrong.
// RUN: hc-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{hcs.topology: core 1 is negative or in two clusters}}
func.func @step() attributes {hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0, 1>, numa = 0, near = array<i32: 0>}, {cores = array<i32: 1>, numa = 0, near = array<i32: 0>}], numa = [{os = 0, kind = "DRAM", bytes = 0}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.topology: cluster 0's home NUMA node 0 is not among its near nodes}}
func.func @step() attributes {hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0>, numa = 0, near = array<i32: 1>}], numa = [{os = 0, kind = "DRAM", bytes = 0}, {os = 1, kind = "HBM", bytes = 0}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.topology cluster: needs array<i32> 'cores'}}
func.func @step() attributes {hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = [0], numa = 0, near = array<i32: 0>}], numa = [{os = 0, kind = "DRAM", bytes = 0}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.core_budget needs hcs.topology on the same op}}
func.func @step() attributes {hcs.core_budget = {ranks_per_node = 1, division = "d", ranks = [{clusters = array<i32: 0>, compute = array<i32: 0>, comm = array<i32>}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.core_budget: rank 0 names core 7, which the topology does not have}}
func.func @step() attributes {hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0, 1>, numa = 0, near = array<i32: 0>}], numa = [{os = 0, kind = "DRAM", bytes = 0}]}, hcs.core_budget = {ranks_per_node = 1, division = "d", ranks = [{clusters = array<i32: 0>, compute = array<i32: 0>, comm = array<i32: 7>}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.core_budget: rank 1 uses core 1, which is already budgeted}}
func.func @step() attributes {hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0, 1>, numa = 0, near = array<i32: 0>}], numa = [{os = 0, kind = "DRAM", bytes = 0}]}, hcs.core_budget = {ranks_per_node = 2, division = "d", ranks = [{clusters = array<i32: 0>, compute = array<i32: 0>, comm = array<i32: 1>}, {clusters = array<i32: 0>, compute = array<i32: 1>, comm = array<i32>}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.core_budget: rank 0 lists clusters [0,1] but computes in [0]}}
func.func @step() attributes {hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0>, numa = 0, near = array<i32: 0>}, {cores = array<i32: 1>, numa = 0, near = array<i32: 0>}], numa = [{os = 0, kind = "DRAM", bytes = 0}]}, hcs.core_budget = {ranks_per_node = 1, division = "d", ranks = [{clusters = array<i32: 0, 1>, compute = array<i32: 0>, comm = array<i32: 1>}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: slice of 'act' at 4096: expected offset 8192 (slices cover an arena in order, no gap or overlap)}}
func.func @step() attributes {hcs.arena_bytes = {act = 12288 : i64}, hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0>, numa = 0, near = array<i32: 0>}, {cores = array<i32: 1>, numa = 0, near = array<i32: 0>}], numa = [{os = 0, kind = "DRAM", bytes = 0}]}, hcs.core_budget = {ranks_per_node = 1, division = "d", ranks = [{clusters = array<i32: 0, 1>, compute = array<i32: 0, 1>, comm = array<i32>}]}, hcs.placement = {page_bytes = 4096, slices = [{arena = "act", offset = 0, bytes = 8192, owner = 0, numa = array<i32: 0>}, {arena = "act", offset = 4096, bytes = 8192, owner = 1, numa = array<i32: 0>}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: arena 'act' is covered up to 8192 of its 12288 bytes}}
func.func @step() attributes {hcs.arena_bytes = {act = 12288 : i64}, hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0>, numa = 0, near = array<i32: 0>}], numa = [{os = 0, kind = "DRAM", bytes = 0}]}, hcs.core_budget = {ranks_per_node = 1, division = "d", ranks = [{clusters = array<i32: 0>, compute = array<i32: 0>, comm = array<i32>}]}, hcs.placement = {page_bytes = 4096, slices = [{arena = "act", offset = 0, bytes = 8192, owner = 0, numa = array<i32: 0>}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: slice of 'act' at 0: a slice other than the last is not whole pages}}
func.func @step() attributes {hcs.arena_bytes = {act = 12288 : i64}, hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0>, numa = 0, near = array<i32: 0>}], numa = [{os = 0, kind = "DRAM", bytes = 0}]}, hcs.core_budget = {ranks_per_node = 1, division = "d", ranks = [{clusters = array<i32: 0>, compute = array<i32: 0>, comm = array<i32>}]}, hcs.placement = {page_bytes = 4096, slices = [{arena = "act", offset = 0, bytes = 100, owner = 0, numa = array<i32: 0>}, {arena = "act", offset = 100, bytes = 12188, owner = 0, numa = array<i32: 0>}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: slice of 'act' at 0: rank 0's home NUMA node 1 is not near its owner, cluster 0}}
func.func @step() attributes {hcs.arena_bytes = {act = 4096 : i64}, hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0>, numa = 0, near = array<i32: 0>}, {cores = array<i32: 1>, numa = 1, near = array<i32: 1>}], numa = [{os = 0, kind = "DRAM", bytes = 0}, {os = 1, kind = "DRAM", bytes = 0}]}, hcs.core_budget = {ranks_per_node = 1, division = "d", ranks = [{clusters = array<i32: 0, 1>, compute = array<i32: 0, 1>, comm = array<i32>}]}, hcs.placement = {page_bytes = 4096, slices = [{arena = "act", offset = 0, bytes = 4096, owner = 0, numa = array<i32: 1>}]}} {
  return
}

// -----

// expected-error @+1 {{hcs.placement: slice of 'act' at 0: owner 2 but rank 0 has 1 clusters}}
func.func @step() attributes {hcs.arena_bytes = {act = 4096 : i64}, hcs.topology = {source = "t", summary = "s", split = 0, clusters = [{cores = array<i32: 0>, numa = 0, near = array<i32: 0>}], numa = [{os = 0, kind = "DRAM", bytes = 0}]}, hcs.core_budget = {ranks_per_node = 1, division = "d", ranks = [{clusters = array<i32: 0>, compute = array<i32: 0>, comm = array<i32>}]}, hcs.placement = {page_bytes = 4096, slices = [{arena = "act", offset = 0, bytes = 4096, owner = 2, numa = array<i32: 0>}]}} {
  return
}
