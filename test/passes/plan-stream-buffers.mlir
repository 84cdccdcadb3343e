// hc-plan-stream-buffers: the "act" arena packed again in the order of
// hc-cftp's streams; hc-verify-plan then proves every cross-stream reuse
// ordered.
// RUN: hc-opt %s -split-input-file --hc-plan-stream-buffers --hc-verify-plan | FileCheck %s
//
// The whole pipeline on a tiny step cut into 2 streams: the plan verifies.
// RUN: hc-opt %S/cftp.mlir -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml clusters=2" --hc-cftp --hc-plan-stream-buffers --hc-verify-plan | FileCheck %s --check-prefix=PIPE
// PIPE: hcs.cftp = {clusters = 2 : i64, {{.*}}reuse_waits = 0 : i64

// Cluster 1 reads all of %a (both streams wrote it) in its op 1; %a is dead
// after that in program order, but cluster 0's op 1 is not ordered after
// it, so %c may not take %a's bytes (hc-plan-buffers' plan would put it at
// 0): it goes past %b. Cluster 0's op 2 waits for cluster 1's op 1 (it
// reads %b), so %d may take %a's bytes. No wait is added.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: hcs.arena_bytes = {act = 768 : i64
// CHECK: %[[A:.*]] = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
// CHECK: %[[B:.*]] = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
// CHECK: %[[C:.*]] = hcs.buffer "act" {offset = 512 : i64} : memref<64xf32>
// CHECK-NEXT: hcs.call "neg"
// CHECK-NEXT: %[[D:.*]] = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
// CHECK-NEXT: hcs.cluster_wait {cluster = 0 : i64, count = 2 : i64, source = 1 : i64}
// CHECK-NOT: hcs.cluster_wait
// %e: %b (cluster 1 wrote it, cluster 0's op 2 read it) is ordered before
// cluster 0's op 3.
// CHECK: hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
// CHECK-NOT: hcs.cluster_wait
// CHECK: return
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
  hcs.cluster_wait {cluster = 1 : i64, source = 0 : i64, count = 1 : i64}
  hcs.call "exp"(%a) -> (%b) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  %c = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "neg"(%p) -> (%c) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32>
  %d = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 2 : i64}
  hcs.call "exp"(%b) -> (%d) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32>
  %e = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "add"(%c, %d) -> (%e) {} {cluster = 0 : i64} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// The same without %d, under a tier of 512 bytes (hc-plan-buffers' peak,
// no room): %c takes %a's bytes as in hc-plan-buffers' plan, and the pass
// orders it with a wait for cluster 1's op 1, the last to touch %a.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: hcs.arena_bytes = {act = 512 : i64
// CHECK-SAME: reuse_waits = 1 : i64, waits = 2 : i64
// CHECK: %[[A:.*]] = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
// CHECK: %[[B:.*]] = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
// CHECK: %[[C:.*]] = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
// CHECK-NEXT: hcs.cluster_wait {cluster = 0 : i64, count = 2 : i64, source = 1 : i64}
// CHECK-NEXT: hcs.call "neg"
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}, hcs.cftp = {clusters = 2 : i64, waits = 1 : i64}, hcs.memory = #hcs.memory_plan<budget = 0, reserve = 0, tiers = [#hcs.tier<arenas = ["act"], capacity = 512, kind = "DRAM", name = "fast">, #hcs.tier<arenas = ["param"], capacity = 0, kind = "DRAM", name = "slow">], recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  %a0 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1]>>
  %a1 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  %p0 = hcs.view %p : memref<64xf32> to memref<32xf32, strided<[1]>>
  %p1 = hcs.view %p : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  hcs.call "tanh"(%p0) -> (%a0) {} {cluster = 0 : i64} : (memref<32xf32, strided<[1]>>) -> memref<32xf32, strided<[1]>>
  hcs.call "tanh"(%p1) -> (%a1) {} {cluster = 1 : i64} : (memref<32xf32, strided<[1], offset: 32>>) -> memref<32xf32, strided<[1], offset: 32>>
  %b = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
  hcs.cluster_wait {cluster = 1 : i64, source = 0 : i64, count = 1 : i64}
  hcs.call "exp"(%a) -> (%b) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  %c = hcs.buffer "act" {offset = 1024 : i64} : memref<64xf32>
  hcs.call "neg"(%p) -> (%c) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// A tier copy touches its buffers at its start and again at its hcs.wait:
// under a tier with room for one buffer, cluster 1's reuse of the
// offloaded buffer's bytes waits for the copy's hcs.wait (cluster 0's
// entry 2: count 3), not for its start.
// CHECK-LABEL: func.func @step()
// CHECK: hcs.offload
// CHECK: hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
// CHECK-NEXT: hcs.cluster_wait {cluster = 1 : i64, count = 3 : i64, source = 0 : i64}
// CHECK-NEXT: hcs.call "neg"
func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64, offload = 256 : i64, param = 256 : i64}, hcs.memory = #hcs.memory_plan<budget = 0, reserve = 0, tiers = [#hcs.tier<arenas = ["act"], capacity = 256, kind = "DRAM", name = "fast">, #hcs.tier<arenas = ["offload", "param"], capacity = 0, kind = "DRAM", name = "slow">], recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32>
  %o = hcs.buffer "offload" {offset = 0 : i64} : memref<64xf32>
  %t = hcs.offload %a to %o {cluster = 0 : i64} : memref<64xf32> to memref<64xf32>
  hcs.wait %t {cluster = 0 : i64}
  %b = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "neg"(%p) -> (%b) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// A scoped wait (only_for) orders one op that may not run: it orders
// nothing for the plan, so %c stays off %a's bytes.
// CHECK-LABEL: func.func @step()
// CHECK: hcs.buffer "act" {offset = 0 : i64}
// CHECK: hcs.buffer "act" {offset = 256 : i64}
// CHECK: hcs.buffer "act" {offset = 512 : i64}
func.func @step() attributes {hcs.arena_bytes = {accum = 256 : i64, act = 512 : i64, grad = 256 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  %b = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
  hcs.call "exp"(%a) -> (%b) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  %g = hcs.buffer "grad" {offset = 0 : i64} : memref<64xf32>
  %acc = hcs.buffer "accum" {offset = 0 : i64} : memref<64xf32>
  hcs.cluster_wait {cluster = 0 : i64, count = 2 : i64, only_for = "grad_accumulate", source = 1 : i64}
  hcs.call "grad_accumulate"(%g, %acc) -> (%g, %acc) {micro_batch = 0.0 : f64, micro_batches = 1.0 : f64} {cluster = 0 : i64} : (memref<64xf32>, memref<64xf32>) -> (memref<64xf32>, memref<64xf32>)
  %c = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "neg"(%b) -> (%c) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32>
  %d = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "neg"(%p) -> (%d) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// One stream (no cluster attribute): hc-plan-buffers' offsets stand.
// CHECK-LABEL: func.func @step()
// CHECK: hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
// CHECK-NOT: cluster_wait
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// Parts of buffers: each stream writes and reads its own half of %a, %b
// and %c (rows-cut calls, no wait at all). %c may take %a's bytes: each
// stream's half of %c lies over its own half of %a (hc-verify-plan proves
// it by bytes). %d is cut in halves twice as large: at 0 its cluster-0
// half would cover cluster 1's half of %a and %c, which no wait orders,
// and over %b likewise, so it goes past them all.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: hcs.arena_bytes = {act = 1024 : i64
// CHECK: hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
// CHECK: hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
// CHECK: hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
// CHECK: hcs.buffer "act" {offset = 512 : i64} : memref<128xf32>
// CHECK-NOT: hcs.cluster_wait
// CHECK: return
func.func @step() attributes {hcs.arena_bytes = {act = 1280 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %p0 = hcs.view %p : memref<64xf32> to memref<32xf32, strided<[1]>>
  %p1 = hcs.view %p : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  %a0 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1]>>
  %a1 = hcs.view %a : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  hcs.call "tanh"(%p0) -> (%a0) {} {cluster = 0 : i64} : (memref<32xf32, strided<[1]>>) -> memref<32xf32, strided<[1]>>
  hcs.call "tanh"(%p1) -> (%a1) {} {cluster = 1 : i64} : (memref<32xf32, strided<[1], offset: 32>>) -> memref<32xf32, strided<[1], offset: 32>>
  %b = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
  %b0 = hcs.view %b : memref<64xf32> to memref<32xf32, strided<[1]>>
  %b1 = hcs.view %b : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  hcs.call "exp"(%a0) -> (%b0) {} {cluster = 0 : i64} : (memref<32xf32, strided<[1]>>) -> memref<32xf32, strided<[1]>>
  hcs.call "exp"(%a1) -> (%b1) {} {cluster = 1 : i64} : (memref<32xf32, strided<[1], offset: 32>>) -> memref<32xf32, strided<[1], offset: 32>>
  %c = hcs.buffer "act" {offset = 512 : i64} : memref<64xf32>
  %c0 = hcs.view %c : memref<64xf32> to memref<32xf32, strided<[1]>>
  %c1 = hcs.view %c : memref<64xf32> to memref<32xf32, strided<[1], offset: 32>>
  hcs.call "neg"(%b0) -> (%c0) {} {cluster = 0 : i64} : (memref<32xf32, strided<[1]>>) -> memref<32xf32, strided<[1]>>
  hcs.call "neg"(%b1) -> (%c1) {} {cluster = 1 : i64} : (memref<32xf32, strided<[1], offset: 32>>) -> memref<32xf32, strided<[1], offset: 32>>
  %d = hcs.buffer "act" {offset = 768 : i64} : memref<128xf32>
  %d0 = hcs.view %d : memref<128xf32> to memref<64xf32, strided<[1]>>
  %d1 = hcs.view %d : memref<128xf32> to memref<64xf32, strided<[1], offset: 64>>
  hcs.call "tanh"(%p) -> (%d0) {} {cluster = 0 : i64} : (memref<64xf32>) -> memref<64xf32, strided<[1]>>
  hcs.call "tanh"(%p) -> (%d1) {} {cluster = 1 : i64} : (memref<64xf32>) -> memref<64xf32, strided<[1], offset: 64>>
  return
}
