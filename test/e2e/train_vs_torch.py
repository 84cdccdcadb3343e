#!/usr/bin/env -S /usr/bin/python3
"""The training step hc derives (autodiff + optimizer) against PyTorch on the
same module, weights and inputs: loss, every trainable gradient of the first
step, and the parameter change after K steps (float64 on both sides)."""
import argparse
import os
import shutil
import sys

import numpy as np

from common import PY, ROOT, compare_step, export, load_npy_dir, rel, run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("export_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model.onnx")
    ref, out = os.path.join(a.work, "ref"), os.path.join(a.work, "out")
    export(model, [x for x in a.export_args if x != "--"])
    hyper = ["--optimizer", a.optimizer, "--lr", "1e-3", "--weight-decay", "0.01"]
    run([PY, os.path.join(ROOT, "models/torch_reference.py"), model, "--batch", "2",
         "--out", ref, "--train-steps", str(a.steps)] + hyper)
    run([os.path.join(a.bin, "hc-eval"), model, "--batch", "2", "--inputs", ref,
         "--out", out, "--train", "--steps", str(a.steps)] + hyper)

    errors = []
    loss_err = rel(np.load(os.path.join(out, "train_loss.npy")),
                   np.load(os.path.join(ref, "train_loss.npy")))
    print("loss (all steps) rel err %.3e" % loss_err)
    if loss_err > 1e-5:
        errors.append("loss %.3e" % loss_err)
    errors += compare_step(ref, load_npy_dir(os.path.join(out, "grads")),
                           load_npy_dir(os.path.join(out, "params")), 1e-4)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model.onnx")
    ref, out = os.path.join(a.work, "ref"), os.path.join(a.work, "out")
    export(model, [x for x in a.export_args if x != "--"])
    hyper = ["--optimizer", a.optimizer, "--lr", "1e-3", "--weight-decay", "0.01"]
    run([PY, os.path.join(ROOT, "models/torch_reference.py"), model, "--batch", "2",
         "--out", ref, "--train-steps", str(a.steps)] + hyper)
    run([os.path.join(a.bin, "hc-eval"), model, "--batch", "2", "--inputs", ref,
         "--out", out, "--train", "--steps", str(a.steps)] + hyper)

    errors = []
    loss_err = rel(np.load(os.path.join(out, "train_loss.npy")),
                   np.load(os.path.join(ref, "train_loss.npy")))
    print("loss (all steps) rel err %.3e" % loss_err)
    if loss_err > 1e-5:
        errors.append("loss %.3e" % loss_err)
    worst_g, worst_p = 0.0, 0.0
    grads = sorted(os.listdir(os.path.join(ref, "grads")))
    hc_grads = sorted(os.listdir(os.path.join(out, "grads")))
    if grads != hc_grads:
        errors.append("gradient sets differ: %s" % sorted(set(grads) ^ set(hc_grads)))
    for f in grads:
        want = np.load(os.path.join(ref, "grads", f))
        if np.linalg.norm(want) == 0:
            errors.append("torch gradient of %s is zero (test would be vacuous)" % f)
            continue
        e = rel(np.load(os.path.join(out, "grads", f)), want)
        worst_g = max(worst_g, e)
        if e > 1e-4:
            errors.append("grad %s %.3e" % (f, e))
    for f in sorted(os.listdir(os.path.join(ref, "params_after"))):
        before = np.load(os.path.join(ref, "params_before", f))
        want = np.load(os.path.join(ref, "params_after", f)) - before
        got = np.load(os.path.join(out, "params", f)) - before
        if np.linalg.norm(want) == 0:  # frozen: must not move at all
            if np.any(got != 0):
                errors.append("frozen %s moved" % f)
            continue
        e = rel(got, want)
        worst_p = max(worst_p, e)
        if e > 1e-4:
            errors.append("delta %s %.3e" % (f, e))
    print("%d gradients: worst rel err %.3e; %d-step parameter change: worst "
          "rel err %.3e" % (len(grads), worst_g, a.steps, worst_p))
    shutil.rmtree(a.work, ignore_errors=True)
    if errors:
        sys.exit("FAILED: " + "; ".join(errors[:10]))


if __name__ == "__main__":
    main()
