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
func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64, grad = 256 : i64}} {
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  %g0 = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%a) -> (%g0) {} : (memref<64xf32>) -> memref<64xf32>
  %t0 = hcs.allreduce_start %g0 {bucket_id = 0 : i64} : memref<64xf32>
  hcs.wait %t0
  hcs.call "neg"(%g0) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
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
