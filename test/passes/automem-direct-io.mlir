// A disk tier reads and writes with direct I/O, in place where the memory
// is block-aligned: the activations of 64 KiB or more that its copies read
// or write are planned on 4096-byte offsets. %a would lie at 64 after the
// small %s; it lies at 4096, and its prefetched copy on a block too. The
// small and the uncopied buffers keep 64-byte offsets.
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: hc-opt %s --hc-automem="mem-budget=300000 reserve=0 offload-dir=%t.dir lookahead=1 rates=stream_gbps_per_thread=0.001" --hc-plan-buffers --hc-verify-plan | FileCheck %s --check-prefix=DIRECTIO
// DIRECTIO-LABEL: func.func @direct()
// DIRECTIO-SAME: hcs.arena_bytes = {act = 200704 : i64, offload = 65536 : i64, param = 65600 : i64}
// DIRECTIO: hcs.buffer "act" {offset = 0 : i64} : memref<16xf32>
// DIRECTIO: %[[A:[0-9]+]] = hcs.buffer "act" {offset = 4096 : i64} : memref<16384xf32>
// DIRECTIO: hcs.offload %[[A]] to
// DIRECTIO: hcs.buffer "act" {offset = 64 : i64} : memref<16384xf32>
// DIRECTIO: %[[B:[0-9]+]] = hcs.buffer "act" {offset = 135168 : i64} : memref<16384xf32>
// DIRECTIO-NEXT: hcs.prefetch %{{[0-9]+}} to %[[B]]
func.func @direct() {
  %q = hcs.buffer "param" {offset = 0 : i64} : memref<16xf32>
  %p = hcs.buffer "param" {offset = 64 : i64} : memref<16384xf32>
  %s = hcs.buffer "act" : memref<16xf32>
  hcs.call "tanh"(%q) -> (%s) {} : (memref<16xf32>) -> memref<16xf32>
  %a = hcs.buffer "act" : memref<16384xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<16384xf32>) -> memref<16384xf32>
  %b = hcs.buffer "act" : memref<16384xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<16384xf32>) -> memref<16384xf32>
  %c = hcs.buffer "act" : memref<16384xf32>
  hcs.call "neg"(%b) -> (%c) {} : (memref<16384xf32>) -> memref<16384xf32>
  %d = hcs.buffer "act" : memref<16384xf32>
  hcs.call "add"(%b, %c) -> (%d) {} : (memref<16384xf32>, memref<16384xf32>) -> memref<16384xf32>
  %e = hcs.buffer "act" : memref<16384xf32>
  hcs.call "sin"(%d) -> (%e) {} : (memref<16384xf32>) -> memref<16384xf32>
  %g = hcs.buffer "act" : memref<16384xf32>
  hcs.call "cos"(%e) -> (%g) {} : (memref<16384xf32>) -> memref<16384xf32>
  %f = hcs.buffer "act" : memref<16384xf32>
  hcs.call "mul"(%g, %a) -> (%f) {} : (memref<16384xf32>, memref<16384xf32>) -> memref<16384xf32>
  %t = hcs.buffer "act" : memref<16xf32>
  hcs.call "add"(%s, %s) -> (%t) {} : (memref<16xf32>, memref<16xf32>) -> memref<16xf32>
  hcs.loss %f : memref<16384xf32>
  return
}
