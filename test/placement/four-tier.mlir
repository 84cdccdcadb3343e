// A node with four memory kinds (test/topologies/four-tier.xml): 768 KiB of
// HBM, 32 GiB DRAM, 64 GiB CXL-attached DRAM, 256 GiB NVM, 8 cores.
// hc-automem makes the HBM the fast tier holding the activations; DRAM
// holds the rest; CXL and NVM are listed, unused. The step below needs
// 1 MiB of activations at its peak, so 256 KiB must leave the fast tier:
// recomputed at the default rates, moved to DRAM and back when
// recomputing is priced out.
// RUN: hc-opt %s --hc-automem="topology=%S/../topologies/four-tier.xml reserve=0" --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/four-tier.xml" --hc-verify-plan | FileCheck %s --check-prefix=RECOMPUTE
// RUN: hc-opt %s --hc-automem="topology=%S/../topologies/four-tier.xml reserve=0 lookahead=1 rates=stream_gbps_per_thread=0.001" --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/four-tier.xml" --hc-verify-plan | FileCheck %s --check-prefix=MOVE

// Per-tier peaks: fast = act, slow = the rest.
// RECOMPUTE: hcs.arena_bytes = {act = 786432 : i64, param = 262144 : i64}
// RECOMPUTE-SAME: hcs.memory = #hcs.memory_plan<budget = 0, reserve = 0, tiers = [#hcs.tier<name = "fast", kind = "HBM", capacity = 786432, arenas = ["act"]>, #hcs.tier<name = "slow", kind = "DRAM", capacity = 34359738368, arenas = ["param", "grad", "m", "v", "state", "offload"]>, #hcs.tier<name = "CXL-DRAM", kind = "CXL-DRAM", capacity = 68719476736, arenas = []>, #hcs.tier<name = "NVM", kind = "NVM", capacity = 274877906944, arenas = []>]
// One call recomputed, nothing moved; moving it was possible (a 1-call
// window by copy time fits after the peak) and priced higher.
// RECOMPUTE-SAME: recomputed_calls = 1, recompute_seconds = {{[^,]*}}, segments = 0, copy_seconds = 0.000000e+00 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 1>
// The activations are placed on the HBM node (0), one slice per cluster
// (core), the parameters on DRAM (1).
// RECOMPUTE-SAME: slices = [#hcs.slice<arena = "act", offset = 0, bytes = 98304, owner = 0, numa = [0]>
// RECOMPUTE-SAME: #hcs.slice<arena = "act", offset = 688128, bytes = 98304, owner = 7, numa = [0]>, #hcs.slice<arena = "param", offset = {{[0-9]+}}, bytes = 32768, owner = {{[0-9]+}}, numa = [1]>
// RECOMPUTE: hcs.call "tanh"{{.*}} {} {hcs.recompute}

// MOVE: hcs.arena_bytes = {act = 786432 : i64, offload = 262144 : i64, param = 262144 : i64}
// MOVE-SAME: #hcs.tier<name = "slow", kind = "DRAM", capacity = 34359738368, arenas = ["param", "grad", "m", "v", "state", "offload"]>
// Nothing recomputed; copy volumes per step: 256 KiB each way.
// MOVE-SAME: ]>], recomputed_calls = 0, recompute_seconds = 0.000000e+00 : f64, segments = 0, copy_seconds = {{[^,]*}}, offload_bytes = 262144, prefetch_bytes = 262144, recomputed_over_move = 0>
// MOVE-SAME: #hcs.slice<arena = "offload", offset = {{[0-9]+}}, bytes = 32768, owner = {{[0-9]+}}, numa = [1]>
// MOVE: hcs.offload
// MOVE: hcs.prefetch
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<65536xf32>
  %a = hcs.buffer "act" : memref<65536xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<65536xf32>) -> memref<65536xf32>
  %b = hcs.buffer "act" : memref<65536xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<65536xf32>) -> memref<65536xf32>
  %c = hcs.buffer "act" : memref<65536xf32>
  hcs.call "neg"(%b) -> (%c) {} : (memref<65536xf32>) -> memref<65536xf32>
  %d = hcs.buffer "act" : memref<65536xf32>
  hcs.call "add"(%b, %c) -> (%d) {} : (memref<65536xf32>, memref<65536xf32>) -> memref<65536xf32>
  %e = hcs.buffer "act" : memref<65536xf32>
  hcs.call "sin"(%d) -> (%e) {} : (memref<65536xf32>) -> memref<65536xf32>
  %f = hcs.buffer "act" : memref<65536xf32>
  hcs.call "mul"(%e, %a) -> (%f) {} : (memref<65536xf32>, memref<65536xf32>) -> memref<65536xf32>
  hcs.loss %f : memref<65536xf32>
  return
}
