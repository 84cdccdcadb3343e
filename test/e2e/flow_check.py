#!/usr/bin/env -S /usr/bin/python3
"""Flow-matching objectives (export_dit.py --objective flow) end to end, for
every prediction x loss weight SiT allows on one path (--path):

  loss      the compiled graph's loss (hc-run --inputs on torch_reference.py's
            consistent inputs) against a float64 oracle restated here from
            SiT's formulas (not models/transport.py), fed the float64 PyTorch
            model's output: 1e-5 relative. The oracle's own derivatives are
            checked by central differences; the oracle with t flipped (1 - t)
            or derivatives 10% off must miss by > 10x that.
  batch     train mode's first batch: the step-1 loss equals, bit for bit,
            the loss of the batch re-derived here (test/run/run_check.py's
            Philox draws; t on the training interval; x_t and the target from
            the path) fed through --inputs; the same batch with t flipped, or
            a velocity target from derivatives 10% off, gives another loss.
  ranks     train mode 3 steps: mpirun -np 2 at batch 2 against -np 1 at
            batch 4 (the same global batches): losses within 1e-6 relative,
            parameters within 1e-4.

usage: flow_check.py --bin DIR --work DIR --path linear|gvp|vp
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

from common import PY, ROOT, loss_of, ranks_agree, run

sys.path.insert(0, os.path.join(ROOT, "test", "run"))
import run_check  # noqa: E402  (the Philox spec of train mode's draws)

COMBOS = [("velocity", "none")] + [(p, w) for p in ("noise", "score")
                                   for w in ("none", "velocity", "likelihood")]
C, S, CLASSES = 4, 8, 3
TOL_LOSS = 1e-5


# ---- SiT's formulas, restated (the oracle) ----------------------------------
def coefficients(path, t):
    """(alpha, alpha', sigma, sigma') in float64."""
    if path == "linear":
        return t, np.ones_like(t), 1 - t, -np.ones_like(t)
    if path == "gvp":
        h = np.pi / 2
        return np.sin(h * t), h * np.cos(h * t), np.cos(h * t), -h * np.sin(h * t)
    smin, smax = 0.1, 20.0
    m = -0.25 * (1 - t) ** 2 * (smax - smin) - 0.5 * (1 - t) * smin
    dm = 0.5 * (1 - t) * (smax - smin) + 0.5 * smin
    a = np.exp(m)
    s = np.sqrt(1 - np.exp(2 * m))
    return a, a * dm, s, -np.exp(2 * m) * dm / s


def drift_var(path, t, flip_derivative=False):
    """SiT's compute_drift variance: alpha'/alpha sigma^2 - sigma sigma' (VP:
    beta_t / 2, which is alpha'/alpha). The plant makes both derivatives 10%
    too large."""
    a, da, s, ds = coefficients(path, t)
    if flip_derivative:
        da, ds = 1.1 * da, 1.1 * ds
    if path == "vp":
        return da / a
    return da / a * s * s - s * ds


def oracle_loss(path, prediction, weight, out, t, target, flip_t=False, flip_derivative=False):
    t = np.asarray(t, np.float64)
    if flip_t:
        t = 1 - t
    if prediction == "velocity":
        return float(np.mean((out - target) ** 2))
    s = coefficients(path, t)[2]
    d = drift_var(path, t, flip_derivative)
    w = {"none": np.ones_like(t), "velocity": (d / s) ** 2, "likelihood": d / s ** 2}[weight]
    w, s = w.reshape(-1, 1, 1, 1), s.reshape(-1, 1, 1, 1)
    r = out - target if prediction == "noise" else out * s + target
    return float(np.mean(w * r * r))


def check_derivatives(path):
    t = np.linspace(0.05, 0.95, 19)
    h = 1e-6
    hi, lo = coefficients(path, t + h), coefficients(path, t - h)
    a, da, s, ds = coefficients(path, t)
    fd_a, fd_s = (hi[0] - lo[0]) / (2 * h), (hi[2] - lo[2]) / (2 * h)
    err = max(np.max(np.abs(fd_a - da)), np.max(np.abs(fd_s - ds)))
    ends = coefficients(path, np.array([1.0]))
    if err > 1e-6 or abs(ends[0][0] - 1) > 1e-12 or abs(ends[2][0]) > 1e-12:
        sys.exit("oracle: %s path's derivatives miss central differences by %g, or "
                 "(alpha, sigma)(1) = (%g, %g) is not the data" % (path, err, ends[0][0], ends[2][0]))
    return err


def interval(path, prediction, train_eps):
    if path == "vp":
        return 0.0, 1 - train_eps
    if prediction != "velocity":
        return train_eps, 1 - train_eps
    return 0.0, 1.0


# ---- train mode's first batch, re-derived ------------------------------------
def spec_batch(path, prediction, train_eps, x, y, seed, gbatch, flip_t=False,
               flip_derivative=False):
    n, d = x.shape[0], x[0].size
    per_epoch = (n // gbatch) * gbatch
    t0, t1 = interval(path, prediction, train_eps)
    xs, ts, ys, targets = [], [], [], []
    for g in range(gbatch):
        row = run_check.permutation(seed, 0, n)[g % per_epoch]
        u = run_check.uniform01(seed, 0, g, run_check.OP_T, 0)
        tf = np.float32(t0 + (t1 - t0) * u)
        _, eps = run_check.draw_t_eps(seed, 0, g, d)
        tc = 1 - float(tf) if flip_t else float(tf)
        a, da, s, ds = (np.float32(v) for v in coefficients(path, np.float64(tc)))
        if flip_derivative:
            da, ds = np.float32(1.1) * da, np.float32(1.1) * ds
        x1 = x[row].reshape(d)
        xs.append((a * x1 + s * eps).astype(np.float32))
        targets.append((da * x1 + ds * eps).astype(np.float32) if prediction == "velocity"
                       else eps)
        ts.append(tf)
        lab = int(y[row])
        if run_check.uniform01(seed, 0, g, run_check.OP_DROP, 0) < 0.1:
            lab = CLASSES
        ys.append(lab)
    shape = (gbatch,) + x.shape[1:]
    return {"x_t": np.stack(xs).reshape(shape), "t": np.array(ts, np.float32),
            "y": np.array(ys, np.int64), "target": np.stack(targets).reshape(shape)}


def check_combo(a, path, prediction, weight, errors):
    w = lambda *p: os.path.join(a.work, "%s_%s" % (prediction, weight), *p)
    os.makedirs(w())
    hc_run, hc_compile = os.path.join(a.bin, "hc-run"), os.path.join(a.bin, "hc-compile")
    name = "%s/%s/%s" % (path, prediction, weight)
    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size",
         str(S), "--in-channels", str(C), "--num-classes", str(CLASSES), "--init", "random",
         "--dynamic-batch", "--with-output", "--objective", "flow", "--path", path,
         "--prediction", prediction, "--loss-weight", weight, "-o", w("m.onnx"), "--quiet"])
    import onnx
    meta = {p.key: p.value for p in onnx.load(w("m.onnx"), load_external_data=False).metadata_props}
    train_eps = json.loads(meta["hc.dit_config"])["flow"]["train_eps"]
    for b in (2, 4):
        run([hc_compile, w("m.onnx"), "--batch", str(b), "--lr", "1e-3", "-o", w("b%d.so" % b)])

    # loss: the compiled graph against the float64 oracle
    run([PY, os.path.join(ROOT, "models/torch_reference.py"), w("m.onnx"), "--batch", "4",
         "--out", w("ref")])
    ref = {k: np.load(w("ref", k + ".npy")) for k in ("t", "target", "prediction_f64")}
    got = loss_of(hc_run, w("b4.so"), w("ref"), {})
    out = ref["prediction_f64"][:, :C]
    want = oracle_loss(path, prediction, weight, out, ref["t"], np.float64(ref["target"]))
    e = abs(got - want) / abs(want)
    flipped = oracle_loss(path, prediction, weight, out, ref["t"], ref["target"], flip_t=True)
    # Where the loss itself is blind to t's direction (no weight, or linear's
    # symmetric 1/(t(1-t))), the batch check below catches a flip instead.
    planted = [abs(flipped - got) / abs(want)] if abs(flipped - want) > 1e-9 * abs(want) else []
    if weight != "none":
        wrong = oracle_loss(path, prediction, weight, out, ref["t"], ref["target"],
                            flip_derivative=True)
        planted.append(abs(wrong - got) / abs(want))
    print("%-26s loss %.9g, float64 oracle %.9g: rel %.2e; planted errors miss by %s"
          % (name, got, want, e, ", ".join("%.2e" % p for p in planted) or
             "(the loss is blind to t's direction)"))
    if e > TOL_LOSS:
        errors.append("%s: loss %.3e from the oracle" % (name, e))
    if planted and min(planted) <= 10 * TOL_LOSS:
        errors.append("%s: a planted error is not caught (%s)" % (name, planted))

    # batch: train mode's first batch against the re-derived one
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (37, C, S, S)).astype(np.float32)
    y = rng.integers(0, CLASSES, 37).astype(np.int64)
    np.save(w("x.npy"), x)
    np.save(w("y.npy"), y)
    run([hc_run, w("b4.so"), "--data", w("x.npy"), "--labels", w("y.npy"), "--steps", "1",
         "--seed", "5", "--no-progress", "--metrics", w("m1.jsonl")])
    with open(w("m1.jsonl")) as f:
        train_loss = json.loads(f.readline())["loss"]
    spec = loss_of(hc_run, w("b4.so"), w("spec"), spec_batch(path, prediction, train_eps, x, y, 5, 4))
    flip = loss_of(hc_run, w("b4.so"), w("spec_flip"),
                   spec_batch(path, prediction, train_eps, x, y, 5, 4, flip_t=True))
    wrong = None
    if prediction == "velocity":
        wrong = loss_of(hc_run, w("b4.so"), w("spec_deriv"),
                        spec_batch(path, prediction, train_eps, x, y, 5, 4, flip_derivative=True))
    print("%-26s train-mode step 1 %.9g; re-derived batch %.9g; t flipped %.9g%s"
          % ("", train_loss, spec, flip, "" if wrong is None else "; derivatives 10%% off %.9g" % wrong))
    if train_loss != spec:
        errors.append("%s: train mode's loss %.17g is not the re-derived batch's %.17g"
                      % (name, train_loss, spec))
    if flip == spec or wrong == spec:
        errors.append("%s: a flipped t or a wrong derivative leaves the loss unchanged" % name)

    # ranks: -np 2 at batch 2 against -np 1 at batch 4
    train = ["--data", w("x.npy"), "--labels", w("y.npy"), "--steps", "3", "--seed", "5",
             "--no-progress", "--log-every", "1"]
    l1, el, ep = ranks_agree(hc_run, w("b4.so"), w("b2.so"), train, w)
    print("%-26s -np 2 vs -np 1, 3 steps: losses %s rel %.2e, parameters rel %.2e"
          % ("", ["%.6g" % v for v in l1], el, ep))
    if el > 1e-6 or ep > 1e-4:
        errors.append("%s: -np 2 differs from -np 1 (loss %.3e, parameters %.3e)" % (name, el, ep))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--path", required=True, choices=("linear", "gvp", "vp"))
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    print("oracle: %s path's alpha', sigma' match central differences to %.1e"
          % (a.path, check_derivatives(a.path)))
    errors = []
    for prediction, weight in COMBOS:
        check_combo(a, a.path, prediction, weight, errors)
    if errors:
        sys.exit("FAILED:\n  " + "\n  ".join(errors))
    print("PASSED")


if __name__ == "__main__":
    main()
