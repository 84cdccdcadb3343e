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
    if errors:
        sys.exit("FAILED: " + "; ".join(errors[:10]))


if __name__ == "__main__":
    main()
