#!/usr/bin/env -S /usr/bin/python3
"""ONNX Adam through the compiled step (hc-compile -> step.so, run by hc-run
on the tiny DiT), two checks:

  reference: the parameter change over 3 steps of a --training-info export
    against a float64 numpy implementation of the operator's definition
    (written from the ONNX spec, below) fed hc's own gradients of each step:
    ||dp - dp_ref|| / ||dp_ref|| <= 1e-5, and the update count T = 3.
  identical: the same export with and without training_info, the latter
    compiled with --optimizer adam and equal hyper-parameters: loss, every
    parameter and every state tensor bit-identical after 3 steps."""
import argparse
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from common import PY, ROOT, read_safetensors, rel, run  # noqa: E402

HYPER = dict(lr=2e-3, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.01,
             weight_decay_post=0.001)
STEPS = 3
BATCH = 2


def flags(hyper):
    return sum((["--" + k.replace("_", "-"), repr(v)] for k, v in hyper.items()), [])


def onnx_adam(r, t, x, g, v, h, alpha, beta, epsilon, norm_coefficient,
              norm_coefficient_post):
    """The ONNX ai.onnx.preview.training Adam pseudo code, float64."""
    g_regularized = norm_coefficient * x + g
    v_new = alpha * v + (1 - alpha) * g_regularized
    h_new = beta * h + (1 - beta) * g_regularized * g_regularized
    h_sqrt = np.sqrt(h_new) + epsilon
    r_adjusted = r * np.sqrt(1 - beta ** t) / (1 - alpha ** t) if t > 0 else r
    x_new = x - r_adjusted * v_new / h_sqrt
    return (1 - norm_coefficient_post) * x_new, v_new, h_new


def export(path, training_info):
    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size", "16",
         "--num-classes", "10", "--opset", "13", "--init", "random", "--batch", str(BATCH),
         "--quiet", "-o", path] + (["--training-info"] + flags(HYPER) if training_info else []))


def write_inputs(folder):
    os.makedirs(folder)
    rng = np.random.default_rng(7)
    np.save(os.path.join(folder, "x_t.npy"), rng.standard_normal((BATCH, 4, 16, 16)).astype(np.float32))
    np.save(os.path.join(folder, "noise.npy"), rng.standard_normal((BATCH, 4, 16, 16)).astype(np.float32))
    np.save(os.path.join(folder, "t.npy"), rng.integers(0, 1000, BATCH).astype(np.int64))
    np.save(os.path.join(folder, "y.npy"), rng.integers(0, 10, BATCH).astype(np.int64))


def hc_run(a, so, inputs, steps, out_prefix):
    out = run([os.path.join(a.bin, "hc-run"), so, "--inputs", inputs, "--steps", str(steps),
               "--save-params", out_prefix + ".params.safetensors",
               "--save-grads", out_prefix + ".grads.safetensors",
               "--save-state", out_prefix + ".state.safetensors"])
    return [l for l in out.splitlines() if l.startswith("loss ")]


def check_reference(a, w):
    export(w("ti.onnx"), True)
    run([os.path.join(a.bin, "hc-compile"), w("ti.onnx"), "-o", w("ti.so")])
    write_inputs(w("in"))
    p0 = read_safetensors(w("ti.so.init.safetensors"))
    # hc's gradient of step k: the last step of a k-step run.
    grads = []
    for k in range(1, STEPS + 1):
        hc_run(a, w("ti.so"), w("in"), k, w("s%d" % k))
        grads.append(read_safetensors(w("s%d.grads.safetensors" % k)))
    p3 = read_safetensors(w("s%d.params.safetensors" % STEPS))
    state = read_safetensors(w("s%d.state.safetensors" % STEPS))
    f32 = {k: float(np.float32(v)) for k, v in HYPER.items()}  # the attributes are float
    names = sorted(grads[0])
    x = {n: p0[n].copy() for n in names}
    v = {n: np.zeros_like(x[n]) for n in names}
    h = {n: np.zeros_like(x[n]) for n in names}
    for t in range(STEPS):
        for n in names:
            x[n], v[n], h[n] = onnx_adam(f32["lr"], t, x[n], grads[t][n], v[n], h[n],
                                         f32["beta1"], f32["beta2"], f32["eps"],
                                         f32["weight_decay"], f32["weight_decay_post"])
    dp = np.concatenate([(p3[n] - p0[n]).ravel() for n in names])
    dp_ref = np.concatenate([(x[n] - p0[n]).ravel() for n in names])
    e = rel(dp, dp_ref)
    ev = rel(np.concatenate([state["adam.V:" + n].ravel() for n in names]),
             np.concatenate([v[n].ravel() for n in names]))
    eh = rel(np.concatenate([state["adam.H:" + n].ravel() for n in names]),
             np.concatenate([h[n].ravel() for n in names]))
    frozen = [n for n in p0 if n not in names]
    print("ONNX Adam, %d steps, %d trainable tensors (%d values): |dp - dp_ref|/|dp_ref| = %.3e, "
          "V %.3e, H %.3e, T = %d; frozen unchanged: %s"
          % (STEPS, len(names), dp.size, e, ev, eh, int(state["adam.T"]), frozen))
    errors = []
    if not e <= 1e-5 or not ev <= 1e-5 or not eh <= 1e-5:
        errors.append("relative error dp %.3e V %.3e H %.3e > 1e-5" % (e, ev, eh))
    if int(state["adam.T"]) != STEPS:
        errors.append("T = %d after %d steps" % (int(state["adam.T"]), STEPS))
    # The rate is the graph's (training_info): hc-run's schedule flags are
    # refused in one line, clipping is not (it acts on the gradients).
    import subprocess
    for flags in (["--lr-schedule", "cosine"], ["--lr", "0.1"], ["--weight-decay", "0.1"]):
        p = subprocess.run([os.path.join(a.bin, "hc-run"), w("ti.so"), "--inputs", w("in"),
                            "--steps", "1"] + flags, capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        print("%s: exit %d: %s" % (" ".join(flags), p.returncode, p.stderr.strip()))
        if p.returncode != 2 or len(lines) != 1 or "trains with ONNX Adam" not in lines[0]:
            errors.append("%s with ONNX Adam: exit %d %s" % (flags, p.returncode, p.stderr))
    p = subprocess.run([os.path.join(a.bin, "hc-run"), w("ti.so"), "--inputs", w("in"),
                        "--steps", "1", "--clip-grad-norm", "0.01"], capture_output=True, text=True)
    if p.returncode != 0:
        errors.append("--clip-grad-norm with ONNX Adam: exit %d %s" % (p.returncode, p.stderr))
    if not frozen or any(not np.array_equal(p3[n], p0[n]) for n in frozen):
        errors.append("frozen parameters %s missing or changed" % frozen)
    return errors


def check_identical(a, w):
    export(w("ti.onnx"), True)
    export(w("plain.onnx"), False)
    run([os.path.join(a.bin, "hc-compile"), w("ti.onnx"), "-o", w("ti.so")])
    run([os.path.join(a.bin, "hc-compile"), w("plain.onnx"), "--optimizer", "adam", "-o", w("plain.so")]
        + flags(HYPER))
    write_inputs(w("in"))
    loss_ti = hc_run(a, w("ti.so"), w("in"), STEPS, w("ti"))
    loss_plain = hc_run(a, w("plain.so"), w("in"), STEPS, w("plain"))
    errors = []
    if loss_ti != loss_plain:
        errors.append("losses differ: %s vs %s" % (loss_ti, loss_plain))
    n = 0
    for kind in ("params", "state", "grads"):
        x = read_safetensors(w("ti.%s.safetensors" % kind))
        y = read_safetensors(w("plain.%s.safetensors" % kind))
        if sorted(x) != sorted(y):
            errors.append("%s names differ" % kind)
            continue
        for name in x:
            n += x[name].size
            if x[name].tobytes() != y[name].tobytes():
                errors.append("%s '%s' differs (max |diff| %.3e)"
                              % (kind, name, np.abs(x[name] - y[name]).max()))
    print("training_info vs --optimizer adam, %d steps: losses %s; %d values of params, state and "
          "grads compared bitwise, %d differ" % (STEPS, "equal" if loss_ti == loss_plain else "DIFFER",
                                                n, len(errors)))
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--check", choices=["reference", "identical"], required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    w = lambda *p: os.path.join(a.work, *p)
    errors = (check_reference if a.check == "reference" else check_identical)(a, w)
    for e in errors:
        print("FAIL:", e)
    if not errors:
        shutil.rmtree(a.work, ignore_errors=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
