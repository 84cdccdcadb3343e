// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=800 reserve=0" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=SPAN
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=800 reserve=0 offload-dir=%t.dir lookahead=0 rates=stream_gbps_per_thread=0.001" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=REFILL
// With the built-in rates, where recomputing %a is cheaper than the disk:
// recompute=off moves it instead, and nothing else changes.
// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=800 reserve=0 offload-dir=%t.dir lookahead=0" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=PRICED
// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=800 reserve=0 offload-dir=%t.dir lookahead=0 recompute=off" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=NORECOMPUTE
// RUN: not hc-opt %s -split-input-file --hc-automem="mem-budget=800 recompute=never" 2>&1 | FileCheck %s --check-prefix=BADRECOMPUTE
// RUN: not hc-opt %s -split-input-file --hc-automem="mem-budget=800 recompute=off segments=on" 2>&1 | FileCheck %s --check-prefix=SEGMENTSOFF
// BADRECOMPUTE: --mem-recompute never: want auto or off
// SEGMENTSOFF: --mem-segments on recomputes segments, which --mem-recompute off forbids
// Which activation hc-automem gives up, and how often it crosses the disk
// (automem.mlir has the basics, automem-chain.mlir the recompute order).

// SPAN-LABEL: func.func @span()
// %a and %s cost the same to recompute and are the same size, and both
// are live across the peak (the exp). %a's gap (its first read to its
// last) is the longer: freeing it lowers every position up to the last
// add, where freeing %s would only lower the positions up to the second.
// So %a is recomputed, before the last add, and %s stays (a tie in cost
// alone would go to %s, the first produced).
// SPAN-SAME: recomputed_calls = 1,
// SPAN: hcs.call "sin"
// SPAN-NOT: hcs.recompute
// SPAN: hcs.call "cos"
// SPAN: hcs.call "tanh"(%{{.*}}) -> (%[[A2:[0-9]+]]) {} {hcs.recompute}
// SPAN-NEXT: hcs.call "add"(%[[A2]], %{{.*}}) -> (%{{.*}}) {} :
// SPAN-NEXT: hcs.loss
// PRICED-LABEL: func.func @span()
// PRICED-SAME: recomputed_calls = 1,
// PRICED-SAME: offload_bytes = 0,
// PRICED-NOT: hcs.offload
// PRICED: hcs.recompute
// NORECOMPUTE-LABEL: func.func @span()
// NORECOMPUTE-SAME: recomputed_calls = 0,
// NORECOMPUTE-SAME: offload_bytes = 256,
// NORECOMPUTE-NOT: hcs.recompute
// NORECOMPUTE: hcs.offload
// NORECOMPUTE-NOT: hcs.recompute
// NORECOMPUTE: hcs.prefetch
// NORECOMPUTE-NOT: hcs.recompute
// NORECOMPUTE: hcs.loss
func.func @span() {
  %x = hcs.constant dense<0.5> : tensor<64xf32> : memref<64xf32>
  %s = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%x) -> (%s) {} : (memref<64xf32>) -> memref<64xf32>
  %a = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%x) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  %u = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%a, %s) -> (%u) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %v = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%u) -> (%v) {} : (memref<64xf32>) -> memref<64xf32>
  %w = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%v) -> (%w) {} : (memref<64xf32>) -> memref<64xf32>
  %q = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%s, %w) -> (%q) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %r = hcs.buffer "act" : memref<64xf32>
  hcs.call "cos"(%q) -> (%r) {} : (memref<64xf32>) -> memref<64xf32>
  %z = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%a, %r) -> (%z) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.loss %z : memref<64xf32>
  return
}

// -----

// REFILL-LABEL: func.func @refill()
// %a is read three times, with a peak (four live buffers, over the
// budget of three) in each gap; recomputing is priced out, so it goes to
// disk. The first peak moves it (an offload and a
// prefetch); the second finds the prefetched copy live across it and
// frees that too: a second prefetch from the same file slot, with no
// second offload (the bytes on disk are still %a's).
// REFILL-SAME: recomputed_calls = 0,
// REFILL-SAME: offload_bytes = 256, prefetch_bytes = 512,
// REFILL: hcs.call "exp"
// REFILL-NEXT: %[[SLOW:.*]] = hcs.buffer "offload"
// REFILL-NEXT: hcs.offload %{{.*}} to %[[SLOW]]
// REFILL-NOT: hcs.offload
// REFILL: hcs.prefetch %[[SLOW]] to %[[B1:[0-9]+]]
// REFILL: hcs.call "add"(%[[B1]], %{{.*}})
// REFILL-NOT: hcs.offload
// REFILL: hcs.prefetch %[[SLOW]] to %[[B2:[0-9]+]]
// REFILL-NOT: hcs.offload
// REFILL: hcs.call "add"(%[[B2]], %{{.*}})
func.func @refill() {
  %x = hcs.constant dense<0.5> : tensor<64xf32> : memref<64xf32>
  %a = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%x) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  %b = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<64xf32>) -> memref<64xf32>
  %c = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%b) -> (%c) {} : (memref<64xf32>) -> memref<64xf32>
  %d = hcs.buffer "act" : memref<64xf32>
  hcs.call "cos"(%b) -> (%d) {} : (memref<64xf32>) -> memref<64xf32>
  %e = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%c, %d) -> (%e) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %f = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%a, %e) -> (%f) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %g = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%f) -> (%g) {} : (memref<64xf32>) -> memref<64xf32>
  %h = hcs.buffer "act" : memref<64xf32>
  hcs.call "cos"(%f) -> (%h) {} : (memref<64xf32>) -> memref<64xf32>
  %k = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%g, %h) -> (%k) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %z = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%a, %k) -> (%z) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.loss %z : memref<64xf32>
  return
}
