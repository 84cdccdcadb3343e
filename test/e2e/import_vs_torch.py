#!/usr/bin/env -S /usr/bin/python3
"""End-to-end import check: export a DiT loss graph with PyTorch, run the same
module in PyTorch (float32 and float64) and hc's importer + reference
evaluator on the same weights and inputs, and compare the DiT output tensor
and the loss. Fails (exit 1) when the relative error exceeds the tolerance."""
import argparse
import os
import shutil
import sys
import time

import numpy as np

from common import export, rel, run, torch_reference


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="folder with hc-eval")
    ap.add_argument("--work", required=True)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("export_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model.onnx")
    ref, out = os.path.join(a.work, "ref"), os.path.join(a.work, "out")
    t0 = time.time()
    export(model, [x for x in a.export_args if x != "--"])
    torch_reference(model, ref)
    # The import alone (--no-fuse): fusion has its own test.
    run([os.path.join(a.bin, "hc-eval"), model, "--batch", "2", "--no-fuse",
         "--inputs", ref, "--out", out])
    worst = 0.0
    for name in ("loss", "prediction"):
        got = np.load(os.path.join(out, name + ".npy"))
        want32 = np.load(os.path.join(ref, name + ".npy"))
        want64 = np.load(os.path.join(ref, name + "_f64.npy"))
        if got.shape != want32.shape or not np.all(np.isfinite(got)):
            sys.exit("FAILED: %s has shape %s (want %s) or non-finite values"
                     % (name, got.shape, want32.shape))
        e32, e64 = rel(got, want32), rel(got, want64)
        worst = max(worst, e32)
        print("%-10s rel err vs torch f32 %.3e, vs torch f64 %.3e" % (name, e32, e64))
    print("%.1f s" % (time.time() - t0))
    shutil.rmtree(a.work, ignore_errors=True)
    if worst > a.tol:
        sys.exit("FAILED: relative error %.3e > %.1e" % (worst, a.tol))


if __name__ == "__main__":
    main()
