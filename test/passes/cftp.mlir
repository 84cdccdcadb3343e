// hc-cftp: the planned step cut into one stream per cluster. Topology: the
// committed flat 2-core machine re-cut into 2 clusters of 1 core.
// The cuts without partial weight gradients (the default); with them
// (partial-grads=true), the last case (PART).
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml clusters=2" --hc-cftp --hc-verify-plan | FileCheck %s
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml clusters=2" --hc-cftp="partial-grads=true" --hc-verify-plan | FileCheck %s --check-prefix=PART
// The same on 4 clusters (PART4), with room for three copies of the
// gradient: clusters 1-3 each have a page-aligned region of the partial
// arena, and each cluster folds all three partials into its rows of the
// gradient.
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat16.xml clusters=4" --hc-cftp="partial-grads=true partial-limit=4194304" --hc-verify-plan | FileCheck %s --check-prefix=PART4
// Without partial-limit the partials take at most the "grad" arena's
// bytes (one more copy of the gradients): three copies do not fit, so
// the 4-cluster step keeps the feature cut (CAP4), while 2 clusters'
// single copy does (PART above).
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat16.xml clusters=4" --hc-cftp="partial-grads=true" --hc-verify-plan | FileCheck %s --check-prefix=CAP4
//
// One cluster (the same machine as discovered): the pass leaves the step alone.
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml" --hc-cftp --hc-verify-plan | FileCheck %s --check-prefix=ONE
// ONE-NOT: {{cluster_wait|cluster = |hcs.cftp|split = "}}
//
// The committed many-core topologies: K clusters of the budget, threads each.
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/lx2.xml" --hc-cftp --hc-verify-plan | FileCheck %s --check-prefix=LX2
// LX2: hcs.cftp = {clusters = 4 : i64, {{.*}}threads = array<i32: 8, 8, 8, 8>
// LX2-COUNT-4: hcs.call "linear"({{.*}}split = "rows"
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/xeon-max.xml" --hc-cftp --hc-verify-plan | FileCheck %s --check-prefix=XMAX
// XMAX: hcs.cftp = {clusters = 4 : i64, {{.*}}threads = array<i32: 4, 4, 4, 4>
// Two ranks per node on the 2-socket machine: 2 clusters of 8 cores each.
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/two-socket.xml ranks-per-node=2" --hc-cftp --hc-verify-plan | FileCheck %s --check-prefix=TWO
// TWO: hcs.cftp = {clusters = 2 : i64, {{.*}}threads = array<i32: 8, 8>
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat16.xml clusters=4" --hc-cftp --hc-verify-plan | FileCheck %s --check-prefix=F16
// F16: hcs.cftp = {clusters = 4 : i64, {{.*}}threads = array<i32: 4, 4, 4, 4>
//
// The cost model decides: by default the bias gradient's sum runs on the
// idle cluster 0 after a wait (below); when a blocking wait costs 10 ms it
// stays on cluster 1, which wrote dz, and the step has one wait fewer.
// RUN: hc-opt %s -split-input-file --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml clusters=2" --hc-cftp="rates=%S/Inputs/cftp-slow-sync.txt" --hc-verify-plan | FileCheck %s --check-prefix=SLOW
// SLOW-LABEL: func.func @step()
// SLOW-SAME: rates = "{{.*}}cftp-slow-sync.txt", split = 3 : i64, threads = array<i32: 1, 1>, unsplit_seconds = {{.*}}, waits = 4 : i64
// SLOW: hcs.call "linear_grad_weight"({{.*}}) {} {cluster = 1 : i64} :
// SLOW-NEXT: hcs.call "reduce_sum"({{.*}}) {axes = array<i64: 0>, keepdims = false} {cluster = 1 : i64} :
// SLOW: hcs.cluster_wait {cluster = 0 : i64, count = 6 : i64, only_for = "allreduce_start", source = 1 : i64}
// SLOW-NEXT: hcs.allreduce_start
// SLOW-NEXT: hcs.cluster_wait {cluster = 0 : i64, count = 6 : i64, source = 1 : i64}
// SLOW-NEXT: hcs.wait

// A tiny step: the forward is cut by rows (a view of each cluster's rows of
// x and y, in place through y's leading dimension); gelu and copy follow on
// the rows each cluster wrote, so no wait; the loss (one scalar) stays on
// cluster 0 and waits for cluster 1's rows; the backward's tiny calls run
// whole where the model finds a cut costs more than it saves; the
// all-reduce stays on cluster 0 after a wait for cluster 1's gradients
// scoped to it (only_for: the runtime skips it where the all-reduce does
// nothing, one rank), so the wait for its sum waits for them again.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: hcs.cftp = {clusters = 2 : i64, predicted_seconds = {{.*}}, rates = "built-in", split = 3 : i64, threads = array<i32: 1, 1>, unsplit_seconds = {{.*}}, waits = 5 : i64, whole = 6 : i64}
// CHECK: %[[X0:.*]] = hcs.view %[[X:[0-9]+]] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
// CHECK-NEXT: %[[Y0:.*]] = hcs.view %[[Y:[0-9]+]] : memref<4x16xf32> to memref<2x16xf32, strided<[16, 1]>>
// CHECK-NEXT: hcs.call "linear"(%[[X0]], %{{.*}}, %{{.*}}) -> (%[[Y0]]) {} {cluster = 0 : i64, split = "rows"}
// CHECK-NEXT: %[[X1:.*]] = hcs.view %[[X]] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
// CHECK-NEXT: %[[Y1:.*]] = hcs.view %[[Y]] : memref<4x16xf32> to memref<2x16xf32, strided<[16, 1], offset: 32>>
// CHECK-NEXT: hcs.call "linear"(%[[X1]], %{{.*}}, %{{.*}}) -> (%[[Y1]]) {} {cluster = 1 : i64, split = "rows"}
// CHECK-NOT: cluster_wait
// CHECK: hcs.call "gelu"({{.*}}cluster = 0 : i64, split = "rows"
// CHECK-NOT: cluster_wait
// CHECK: hcs.call "gelu"({{.*}}cluster = 1 : i64, split = "rows"
// CHECK-NOT: cluster_wait
// CHECK: hcs.call "copy"({{.*}}cluster = 1 : i64, split = "rows"
// CHECK: hcs.cluster_wait {cluster = 0 : i64, count = 3 : i64, source = 1 : i64}
// CHECK-NEXT: hcs.call "mse_loss"({{.*}}) {} {cluster = 0 : i64} :
// CHECK: hcs.cluster_wait {cluster = 1 : i64, count = 3 : i64, source = 0 : i64}
// CHECK-NEXT: hcs.call "mse_loss_grad"({{.*}}) {} {cluster = 1 : i64} :
// CHECK-NEXT: hcs.call "linear_grad_weight"({{.*}}) {} {cluster = 1 : i64} :
// CHECK-NEXT: hcs.cluster_wait {cluster = 0 : i64, count = 4 : i64, source = 1 : i64}
// CHECK-NEXT: hcs.call "reduce_sum"({{.*}}) {axes = array<i64: 0>, keepdims = false} {cluster = 0 : i64} :
// CHECK: hcs.cluster_wait {cluster = 0 : i64, count = 5 : i64, only_for = "allreduce_start", source = 1 : i64}
// CHECK-NEXT: hcs.allreduce_start {{.*}}cluster = 0 : i64
// CHECK-NEXT: hcs.cluster_wait {cluster = 0 : i64, count = 5 : i64, source = 1 : i64}
// CHECK-NEXT: hcs.wait {{.*}} {cluster = 0 : i64}
func.func @step() {
  %x = hcs.input "x" {index = 0 : i64} : memref<4x8xf32>
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<16x8xf32>
  %b = hcs.buffer "param" {name = "b", offset = 512 : i64} : memref<16xf32>
  %dw = hcs.buffer "grad" {name = "grad:w", offset = 0 : i64} : memref<16x8xf32>
  %db = hcs.buffer "grad" {name = "grad:b", offset = 512 : i64} : memref<16xf32>
  %y = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "linear"(%x, %w, %b) -> (%y) {} : (memref<4x8xf32>, memref<16x8xf32>, memref<16xf32>) -> memref<4x16xf32>
  %z = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "gelu"(%y) -> (%z) {approximate = "tanh"} : (memref<4x16xf32>) -> memref<4x16xf32>
  %t = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "copy"(%z) -> (%t) {} : (memref<4x16xf32>) -> memref<4x16xf32>
  %l = hcs.buffer "act" : memref<f32>
  hcs.call "mse_loss"(%z, %t) -> (%l) {} : (memref<4x16xf32>, memref<4x16xf32>) -> memref<f32>
  %one = hcs.constant dense<1.0> : tensor<f32> : memref<f32>
  %dz = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "mse_loss_grad"(%one, %z, %t) -> (%dz) {} : (memref<f32>, memref<4x16xf32>, memref<4x16xf32>) -> memref<4x16xf32>
  hcs.call "linear_grad_weight"(%dz, %x) -> (%dw) {} : (memref<4x16xf32>, memref<4x8xf32>) -> memref<16x8xf32>
  hcs.call "reduce_sum"(%dz) -> (%db) {axes = array<i64: 0>, keepdims = false} : (memref<4x16xf32>) -> memref<16xf32>
  %all = hcs.buffer "grad" {offset = 0 : i64} : memref<144xf32>
  %tok = hcs.allreduce_start %all {bucket_id = 0 : i64} : memref<144xf32>
  hcs.wait %tok
  hcs.loss %l : memref<f32>
  return
}

// -----

// Larger GEMMs: the weight gradient and the bias sum are cut by output
// feature (each cluster reads all rows: a wait for the other's rows of dy
// first), each writing its rows of dw in place; the scalar loss stays on
// cluster 0, already ordered after cluster 1's rows.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: split = 4 : i64, threads = array<i32: 1, 1>, unsplit_seconds = {{.*}}, waits = 2 : i64, whole = 1 : i64}
// CHECK: hcs.call "linear"({{.*}}cluster = 0 : i64, split = "rows"
// CHECK: hcs.call "linear"({{.*}}cluster = 1 : i64, split = "rows"
// CHECK: hcs.call "gelu"({{.*}}cluster = 1 : i64, split = "rows"
// CHECK-NEXT: hcs.cluster_wait {cluster = 0 : i64, count = 2 : i64, source = 1 : i64}
// CHECK-NEXT: %[[G0:.*]] = hcs.view %[[G:[0-9]+]] : memref<64x512xf32> to memref<64x256xf32, strided<[512, 1]>>
// CHECK-NEXT: %[[W0:.*]] = hcs.view %[[W:[0-9]+]] : memref<512x256xf32> to memref<256x256xf32, strided<[256, 1]>>
// CHECK-NEXT: hcs.call "linear_grad_weight"(%[[G0]], %[[XIN:[0-9]+]]) -> (%[[W0]]) {} {cluster = 0 : i64, split = "features"}
// CHECK-NEXT: hcs.cluster_wait {cluster = 1 : i64, count = 2 : i64, source = 0 : i64}
// CHECK-NEXT: %[[G1:.*]] = hcs.view %[[G]] : memref<64x512xf32> to memref<64x256xf32, strided<[512, 1], offset: 256>>
// CHECK-NEXT: %[[W1:.*]] = hcs.view %[[W]] : memref<512x256xf32> to memref<256x256xf32, strided<[256, 1], offset: 65536>>
// CHECK-NEXT: hcs.call "linear_grad_weight"(%[[G1]], %[[XIN]]) -> (%[[W1]]) {} {cluster = 1 : i64, split = "features"}
// CHECK: hcs.call "reduce_sum"({{.*}}cluster = 0 : i64, split = "features"} : ({{.*}}) -> memref<256xf32, strided<[1]>>
// CHECK: hcs.call "reduce_sum"({{.*}}cluster = 1 : i64, split = "features"} : ({{.*}}) -> memref<256xf32, strided<[1], offset: 256>>
// CHECK-NOT: cluster_wait
// CHECK: hcs.call "reduce_sum"({{.*}}) {axes = array<i64: 0, 1>, keepdims = false} {cluster = 0 : i64} : (memref<64x512xf32>) -> memref<f32>
func.func @step() {
  %x = hcs.input "x" {index = 0 : i64} : memref<64x256xf32>
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<512x256xf32>
  %dw = hcs.buffer "grad" {name = "grad:w", offset = 0 : i64} : memref<512x256xf32>
  %db = hcs.buffer "grad" {name = "grad:b", offset = 524288 : i64} : memref<512xf32>
  %y = hcs.buffer "act" : memref<64x512xf32>
  hcs.call "linear"(%x, %w) -> (%y) {} : (memref<64x256xf32>, memref<512x256xf32>) -> memref<64x512xf32>
  %dy = hcs.buffer "act" : memref<64x512xf32>
  hcs.call "gelu"(%y) -> (%dy) {approximate = "tanh"} : (memref<64x512xf32>) -> memref<64x512xf32>
  hcs.call "linear_grad_weight"(%dy, %x) -> (%dw) {} : (memref<64x512xf32>, memref<64x256xf32>) -> memref<512x256xf32>
  hcs.call "reduce_sum"(%dy) -> (%db) {axes = array<i64: 0>, keepdims = false} : (memref<64x512xf32>) -> memref<512xf32>
  %l = hcs.buffer "act" : memref<f32>
  hcs.call "reduce_sum"(%y) -> (%l) {axes = array<i64: 0, 1>, keepdims = false} : (memref<64x512xf32>) -> memref<f32>
  hcs.loss %l : memref<f32>
  return
}

// -----

// hc-automem's tier copies cut by clusters (hc-cftp): each cluster
// offloads, waits for and prefetches its own rows of the buffers its cut
// calls write and read, so no stream waits for the other's copies. Only the
// loss, whole on cluster 0, waits for cluster 1's mul.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: copies = 4 : i64
// CHECK: hcs.call "gelu"({{.*}}cluster = 1 : i64, split = "rows"
// CHECK-NOT: hcs.cluster_wait
// CHECK: %[[O0:.*]] = hcs.offload {{.*}} {cluster = 0 : i64} : memref<32x512xf32, strided<[512, 1]>> to memref<32x512xf32, strided<[512, 1]>>
// CHECK-NOT: hcs.cluster_wait
// CHECK: %[[O1:.*]] = hcs.offload {{.*}} {cluster = 1 : i64} : memref<32x512xf32, strided<[512, 1], offset: 16384>> to memref<32x512xf32, strided<[512, 1], offset: 16384>>
// CHECK-NEXT: hcs.wait %[[O0]] {cluster = 0 : i64}
// CHECK-NEXT: hcs.wait %[[O1]] {cluster = 1 : i64}
// CHECK-NOT: hcs.cluster_wait
// CHECK: hcs.call "exp"({{.*}}cluster = 1 : i64, split = "rows"
// CHECK-NOT: hcs.cluster_wait
// CHECK: %[[P0:.*]] = hcs.prefetch {{.*}} {cluster = 0 : i64} : memref<32x512xf32, strided<[512, 1]>>
// CHECK-NOT: hcs.cluster_wait
// CHECK: %[[P1:.*]] = hcs.prefetch {{.*}} {cluster = 1 : i64} : memref<32x512xf32, strided<[512, 1], offset: 16384>>
// CHECK-NEXT: hcs.wait %[[P0]] {cluster = 0 : i64}
// CHECK-NEXT: hcs.wait %[[P1]] {cluster = 1 : i64}
// CHECK-NOT: hcs.cluster_wait
// CHECK: hcs.call "mul"({{.*}}cluster = 1 : i64, split = "rows"
// CHECK: hcs.cluster_wait {cluster = 0 : i64, count = 7 : i64, source = 1 : i64}
// CHECK-NEXT: hcs.call "reduce_mean"
func.func @step() attributes {hcs.memory = #hcs.memory_plan<budget = 0, reserve = 0, tiers = [#hcs.tier<arenas = ["act"], capacity = 0, kind = "DRAM", name = "fast">, #hcs.tier<arenas = ["offload"], capacity = 0, kind = "DRAM", name = "slow">], recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  %x = hcs.input "x" {index = 0 : i64} : memref<64x512xf32>
  %a = hcs.buffer "act" : memref<64x512xf32>
  hcs.call "gelu"(%x) -> (%a) {approximate = "tanh"} : (memref<64x512xf32>) -> memref<64x512xf32>
  %o = hcs.buffer "offload" : memref<64x512xf32>
  %t0 = hcs.offload %a to %o : memref<64x512xf32> to memref<64x512xf32>
  hcs.wait %t0
  %b = hcs.buffer "act" : memref<64x512xf32>
  hcs.call "exp"(%x) -> (%b) {} : (memref<64x512xf32>) -> memref<64x512xf32>
  %c = hcs.buffer "act" : memref<64x512xf32>
  %t1 = hcs.prefetch %o to %c : memref<64x512xf32> to memref<64x512xf32>
  hcs.wait %t1
  %d = hcs.buffer "act" : memref<64x512xf32>
  hcs.call "mul"(%b, %c) -> (%d) {} : (memref<64x512xf32>, memref<64x512xf32>) -> memref<64x512xf32>
  %l = hcs.buffer "act" : memref<f32>
  hcs.call "reduce_mean"(%d) -> (%l) {axes = array<i64: 0, 1>, keepdims = false} : (memref<64x512xf32>) -> memref<f32>
  hcs.loss %l : memref<f32>
  return
}

// -----

// A disk tier's copy is cut only on its 4 KiB blocks (direct I/O writes
// whole blocks): half of 64 rows of 2000 bytes is 64000 bytes, so these
// copies stay whole, on stream 0, and their bytes are ordered like any
// access. The offload reads what both clusters' gelu wrote (it waits for
// cluster 1). The exp's buffer has bytes of its own (hc-cftp lays the
// buffers out apart), so it runs whole on cluster 1 beside the copies,
// waiting for nothing; the mul on cluster 1 reads the prefetched buffer
// only after the prefetch's wait (count 5: stream 0's fifth entry, not the
// prefetch's start). plan-stream-buffers.mlir checks that a reuse of a
// copy's bytes waits for its hcs.wait.
// CHECK-LABEL: func.func @step()
// CHECK-SAME: copies = 2 : i64
// CHECK: hcs.call "gelu"({{.*}}cluster = 1 : i64, split = "rows"
// CHECK: hcs.cluster_wait {cluster = 0 : i64, count = 1 : i64, source = 1 : i64}
// CHECK-NEXT: %[[T0:.*]] = hcs.offload {{.*}} {cluster = 0 : i64} : memref<64x500xf32> to memref<64x500xf32>
// CHECK-NEXT: hcs.wait %[[T0]] {cluster = 0 : i64}
// CHECK-NEXT: hcs.buffer "act"
// CHECK-NEXT: hcs.call "exp"({{.*}}) {} {cluster = 1 : i64} :
// CHECK: %[[T1:.*]] = hcs.prefetch {{.*}} {cluster = 0 : i64}
// CHECK-NEXT: hcs.wait %[[T1]] {cluster = 0 : i64}
// CHECK: hcs.cluster_wait {cluster = 1 : i64, count = 5 : i64, source = 0 : i64}
// CHECK-NOT: hcs.call
// CHECK: hcs.call "mul"({{.*}}cluster = 1 : i64, split = "rows"
func.func @step() attributes {hcs.memory = #hcs.memory_plan<budget = 0, reserve = 0, tiers = [#hcs.tier<arenas = ["act"], capacity = 0, kind = "DRAM", name = "fast">, #hcs.tier<arenas = ["offload"], capacity = 0, kind = "disk", name = "disk">], offload_dir = "/tmp", recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  %x = hcs.input "x" {index = 0 : i64} : memref<64x500xf32>
  %a = hcs.buffer "act" : memref<64x500xf32>
  hcs.call "gelu"(%x) -> (%a) {approximate = "tanh"} : (memref<64x500xf32>) -> memref<64x500xf32>
  %o = hcs.buffer "offload" : memref<64x500xf32>
  %t0 = hcs.offload %a to %o : memref<64x500xf32> to memref<64x500xf32>
  hcs.wait %t0
  %b = hcs.buffer "act" : memref<64x500xf32>
  hcs.call "exp"(%x) -> (%b) {} : (memref<64x500xf32>) -> memref<64x500xf32>
  %c = hcs.buffer "act" : memref<64x500xf32>
  %t1 = hcs.prefetch %o to %c : memref<64x500xf32> to memref<64x500xf32>
  hcs.wait %t1
  %d = hcs.buffer "act" : memref<64x500xf32>
  hcs.call "mul"(%b, %c) -> (%d) {} : (memref<64x500xf32>, memref<64x500xf32>) -> memref<64x500xf32>
  %l = hcs.buffer "act" : memref<f32>
  hcs.call "reduce_mean"(%d) -> (%l) {axes = array<i64: 0, 1>, keepdims = false} : (memref<64x500xf32>) -> memref<f32>
  hcs.loss %l : memref<f32>
  return
}

// -----

// Each cluster's pieces of a cut copy queue on its own copy lane: both
// clusters' offloads end together, neither stream lags the other, and the
// linear after them is cut. (With one FIFO for both, cluster 1's piece
// ended a piece's disk time after cluster 0's, and the model ran the
// linear whole on cluster 0 while cluster 1 waited: 19 of S/2's linears
// under a 60% budget.)
// CHECK-LABEL: func.func @step()
// CHECK-SAME: copies = 4 : i64
// CHECK: %[[O0:.*]] = hcs.offload {{.*}} {cluster = 0 : i64}
// CHECK: %[[O1:.*]] = hcs.offload {{.*}} {cluster = 1 : i64}
// CHECK-NEXT: hcs.wait %[[O0]] {cluster = 0 : i64}
// CHECK-NEXT: hcs.wait %[[O1]] {cluster = 1 : i64}
// CHECK-NOT: hcs.call
// CHECK: hcs.call "linear"({{.*}}) {} {cluster = 0 : i64, split = "rows"}
// CHECK: hcs.call "linear"({{.*}}) {} {cluster = 1 : i64, split = "rows"}
func.func @step() attributes {hcs.memory = #hcs.memory_plan<budget = 0, reserve = 0, tiers = [#hcs.tier<arenas = ["act"], capacity = 0, kind = "DRAM", name = "fast">, #hcs.tier<arenas = ["offload"], capacity = 0, kind = "disk", name = "disk">], offload_dir = "/tmp", recomputed_calls = 0, recompute_seconds = 0.0 : f64, segments = 0, copy_seconds = 0.0 : f64, offload_bytes = 0, prefetch_bytes = 0, recomputed_over_move = 0>} {
  %x = hcs.input "x" {index = 0 : i64} : memref<64x8192xf32>
  %a = hcs.buffer "act" : memref<64x8192xf32>
  hcs.call "gelu"(%x) -> (%a) {approximate = "tanh"} : (memref<64x8192xf32>) -> memref<64x8192xf32>
  %o = hcs.buffer "offload" : memref<64x8192xf32>
  %t0 = hcs.offload %a to %o : memref<64x8192xf32> to memref<64x8192xf32>
  hcs.wait %t0
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<512x512xf32>
  %h = hcs.input "h" {index = 1 : i64} : memref<64x512xf32>
  %y = hcs.buffer "act" : memref<64x512xf32>
  hcs.call "linear"(%h, %w) -> (%y) {} : (memref<64x512xf32>, memref<512x512xf32>) -> memref<64x512xf32>
  %c = hcs.buffer "act" : memref<64x8192xf32>
  %t1 = hcs.prefetch %o to %c : memref<64x8192xf32> to memref<64x8192xf32>
  hcs.wait %t1
  %l = hcs.buffer "act" : memref<f32>
  hcs.call "reduce_mean"(%y) -> (%l) {axes = array<i64: 0, 1>, keepdims = false} : (memref<64x512xf32>) -> memref<f32>
  %l2 = hcs.buffer "act" : memref<f32>
  hcs.call "reduce_mean"(%c) -> (%l2) {axes = array<i64: 0, 1>, keepdims = false} : (memref<64x8192xf32>) -> memref<f32>
  hcs.loss %l : memref<f32>
  return
}

// -----

// A call hc-automem marked as a recomputation (hcs.recompute) keeps the mark
// on every piece of its cut.
// CHECK-LABEL: func.func @step()
// CHECK: hcs.call "linear"({{.*}}) {} {cluster = 0 : i64, hcs.recompute, split = "rows"}
// CHECK: hcs.call "linear"({{.*}}) {} {cluster = 1 : i64, hcs.recompute, split = "rows"}
func.func @step() {
  %x = hcs.input "x" {index = 0 : i64} : memref<4x8xf32>
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<16x8xf32>
  %b = hcs.buffer "param" {name = "b", offset = 512 : i64} : memref<16xf32>
  %dw = hcs.buffer "grad" {name = "grad:w", offset = 0 : i64} : memref<16x8xf32>
  %db = hcs.buffer "grad" {name = "grad:b", offset = 512 : i64} : memref<16xf32>
  %y = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "linear"(%x, %w, %b) -> (%y) {} {hcs.recompute} : (memref<4x8xf32>, memref<16x8xf32>, memref<16xf32>) -> memref<4x16xf32>
  %z = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "gelu"(%y) -> (%z) {approximate = "tanh"} : (memref<4x16xf32>) -> memref<4x16xf32>
  %t = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "copy"(%z) -> (%t) {} : (memref<4x16xf32>) -> memref<4x16xf32>
  %l = hcs.buffer "act" : memref<f32>
  hcs.call "mse_loss"(%z, %t) -> (%l) {} : (memref<4x16xf32>, memref<4x16xf32>) -> memref<f32>
  %one = hcs.constant dense<1.0> : tensor<f32> : memref<f32>
  %dz = hcs.buffer "act" : memref<4x16xf32>
  hcs.call "mse_loss_grad"(%one, %z, %t) -> (%dz) {} : (memref<f32>, memref<4x16xf32>, memref<4x16xf32>) -> memref<4x16xf32>
  hcs.call "linear_grad_weight"(%dz, %x) -> (%dw) {} : (memref<4x16xf32>, memref<4x8xf32>) -> memref<16x8xf32>
  hcs.call "reduce_sum"(%dz) -> (%db) {axes = array<i64: 0>, keepdims = false} : (memref<4x16xf32>) -> memref<16xf32>
  %all = hcs.buffer "grad" {offset = 0 : i64} : memref<144xf32>
  %tok = hcs.allreduce_start %all {bucket_id = 0 : i64} : memref<144xf32>
  hcs.wait %tok
  hcs.loss %l : memref<f32>
  return
}

// -----

// Partial weight gradients (partial-grads=true). The weight and
// bias gradient's feature cut would make each cluster wait for the other's
// rows of dy; instead each cluster sums its own rows (split = "partial"),
// cluster 0 into dw and db, cluster 1 into its buffers of the "partial"
// arena. Before the bucket's grad_accumulate the partials are folded into
// the gradient by calls only for a step that reduces gradients per bucket
// (only_if = "reduced"), each cluster its rows of dw and db, after a wait
// scoped to them; before grad_norm, the next op to read the gradients,
// again by calls only for a step that does not (only_if = "local").
// CAP4: func.func @step() attributes {hcs.arena_bytes = {accum = {{[0-9]+}} : i64, act = {{[0-9]+}} : i64, grad = {{[0-9]+}} : i64, param = {{[0-9]+}} : i64}, hcs.cftp = {clusters = 4 : i64
// CAP4-NOT: "partial"
// CAP4: hcs.call "linear_grad_weight_bias"({{.*}}cluster = 3 : i64, split = "features"
// CAP4-NOT: "partial"
// CAP4: return
// PART4: func.func @step() attributes {hcs.arena_bytes = {{{.*}}partial = 1583104 : i64
// PART4-SAME: folds = 48 : i64, partial = 1 : i64
// PART4: hcs.buffer "partial" {offset = 0 : i64} : memref<512x256xf32>
// PART4: hcs.buffer "partial" {offset = 528384 : i64} : memref<512x256xf32>
// PART4: hcs.buffer "partial" {offset = 1056768 : i64} : memref<512x256xf32>
// PART4: hcs.wait
// PART4: %[[G:[0-9]+]] = hcs.view %{{[0-9]+}} : memref<512x256xf32> to memref<128x256xf32, strided<[256, 1]>>
// PART4-COUNT-3: hcs.call "add"(%[[G]], %{{[0-9]+}}) -> (%[[G]]) {} {cluster = 0 : i64, only_if = "local", split = "fold"}
// PART: func.func @step() attributes {hcs.arena_bytes = {{{.*}}partial = 526336 : i64
// PART-SAME: hcs.cftp = {clusters = 2 : i64, folds = 8 : i64, partial = 1 : i64,
// PART: hcs.call "linear_grad_weight_bias"(%{{.*}}, %{{.*}}) -> (%[[DW:[0-9]+]], %[[DB:[0-9]+]]) {} {cluster = 0 : i64, split = "partial"} : (memref<32x512xf32, strided<[512, 1]>>, memref<32x256xf32, strided<[256, 1]>>) -> (memref<512x256xf32>, memref<512xf32>)
// PART: %[[QW:[0-9]+]] = hcs.buffer "partial" {offset = 0 : i64} : memref<512x256xf32>
// PART-NEXT: %[[QB:[0-9]+]] = hcs.buffer "partial" {offset = 524288 : i64} : memref<512xf32>
// PART-NEXT: hcs.call "linear_grad_weight_bias"(%{{.*}}, %{{.*}}) -> (%[[QW]], %[[QB]]) {} {cluster = 1 : i64, split = "partial"} : (memref<32x512xf32, strided<[512, 1], offset: 16384>>, memref<32x256xf32, strided<[256, 1], offset: 8192>>) -> (memref<512x256xf32>, memref<512xf32>)
// PART-NOT: hcs.cluster_wait {{{.*}}source
// PART: %[[G0:[0-9]+]] = hcs.view %[[DW]] : memref<512x256xf32> to memref<256x256xf32, strided<[256, 1]>>
// PART-NEXT: %[[P0:[0-9]+]] = hcs.view %[[QW]] : memref<512x256xf32> to memref<256x256xf32, strided<[256, 1]>>
// PART-NEXT: hcs.cluster_wait {cluster = 0 : i64, count = {{[0-9]+}} : i64, only_for = "call_if_reduced", source = 1 : i64}
// PART-NEXT: hcs.call "add"(%[[G0]], %[[P0]]) -> (%[[G0]]) {} {cluster = 0 : i64, only_if = "reduced", split = "fold"}
// PART: hcs.call "add"({{.*}}) -> ({{.*}}) {} {cluster = 1 : i64, only_if = "reduced", split = "fold"} : (memref<256x256xf32, strided<[256, 1], offset: 65536>>
// PART: hcs.call "add"({{.*}}cluster = 1 : i64, only_if = "reduced", split = "fold"} : (memref<256xf32, strided<[1], offset: 256>>
// PART-NOT: only_if
// PART: hcs.call "grad_accumulate"
// PART: hcs.allreduce_start
// PART: hcs.wait
// PART-NOT: only_if
// PART: hcs.call "add"({{.*}}cluster = 0 : i64, only_if = "local", split = "fold"
// PART-NEXT: hcs.view
// PART-NEXT: hcs.view
// PART-NEXT: hcs.cluster_wait {cluster = 1 : i64, count = {{[0-9]+}} : i64, only_for = "call_if_local", source = 0 : i64}
// PART-NEXT: hcs.call "add"({{.*}}cluster = 1 : i64, only_if = "local", split = "fold"
// PART-COUNT-2: hcs.call "add"({{.*}}only_if = "local", split = "fold"
// PART-NOT: only_if
// PART: hcs.call "grad_norm"
func.func @step() {
  %x = hcs.input "x" {index = 0 : i64} : memref<64x256xf32>
  %w = hcs.buffer "param" {name = "w", offset = 0 : i64} : memref<512x256xf32>
  %b = hcs.buffer "param" {name = "b", offset = 524288 : i64} : memref<512xf32>
  %dw = hcs.buffer "grad" {name = "grad:w", offset = 0 : i64} : memref<512x256xf32>
  %db = hcs.buffer "grad" {name = "grad:b", offset = 524288 : i64} : memref<512xf32>
  %y = hcs.buffer "act" : memref<64x512xf32>
  hcs.call "linear"(%x, %w, %b) -> (%y) {} : (memref<64x256xf32>, memref<512x256xf32>, memref<512xf32>) -> memref<64x512xf32>
  %l = hcs.buffer "act" : memref<f32>
  hcs.call "reduce_sum"(%y) -> (%l) {axes = array<i64: 0, 1>, keepdims = false} : (memref<64x512xf32>) -> memref<f32>
  %dy = hcs.buffer "act" : memref<64x512xf32>
  hcs.call "gelu"(%y) -> (%dy) {approximate = "tanh"} : (memref<64x512xf32>) -> memref<64x512xf32>
  hcs.call "linear_grad_weight_bias"(%dy, %x) -> (%dw, %db) {} : (memref<64x512xf32>, memref<64x256xf32>) -> (memref<512x256xf32>, memref<512xf32>)
  %all = hcs.buffer "grad" {offset = 0 : i64} : memref<131584xf32>
  %acc = hcs.buffer "accum" {offset = 0 : i64} : memref<131584xf32>
  hcs.call "grad_accumulate"(%all, %acc) -> (%all, %acc) {micro_batch = 0.0 : f64, micro_batches = 1.0 : f64} : (memref<131584xf32>, memref<131584xf32>) -> (memref<131584xf32>, memref<131584xf32>)
  %tok = hcs.allreduce_start %all {bucket_id = 0 : i64} : memref<131584xf32>
  hcs.wait %tok
  %n = hcs.buffer "grad" {name = "grad_norm", offset = 526336 : i64} : memref<f32>
  hcs.call "grad_norm"(%all) -> (%n) {} : (memref<131584xf32>) -> memref<f32>
  hcs.loss %l : memref<f32>
  return
}
