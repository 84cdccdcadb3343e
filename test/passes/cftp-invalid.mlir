// hc-cftp's refusals: one line naming the flag.
// RUN: not hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml clusters=2" --hc-cftp 2>&1 | FileCheck %s --check-prefix=BATCH
// BATCH: error: --clusters 2 does not divide the per-rank batch 3 (CFTP cuts the batch across the clusters; use a multiple of it, or --cftp off)
// Without strict-batch (hc-compile: no --clusters given) the step stays whole.
// RUN: hc-opt %s --hc-plan-buffers --hc-plan-placement="topology=%S/../topologies/flat2.xml clusters=2" --hc-cftp="strict-batch=false" --hc-verify-plan | FileCheck %s --check-prefix=LOOSE
// LOOSE: hcs.cftp = {clusters = 2 : i64, skipped = "the per-rank batch 3 is not a multiple of the clusters"}
// LOOSE: hcs.call "neg"(%{{.*}}) -> (%{{.*}}) {} : (memref<3x8xf32>) -> memref<3x8xf32>
// RUN: not hc-opt %s --hc-cftp="rates=%t.missing.txt" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: --rates {{.*}}missing.txt: cannot read the file
// RUN: not hc-opt %s --hc-cftp="rates=%S/Inputs/cftp-bad-rates.txt" 2>&1 | FileCheck %s --check-prefix=KEY
// KEY: error: --rates {{.*}}cftp-bad-rates.txt:2: unknown rate 'warp_factor'
func.func @step() {
  %x = hcs.input "x" {index = 0 : i64} : memref<3x8xf32>
  %y = hcs.buffer "act" : memref<3x8xf32>
  hcs.call "neg"(%x) -> (%y) {} : (memref<3x8xf32>) -> memref<3x8xf32>
  hcs.loss %y : memref<3x8xf32>
  return
}
