#!/usr/bin/env -S /usr/bin/python3
"""Validation loss (hc-run --val-data) on the tiny DiT:

  - two runs score the same bits (fixed timesteps and noise);
  - the loss at the last step is bit-equal to test mode's loss on the same
    inputs (the batches rebuilt here from the spec, test/run/run_check.py's
    validation_batch) with the trained weights, and val_loss_ema to test
    mode's with the checkpoint's EMA weights;
  - ranks average: -np 2 at batch 2 scores the initial weights (lr 0) as
    -np 1 at batch 4 does, within 1e-6.
"""
import json
import os
import shutil
import sys

import numpy as np

from common import PY, ROOT, bin_and_work, read_safetensors, run

sys.path.insert(0, os.path.join(ROOT, "test", "run"))
import run_check  # noqa: E402
import st  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def main():
    a, w = bin_and_work()
    hc_run = os.path.join(a.bin, "hc-run")
    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size", "16",
         "--num-classes", "10", "--opset", "13", "--dynamic-batch", "--init", "random",
         "-o", w("m.onnx")])
    for b in (2, 4):
        run([os.path.join(a.bin, "hc-compile"), w("m.onnx"), "--batch", str(b), "--optimizer",
             "adamw", "--lr", "1e-3", "-o", w("b%d.so" % b)])
    r = np.random.default_rng(0)
    np.save(w("x.npy"), r.uniform(-1, 1, (40, 4, 16, 16)).astype(np.float32))
    np.save(w("y.npy"), r.integers(0, 10, 40).astype(np.int64))
    xv = r.uniform(-1, 1, (10, 4, 16, 16)).astype(np.float32)
    yv = r.integers(0, 10, 10).astype(np.int64)
    np.save(w("xv.npy"), xv)
    np.save(w("yv.npy"), yv)
    errors = []

    def train(so, tag, extra=(), np_=None):
        out = run((MPIRUN + ["-np", str(np_)] if np_ else []) +
                  [hc_run, w(so), "--data", w("x.npy"), "--labels", w("y.npy"), "--steps", "4",
                   "--seed", "5", "--no-progress", "--log-every", "2", "--val-data", w("xv.npy"),
                   "--val-labels", w("yv.npy"), "--metrics", w(tag + ".jsonl")] + list(extra))
        with open(w(tag + ".jsonl")) as f:
            vals = [json.loads(l) for l in f if "val_loss" in l]
        return out, vals

    out, v1 = train("b4.so", "a", ["--ema", "0.9", "--ckpt-dir", w("ck"), "--save-params",
                                   w("p.safetensors")])
    _, v2 = train("b4.so", "b", ["--ema", "0.9", "--ckpt-dir", w("ck2")])
    print("validation at steps %s: %s" % ([v["step"] for v in v1], v1))
    if [v["step"] for v in v1] != [2, 4] or "Val Loss" not in out:
        errors.append("validation steps %s" % [v["step"] for v in v1])
    if v1 != v2:
        errors.append("two runs scored differently: %s vs %s" % (v1, v2))
    if "validation uses 8 of the 10 samples" not in out:
        errors.append("no note about the 2 samples left out:\n" + out)
    # Test mode on the spec's batches with the trained and the EMA weights.
    ck = st.load(w("ck", "ckpt-00000004.safetensors"))
    st.save(w("ema.safetensors"), {k[4:]: v for k, v in ck.items() if k.startswith("ema:")})
    for weights, key in (("p.safetensors", "val_loss"), ("ema.safetensors", "val_loss_ema")):
        losses = []
        for k in range(2):
            x_t, t, y, eps = run_check.validation_batch(xv, yv, 4 * k, 4, 10)
            d = w("vb%d" % k)
            os.makedirs(d, exist_ok=True)
            for name, v in (("x_t", x_t.reshape(4, 4, 16, 16)), ("t", t), ("y", y),
                            ("noise", eps.reshape(4, 4, 16, 16))):
                np.save(os.path.join(d, name + ".npy"), v)
            o = run([hc_run, w("b4.so"), "--inputs", d, "--steps", "1", "--init", w(weights)])
            losses.append(float([l for l in o.splitlines() if l.startswith("loss ")][0].split()[1]))
        want = (losses[0] + losses[1]) / 2
        got = v1[-1][key]
        print("%s at step 4: %.17g; test mode on the spec's batches: %.17g" % (key, got, want))
        if got != want:
            errors.append("%s %.17g is not test mode's %.17g" % (key, got, want))
    # Ranks average: the initial weights (lr 0) at -np 2 x 2 and -np 1 x 4.
    _, n1 = train("b4.so", "n1", ["--lr", "0"])
    _, n2 = train("b2.so", "n2", ["--lr", "0"], np_=2)
    e = abs(n2[0]["val_loss"] - n1[0]["val_loss"]) / n1[0]["val_loss"]
    print("initial weights: -np 1 x 4 %.9g, -np 2 x 2 %.9g (rel %.1e)"
          % (n1[0]["val_loss"], n2[0]["val_loss"], e))
    if e > 1e-6 or n1[0]["val_loss"] != n1[-1]["val_loss"]:
        errors.append("rank averaging %.2e" % e)
    shutil.rmtree(a.work, ignore_errors=True)
    if errors:
        sys.exit("FAILED: " + "; ".join(errors))


if __name__ == "__main__":
    main()
