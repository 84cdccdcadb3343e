// RUN: hc-opt %s --hc-automem="mem-budget=1100 reserve=0" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=BUDGET
// hc-automem on a chain of recomputations (automem.mlir has the rest).

// A chain: %n (layer-norm-like) feeds %m (modulate-like); both are read
// again late, %m first. Recomputing %m needs %n still there, so %m is
// recomputed first and %n's clone then comes before %m's. Views of a
// recomputed buffer are rebuilt on the clone. (The input is a constant:
// no persistent bytes, so the budget is all activations.)

// BUDGET-LABEL: func.func @step()
// BUDGET-SAME: hcs.arena_bytes = {act = 1024 : i64}
// BUDGET-SAME: recomputed_calls = 2,
// BUDGET: %[[X:.*]] = hcs.constant
// BUDGET: %[[N:.*]] = hcs.buffer "act"
// BUDGET-NEXT: hcs.call "tanh"(%[[X]]) -> (%[[N]]) {} :
// BUDGET: %[[M:.*]] = hcs.buffer "act"
// BUDGET-NEXT: hcs.call "exp"(%[[N]]) -> (%[[M]]) {} :
// BUDGET: hcs.call "add"
// BUDGET: hcs.call "add"
// BUDGET: hcs.call "tanh"(%[[X]]) -> (%[[N2:[0-9]+]]) {} {hcs.recompute}
// BUDGET-NEXT: hcs.call "exp"(%[[N2]]) -> (%[[M2:[0-9]+]]) {} {hcs.recompute}
// BUDGET-NEXT: %[[V:.*]] = hcs.view %[[M2]] : memref<64xf32> to memref<8x8xf32>
// BUDGET-NEXT: hcs.call "add"(%[[V]], %{{.*}}) -> (%{{.*}}) {} : (memref<8x8xf32>
// BUDGET: hcs.call "mul"(%{{.*}}, %[[N2]])

func.func @step() {
  %x = hcs.constant dense<0.5> : tensor<64xf32> : memref<64xf32>
  %n = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%x) -> (%n) {} : (memref<64xf32>) -> memref<64xf32>
  %m = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%n) -> (%m) {} : (memref<64xf32>) -> memref<64xf32>
  %h = hcs.buffer "act" : memref<64xf32>
  hcs.call "sin"(%m) -> (%h) {} : (memref<64xf32>) -> memref<64xf32>
  %k = hcs.buffer "act" : memref<64xf32>
  hcs.call "cos"(%h) -> (%k) {} : (memref<64xf32>) -> memref<64xf32>
  %j = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%k) -> (%j) {} : (memref<64xf32>) -> memref<64xf32>
  %q = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%h, %k) -> (%q) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %w = hcs.buffer "act" : memref<64xf32>
  hcs.call "add"(%q, %j) -> (%w) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  %mv = hcs.view %m : memref<64xf32> to memref<8x8xf32>
  %wv = hcs.view %w : memref<64xf32> to memref<8x8xf32>
  %g = hcs.buffer "act" : memref<8x8xf32>
  hcs.call "add"(%mv, %wv) -> (%g) {} : (memref<8x8xf32>, memref<8x8xf32>) -> memref<8x8xf32>
  %gv = hcs.view %g : memref<8x8xf32> to memref<64xf32>
  %r = hcs.buffer "act" : memref<64xf32>
  hcs.call "mul"(%gv, %n) -> (%r) {} : (memref<64xf32>, memref<64xf32>) -> memref<64xf32>
  hcs.loss %r : memref<64xf32>
  return
}
