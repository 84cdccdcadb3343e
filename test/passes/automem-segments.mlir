// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=100000 reserve=0 segments=on" | FileCheck %s --check-prefix=ON
// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=100000 reserve=0 segments=off" | FileCheck %s --check-prefix=OFF
// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=1536 reserve=0" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=FIT
// RUN: hc-opt %s -split-input-file --hc-automem="mem-budget=2304 reserve=0" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=CHEAP
// hc-automem's segment recomputation (AutoMemSegments.cpp).

// Two "blocks" x1 = x0 + sin(exp(x0)), x2 = x1 + sin(exp(x1)), a loss
// x2 * x2, and a backward that reads each block's exp and sin outputs, the
// second block's first. The step flows through x0, x1 and x2 alone: they
// are the cuts. The segment ending at x1 and the one ending at x2 are
// recomputed (exp and sin cloned, reading the kept cut) right before the
// backward's first read of each; the segment ending at the loss is not.
// The backward reads the clones; the cuts stay.

// ON-LABEL: func.func @blocks
// ON-SAME: segments = 2,
// ON: %[[C:.*]] = hcs.constant
// ON: hcs.call "tanh"(%[[C]]) -> (%[[X0:[0-9]+]])
// ON: hcs.call "exp"(%[[X0]]) -> (%[[H0:[0-9]+]]) {} :
// ON: hcs.call "sin"(%[[H0]]) -> (%[[G0:[0-9]+]]) {} :
// ON: hcs.call "add"(%[[X0]], %[[G0]]) -> (%[[X1:[0-9]+]])
// ON: hcs.call "exp"(%[[X1]]) -> (%[[H1:[0-9]+]]) {} :
// ON: hcs.call "sin"(%[[H1]]) -> (%[[G1:[0-9]+]]) {} :
// ON: hcs.call "add"(%[[X1]], %[[G1]]) -> (%[[X2:[0-9]+]])
// ON: hcs.call "mul"(%[[X2]], %[[X2]]) -> (%[[Y:[0-9]+]])
// The second block's segment, before the backward's first read of it.
// ON: hcs.call "exp"(%[[X1]]) -> (%[[H1R:[0-9]+]]) {} {hcs.recompute, hcs.segment = 1 : i64}
// ON-NEXT: hcs.buffer "act"
// ON-NEXT: hcs.call "sin"(%[[H1R]]) -> (%[[G1R:[0-9]+]]) {} {hcs.recompute, hcs.segment = 1 : i64}
// ON-NEXT: hcs.call "mul"(%[[Y]], %[[G1R]])
// ON-NEXT: hcs.buffer "act"
// ON-NEXT: hcs.call "mul"(%{{.*}}, %[[H1R]])
// A view of a recomputed buffer is rebuilt on its clone.
// ON: hcs.call "exp"(%[[X0]]) -> (%[[H0R:[0-9]+]]) {} {hcs.recompute, hcs.segment = 0 : i64}
// ON-NEXT: hcs.buffer "act"
// ON-NEXT: hcs.call "sin"(%[[H0R]]) -> (%[[G0R:[0-9]+]]) {} {hcs.recompute, hcs.segment = 0 : i64}
// ON-NEXT: %[[V:.*]] = hcs.view %[[G0R]] : memref<64xf32> to memref<8x8xf32>
// ON-NEXT: hcs.call "neg"(%[[V]])
// ON: hcs.call "mul"(%{{.*}}, %[[H0R]])
// ON-NOT: hcs.recompute
// ON: hcs.loss

// OFF-LABEL: func.func @blocks
// OFF-SAME: segments = 0,
// OFF-NOT: hcs.segment

func.func @blocks() {
  %c = hcs.constant dense<0.5> : tensor<64xf32> : memref<64xf32>
  %x0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%c) -> (%x0) {} : (memref<64xf32>) -> memref<64xf32>
  %h0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%x0) -> (%h0) {} : (memref<64xf32>) -> memref<64xf32>
  %g0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%h0) -> (%g0) {} : (memref<64xf32>) -> memref<64xf32>
  %x1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%x0, %g0) -> (%x1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %h1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%x1) -> (%h1) {} : (memref<64xf32>) -> memref<64xf32>
  %g1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%h1) -> (%g1) {} : (memref<64xf32>) -> memref<64xf32>
  %x2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%x1, %g1) -> (%x2) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %y = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%x2, %x2) -> (%y) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  // The backward.
  %d2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%y, %g1) -> (%d2) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %d1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%d2, %h1) -> (%d1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %gv = hcs.view %g0 : memref<64xf32> to memref<8x8xf32>
  %e2 = hcs.buffer "act" : memref<8x8xf32>
  hcs.call "neg"(%gv) -> (%e2) {} : (memref<8x8xf32>) -> memref<8x8xf32>
  %ev = hcs.view %e2 : memref<8x8xf32> to memref<64xf32>
  %e1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%d1, %ev) -> (%e1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %e0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%e1, %h0) -> (%e0) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.loss %y : memref<64xf32>
  return
}

// -----

// The first block's input is rewritten in place after the forward (an
// optimizer-like update), so its segment cannot run again on the same
// bytes and is left alone; the second block's segment is recomputed.

// ON-LABEL: func.func @inplace
// ON-SAME: segments = 1,
// ON: hcs.call "exp"(%{{.*}}) -> (%{{.*}}) {} {hcs.recompute, hcs.segment = 0 : i64}
// ON-NOT: hcs.segment = 1
// ON: hcs.loss

func.func @inplace() {
  %c = hcs.constant dense<0.5> : tensor<64xf32> : memref<64xf32>
  %x0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%c) -> (%x0) {} : (memref<64xf32>) -> memref<64xf32>
  %h0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%x0) -> (%h0) {} : (memref<64xf32>) -> memref<64xf32>
  %g0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%h0) -> (%g0) {} : (memref<64xf32>) -> memref<64xf32>
  %x1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%x0, %g0) -> (%x1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %h1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%x1) -> (%h1) {} : (memref<64xf32>) -> memref<64xf32>
  %g1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%h1) -> (%g1) {} : (memref<64xf32>) -> memref<64xf32>
  %x2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%x1, %g1) -> (%x2) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %y = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%x2, %x2) -> (%y) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.call "neg"(%c) -> (%x0) {} : (memref<64xf32>) -> memref<64xf32>
  %d2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%y, %g1) -> (%d2) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %d1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%d2, %h1) -> (%d1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %e1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%d1, %g0) -> (%e1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %e0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%e1, %h0) -> (%e0) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.loss %y : memref<64xf32>
  return
}

// -----

// Three blocks x' = x + exp(x) * cos(x) whose backward reads exp(x), cos(x)
// and their product. The per-activation plan can recompute the product
// but not exp(x) or cos(x): x is gone by then. So it keeps two buffers a
// block where a segment keeps one (the cut x). At 1536 bytes the
// per-activation plan does not fit and two segments (the first two, whose
// activations wait longest) are the fewest that do: cheaper than all
// three. At 2304 bytes the per-activation plan fits and recomputes least.
// Each plan says what the others would cost.

// FIT-LABEL: func.func @three
// FIT-SAME: segments = 2,
// FIT-SAME: other_plan = "3 segments: {{[0-9.e+-]+}} s predicted; per-activation: does not fit"
// FIT-NOT: hcs.segment = 2
// FIT: hcs.segment = 1
// FIT-NOT: hcs.segment = 2
// FIT: hcs.segment = 0
// FIT-NOT: hcs.segment = 2
// FIT: hcs.loss

// CHEAP-LABEL: func.func @three
// CHEAP-SAME: segments = 0,
// CHEAP-SAME: other_plan = "3 segments: {{[0-9.e+-]+}} s predicted; 1 segment: {{[0-9.e+-]+}} s predicted"
// CHEAP-NOT: hcs.segment
// CHEAP: hcs.recompute
// CHEAP-NOT: hcs.segment
// CHEAP: hcs.loss

func.func @three() {
  %c = hcs.constant dense<0.5> : tensor<64xf32> : memref<64xf32>
  %x0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%c) -> (%x0) {} : (memref<64xf32>) -> memref<64xf32>
  %h0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%x0) -> (%h0) {} : (memref<64xf32>) -> memref<64xf32>
  %j0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "cos"(%x0) -> (%j0) {} : (memref<64xf32>) -> memref<64xf32>
  %g0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%h0, %j0) -> (%g0) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %x1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%x0, %g0) -> (%x1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %h1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%x1) -> (%h1) {} : (memref<64xf32>) -> memref<64xf32>
  %j1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "cos"(%x1) -> (%j1) {} : (memref<64xf32>) -> memref<64xf32>
  %g1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%h1, %j1) -> (%g1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %x2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%x1, %g1) -> (%x2) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %h2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%x2) -> (%h2) {} : (memref<64xf32>) -> memref<64xf32>
  %j2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "cos"(%x2) -> (%j2) {} : (memref<64xf32>) -> memref<64xf32>
  %g2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%h2, %j2) -> (%g2) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %x3 = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%x2, %g2) -> (%x3) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %y = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%x3, %x3) -> (%y) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %dg2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%y, %g2) -> (%dg2) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %dj2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%dg2, %j2) -> (%dj2) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %dh2 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%dj2, %h2) -> (%dh2) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %dg1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%dh2, %g1) -> (%dg1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %dj1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%dg1, %j1) -> (%dj1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %dh1 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%dj1, %h1) -> (%dh1) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %dg0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%dh1, %g0) -> (%dg0) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %dj0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%dg0, %j0) -> (%dj0) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %dh0 = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%dj0, %h0) -> (%dh0) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.loss %y : memref<64xf32>
  return
}
