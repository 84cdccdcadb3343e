#!/usr/bin/env -S /usr/bin/python3
"""hc-run sample --cond on a tiny DiT conditioned on a vector, a field and a
token sequence besides class labels (issue 53, item 4), against float64.

For every --cfg-drop (all, and each form alone: y, sun, low, txt), DDPM
with guidance scale 4 (--dump-steps):
  feed        the inputs of the model call, exactly: the conditional rows take
              the --cond rows and --classes; the guided twins take the null
              class, NAME_drop = 1 or a zero field for what --cfg-drop names
              and the same condition for the rest.
  model       the model outputs equal the float64 PyTorch DiT's on those
              inputs (1e-4 relative); the same DiT fed twins that keep the
              dropped form (a planted error) misses by more than 10x that.
  update      every step's x_{t-1} equals the float64 guided update
              (models/sampler_reference.py) of the float64 PyTorch DiT's
              outputs for x_t (1e-4 relative), and of hc's own outputs (1e-5).
A flow model (rectified flow, Euler, guidance 3) is checked the same way:
its feed, its outputs, and x + h (u + s (c - u)) per step in float64.
Then --per-cond, --save-npy labels and the grid, and every refusal (one
line, exit 2).

usage: cond_sample_check.py --bin DIR --work DIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "models"))
import safetensors_np  # noqa: E402
import sampler_reference as ref  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
from common import bin_and_work  # noqa: E402

PY = "/usr/bin/python3"
C, S, CLASSES, BATCH, M = 4, 8, 3, 6, 3
CONDS = [("sun", "vector", (5,)), ("low", "field", (2, S, S)), ("txt", "tokens", (3, 6))]
SPECS = ["vector:sun:5", "concat:low:2", "tokens:txt:3:6"]
TOL_STEP, TOL_MODEL, TOL_F64 = 1e-5, 1e-4, 1e-4
CLASS_LIST = [2, 0, 1]


def run(cmd, cwd, expect=0):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    if p.returncode != expect:
        sys.exit("FAILED: %s: exit %d (expected %d)\n%s%s"
                 % (" ".join(cmd), p.returncode, expect, p.stdout[-2000:], p.stderr[-2000:]))
    return p


def setup(a, name, extra):
    """Export, compile a sampler, and a checkpoint of random weights (every
    conditioning's path non-zero, unlike the zero-initialised export)."""
    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size",
         str(S), "--in-channels", str(C), "--num-classes", str(CLASSES), "--init", "random",
         "--dynamic-batch", "--quiet", "-o", name + ".onnx"] +
        sum((["--cond", s] for s in SPECS), []) + extra, a.work)
    run([os.path.join(a.bin, "hc-compile"), name + ".onnx", "--sampler", "--batch", str(BATCH),
         "-o", name + ".so"], a.work)
    init = safetensors_np.load(os.path.join(a.work, name + ".so.init.safetensors"))
    rng = np.random.default_rng(3)
    weights = {k: (v + 0.05 * rng.standard_normal(v.shape)).astype(np.float32)
               for k, v in init.items()}
    safetensors_np.save(os.path.join(a.work, name + ".ckpt.safetensors"), weights)
    return weights


def torch_model(weights, learn_sigma):
    import torch
    import dit as ditlib
    m = ditlib.make_dit("tiny", image_size=S, in_channels=C, num_classes=CLASSES,
                        learn_sigma=learn_sigma, init="random", conds=SPECS)
    m.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    return m.double().eval()


def expected_feed(conds, drop, guided=True):
    """The model call's y and conditioning inputs for M images (rows 0..M-1,
    classes CLASS_LIST) and their guided twins, as hc-run must build them."""
    nul = {n: drop == "all" or drop == n for n in ["y"] + [c[0] for c in CONDS]}
    feed = {"y": np.array(CLASS_LIST + ([CLASSES if nul["y"] else c for c in CLASS_LIST]
                                        if guided else []), np.int64)}
    for name, kind, _ in CONDS:
        rows = conds[name][:M]
        twin = np.zeros_like(rows) if nul[name] and kind == "field" else rows
        feed[name] = np.concatenate([rows, twin] if guided else [rows]).astype(np.float32)
        if kind != "field":
            feed[name + "_drop"] = np.array([0.0] * M + ([1.0 if nul[name] else 0.0] * M
                                                         if guided else []), np.float32)
    return feed


def model_out(m, x, t, feed):
    import torch
    with torch.no_grad():
        return m(torch.from_numpy(np.float64(x)), torch.from_numpy(np.asarray(t)),
                 torch.from_numpy(feed["y"]),
                 conds={k: torch.from_numpy(np.float64(v)) for k, v in feed.items()
                        if k != "y"}).numpy()


def relerr(got, want):
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def sample(a, name, dump, extra):
    shutil.rmtree(os.path.join(a.work, dump), ignore_errors=True)
    os.makedirs(os.path.join(a.work, dump))
    run([os.path.join(a.bin, "hc-run"), "sample", name + ".so", "--ckpt",
         name + ".ckpt.safetensors", "--classes", ",".join(map(str, CLASS_LIST)),
         "--seed", "7", "--dump-steps", dump, "--save-npy", dump + "/samples.npy",
         "--no-progress"] + sum((["--cond", "%s=c_%s.npy" % (n, n)] for n, _, _ in CONDS), [])
        + extra, a.work)
    return lambda k: np.load(os.path.join(a.work, dump, k + ".npy"))


def check_feed(d, feed, what, errors):
    for k, v in feed.items():
        got = d("y") if k == "y" else d("cond_" + k)
        if got.shape != v.shape or not np.array_equal(got, v):
            errors.append("%s: the model was fed %s = %s, expected %s" % (what, k, got, v))


def case_ddpm(a, conds, errors):
    weights = setup(a, "ddpm", [])
    m = torch_model(weights, True)
    steps, cfg = "4", 4.0
    sched = ref.Schedule(ref.respacing(1000, steps))
    K = len(sched.betas)
    for drop in ("all", "y", "sun", "low", "txt"):
        what = "ddpm --cfg-drop %s" % drop
        d = sample(a, "ddpm", "dump-" + drop, ["--cfg-scale", str(cfg), "--cfg-drop", drop,
                                               "--sampler", "ddpm", "--sampling-steps", steps])
        feed = expected_feed(conds, drop)
        check_feed(d, feed, what, errors)
        x, out, noise, t = d("x"), d("model_out"), d("noise"), d("t")
        wrong = dict(feed)  # planted: the twins keep the dropped form
        for k in [c for c in feed if c != "y"]:
            wrong[k] = np.concatenate([feed[k][:M], feed[k][:M]])
        if drop in ("all", "y"):
            wrong["y"] = np.array(CLASS_LIST * 2, np.int64)
        model_err = planted = step_err = f64_err = 0.0
        for k in range(K):
            i = K - 1 - k
            xx = np.concatenate([x[k], x[k]])
            want = model_out(m, xx, np.full(2 * M, t[k]), feed)
            model_err = max(model_err, relerr(out[k], want))
            planted = max(planted, relerr(out[k], model_out(m, xx, np.full(2 * M, t[k]), wrong)))
            mine = ref.step(sched, i, x[k], out[k], noise[k], C, cfg, True, "ddpm")
            step_err = max(step_err, relerr(x[k + 1], mine))
            f64 = ref.step(sched, i, x[k], want, noise[k], C, cfg, True, "ddpm")
            f64_err = max(f64_err, relerr(x[k + 1], f64))
        print("%-24s feed exact; model %.2e (planted twin %.2e); update %.2e on hc's outputs, "
              "%.2e on float64 PyTorch's" % (what, model_err, planted, step_err, f64_err))
        if model_err > TOL_MODEL or step_err > TOL_STEP or f64_err > TOL_F64:
            errors.append("%s: model %.3g, update %.3g, float64 update %.3g"
                          % (what, model_err, step_err, f64_err))
        if planted <= 10 * TOL_MODEL:
            errors.append("%s: twins that keep the dropped form are not told apart (%.3g)"
                          % (what, planted))


def case_flow(a, conds, errors):
    weights = setup(a, "flow", ["--objective", "flow", "--no-learn-sigma"])
    m = torch_model(weights, False)
    cfg, steps = 3.0, 3
    d = sample(a, "flow", "dump-flow", ["--cfg-scale", str(cfg), "--sampler", "euler",
                                        "--sampling-steps", str(steps)])
    feed = expected_feed(conds, "all")
    check_feed(d, feed, "flow euler", errors)
    x, ts = d("x"), d("step_t")
    evx, evt, out = d("eval_x"), d("eval_t"), d("model_out")
    model_err = f64_err = 0.0
    for k in range(steps):
        xx = np.concatenate([evx[k].reshape(M, C, S, S)] * 2)
        want = model_out(m, xx, np.full(2 * M, evt[k], np.float32), feed)
        model_err = max(model_err, relerr(out[k].reshape(want.shape), want))
        c, u = want[:M, :C], want[M:, :C]
        h = (ts[k] - (ts[k - 1] if k else 0.0))
        nxt = np.float64(x[k].reshape(M, C, S, S)) + h * (u + cfg * (c - u))
        f64_err = max(f64_err, relerr(x[k + 1].reshape(M, C, S, S), nxt))
    print("flow euler cfg 3          feed exact; model %.2e; update %.2e on float64 PyTorch's"
          % (model_err, f64_err))
    if model_err > TOL_MODEL or f64_err > TOL_F64:
        errors.append("flow: model %.3g, float64 update %.3g" % (model_err, f64_err))


def refusals(a, errors):
    base = [os.path.join(a.bin, "hc-run"), "sample", "ddpm.so", "--ckpt",
            "ddpm.ckpt.safetensors", "--save-npy", "r.npy", "--sampling-steps", "2"]
    flags = lambda **over: sum((["--cond", "%s=%s" % (n, over.get(n, "c_%s.npy" % n))]
                                for n, _, _ in CONDS if over.get(n, "") is not None), [])
    np.save(os.path.join(a.work, "short_low.npy"), np.zeros((M - 1, 2, S, S), np.float32))
    np.save(os.path.join(a.work, "bad_txt.npy"), np.zeros((M, 4, 6), np.float32))
    cases = [
        ("a conditioning not given", flags(txt=None) + ["--classes", "0"], "give --cond txt="),
        ("rows disagree", flags(low="short_low.npy") + ["--classes", "0"], "2 samples"),
        ("wrong shape", flags(txt="bad_txt.npy") + ["--classes", "0"], "[N,3,6]"),
        ("a name the model lacks", flags() + ["--cond", "moon=c_sun.npy", "--classes", "0"],
         "no conditioning named 'moon'"),
        ("--classes count", flags() + ["--classes", "0,1"], "2 classes for 3 --cond rows"),
        ("no --classes", flags(), "--classes"),
        ("--per-class", flags() + ["--classes", "0", "--per-class", "2"], "--per-cond"),
        ("--cfg-drop unknown", flags() + ["--classes", "0", "--cfg-drop", "moon"],
         "'moon' is not one of"),
        ("--cfg-drop without guidance", flags() + ["--classes", "0", "--cfg-scale", "1",
                                                   "--cfg-drop", "txt"], "--cfg-scale 1"),
    ]
    print("refusals (each one line, exit 2):")
    for what, extra, words in cases:
        p = subprocess.run(base + extra, cwd=a.work, capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        print("  %-28s exit %d: %s" % (what, p.returncode, lines[-1] if lines else ""))
        if p.returncode != 2 or len(lines) != 1 or words not in p.stderr:
            errors.append("%s: exit %d %r (want exit 2, one line with %r)"
                          % (what, p.returncode, p.stderr, words))


def main():
    a, _ = bin_and_work()
    rng = np.random.default_rng(5)
    conds = {n: rng.standard_normal((M,) + shape).astype(np.float32) for n, _, shape in CONDS}
    for n, v in conds.items():
        np.save(os.path.join(a.work, "c_%s.npy" % n), v)
    errors = []
    case_ddpm(a, conds, errors)
    case_flow(a, conds, errors)
    # --per-cond: rows x N images in order, labels per row, a grid row per condition.
    run([os.path.join(a.bin, "hc-run"), "sample", "ddpm.so", "--ckpt", "ddpm.ckpt.safetensors",
         "--classes", "1", "--per-cond", "2", "--sampling-steps", "2", "--save-npy", "pc.npy",
         "--out", "pc.png", "--no-progress"] +
        sum((["--cond", "%s=c_%s.npy" % (n, n)] for n, _, _ in CONDS), []), a.work)
    samples = np.load(os.path.join(a.work, "pc.npy"))
    labels = np.load(os.path.join(a.work, "pc.labels.npy"))
    if samples.shape != (2 * M, C, S, S) or list(labels) != [1] * (2 * M):
        errors.append("--per-cond 2: samples %s, labels %s" % (samples.shape, list(labels)))
    refusals(a, errors)
    if errors:
        sys.exit("FAILED:\n  " + "\n  ".join(errors))
    print("PASS")


if __name__ == "__main__":
    main()
