// RUN: hc-opt %s --hc-bf16-storage --split-input-file | FileCheck %s

// A DiT block's two cases: the GELU before fc2 (read by fc2's forward and
// its weight gradient, once through a view) and the modulated norm before
// fc1 become bf16 buffers, views included; the others stay float32: fc1's
// pre-activation (gelu_grad reads it), fc2's output (the residual's add
// reads it), the gradients.
// CHECK-LABEL: func.func @block
// CHECK: %[[H:.*]] = hcs.buffer "act" : memref<4x3x8xf32>
// CHECK: %[[N:.*]] = hcs.buffer "act" : memref<4x3x8xbf16>
// CHECK: %[[PRE:.*]] = hcs.buffer "act" : memref<4x3x16xf32>
// CHECK: %[[G:.*]] = hcs.buffer "act" : memref<4x3x16xbf16>
// CHECK: %[[Y:.*]] = hcs.buffer "act" : memref<4x3x8xf32>
// CHECK: hcs.call "modulated_layer_norm"(%[[H]], %{{.*}}, %{{.*}}) -> (%[[N]]) {epsilon = {{.*}}} : (memref<4x3x8xf32>, memref<4x8xf32>, memref<4x8xf32>) -> memref<4x3x8xbf16>
// CHECK: hcs.call "linear"(%[[N]], %{{.*}}) -> (%[[PRE]]) {precision = "bf16"} : (memref<4x3x8xbf16>, memref<16x8xf32>) -> memref<4x3x16xf32>
// CHECK: hcs.call "gelu"(%[[PRE]]) -> (%[[G]]) {approximate = "tanh"} : (memref<4x3x16xf32>) -> memref<4x3x16xbf16>
// CHECK: %[[GV:.*]] = hcs.view %[[G]] : memref<4x3x16xbf16> to memref<12x16xbf16>
// CHECK: hcs.call "linear"(%[[GV]], %{{.*}}) -> (%[[Y]]) {precision = "bf16"} : (memref<12x16xbf16>, memref<8x16xf32>) -> memref<4x3x8xf32>
// CHECK: hcs.call "add"(%[[Y]], %[[H]]) -> (%{{.*}}) {} : (memref<4x3x8xf32>, memref<4x3x8xf32>) -> memref<4x3x8xf32>
// CHECK: hcs.call "linear_grad_weight_bias"(%{{.*}}, %[[G]]) -> (%{{.*}}, %{{.*}}) {precision = "bf16"} : (memref<4x3x8xf32>, memref<4x3x16xbf16>)
// CHECK: hcs.call "gelu_grad"(%{{.*}}, %[[PRE]])
// CHECK: hcs.call "linear_grad_weight"(%{{.*}}, %[[N]]) -> (%{{.*}}) {precision = "bf16"} : (memref<4x3x16xf32>, memref<4x3x8xbf16>)
func.func @block() {
  %h = hcs.buffer "act" : memref<4x3x8xf32>
  %shift = hcs.buffer "param" {name = "shift"} : memref<4x8xf32>
  %scale = hcs.buffer "param" {name = "scale"} : memref<4x8xf32>
  %w1 = hcs.buffer "param" {name = "w1"} : memref<16x8xf32>
  %w2 = hcs.buffer "param" {name = "w2"} : memref<8x16xf32>
  %n = hcs.buffer "act" : memref<4x3x8xf32>
  %pre = hcs.buffer "act" : memref<4x3x16xf32>
  %g = hcs.buffer "act" : memref<4x3x16xf32>
  %y = hcs.buffer "act" : memref<4x3x8xf32>
  %r = hcs.buffer "act" : memref<4x3x8xf32>
  %dy = hcs.buffer "act" : memref<4x3x8xf32>
  %dw2 = hcs.buffer "grad" : memref<8x16xf32>
  %db2 = hcs.buffer "grad" : memref<8xf32>
  %dg = hcs.buffer "act" : memref<4x3x16xf32>
  %dpre = hcs.buffer "act" : memref<4x3x16xf32>
  %dw1 = hcs.buffer "grad" : memref<16x8xf32>
  hcs.call "modulated_layer_norm"(%h, %shift, %scale) -> (%n) {epsilon = 1.0e-06 : f64} : (memref<4x3x8xf32>, memref<4x8xf32>, memref<4x8xf32>) -> memref<4x3x8xf32>
  hcs.call "linear"(%n, %w1) -> (%pre) {precision = "bf16"} : (memref<4x3x8xf32>, memref<16x8xf32>) -> memref<4x3x16xf32>
  hcs.call "gelu"(%pre) -> (%g) {approximate = "tanh"} : (memref<4x3x16xf32>) -> memref<4x3x16xf32>
  %gv = hcs.view %g : memref<4x3x16xf32> to memref<12x16xf32>
  hcs.call "linear"(%gv, %w2) -> (%y) {precision = "bf16"} : (memref<12x16xf32>, memref<8x16xf32>) -> memref<4x3x8xf32>
  hcs.call "add"(%y, %h) -> (%r) {} : (memref<4x3x8xf32>, memref<4x3x8xf32>) -> memref<4x3x8xf32>
  hcs.call "linear_grad_weight_bias"(%dy, %g) -> (%dw2, %db2) {precision = "bf16"} : (memref<4x3x8xf32>, memref<4x3x16xf32>) -> (memref<8x16xf32>, memref<8xf32>)
  hcs.call "linear_grad_input"(%dy, %w2) -> (%dg) {precision = "bf16"} : (memref<4x3x8xf32>, memref<8x16xf32>) -> memref<4x3x16xf32>
  hcs.call "gelu_grad"(%dg, %pre) -> (%dpre) {approximate = "tanh"} : (memref<4x3x16xf32>, memref<4x3x16xf32>) -> memref<4x3x16xf32>
  hcs.call "linear_grad_weight"(%dpre, %n) -> (%dw1) {precision = "bf16"} : (memref<4x3x16xf32>, memref<4x3x8xf32>) -> memref<16x8xf32>
  return
}

// -----

// Near misses, each kept float32: a reader the slots do not allow (a GELU
// output that gelu_grad reads; a linear's weight operand); a GEMM without
// precision bf16 (fp32 rounds nothing); a named buffer (the host reads it);
// two writers; an "offload" buffer; a buffer a writer also reads.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: bf16>
// CHECK: return
func.func @kept() {
  %x = hcs.buffer "act" : memref<4x8xf32>
  %w = hcs.buffer "param" {name = "w"} : memref<8x8xf32>
  %a = hcs.buffer "act" : memref<4x8xf32>
  %a2 = hcs.buffer "act" : memref<4x8xf32>
  hcs.call "gelu"(%x) -> (%a) {approximate = "tanh"} : (memref<4x8xf32>) -> memref<4x8xf32>
  hcs.call "linear"(%a, %w) -> (%a2) {precision = "bf16"} : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32>
  hcs.call "gelu_grad"(%a2, %a) -> (%a2) {approximate = "tanh"} : (memref<4x8xf32>, memref<4x8xf32>) -> memref<4x8xf32>
  %b = hcs.buffer "act" : memref<8x8xf32>
  %b2 = hcs.buffer "act" : memref<4x8xf32>
  hcs.call "gelu"(%w) -> (%b) {approximate = "tanh"} : (memref<8x8xf32>) -> memref<8x8xf32>
  hcs.call "linear"(%x, %b) -> (%b2) {precision = "bf16"} : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32>
  %c = hcs.buffer "act" : memref<4x8xf32>
  %c2 = hcs.buffer "act" : memref<4x8xf32>
  hcs.call "gelu"(%x) -> (%c) {approximate = "tanh"} : (memref<4x8xf32>) -> memref<4x8xf32>
  hcs.call "linear"(%c, %w) -> (%c2) {} : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32>
  %d = hcs.buffer "act" {name = "monitor"} : memref<4x8xf32>
  %d2 = hcs.buffer "act" : memref<4x8xf32>
  hcs.call "gelu"(%x) -> (%d) {approximate = "tanh"} : (memref<4x8xf32>) -> memref<4x8xf32>
  hcs.call "linear"(%d, %w) -> (%d2) {precision = "bf16"} : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32>
  %e = hcs.buffer "act" : memref<4x8xf32>
  %e2 = hcs.buffer "act" : memref<4x8xf32>
  hcs.call "gelu"(%x) -> (%e) {approximate = "tanh"} : (memref<4x8xf32>) -> memref<4x8xf32>
  hcs.call "gelu"(%a2) -> (%e) {approximate = "tanh"} : (memref<4x8xf32>) -> memref<4x8xf32>
  hcs.call "linear"(%e, %w) -> (%e2) {precision = "bf16"} : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32>
  %f = hcs.buffer "offload" : memref<4x8xf32>
  %f2 = hcs.buffer "act" : memref<4x8xf32>
  hcs.call "gelu"(%x) -> (%f) {approximate = "tanh"} : (memref<4x8xf32>) -> memref<4x8xf32>
  hcs.call "linear"(%f, %w) -> (%f2) {precision = "bf16"} : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32>
  %i = hcs.buffer "act" : memref<4x8xf32>
  %i2 = hcs.buffer "act" : memref<4x8xf32>
  hcs.call "modulated_layer_norm"(%i, %x, %x) -> (%i) {epsilon = 1.0e-06 : f64} : (memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) -> memref<4x8xf32>
  hcs.call "linear"(%i, %w) -> (%i2) {precision = "bf16"} : (memref<4x8xf32>, memref<8x8xf32>) -> memref<4x8xf32>
  return
}

// -----

// qkv: attention and its gradient read it (bf16 slots, precision bf16) and
// its linear writes bf16 (the GEMM rounds as it stores): the linear writes
// the bf16 buffer itself, no cast; read once (a sampler's attention) too.
// CHECK-LABEL: func.func @qkv
// CHECK: %[[QKV:.*]] = hcs.buffer "act" : memref<2x4x24xbf16>
// CHECK-NOT: "cast"
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%[[QKV]]) {precision = "bf16"} : (memref<2x4x8xf32>, memref<24x8xf32>) -> memref<2x4x24xbf16>
// CHECK-NEXT: hcs.call "attention"(%[[QKV]]) -> (%{{.*}}, %{{.*}}) {num_heads = 2 : i64, precision = "bf16", scale = 5.000000e-01 : f64} : (memref<2x4x24xbf16>)
// CHECK: hcs.call "attention_grad"(%{{.*}}, %{{.*}}, %{{.*}}, %[[QKV]]) -> (%{{.*}}) {{.*}} : (memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x2x4xf32>, memref<2x4x24xbf16>)
// CHECK-LABEL: func.func @qkv_once
// CHECK: %[[Q1:.*]] = hcs.buffer "act" : memref<2x4x24xbf16>
// CHECK-NOT: "cast"
// CHECK: hcs.call "linear"(%{{.*}}, %{{.*}}) -> (%[[Q1]]) {precision = "bf16"} : (memref<2x4x8xf32>, memref<24x8xf32>) -> memref<2x4x24xbf16>
// CHECK-NEXT: hcs.call "attention"(%[[Q1]])
func.func @qkv() {
  %x = hcs.buffer "act" : memref<2x4x8xf32>
  %w = hcs.buffer "param" {name = "w"} : memref<24x8xf32>
  %qkv = hcs.buffer "act" : memref<2x4x24xf32>
  %o = hcs.buffer "act" : memref<2x4x8xf32>
  %lse = hcs.buffer "act" : memref<2x2x4xf32>
  %do = hcs.buffer "act" : memref<2x4x8xf32>
  %dqkv = hcs.buffer "act" : memref<2x4x24xf32>
  hcs.call "linear"(%x, %w) -> (%qkv) {precision = "bf16"} : (memref<2x4x8xf32>, memref<24x8xf32>) -> memref<2x4x24xf32>
  hcs.call "attention"(%qkv) -> (%o, %lse) {num_heads = 2 : i64, precision = "bf16", scale = 0.5 : f64} : (memref<2x4x24xf32>) -> (memref<2x4x8xf32>, memref<2x2x4xf32>)
  hcs.call "attention_grad"(%do, %o, %lse, %qkv) -> (%dqkv) {num_heads = 2 : i64, precision = "bf16", scale = 0.5 : f64} : (memref<2x4x8xf32>, memref<2x4x8xf32>, memref<2x2x4xf32>, memref<2x4x24xf32>) -> memref<2x4x24xf32>
  return
}
func.func @qkv_once() {
  %x = hcs.buffer "act" : memref<2x4x8xf32>
  %w = hcs.buffer "param" {name = "w"} : memref<24x8xf32>
  %qkv = hcs.buffer "act" : memref<2x4x24xf32>
  %o = hcs.buffer "act" : memref<2x4x8xf32>
  hcs.call "linear"(%x, %w) -> (%qkv) {precision = "bf16"} : (memref<2x4x8xf32>, memref<24x8xf32>) -> memref<2x4x24xf32>
  hcs.call "attention"(%qkv) -> (%o) {num_heads = 2 : i64, precision = "bf16", scale = 0.5 : f64} : (memref<2x4x24xf32>) -> memref<2x4x8xf32>
  return
}

// -----

// A writer that cannot write bf16 (SiLU, adaLN's conditioning): read by
// two bf16 linears, it writes a float32 temporary that a cast rounds into
// the bf16 buffer the two read; read once it stays float32 (the cast would
// buy nothing).
// CHECK-LABEL: func.func @cast
// CHECK: %[[C:.*]] = hcs.buffer "act" : memref<4x8xbf16>
// CHECK: hcs.call "silu"(%{{.*}}) -> (%[[TMP:[0-9]+]]) {} : (memref<4x8xf32>) -> memref<4x8xf32>
// CHECK-NEXT: hcs.call "cast"(%[[TMP]]) -> (%[[C]]) {} : (memref<4x8xf32>) -> memref<4x8xbf16>
// CHECK-NEXT: hcs.call "linear"(%[[C]], %{{.*}}) -> (%{{.*}}) {precision = "bf16"} : (memref<4x8xbf16>, memref<16x8xf32>) -> memref<4x16xf32>
// CHECK-NEXT: hcs.call "linear"(%[[C]], %{{.*}}) -> (%{{.*}}) {precision = "bf16"} : (memref<4x8xbf16>, memref<16x8xf32>) -> memref<4x16xf32>
// CHECK-LABEL: func.func @cast_once
// CHECK-NOT: bf16>
// CHECK-NOT: "cast"
// CHECK: return
func.func @cast() {
  %x = hcs.buffer "act" : memref<4x8xf32>
  %w1 = hcs.buffer "param" {name = "w1"} : memref<16x8xf32>
  %w2 = hcs.buffer "param" {name = "w2"} : memref<16x8xf32>
  %c = hcs.buffer "act" : memref<4x8xf32>
  %m1 = hcs.buffer "act" : memref<4x16xf32>
  %m2 = hcs.buffer "act" : memref<4x16xf32>
  %s = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "silu"(%x) -> (%c) {} : (memref<4x8xf32>) -> memref<4x8xf32>
  hcs.call "linear"(%c, %w1) -> (%m1) {precision = "bf16"} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  hcs.call "linear"(%c, %w2) -> (%m2) {precision = "bf16"} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  hcs.call "add"(%m1, %m2) -> (%s) {} : (memref<4x16xf32>, memref<4x16xf32>) -> memref<4x16xf32>
  return
}
func.func @cast_once() {
  %x = hcs.buffer "act" : memref<4x8xf32>
  %w1 = hcs.buffer "param" {name = "w1"} : memref<16x8xf32>
  %c = hcs.buffer "act" : memref<4x8xf32>
  %m1 = hcs.buffer "act" : memref<4x16xf32>
  %s = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "silu"(%x) -> (%c) {} : (memref<4x8xf32>) -> memref<4x8xf32>
  hcs.call "linear"(%c, %w1) -> (%m1) {precision = "bf16"} : (memref<4x8xf32>, memref<16x8xf32>) -> memref<4x16xf32>
  hcs.call "add"(%m1, %m1) -> (%s) {} : (memref<4x16xf32>, memref<4x16xf32>) -> memref<4x16xf32>
  return
}
