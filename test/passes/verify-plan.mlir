// RUN: hc-opt %s --hc-verify-plan -split-input-file -verify-diagnostics

// A hand-made plan where two simultaneously live buffers overlap: rejected.
func.func @step() attributes {hcs.arena_bytes = {act = 512 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{overlaps a buffer that is live at the same time: [0, 256) and [128, 384)}}
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  // expected-note @+1 {{the other buffer}}
  %b = hcs.buffer "act" {offset = 128 : i64} : memref<64xf32>
  hcs.call "exp"(%a) -> (%b) {} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

// The same offsets are fine when the buffers are never live together.
func.func @step() attributes {hcs.arena_bytes = {act = 384 : i64, param = 256 : i64}} {
  %p = hcs.buffer "param" {offset = 0 : i64} : memref<64xf32>
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  hcs.call "tanh"(%p) -> (%a) {} : (memref<64xf32>) -> memref<64xf32>
  hcs.call "exp"(%a) -> (%p) {} : (memref<64xf32>) -> memref<64xf32>
  %b = hcs.buffer "act" {offset = 128 : i64} : memref<64xf32>
  hcs.call "neg"(%p) -> (%b) {} : (memref<64xf32>) -> memref<64xf32>
  return
}

// -----

func.func @step() attributes {hcs.arena_bytes = {act = 128 : i64}} {
  // expected-error @+1 {{buffer [0, 256) lies outside arena 'act'}}
  %a = hcs.buffer "act" {offset = 0 : i64} : memref<64xf32>
  return
}

// -----

func.func @step() attributes {hcs.arena_bytes = {act = 256 : i64}} {
  // expected-error @+1 {{buffer has no offset: run hc-plan-buffers}}
  %a = hcs.buffer "act" : memref<64xf32>
  return
}
