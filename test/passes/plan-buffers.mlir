// RUN: hc-opt %s --hc-plan-buffers --hc-verify-plan | FileCheck %s

// Liveness-based reuse: %a dies after the second call, so %c (allocated
// later) takes its place; %b is live across and keeps its own space. The
// arena's peak is two 256-byte buffers, not three.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}
// CHECK: %[[A:.*]] = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
// CHECK: %[[B:.*]] = hcs.buffer "act" {offset = 256 : i64} : memref<64xf32>
// CHECK: %[[C:.*]] = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
func.func @step() {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  %b = hcs.buffer "act" : memref<64xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<64xf32>) -> memref<64xf32>
  %c = hcs.buffer "act" : memref<64xf32>
  hcs.call "neg"(%b) -> (%c) {} : (memref<64xf32>) -> memref<64xf32>
  %v = hcs.view %b : memref<64xf32> to memref<8x8xf32>
  hcs.call "add"(%c, %v) -> (%p) {} : (memref<64xf32>, memref<8x8xf32>) -> memref<64xf32>
  return
}
