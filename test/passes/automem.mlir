// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=1100 reserve=0" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=BUDGET
// RUN: hc-opt %s -split-input-file --hc-automem="fast-mem=800 reserve=0 lookahead=1 rates=stream_gbps_per_thread=0.001" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=MOVE
// RUN: hc-opt %s -split-input-file --hc-automem="fast-mem=800 reserve=0 lookahead=1" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=FASTCHEAP
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=1100 reserve=0 offload-dir=%t.dir lookahead=1 rates=stream_gbps_per_thread=0.001" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=DISK -DDIR=%t.dir
// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=1100 reserve=0 offload-dir=%t.dir lookahead=1 rates=disk_gbps=0.000001" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=DISKSLOW
// RUN: hc-opt %s -split-input-file --hc-automem --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=NONE
// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=100000 reserve=0" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=ROOMY

// %a is made early, read once more at the end; in between, at the `add`,
// four 256-byte activations are live (1024 bytes + 256 of parameters).

// BUDGET-LABEL: func.func @step()
// 1100 bytes leave no room for 1024 + 256: %a is recomputed (tanh of a
// parameter, the cheapest way to free its 256 bytes at the peak), so the
// plan needs 768 + 256.
// BUDGET-SAME: hcs.arena_bytes = {act = 768 : i64, param = 256 : i64}
// BUDGET-SAME: hcs.memory = #hcs.memory_plan<budget = 1100, reserve = 0, tiers = [#hcs.tier<name = "slow", kind = "DRAM", capacity = 1100, arenas = ["act", "param", "grad", "m", "v", "state", "offload"]>], recomputed_calls = 1, recompute_seconds = {{[^,]*}} : f64, segments = 0, copy_seconds = 0.000000e+00 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>
// BUDGET: %[[P:.*]] = hcs.buffer "param"
// BUDGET: %[[A:.*]] = hcs.buffer "act"
// BUDGET-NEXT: hcs.call "tanh"(%[[P]]) -> (%[[A]]) {} :
// BUDGET: hcs.call "exp"(%[[A]])
// BUDGET: hcs.call "sin"
// BUDGET: hcs.call "tanh"(%[[P]]) -> (%[[A2:[0-9]+]]) {} {hcs.recompute}
// BUDGET-NEXT: hcs.call "mul"(%{{.*}}, %[[A2]])
// BUDGET-NOT: hcs.offload

// MOVE-LABEL: func.func @step()
// An 800-byte fast tier, and recomputing priced out (memory-bound kernels
// at 1 MB/s): %a goes to the slow tier after its last early use and comes
// back one call before the `mul`.
// MOVE-SAME: hcs.arena_bytes = {act = 768 : i64, offload = 4096 : i64, param = 256 : i64}
// MOVE-SAME: tiers = [#hcs.tier<name = "fast", kind = "DRAM (--fast-mem)", capacity = 800, arenas = ["act"]>, #hcs.tier<name = "slow", kind = "DRAM", capacity = {{[0-9]+}}, arenas = ["param", "grad", "m", "v", "state", "offload"]>]
// MOVE-SAME: recomputed_calls = 0,
// MOVE-SAME: offload_bytes = 256, prefetch_bytes = 256,
// MOVE: %[[A:.*]] = hcs.buffer "act"
// MOVE-NEXT: hcs.call "tanh"({{.*}}) -> (%[[A]])
// MOVE-NEXT: %[[B:.*]] = hcs.buffer "act"
// MOVE-NEXT: hcs.call "exp"(%[[A]]) -> (%[[B]])
// MOVE-NEXT: %[[S:.*]] = hcs.buffer "offload"
// MOVE-NEXT: %[[T:.*]] = hcs.offload %[[A]] to %[[S]]
// The copy runs while the next call (lookahead 1) computes, and is waited
// on before the `add`, the peak, where its bytes must be free.
// MOVE-NEXT: hcs.buffer "act"
// MOVE-NEXT: hcs.call "neg"
// MOVE-NEXT: hcs.wait %[[T]]
// MOVE-NEXT: hcs.buffer "act"
// MOVE-NEXT: hcs.call "add"
// MOVE: %[[T2:[0-9]+]] = hcs.prefetch %[[S]] to %[[A2:[0-9]+]] :
// MOVE-NEXT: hcs.call "sin"
// MOVE: hcs.wait %[[T2]]
// MOVE-NEXT: hcs.call "mul"(%{{.*}}, %[[A2]])

// FASTCHEAP-LABEL: func.func @step()
// The same fast tier at the default rates: recomputing the tanh costs less
// than two copies, so nothing moves.
// FASTCHEAP-SAME: hcs.arena_bytes = {act = 768 : i64, param = 256 : i64}
// FASTCHEAP-SAME: recomputed_calls = 1,
// FASTCHEAP-SAME: offload_bytes = 0, prefetch_bytes = 0,
// FASTCHEAP-NOT: hcs.offload

// DISK-LABEL: func.func @step()
// A disk tier (offload-dir) and the same budget with recomputing priced
// out: %a goes to a file, so memory holds 768 + 256 bytes; the offload
// arena, a file read and written with direct I/O, is planned in 4096-byte
// slots. The disk's capacity is the folder's free space.
// DISK-SAME: hcs.arena_bytes = {act = 768 : i64, offload = 4096 : i64, param = 256 : i64}
// DISK-SAME: #hcs.tier<name = "slow", kind = "DRAM", capacity = 1100, arenas = ["act", "param", "grad", "m", "v", "state"]>, #hcs.tier<name = "disk", kind = "disk", capacity = {{[0-9]+}}, arenas = ["offload"]>], offload_dir = "[[DIR]]", recomputed_calls = 0,
// DISK-SAME: offload_bytes = 256, prefetch_bytes = 256,
// DISK: hcs.offload
// DISK: hcs.prefetch

// DISKSLOW-LABEL: func.func @step()
// The same disk at 1 kB/s: moving would cost more than recomputing, so the
// plan recomputes and says so (recomputed_over_move).
// DISKSLOW-SAME: recomputed_calls = 1,
// DISKSLOW-SAME: offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 1>
// DISKSLOW-NOT: hcs.offload

// NONE-LABEL: func.func @step()
// No budget and no fast tier (this machine's topology has no HBM): the
// pass leaves the step alone.
// NONE-SAME: hcs.arena_bytes = {act = 1024 : i64, param = 256 : i64}}
// NONE-NOT: hcs.memory
// NONE-NOT: hcs.recompute

// ROOMY-LABEL: func.func @step()
// ROOMY-SAME: hcs.arena_bytes = {act = 1024 : i64, param = 256 : i64}
// ROOMY-SAME: recomputed_calls = 0,
// ROOMY-NOT: hcs.recompute
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  %b = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<64xf32>) -> memref<64xf32>
  %c = hcs.buffer "act" : memref<64xf32>
  hcs.call "neg"(%b) -> (%c) {} : (memref<64xf32>) -> memref<64xf32>
  %d = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%b, %c) -> (%d) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %e = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%d) -> (%e) {} : (memref<64xf32>) -> memref<64xf32>
  %f = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%e, %a) -> (%f) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.loss %f : memref<64xf32>
  return
}


// -----

// No plan fits: the error names the budget and what the smallest plan
// found needs (hc-compile: one line, exit 2).
// RUN: not hc-opt %s -split-input-file --hc-automem="mem-budget=700 reserve=0" 2>&1 | FileCheck %s --check-prefix=SMALL
// A window that is neither auto nor a number of calls is refused.
// RUN: not hc-opt %s -split-input-file --hc-automem="fast-mem=800 lookahead=-1" 2>&1 | FileCheck %s --check-prefix=BADWINDOW
// BADWINDOW: error: lookahead -1: want auto or a number of calls
// RUN: not hc-opt %s -split-input-file --hc-automem="fast-mem=800 lookahead=two" 2>&1 | FileCheck %s --check-prefix=BADWORD
// BADWORD: error: lookahead two: want auto or a number of calls
// SMALL: error: --mem-budget 700: the smallest plan found needs 1024 bytes (parameters, gradients and optimizer state 256, activations 768, reserve 0)

// -----

// An offload's wait comes `lookahead` calls after its start, or before the
// peak if that comes first: with lookahead 2, %a's copy has one call (the
// `neg`) before the peak at the `add`; after the peak two calls pass
// before the `mul` reads %a again, so the prefetch starts two calls early.
// RUN: hc-opt %s -split-input-file --hc-automem="fast-mem=800 reserve=0 lookahead=2 rates=stream_gbps_per_thread=0.001" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=LATEWAIT
// LATEWAIT-LABEL: func.func @late()
// LATEWAIT-SAME: hcs.arena_bytes = {act = 768 : i64, offload = 4096 : i64, param = 256 : i64}
// LATEWAIT-SAME: offload_bytes = 256, prefetch_bytes = 256,
// LATEWAIT: hcs.call "exp"(%[[A:[0-9]+]])
// LATEWAIT-NEXT: %[[S:.*]] = hcs.buffer "offload"
// LATEWAIT-NEXT: %[[T:.*]] = hcs.offload %[[A]] to %[[S]]
// LATEWAIT-NEXT: hcs.buffer "act"
// LATEWAIT-NEXT: hcs.call "neg"
// LATEWAIT-NEXT: hcs.buffer "act"
// LATEWAIT-NEXT: hcs.wait %[[T]]
// LATEWAIT-NEXT: hcs.call "add"
// LATEWAIT: %[[T2:[0-9]+]] = hcs.prefetch %[[S]] to %[[A2:[0-9]+]] :
// LATEWAIT-NEXT: hcs.call "sin"
// LATEWAIT-NEXT: hcs.buffer "act"
// LATEWAIT-NEXT: hcs.call "cos"
// LATEWAIT-NEXT: hcs.buffer "act"
// LATEWAIT-NEXT: hcs.wait %[[T2]]
// LATEWAIT-NEXT: hcs.call "mul"(%{{.*}}, %[[A2]])
// lookahead=auto (the default), every byte moved (recompute=off): at the
// built-in rates one call covers a 256-byte copy, so the prefetch starts
// one call early (after the `sin`, where 2-call windows start it before),
// and the plan records which windows won.
// RUN: hc-opt %s -split-input-file --hc-automem="fast-mem=800 reserve=0 recompute=off" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=AUTO
// AUTO-LABEL: func.func @late()
// AUTO-SAME: other_plan = "windows by copy time (0 s exposed); windows of 2 calls: {{[0-9.e-]+}} s predicted, 0 s exposed"
// AUTO: %[[T:[0-9]+]] = hcs.offload
// AUTO-NEXT: hcs.buffer "act"
// AUTO-NEXT: hcs.call "neg"
// AUTO-NEXT: hcs.wait %[[T]]
// AUTO: hcs.call "sin"
// AUTO-NEXT: hcs.buffer "act"
// AUTO-NEXT: hcs.buffer "act"
// AUTO-NEXT: %[[T2:[0-9]+]] = hcs.prefetch
// AUTO-NEXT: hcs.call "cos"
// AUTO-NEXT: hcs.buffer "act"
// AUTO-NEXT: hcs.wait %[[T2]]
// AUTO-NEXT: hcs.call "mul"
// Copies at 64 MB/s need about three calls each: neither window may
// cross the peak (the `add`), so both are cut there and part of each copy
// is exposed, as it is with 2-call windows.
// RUN: hc-opt %s -split-input-file --hc-automem="fast-mem=800 reserve=0 recompute=off rates=copy_gbps=0.064" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=AUTOCUT
// AUTOCUT-LABEL: func.func @late()
// AUTOCUT-SAME: other_plan = "windows by copy time ({{[1-9][0-9.]*}}e-06 s exposed); windows of 2 calls:
// AUTOCUT: hcs.offload
// AUTOCUT-NEXT: hcs.buffer "act"
// AUTOCUT-NEXT: hcs.call "neg"
// AUTOCUT-NEXT: hcs.buffer "act"
// AUTOCUT-NEXT: hcs.wait
// AUTOCUT-NEXT: hcs.call "add"
// AUTOCUT-NEXT: hcs.buffer "act"
// AUTOCUT-NEXT: hcs.prefetch
// AUTOCUT-NEXT: hcs.buffer "act"
// AUTOCUT-NEXT: hcs.call "sin"
func.func @late() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  %b = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<64xf32>) -> memref<64xf32>
  %c = hcs.buffer "act" : memref<64xf32>
  hcs.call "neg"(%b) -> (%c) {} : (memref<64xf32>) -> memref<64xf32>
  %d = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%b, %c) -> (%d) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %e = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%d) -> (%e) {} : (memref<64xf32>) -> memref<64xf32>
  %g = hcs.buffer "act" : memref<64xf32>
  hcs.call "cos"(%e) -> (%g) {} : (memref<64xf32>) -> memref<64xf32>
  %f = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%g, %a) -> (%f) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.loss %f : memref<64xf32>
  return
}
