// RUN: hc-opt %s --hc-verify-plan -split-input-file -verify-diagnostics

// A hand-made plan where two simultaneously live buffers overlap: rejected.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{overlaps a buffer that is live at the same time: [0, 256) and [128, 384)}}
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  // expected-note @+1 {{the other buffer}}
  %b = hcs.buffer "act" {offset = 128 : i64} : memref<64xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// The same offsets are fine when the buffers are never live together.
func.func @step() attributes {hcs.arena_bytes = {act = 384 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  hcs.call "exp"(%a) -> (%p) {} : (memref<64xf32>) -> memref<64xf32>
  %b = hcs.buffer "act" {offset = 128 : i64} : memref<64xf32>
  hcs.call "neg"(%p) -> (%b) {} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

func.func @step() attributes {hcs.arena_bytes = {act = 128 : i64}} {
  // expected-error @+1 {{buffer [0, 256) lies outside arena 'act'}}
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  return
}

// -----

func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64}} {
  // expected-error @+1 {{buffer has no offset: run hc-plan-buffers}}
  %a = hcs.buffer "act" : memref<64xf32>
  return
}

// -----

// The access model makes every asynchronous op a request the verifier
// follows to its wait: an all-reduce never waited for is refused like a tier
// copy is.
func.func @step() attributes {hcs.arena_bytes = {grad = 256 : i64}} {
  %g = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{all-reduce is never waited for}}
  %t = hcs.allreduce_start %g {bucket_id = 0 : i64} : memref<64xf32>
  return
}

// -----

// A kernel writing into a gradient bucket whose all-reduce is in flight.
func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64, grad = 512 : i64}} {
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  %g0 = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  %g1 = hcs.buffer "grad" {offset = 256 : i64} : memref<64xf32>
  hcs.call "tanh"(%a) -> (%g0) {} : (memref<64xf32>) -> memref<64xf32>
  %b0 = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  // expected-note @+1 {{the all-reduce starts here}}
  %t0 = hcs.allreduce_start %b0 {bucket_id = 0 : i64} : memref<64xf32>
  // Another bucket's bytes may be written meanwhile...
  hcs.call "exp"(%a) -> (%g1) {} : (memref<64xf32>) -> memref<64xf32>
  %v = hcs.view %g0 : memref<64xf32> to memref<8x8xf32>
  // ...but not this one's, not even through a view.
  // expected-error @+1 {{touches gradient bytes [0, 256) of bucket 0 while its all-reduce is in flight}}
  hcs.call "neg"(%v) -> (%a) {} : (memref<8x8xf32>) -> memref<64xf32>
  hcs.wait %t0
  return
}

// -----

// The same read after the wait is fine.
func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64, grad = 256 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  %g0 = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%g0) {} : (memref<64xf32>) -> memref<64xf32>
  %t0 = hcs.allreduce_start %g0 {bucket_id = 0 : i64} : memref<64xf32>
  hcs.wait %t0
  hcs.call "neg"(%g0) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// AutoMem (hc-automem): a kernel reads a prefetch's target before the
// prefetch is waited on.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, offload = 256 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  %s = hcs.buffer "offload" {offset = 0 : i64} : memref<64xf32>
  %t = hcs.offload %a to %s : memref<64xf32> to memref<64xf32>
  hcs.wait %t
  %b = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
  // expected-note @+1 {{the copy starts here}}
  %t2 = hcs.prefetch %s to %b : memref<64xf32> to memref<64xf32>
  // expected-error @+1 {{touches the target ('act' bytes [256, 512)) of a tier copy in flight}}
  hcs.call "exp"(%b) -> (%p) {} : (memref<64xf32>) -> memref<64xf32>
  hcs.wait %t2
  return
}

// -----

// An offload's source overwritten while the copy runs.
func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64, offload = 256 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  %s = hcs.buffer "offload" {offset = 0 : i64} : memref<64xf32>
  // expected-note @+1 {{the copy starts here}}
  %t = hcs.offload %a to %s : memref<64xf32> to memref<64xf32>
  // The source's bytes are named (before the access model, the target's were).
  // expected-error @+1 {{writes the source ('act' bytes [0, 256)) of a tier copy in flight}}
  hcs.call "exp"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  hcs.wait %t
  return
}

// -----

// A piece of a copy (hc-cftp cuts copies by clusters) holds only its own
// bytes: the other half of its buffer may be written meanwhile, its own half
// not.
func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64, offload = 256 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  %s = hcs.buffer "offload" {offset = 0 : i64} : memref<64xf32>
  %a0 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1]>>
  %s0 = hcs.view %s : memref<64xf32> to memref<32xf32, strided<[1]>>
  // expected-note @+1 {{the copy starts here}}
  %t = hcs.offload %a0 to %s0 : memref<32xf32, strided<[1]>> to memref<32xf32, strided<[1]>>
  %p1 = hcs.view %p : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  %a1 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  hcs.call "exp"(%p1) -> (%a1) {} : (memref<32xf32, strided<[1], offset: 32>>) -> memref<32xf32, strided<[1], offset: 32>>
  // expected-error @+1 {{writes the source ('act' bytes [0, 128)) of a tier copy in flight}}
  hcs.call "exp"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  hcs.wait %t
  return
}

// -----

func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64, offload = 256 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  %s = hcs.buffer "offload" {offset = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{tier copy is never waited for}}
  %t = hcs.offload %a to %s : memref<64xf32> to memref<64xf32>
  return
}

// -----

// A use redirected to a recomputation's buffer that comes too late.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  // expected-note @+1 {{the buffer}}
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  %b = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
  // expected-error @+1 {{reads an 'act' buffer before anything writes it (a recomputation or prefetch must come first)}}
  hcs.call "exp"(%a) -> (%b) {} : (memref<64xf32>) -> memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} {hcs.recompute} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// The fast tier's arenas exceed its capacity.
// expected-error @+1 {{memory tier 'fast' needs 512 bytes, over its capacity of 300}}
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}, hcs.memory = #hcs.memory_plan<budget = 0, reserve = 0, tiers = [#hcs.tier<arenas = ["act"], capacity = 300, kind = "HBM", name = "fast">, #hcs.tier<arenas = ["param"], capacity = 0, kind = "DRAM", name = "slow">], recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  return
}

// -----

// All arenas plus the reserve exceed the budget.
// expected-error @+1 {{the plan needs 1792 bytes (arenas 768 + reserve 1024), over the budget of 1500}}
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}, hcs.memory = #hcs.memory_plan<budget = 1500, reserve = 1024, tiers = [#hcs.tier<arenas = ["act", "param"], capacity = 0, kind = "DRAM", name = "slow">], recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  return
}

// -----

// The kept panels of constant weights (hc-constant-weights) count too: the
// plan below fits without them.
// expected-error @+1 {{the plan needs 1856 bytes (arenas 768 + reserve 1024 + kept weight panels 64), over the budget of 1792}}
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}, hcs.kept_weights_bytes = 64 : i64, hcs.memory = #hcs.memory_plan<budget = 1792, reserve = 1024, tiers = [#hcs.tier<arenas = ["act", "param"], capacity = 0, kind = "DRAM", name = "slow">], recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  return
}

// -----

// The same plan within its budget and tier.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}, hcs.memory = #hcs.memory_plan<budget = 1792, reserve = 1024, tiers = [#hcs.tier<arenas = ["act"], capacity = 512, kind = "HBM", name = "fast">, #hcs.tier<arenas = ["param"], capacity = 0, kind = "DRAM", name = "slow">], recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  return
}

// -----

// CFTP streams (hc-cftp): cluster 0 reads the rows cluster 1 wrote with no
// hcs.cluster_wait between them: rejected, naming both ops.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  %a0 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1]>>
  %a1 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  %p0 = hcs.view %p : memref<64xf32> to memref<32xf32, strided<[1]>>
  %p1 = hcs.view %p : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  hcs.call "tanh"(%p0) -> (%a0) {} {cluster = 0 : i64} : (memref<32xf32, strided<[1]>>) -> memref<32xf32, strided<[1]>>
  // expected-note @+1 {{the other cluster's op}}
  hcs.call "tanh"(%p1) -> (%a1) {} {cluster = 1 : i64} : (memref<32xf32, strided<[1], offset: 32>>) -> memref<32xf32, strided<[1], offset: 32>>
  %b = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
  // expected-error @+1 {{cluster 0 reads bytes [128, 256) of arena 'act' that cluster 1 wrote in its op 0, with no hcs.cluster_wait ordering them}}
  hcs.call "exp"(%a) -> (%b) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// The same with the wait: accepted. Cluster 1 then overwrites bytes cluster
// 0 read (a buffer the plan reuses): it must wait for that read too.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  %a0 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1]>>
  %a1 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  %p0 = hcs.view %p : memref<64xf32> to memref<32xf32, strided<[1]>>
  %p1 = hcs.view %p : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  hcs.call "tanh"(%p0) -> (%a0) {} {cluster = 0 : i64} : (memref<32xf32, strided<[1]>>) -> memref<32xf32, strided<[1]>>
  hcs.call "tanh"(%p1) -> (%a1) {} {cluster = 1 : i64} : (memref<32xf32, strided<[1], offset: 32>>) -> memref<32xf32, strided<[1], offset: 32>>
  %b = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64}
  // expected-note @+1 {{the other cluster's op}}
  hcs.call "exp"(%a) -> (%b) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32>
  %c = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{cluster 1 writes bytes [0, 256) of arena 'act' that cluster 0 read in its op 1, with no hcs.cluster_wait ordering them}}
  hcs.call "neg"(%p) -> (%c) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// A wait for an op that comes later in program order could deadlock.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{waits for op 1 of cluster 1, which has only 0 before this point: the streams could deadlock}}
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64}
  hcs.call "tanh"(%p) -> (%a) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// A CFTP plan with tier copies (cftp.mlir's last case, smaller) without the
// wait that orders cluster 1's write of the offloaded bytes after the
// copy's hcs.wait: the copy reads them until then.
func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64, offload = 4096 : i64}} {
  %x = hcs.input "x" {index = 0 : i64} : memref<4x8xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<4x8xf32>
  hcs.call "gelu"(%x) -> (%a) {approximate = "tanh"} {cluster = 0 : i64} : (memref<4x8xf32>) -> memref<4x8xf32>
  %o = hcs.buffer "offload" {offset = 0 : i64} : memref<4x8xf32>
  %t0 = hcs.offload %a to %o {cluster = 0 : i64} : memref<4x8xf32> to memref<4x8xf32>
  // expected-note @+1 {{the other cluster's op}}
  hcs.wait %t0 {cluster = 0 : i64}
  %b = hcs.buffer "act" {offset = 0 : i64} : memref<4x8xf32>
  %b1 = hcs.view %b : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  %x1 = hcs.view %x : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  // expected-error @+1 {{cluster 1 writes bytes [64, 128) of arena 'act' that cluster 0 read in its op 2, with no hcs.cluster_wait ordering them}}
  hcs.call "exp"(%x1) -> (%b1) {} {cluster = 1 : i64, split = "rows"} : (memref<2x8xf32, strided<[8, 1], offset: 16>>) -> memref<2x8xf32, strided<[8, 1], offset: 16>>
  return
}

// -----

// The same plan with the wait: it verifies.
func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64, offload = 4096 : i64}} {
  %x = hcs.input "x" {index = 0 : i64} : memref<4x8xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<4x8xf32>
  hcs.call "gelu"(%x) -> (%a) {approximate = "tanh"} {cluster = 0 : i64} : (memref<4x8xf32>) -> memref<4x8xf32>
  %o = hcs.buffer "offload" {offset = 0 : i64} : memref<4x8xf32>
  %t0 = hcs.offload %a to %o {cluster = 0 : i64} : memref<4x8xf32> to memref<4x8xf32>
  hcs.wait %t0 {cluster = 0 : i64}
  %b = hcs.buffer "act" {offset = 0 : i64} : memref<4x8xf32>
  %b1 = hcs.view %b : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  %x1 = hcs.view %x : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  hcs.cluster_wait {cluster = 1 : i64, count = 3 : i64, source = 0 : i64}
  hcs.call "exp"(%x1) -> (%b1) {} {cluster = 1 : i64, split = "rows"} : (memref<2x8xf32, strided<[8, 1], offset: 16>>) -> memref<2x8xf32, strided<[8, 1], offset: 16>>
  return
}

// -----

// A wait scoped to an all-reduce start (only_for) orders that start alone:
// cluster 0's wait for the sum, which touches the bytes cluster 1 wrote,
// needs a wait of its own.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, grad = 256 : i64}} {
  %g = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  %g1 = hcs.view %g : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  %p = hcs.input "x" {index = 0 : i64} : memref<32xf32>
  // expected-note @+1 {{the other cluster's op}}
  hcs.call "tanh"(%p) -> (%g1) {} {cluster = 1 : i64} : (memref<32xf32>) -> memref<32xf32, strided<[1], offset: 32>>
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64, only_for = "allreduce_start"}
  %tok = hcs.allreduce_start %g {bucket_id = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{cluster 0 reads bytes [128, 256) of arena 'grad' that cluster 1 wrote in its op 0, with no hcs.cluster_wait ordering them}}
  hcs.wait %tok
  return
}

// -----

// The same with an unscoped wait before the sum's wait: it verifies.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, grad = 256 : i64}} {
  %g = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  %g1 = hcs.view %g : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  %p = hcs.input "x" {index = 0 : i64} : memref<32xf32>
  hcs.call "tanh"(%p) -> (%g1) {} {cluster = 1 : i64} : (memref<32xf32>) -> memref<32xf32, strided<[1], offset: 32>>
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64, only_for = "allreduce_start"}
  %tok = hcs.allreduce_start %g {bucket_id = 0 : i64} : memref<64xf32>
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64}
  hcs.wait %tok
  return
}

// -----

// A scoped wait must stand right before the op it names in its stream.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, grad = 256 : i64}} {
  %g = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  %g1 = hcs.view %g : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  %p = hcs.input "x" {index = 0 : i64} : memref<32xf32>
  hcs.call "tanh"(%p) -> (%g1) {} {cluster = 1 : i64} : (memref<32xf32>) -> memref<32xf32, strided<[1], offset: 32>>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{a wait only for grad_accumulate before an op of its stream that is none}}
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64, only_for = "grad_accumulate"}
  hcs.call "exp"(%g) -> (%a) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// A wait scoped to a conditional call (call_if_reduced) orders that call
// alone: the call if local after it, reading the bytes cluster 1 wrote,
// needs a wait of its own.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, grad = 256 : i64, partial = 256 : i64}} {
  %g = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  %q = hcs.buffer "partial" {offset = 0 : i64} : memref<64xf32>
  %p = hcs.input "x" {index = 0 : i64} : memref<64xf32>
  // expected-note @+1 {{the other cluster's op}}
  hcs.call "tanh"(%p) -> (%q) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64, only_for = "call_if_reduced"}
  hcs.call "add"(%g, %q) -> (%g) {} {cluster = 0 : i64, only_if = "reduced"} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  // expected-error @+1 {{cluster 0 reads bytes [0, 256) of arena 'partial' that cluster 1 wrote in its op 0, with no hcs.cluster_wait ordering them}}
  hcs.call "add"(%g, %q) -> (%g) {} {cluster = 0 : i64, only_if = "local"} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// The same with the local call's own scoped wait: it verifies.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, grad = 256 : i64, partial = 256 : i64}} {
  %g = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  %q = hcs.buffer "partial" {offset = 0 : i64} : memref<64xf32>
  %p = hcs.input "x" {index = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%q) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64, only_for = "call_if_reduced"}
  hcs.call "add"(%g, %q) -> (%g) {} {cluster = 0 : i64, only_if = "reduced"} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64, only_for = "call_if_local"}
  hcs.call "add"(%g, %q) -> (%g) {} {cluster = 0 : i64, only_if = "local"} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// A wait scoped to a call if local must not stand before a call if reduced.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, grad = 256 : i64, partial = 256 : i64}} {
  %g = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  %q = hcs.buffer "partial" {offset = 0 : i64} : memref<64xf32>
  %p = hcs.input "x" {index = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%q) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  // expected-error @+1 {{a wait only for call_if_local before an op of its stream that is none}}
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64, only_for = "call_if_local"}
  hcs.call "add"(%g, %q) -> (%g) {} {cluster = 0 : i64, only_if = "reduced"} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  return
}
