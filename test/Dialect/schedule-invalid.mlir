// RUN: hc-opt %s -split-input-file -verify-diagnostics
// The schedule dialect's own checks: hcs.call names a kernel of the
// runtime's registry (abi/include/hc/abi/kernels.def) and carries
// exactly the attributes its layout there names, so a typo in a lowering is
// an IR error here, not "the generated C++ failed to compile" or an
// attribute the runtime silently reads as its default.

func.func @unknown_kernel(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{'hcs.call' op unknown runtime kernel 'tanhh' (abi/include/hc/abi/kernels.def lists them)}}
  hcs.call "tanhh"(%a) -> (%b) {} : (memref<4xf32>) -> memref<4xf32>
  return
}

// -----

// Every name of the registry is accepted with its layout: the first, one
// from the middle, the last (the in-place optimizer), a backward kernel
// with its flag at its default (absent) and set, and a compiler-only
// attribute (keepdims) the runtime does not read.
func.func @known_kernels(%a: memref<4xf32>, %b: memref<4xf32>, %s: memref<1xf32>) {
  hcs.call "add"(%a, %a) -> (%b) {} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  hcs.call "gelu_grad"(%a, %a) -> (%b) {} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  hcs.call "gelu_grad"(%a, %a) -> (%b) {approximate = "none"} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  hcs.call "reduce_sum"(%a) -> (%s) {axes = array<i64: 0>, keepdims = true} : (memref<4xf32>) -> memref<1xf32>
  hcs.call "sgd"(%a, %a) -> (%b) {lr = 1.0e-03 : f64, weight_decay = 0.0 : f64} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  return
}

// -----

func.func @attribute_not_in_layout(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{'hcs.call' op kernel 'add' has no attribute 'axis' (kernels.def: none)}}
  hcs.call "add"(%a, %a) -> (%b) {axis = 0 : i64} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  return
}

// -----

func.func @misspelt_attribute(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{'hcs.call' op kernel 'softmax' has no attribute 'axes' (kernels.def: axis)}}
  hcs.call "softmax"(%a) -> (%b) {axes = array<i64: 0>} : (memref<4xf32>) -> memref<4xf32>
  return
}

// -----

func.func @missing_attribute(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{'hcs.call' op kernel 'sgd' needs attribute 'weight_decay' (a float)}}
  hcs.call "sgd"(%a, %a) -> (%b) {lr = 1.0e-03 : f64} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  return
}

// -----

func.func @attribute_of_the_wrong_kind(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{'hcs.call' op kernel 'attention': attribute 'num_heads' must be an integer}}
  hcs.call "attention"(%a) -> (%b) {num_heads = 4.0 : f64, scale = 0.5 : f64} : (memref<4xf32>) -> memref<4xf32>
  return
}

// -----

func.func @flag_must_be_a_string(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{'hcs.call' op kernel 'gelu': attribute 'approximate' must be a string}}
  hcs.call "gelu"(%a) -> (%b) {approximate = 1 : i64} : (memref<4xf32>) -> memref<4xf32>
  return
}

// -----

// hcrt_attrs holds 16 integers: slice_grad's starts and steps of a rank-9
// view would need 18.
func.func @too_many_values(%a: memref<1x1x1x1x1x1x1x1x1xf32>, %b: memref<1x1x1x1x1x1x1x1x1xf32>) {
  // expected-error @+1 {{'hcs.call' op kernel 'slice_grad': 18 integer and 0 float attribute values, hcrt_attrs holds 16 and 8}}
  hcs.call "slice_grad"(%a) -> (%b) {starts = array<i64: 0, 0, 0, 0, 0, 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1, 1, 1, 1, 1, 1>} : (memref<1x1x1x1x1x1x1x1x1xf32>) -> memref<1x1x1x1x1x1x1x1x1xf32>
  return
}

// -----

// bf16 mixed precision (hc-bf16-gemms): `precision` is a flag of the
// GEMM-class kernels only, and a string.
func.func @precision_on_gemms(%x: memref<2x3xf32>, %w: memref<4x3xf32>, %y: memref<2x4xf32>) {
  hcs.call "linear"(%x, %w) -> (%y) {precision = "bf16"} : (memref<2x3xf32>, memref<4x3xf32>) -> memref<2x4xf32>
  hcs.call "linear"(%x, %w) -> (%y) {} : (memref<2x3xf32>, memref<4x3xf32>) -> memref<2x4xf32>
  return
}

// -----

func.func @precision_not_on_add(%a: memref<4xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{'hcs.call' op kernel 'add' has no attribute 'precision' (kernels.def: none)}}
  hcs.call "add"(%a, %a) -> (%b) {precision = "bf16"} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  return
}

// -----

func.func @precision_not_a_string(%x: memref<2x3xf32>, %w: memref<4x3xf32>, %y: memref<2x4xf32>) {
  // expected-error @+1 {{'hcs.call' op kernel 'linear': attribute 'precision' must be a string}}
  hcs.call "linear"(%x, %w) -> (%y) {precision = 16 : i64} : (memref<2x3xf32>, memref<4x3xf32>) -> memref<2x4xf32>
  return
}

// -----

// A flag's string is one of its two values: "fp16" would otherwise pack as
// fp32 and run as something it does not say.
func.func @precision_unknown_value(%x: memref<2x3xf32>, %w: memref<4x3xf32>, %y: memref<2x4xf32>) {
  // expected-error @+1 {{'hcs.call' op kernel 'linear': attribute 'precision' must be "bf16" or "fp32", got "fp16"}}
  hcs.call "linear"(%x, %w) -> (%y) {precision = "fp16"} : (memref<2x3xf32>, memref<4x3xf32>) -> memref<2x4xf32>
  return
}

// -----

// Tier copies (hc-automem) move whole buffers between "act" and "offload".
func.func @step() {
  %a = hcs.buffer "act" : memref<64xf32>
  %s = hcs.buffer "param" : memref<64xf32>
  // expected-error @+1 {{copies a whole 'act' buffer to a whole 'offload' buffer}}
  %t = hcs.offload %a to %s : memref<64xf32> to memref<64xf32>
  hcs.wait %t
  return
}

// -----

func.func @step() {
  %a = hcs.buffer "act" : memref<64xf32>
  %s = hcs.buffer "offload" : memref<64xf32>
  // expected-error @+1 {{copies a whole 'offload' buffer to a whole 'act' buffer}}
  %t = hcs.prefetch %a to %s : memref<64xf32> to memref<64xf32>
  hcs.wait %t
  return
}

// -----

func.func @step() {
  %a = hcs.buffer "act" : memref<64xf32>
  %s = hcs.buffer "offload" : memref<32xf32>
  // expected-error @+1 {{source and target must have one type}}
  %t = hcs.offload %a to %s : memref<64xf32> to memref<32xf32>
  hcs.wait %t
  return
}

// -----

func.func @step() {
  %a = hcs.buffer "act" : memref<64xf32>
  %v = hcs.view %a : memref<64xf32> to memref<8x8xf32>
  %s = hcs.buffer "offload" : memref<8x8xf32>
  // expected-error @+1 {{copies a piece of a buffer, but not to the same piece of a buffer of its type}}
  %t = hcs.offload %v to %s : memref<8x8xf32> to memref<8x8xf32>
  hcs.wait %t
  return
}

// -----

// hc-cftp's pieces of a copy: the same rows of two buffers of one type...
func.func @step() {
  %a = hcs.buffer "act" : memref<8x8xf32>
  %s = hcs.buffer "offload" : memref<8x8xf32>
  %va = hcs.view %a : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  %vs = hcs.view %s : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  %t = hcs.offload %va to %vs : memref<4x8xf32, strided<[8, 1], offset: 32>> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  hcs.wait %t
  // ...and contiguous: the copy engine moves one byte range.
  %ca = hcs.view %a : memref<8x8xf32> to memref<8x4xf32, strided<[8, 1]>>
  %cs = hcs.view %s : memref<8x8xf32> to memref<8x4xf32, strided<[8, 1]>>
  // expected-error @+1 {{copies a piece that is not contiguous}}
  %u = hcs.prefetch %cs to %ca : memref<8x4xf32, strided<[8, 1]>> to memref<8x4xf32, strided<[8, 1]>>
  hcs.wait %u
  return
}

// -----

// Pieces of buffers of two types: not the same bytes of each.
func.func @step() {
  %a = hcs.buffer "act" : memref<8x8xf32>
  %s = hcs.buffer "offload" : memref<16x4xf32>
  %va = hcs.view %a : memref<8x8xf32> to memref<16xf32>
  %vs = hcs.view %s : memref<16x4xf32> to memref<16xf32>
  // expected-error @+1 {{copies a piece of a buffer, but not to the same piece of a buffer of its type}}
  %t = hcs.offload %va to %vs : memref<16xf32> to memref<16xf32>
  hcs.wait %t
  return
}

// -----

func.func @step() {
  // expected-error @+1 {{unknown arena 'disk'}}
  %a = hcs.buffer "disk" : memref<64xf32>
  return
}

// -----

// The verifier holds every call to the slots: a bf16 x on a GEMM without
// precision bf16, and a bf16 output of a kernel that writes float32 only.
func.func @refused(%x: memref<4x8xbf16>, %w: memref<8x8xf32>, %y: memref<4x8xf32>) {
  // expected-error @+1 {{kernel 'linear' input 0 cannot be bf16 (kernels.def's HCRT_BF16_SLOTS, with precision bf16)}}
  hcs.call "linear"(%x, %w) -> (%y) {} : (memref<4x8xbf16>, memref<8x8xf32>) -> memref<4x8xf32>
  return
}

// -----

func.func @refused_output(%x: memref<4x8xf32>, %y: memref<4x8xbf16>) {
  // expected-error @+1 {{kernel 'tanh' output 0 cannot be bf16 (kernels.def's HCRT_BF16_SLOTS)}}
  hcs.call "tanh"(%x) -> (%y) {} : (memref<4x8xf32>) -> memref<4x8xbf16>
  return
}

// -----

// hcs.cluster_wait: two clusters, a count, and a scope the runtime knows.
func.func @self_wait() {
  // expected-error @+1 {{'hcs.cluster_wait' op a cluster cannot wait for itself}}
  hcs.cluster_wait {cluster = 1 : i64, source = 1 : i64, count = 1 : i64}
  return
}

// -----

func.func @unknown_scope() {
  // expected-error @+1 {{'hcs.cluster_wait' op only_for 'linear': a scoped wait orders an allreduce_start, a grad_accumulate call or a conditional call (call_if_reduced, call_if_local)}}
  hcs.cluster_wait {cluster = 0 : i64, source = 1 : i64, count = 1 : i64, only_for = "linear"}
  return
}

// -----

// hcs.call's only_if: "reduced" or "local" (hcrt_call_condition).
func.func @unknown_condition(%a: memref<4xf32>) {
  // expected-error @+1 {{'hcs.call' op only_if 'always': a call runs only if "reduced" or "local"}}
  hcs.call "add"(%a, %a) -> (%a) {} {only_if = "always"} : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  return
}
