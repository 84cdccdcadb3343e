#!/usr/bin/env -S /usr/bin/python3
"""End-to-end checks of hc-run against the toy step libraries (toy_step.cpp).

usage: run_check.py CASE --hc-run BIN --toys DIR --work DIR

The toy is a linear least-squares denoiser trained by SGD (see toy_step.cpp);
this script recomputes it in float64 numpy (the oracle) and, for train mode,
re-derives every input hc-run must feed from the spec (epoch permutation,
t, Box-Muller noise, x_t, label dropout; Philox4x32-10 in pure Python), so
the comparisons are against an independent implementation.
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
import st  # noqa: E402
import diffusion  # noqa: E402

D, K, KE, LR = 16, 3, 4, 0.05
SHAPE = (1, 4, 4)
PARAMS = ["lin.weight", "emb.weight", "time.weight", "fixed.bias"]
TRAINABLE = PARAMS[:3]
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


# ---------------------------------------------------------------- the oracle
def init_params(seed=3):
    r = np.random.default_rng(seed)
    return {"lin.weight": (r.standard_normal((D, D)) * 0.1).astype(np.float32),
            "emb.weight": (r.standard_normal((KE, D)) * 0.1).astype(np.float32),
            "time.weight": (r.standard_normal(D) * 0.1).astype(np.float32),
            "fixed.bias": (r.standard_normal(D) * 0.1).astype(np.float32)}


def toy_step(p, x, t, y, noise):
    """One SGD step of the toy on the global batch, float64. Returns
    (loss, grads, new params)."""
    p = {k: v.astype(np.float64) for k, v in p.items()}
    g = x.shape[0]
    x = x.reshape(g, D).astype(np.float64)
    n = noise.reshape(g, D).astype(np.float64)
    tt = t.astype(np.float64) / 1000.0
    pred = p["fixed.bias"] + np.outer(tt, p["time.weight"]) + p["emb.weight"][y] + x @ p["lin.weight"].T
    r = pred - n
    loss = float(np.mean(r * r))
    d = 2.0 * r / (g * D)
    gE = np.zeros_like(p["emb.weight"])
    np.add.at(gE, y, d)
    grads = {"lin.weight": d.T @ x, "emb.weight": gE, "time.weight": d.T @ tt}
    new = dict(p)
    for k in TRAINABLE:
        new[k] = p[k] - LR * grads[k]
    return loss, grads, new


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


# ------------------------------------------------ train-mode sampling (spec)
M32 = 0xFFFFFFFF


def philox(c0, c1, c2, c3, k0, k1):
    for _ in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0 = (k0 + 0x9E3779B9) & M32
        k1 = (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


def uniform01(seed, step, sample, op, element):
    b = philox(element & M32, sample & M32, step & M32,
               (op & M32) ^ ((((sample >> 32) & M32) << 16) & M32),
               seed & M32, (seed >> 32) & M32)
    return (b[0] >> 8) * (1.0 / 16777216.0)


OP_PERM, OP_T, OP_EPS, OP_DROP, OP_FLIP = 0x70, 0x71, 0x72, 0x73, 0x74


def permutation(seed, epoch, n):
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        b = philox(i & M32, (i >> 32) & M32, epoch & M32,
                   OP_PERM ^ ((((epoch >> 32) & M32) << 16) & M32), seed & M32, (seed >> 32) & M32)
        j = ((b[0] << 32) | b[1]) % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p


SQRT_AB, SQRT_1MAB = diffusion.q_coefficients()


def draw_t_eps(seed, step, g, d):
    """Sample g's timestep and its d noise values (Box-Muller over pairs)."""
    t = min(int(uniform01(seed, step, g, OP_T, 0) * 1000), 999)
    eps = np.empty(d, np.float32)
    for k in range(0, d, 2):
        u1 = uniform01(seed, step, g, OP_EPS, k)
        u2 = uniform01(seed, step, g, OP_EPS, k + 1)
        rad = math.sqrt(-2.0 * math.log(1.0 - u1))
        eps[k] = np.float32(rad * math.cos(2 * math.pi * u2))
        if k + 1 < d:
            eps[k + 1] = np.float32(rad * math.sin(2 * math.pi * u2))
    return t, eps


def sample_batch(seed, step, images, labels, gbatch, drop_p, null_class, hflip=False, flips=None,
                 x0s=None):
    """Global batch of step `step` (0-based): x_t, t, y, eps as hc-run must
    make them. hflip: --hflip's mirror of x0 along its last axis when the
    sample's draw is below 1/2 (each decision appended to `flips`). x0s: a
    list that receives each sample's (maybe mirrored) x0, the x_start input
    of a VLB objective."""
    n, d = images.shape[0], images[0].size
    per_epoch = (n // gbatch) * gbatch
    xs, ts, ys, es = [], [], [], []
    for g in range(gbatch):
        pos = step * gbatch + g
        row = permutation(seed, pos // per_epoch, n)[pos % per_epoch]
        t, eps = draw_t_eps(seed, step, g, d)
        x0 = images[row]
        flip = hflip and uniform01(seed, step, g, OP_FLIP, 0) < 0.5
        if flips is not None:
            flips.append(flip)
        x0 = (x0[..., ::-1] if flip else x0).reshape(d)
        if x0s is not None:
            x0s.append(x0.reshape(images[row].shape).astype(np.float32))
        xt = np.float32(SQRT_AB[t]) * x0 + np.float32(SQRT_1MAB[t]) * eps
        y = int(labels[row])
        if drop_p > 0 and uniform01(seed, step, g, OP_DROP, 0) < drop_p:
            y = null_class
        xs.append(xt.astype(np.float32))
        ts.append(t)
        ys.append(y)
        es.append(eps)
    return np.stack(xs), np.array(ts, np.int64), np.array(ys, np.int64), np.stack(es)


VAL_SEED, VAL_STEP = 0x76616C69646174, 2**64 - 1


def validation_batch(images, labels, first, count, null_class):
    """Samples first..first+count-1 of a validation set as hc-run's
    --val-data scores them: row j itself, t and eps keyed by (VAL_SEED,
    VAL_STEP, j), no label dropout, no flip."""
    d = images[0].size
    xs, ts, ys, es = [], [], [], []
    for j in range(first, first + count):
        t, eps = draw_t_eps(VAL_SEED, VAL_STEP, j, d)
        x0 = images[j].reshape(d)
        xs.append((np.float32(SQRT_AB[t]) * x0 + np.float32(SQRT_1MAB[t]) * eps).astype(np.float32))
        ts.append(t)
        ys.append(null_class if labels is None else int(labels[j]))
        es.append(eps)
    return np.stack(xs), np.array(ts, np.int64), np.array(ys, np.int64), np.stack(es)


def read_dump(path, b):
    raw = open(path, "rb").read()
    check(len(raw) == b * D * 4 * 2 + b * 16, "%s: %d bytes" % (path, len(raw)))
    x = np.frombuffer(raw, np.float32, b * D, 0).reshape(b, D)
    t = np.frombuffer(raw, np.int64, b, b * D * 4)
    y = np.frombuffer(raw, np.int64, b, b * D * 4 + 8 * b)
    e = np.frombuffer(raw, np.float32, b * D, b * D * 4 + 16 * b).reshape(b, D)
    return x, t, y, e


# ------------------------------------------------------------------ running
class Env:
    def __init__(self, a):
        self.hc_run = a.hc_run
        self.work = a.work
        shutil.rmtree(a.work, ignore_errors=True)
        os.makedirs(a.work)
        for so in ("toy_b4.so", "toy_b2.so", "toy_abi999.so"):
            shutil.copy(os.path.join(a.toys, so), os.path.join(a.work, so))
        self.init = init_params()
        st.save(self.path("toy.init.safetensors"), self.init)

    def path(self, *p):
        return os.path.join(self.work, *p)

    def run(self, args, np_=None, env=None, timeout=90):
        cmd = ([] if np_ is None else MPI + ["-np", str(np_)]) + [self.hc_run] + args
        e = dict(os.environ)
        e.update(env or {})
        t0 = time.monotonic()
        p = subprocess.run(cmd, cwd=self.work, env=e, capture_output=True, text=True, timeout=timeout)
        p.elapsed = time.monotonic() - t0
        p.cmd = " ".join(cmd)
        return p

    def ok(self, args, np_=None, env=None):
        p = self.run(args, np_, env)
        check(p.returncode == 0, "%s: exit %d\n%s%s" % (p.cmd, p.returncode, p.stdout, p.stderr))
        return p


def losses(stdout):
    return [float(m) for m in re.findall(r"^loss (\S+)$", stdout, re.M)]


def write_inputs(folder, gbatch, seed=11, t_dtype=np.int64, x_shape=None):
    os.makedirs(folder, exist_ok=True)
    r = np.random.default_rng(seed)
    x = r.standard_normal((gbatch,) + (x_shape or SHAPE)).astype(np.float32)
    n = r.standard_normal((gbatch,) + SHAPE).astype(np.float32)
    t = r.integers(0, 1000, gbatch).astype(t_dtype)
    y = r.integers(0, KE, gbatch).astype(np.int64)
    for name, a in (("x_t", x), ("noise", n), ("t", t), ("y", y)):
        np.save(os.path.join(folder, name + ".npy"), a)
    return x, t, y, n


def oracle_fixed(p, inputs, steps):
    x, t, y, n = inputs
    out = []
    grads = None
    for _ in range(steps):
        loss, grads, p = toy_step(p, x, t, y, n)
        out.append(loss)
    return out, grads, p


# -------------------------------------------------------------------- cases
def case_test_mode(env):
    inputs = write_inputs(env.path("in"), 4)
    p = env.ok(["toy_b4.so", "--inputs", "in", "--steps", "3", "--save-params", "p.safetensors",
                "--save-grads", "g.safetensors", "--save-state", "s.safetensors"])
    got = losses(p.stdout)
    want, grads, params = oracle_fixed(env.init, inputs, 3)
    check(len(got) == 3, "expected 3 loss lines:\n" + p.stdout)
    lerr = max(abs(a - b) / abs(b) for a, b in zip(got, want))
    check(lerr <= 1e-5, "losses %s vs oracle %s" % (got, want))
    saved, meta = st.load(env.path("p.safetensors"), with_metadata=True)
    check(sorted(saved) == sorted(PARAMS), "saved params %s" % sorted(saved))
    check(meta.get("format") == "pt" and meta.get("step") == "3", "metadata %s" % meta)
    perr = max(rel(saved[k], params[k]) for k in PARAMS)
    check(perr <= 1e-5, "params differ from the oracle by %g" % perr)
    check(np.array_equal(saved["fixed.bias"], env.init["fixed.bias"]), "frozen fixed.bias changed")
    for k in PARAMS:
        check(saved[k].dtype == np.float32 and saved[k].shape == env.init[k].shape, k)
    g = st.load(env.path("g.safetensors"))
    check(sorted(g) == sorted(TRAINABLE), "saved grads %s" % sorted(g))
    gerr = max(rel(g[k], grads[k]) for k in TRAINABLE)
    check(gerr <= 1e-5, "last-step grads differ from the oracle by %g" % gerr)
    s = st.load(env.path("s.safetensors"))
    check(list(s) == ["sgd.step"] and s["sgd.step"].dtype == np.int64 and s["sgd.step"].shape == ()
          and int(s["sgd.step"]) == 3, "state %s" % s)
    # Resume from the saved parameters + state: 2 more steps equal steps 4..5.
    st.save(env.path("ckpt.safetensors"), dict(saved, **s))
    p2 = env.ok(["toy_b4.so", "--inputs", "in", "--steps", "2", "--init", "ckpt.safetensors",
                 "--save-state", "s2.safetensors"])
    want5, _, _ = oracle_fixed(params, inputs, 2)
    got5 = losses(p2.stdout)
    check(max(abs(a - b) / abs(b) for a, b in zip(got5, want5)) <= 1e-5, "resumed %s vs %s" % (got5, want5))
    check(int(st.load(env.path("s2.safetensors"))["sgd.step"]) == 5, "resumed state step")
    print("test mode: 3 losses within %.2e of the float64 oracle (%s), params %.2e, grads %.2e; "
          "resume from saved params+state ok" % (lerr, ", ".join("%.6f" % v for v in got), perr, gerr))


def case_np2_vs_np1(env):
    write_inputs(env.path("in"), 4)
    p1 = env.ok(["toy_b4.so", "--inputs", "in", "--steps", "3", "--save-params", "p1.safetensors"])
    p2 = env.ok(["toy_b2.so", "--inputs", "in", "--steps", "3", "--save-params", "p2.{rank}.safetensors",
                 "--save-grads", "g2.safetensors"], np_=2)
    l1, l2 = losses(p1.stdout), losses(p2.stdout)
    check(len(l1) == 3 and len(l2) == 3, "loss lines: np1 %s np2 %s (np2 prints on rank 0 only)" % (l1, l2))
    lerr = max(abs(a - b) / abs(b) for a, b in zip(l1, l2))
    check(lerr <= 1e-6, "losses np1 %s np2 %s" % (l1, l2))
    a = st.load(env.path("p1.safetensors"))
    r0, r1 = st.load(env.path("p2.0.safetensors")), st.load(env.path("p2.1.safetensors"))
    for k in PARAMS:
        check(np.array_equal(r0[k], r1[k]), "%s differs between rank 0 and rank 1" % k)
    perr = max(rel(r0[k], a[k]) for k in PARAMS)
    check(perr <= 1e-6, "np2 params differ from np1 by %g" % perr)
    check(os.path.exists(env.path("g2.safetensors")), "rank 0 wrote g2.safetensors")
    check(not [f for f in os.listdir(env.work) if ".tmp." in f], "temporary files left")
    print("np2 vs np1: losses within %.2e, params within %.2e (rel), ranks bit-identical" % (lerr, perr))


def expect_exit2(env, args, what, np_=None, contains=None, env_vars=None):
    p = env.run(args, np_, env_vars)
    lines = [l for l in p.stderr.splitlines() if l.startswith("hc-run:")]
    check(p.returncode == 2, "%s: expected exit 2, got %d\n%s" % (what, p.returncode, p.stderr))
    if np_ is None:
        check(len(p.stderr.strip().splitlines()) == 1, "%s: expected one stderr line:\n%s" % (what, p.stderr))
    check(len(lines) == 1, "%s: expected one hc-run line:\n%s" % (what, p.stderr))
    if contains:
        check(contains in lines[0], "%s: %r not in %r" % (what, contains, lines[0]))
    check("loss" not in p.stdout, "%s: it stepped:\n%s" % (what, p.stdout))
    return lines[0]


def case_abi_mismatch(env):
    write_inputs(env.path("in"), 2)
    l1 = expect_exit2(env, ["toy_abi999.so", "--inputs", "in", "--steps", "1"], "abi", contains="999")
    l2 = expect_exit2(env, ["toy_abi999.so", "--inputs", "in", "--steps", "1"], "abi np2", np_=2, contains="999")
    print("ABI 999: exit 2 with one line: %s (np2 too)" % l1)


def case_bad_input(env):
    write_inputs(env.path("in"), 4)
    st.save(env.path("keep.safetensors"), {"x": np.ones(3, np.float32)})
    keep = open(env.path("keep.safetensors"), "rb").read()
    save = ["--save-params", "keep.safetensors", "--save-grads", "keep-grads.safetensors"]
    base = ["toy_b4.so", "--steps", "2"] + save

    def variant(name, **kw):
        d = env.path(name)
        write_inputs(d, **kw)
        return d

    cases = [
        ("x_t shape", base + ["--inputs", variant("shape", gbatch=4, x_shape=(1, 4, 5))], "needs [4,1,4,4]"),
        ("t dtype", base + ["--inputs", variant("dtype", gbatch=4, t_dtype=np.int32)], "dtype"),
        ("global batch", base + ["--inputs", variant("batch", gbatch=6)], "global batch 6"),
        ("missing input", base + ["--inputs", "nowhere"], "cannot open"),
        ("unknown flag", base + ["--inputs", "in", "--frobnicate"], "unknown flag"),
        ("no steps", ["toy_b4.so", "--inputs", "in"], "--steps"),
        ("train flag", base + ["--inputs", "in", "--seed", "3"], "train-mode"),
        ("both modes", base + ["--inputs", "in", "--data", "x.npy"], "exclude"),
        ("no step lib", ["nope.so", "--inputs", "in", "--steps", "1"], "nope.so"),
        ("not a step lib", [os.path.join(os.path.dirname(os.path.dirname(env.hc_run)), "lib", "libhcrt.so"),
                            "--inputs", "in", "--steps", "1"], "hc_step_get_api"),
        ("save folder", ["toy_b4.so", "--steps", "1", "--inputs", "in", "--save-params", "no/dir/p.safetensors"],
         "does not exist"),
    ]
    # init files: a missing parameter, a wrong shape, a stranger, garbage
    bad = dict(env.init)
    del bad["time.weight"]
    st.save(env.path("init_missing.safetensors"), bad)
    bad = dict(env.init, **{"emb.weight": np.zeros((3, D), np.float32)})
    st.save(env.path("init_shape.safetensors"), bad)
    bad = dict(env.init, stranger=np.zeros(2, np.float32))
    st.save(env.path("init_extra.safetensors"), bad)
    open(env.path("init_garbage.safetensors"), "wb").write(b"\x10\0\0\0\0\0\0\0{not json}      ")
    for f, why in (("init_missing", "'time.weight' is missing"), ("init_shape", "[3,16]"),
                   ("init_extra", "stranger"), ("init_garbage", "malformed JSON")):
        cases.append((f, base + ["--inputs", "in", "--init", f + ".safetensors"], why))
    seen = []
    for what, args, contains in cases:
        line = expect_exit2(env, args, what, contains=contains)
        check(open(env.path("keep.safetensors"), "rb").read() == keep, "%s: keep.safetensors overwritten" % what)
        seen.append(line)
    expect_exit2(env, base + ["--inputs", "in"], "np2 batch mismatch", np_=2, contains="2 rank(s)")
    check(open(env.path("keep.safetensors"), "rb").read() == keep, "np2: keep.safetensors overwritten")
    print("bad input: %d cases exit 2 with one line, nothing overwritten, e.g.\n  %s"
          % (len(cases) + 1, "\n  ".join(seen[:4])))


def make_data(env, n=10, seed=21):
    r = np.random.default_rng(seed)
    images = r.standard_normal((n,) + SHAPE).astype(np.float32)
    labels = r.integers(0, K, n).astype(np.int64)
    np.save(env.path("data.npy"), images)
    np.save(env.path("labels.npy"), labels)
    return images, labels


LOG = re.compile(r"^\(step=(\d{7})\) Train Loss: (\d+\.\d{4}), Train Steps/Sec: [\d.]+, "
                 r"Img/Sec: [\d.]+, GFLOP/s: [\d.]+, Peak RSS: \d+ MB$", re.M)
STEPS, SEED, EVERY = 7, 5, 3


def train_run(env, so, np_, tag, extra=()):
    dump = env.path("dump." + tag)
    os.makedirs(dump)
    p = env.ok([so, "--data", "data.npy", "--labels", "labels.npy", "--steps", str(STEPS), "--seed", str(SEED),
                "--log-every", str(EVERY), "--metrics", "m.%s.jsonl" % tag,
                "--save-params", "p.%s.{rank}.safetensors" % tag] + list(extra), np_=np_,
               env={"HC_TOY_DUMP_DIR": dump})
    return p, dump


def case_train(env):
    import json
    images, labels = make_data(env)
    p, dump = train_run(env, "toy_b4.so", None, "np1")
    check("\r" not in p.stdout, "progress bar drawn although stdout is not a terminal")
    logs = LOG.findall(p.stdout)
    check([int(s) for s, _ in logs] == [3, 6, 7], "log lines:\n" + p.stdout)
    lines = open(env.path("m.np1.jsonl")).read().splitlines()
    check(len(lines) == 3, "metrics lines: %d" % len(lines))
    recs = [json.loads(l) for l in lines]
    keys = ["step", "loss", "lr", "steps_per_sec", "img_per_sec", "gflops", "peak_rss_mb",
            "setup_peak_rss_mb", "step_peak_rss_mb", "wall_s"]
    check(all(list(r) == keys for r in recs), "metrics keys %s" % list(recs[0]))
    # No schedule flag: the library's compiled rate (the toy's 0.05f).
    check(all(r["lr"] == float(np.float32(0.05)) for r in recs), "lr %s" % recs[0]["lr"])
    # Inputs: bit-exact against the spec re-derived here; training against the oracle.
    params = dict(env.init)
    step_losses = []
    for s in range(STEPS):
        x, t, y, e = sample_batch(SEED, s, images, labels, 4, 0.1, K)
        gx, gt, gy, ge = read_dump(os.path.join(dump, "r0_s%d.bin" % (s + 1)), 4)
        check(np.array_equal(gt, t), "step %d: t %s, spec %s" % (s + 1, gt, t))
        check(np.array_equal(gy, y), "step %d: y %s, spec %s" % (s + 1, gy, y))
        check(np.array_equal(ge, e), "step %d: noise differs from the spec by %g" % (s + 1, np.abs(ge - e).max()))
        check(np.array_equal(gx, x), "step %d: x_t differs from the spec by %g" % (s + 1, np.abs(gx - x).max()))
        loss, _, params = toy_step(params, x, t, y, e)
        step_losses.append(loss)
    windows = [step_losses[0:3], step_losses[3:6], step_losses[6:7]]
    for r, w in zip(recs, windows):
        check(abs(r["loss"] - np.mean(w)) <= 1e-5 * np.mean(w), "metrics loss %g vs oracle %g" % (r["loss"], np.mean(w)))
    saved = st.load(env.path("p.np1.0.safetensors"))
    perr = max(rel(saved[k], params[k]) for k in PARAMS)
    check(perr <= 1e-5, "trained params differ from the oracle by %g" % perr)
    print("train: %d steps, inputs bit-identical to the spec (permutation, t, Box-Muller eps, x_t, "
          "label dropout), window losses %s match the oracle, params within %.2e"
          % (STEPS, [round(r["loss"], 5) for r in recs], perr))


def case_train_np2(env):
    make_data(env)
    p1, d1 = train_run(env, "toy_b4.so", None, "np1")
    p2, d2 = train_run(env, "toy_b2.so", 2, "np2")
    for s in range(1, STEPS + 1):
        g1 = read_dump(os.path.join(d1, "r0_s%d.bin" % s), 4)
        halves = [read_dump(os.path.join(d2, "r%d_s%d.bin" % (r, s)), 2) for r in (0, 1)]
        for k in range(4):
            check(np.array_equal(g1[k], np.concatenate([halves[0][k], halves[1][k]])),
                  "step %d: input %d differs between np1 and np2" % (s, k))
    a = st.load(env.path("p.np1.0.safetensors"))
    r0, r1 = st.load(env.path("p.np2.0.safetensors")), st.load(env.path("p.np2.1.safetensors"))
    for k in PARAMS:
        check(np.array_equal(r0[k], r1[k]), "%s differs between ranks" % k)
    perr = max(rel(r0[k], a[k]) for k in PARAMS)
    check(perr <= 1e-6, "np2 params differ from np1 by %g" % perr)
    l1 = [float(v) for _, v in LOG.findall(p1.stdout)]
    l2 = [float(v) for _, v in LOG.findall(p2.stdout)]
    check(len(l2) == 3 and max(abs(x - y) for x, y in zip(l1, l2)) <= 1e-4,
          "logged losses %s vs %s; -np 2 stdout: %r" % (l1, l2, p2.stdout[-600:]))
    print("train np2 vs np1: every step's global batch bit-identical, params within %.2e, ranks bit-identical"
          % perr)


def case_train_hflip(env):
    """--hflip: every step's global batch is the spec's (x0 mirrored where the
    sample's own draw says so), the same at -np 1 and -np 2; some samples are
    mirrored and some not, so the test cannot pass with the flag ignored."""
    images, labels = make_data(env)
    train_run(env, "toy_b4.so", None, "np1", ["--hflip"])
    train_run(env, "toy_b2.so", 2, "np2", ["--hflip"])
    flips = []
    for s in range(STEPS):
        want = sample_batch(SEED, s, images, labels, 4, 0.1, K, hflip=True, flips=flips)
        got1 = read_dump(os.path.join(env.path("dump.np1"), "r0_s%d.bin" % (s + 1)), 4)
        halves = [read_dump(os.path.join(env.path("dump.np2"), "r%d_s%d.bin" % (r, s + 1)), 2) for r in (0, 1)]
        for k in range(4):
            check(np.array_equal(got1[k], want[k]), "step %d: input %d differs from the spec" % (s + 1, k))
            check(np.array_equal(got1[k], np.concatenate([halves[0][k], halves[1][k]])),
                  "step %d: input %d differs between np1 and np2" % (s + 1, k))
    check(0 < sum(flips) < len(flips), "flips %s: all or none" % flips)
    plain = sample_batch(SEED, 0, images, labels, 4, 0.1, K)
    first = read_dump(os.path.join(env.path("dump.np1"), "r0_s1.bin"), 4)
    check(not np.array_equal(first[0], plain[0]) or not any(flips[:4]), "step 1 equals the unflipped batch")
    # A resume must keep the augmentation: a checkpoint records it.
    env.ok(["toy_b4.so", "--data", "data.npy", "--labels", "labels.npy", "--steps", "2", "--hflip",
            "--ckpt-dir", "ck"])
    p = env.run(["toy_b4.so", "--data", "data.npy", "--labels", "labels.npy", "--steps", "3",
                 "--ckpt-dir", "ck", "--resume"])
    check(p.returncode == 2 and "--hflip missing" in p.stderr, "resume without --hflip: exit %d %r"
          % (p.returncode, p.stderr))
    print("--hflip: %d of %d samples mirrored, every global batch bit-identical to the spec at np 1 and np 2; "
          "a resume without it is refused" % (sum(flips), len(flips)))


def case_bad_data(env):
    images, labels = make_data(env)
    base = ["toy_b4.so", "--steps", "2", "--labels", "labels.npy"]

    def save(name, a):
        np.save(env.path(name), a)
        return name

    cases = [
        ("shape", ["--data", save("d_shape.npy", np.zeros((10, 1, 4, 5), np.float32))], "float32 [N,1,4,4]"),
        ("channels", ["--data", save("d_ch.npy", np.zeros((10, 3, 4, 4), np.float32))], "[10,3,4,4]"),
        ("dtype", ["--data", save("d_f64.npy", images.astype(np.float64))], "f8"),
        ("few", ["--data", save("d_few.npy", images[:3])], "fewer than one global batch"),
        ("label range", ["--data", "data.npy", "--labels", save("l_range.npy", np.full(10, K, np.int64))],
         "outside 0..2"),
        ("label count", ["--data", "data.npy", "--labels", save("l_count.npy", labels[:9])], "[10]"),
        ("label dtype", ["--data", "data.npy", "--labels", save("l_float.npy", labels.astype(np.float32))],
         "integer"),
        ("missing", ["--data", "missing.npy"], "missing.npy"),
        ("steps 0", ["--data", "data.npy", "--steps", "0"], "--steps"),
        ("log-every", ["--data", "data.npy", "--log-every", "0"], "--log-every"),
        ("seed", ["--data", "data.npy", "--seed", "x"], "--seed"),
        ("metrics dir", ["--data", "data.npy", "--metrics", "no/dir/m.jsonl"], "does not exist"),
    ]
    out = []
    for what, args, contains in cases:
        out.append(expect_exit2(env, base + args, what, contains=contains))
    print("bad data: %d cases exit 2 with one line, e.g.\n  %s" % (len(cases), "\n  ".join(out[:4])))


def case_nonfinite(env):
    make_data(env)
    for np_ in (None, 2):
        so = "toy_b4.so" if np_ is None else "toy_b2.so"
        p = env.run([so, "--data", "data.npy", "--labels", "labels.npy", "--steps", "9", "--log-every", "2",
                     "--save-params", "never.safetensors"], np_, {"HC_TOY_NAN_STEP": "4"})
        check(p.returncode == 1, "np %s: exit %d\n%s" % (np_, p.returncode, p.stderr))
        check("non-finite loss" in p.stderr and "step 4" in p.stderr, p.stderr)
        check(not os.path.exists(env.path("never.safetensors")), "saved after a non-finite loss")
        check("(step=0000004)" not in p.stdout, "logged past the bad step")
    print("non-finite loss at step 4: exit 1 naming the step (np1 and np2): %s"
          % [l for l in p.stderr.splitlines() if "non-finite" in l][0])


def rank_failure(env, mode):
    write_inputs(env.path("in"), 4)
    p = env.run(["toy_b2.so", "--inputs", "in", "--steps", "50"], 2,
                {"HC_TOY_FAIL_RANK": "1", "HC_TOY_FAIL_STEP": "2", "HC_TOY_FAIL_MODE": mode}, timeout=60)
    check(p.returncode != 0, "a failing rank left exit code 0")
    check(p.elapsed < 30, "the job took %.1f s to end" % p.elapsed)
    # SIGKILL cannot be caught: its message is mpirun's.
    want = {"error": ["rank 1: step 2 failed"], "exit": ["rank 1 exits at step 2"],
            "segv": ["hc-run: rank 1: internal error: killed by signal SIGSEGV"],
            "kill": ["rank 1", "signal 9"]}[mode]
    for w in want:
        check(w in p.stderr, "stderr lacks %r:\n%s" % (w, p.stderr))
    check(len(losses(p.stdout)) <= 1, "kept stepping:\n" + p.stdout)
    print("rank 1 fails at step 2 (%s): job ended in %.2f s with exit %d" % (mode, p.elapsed, p.returncode))


def case_rank_failure_setup(env):
    """Only rank 1 cannot start: every rank stops at once, rank 1 reports."""
    make_data(env)
    p = env.run(["toy_b2.so", "--data", "data.npy", "--steps", "5"], 2,
                {"HC_TOY_FAIL_RANK": "1", "HC_TOY_FAIL_STEP": "0"}, timeout=60)
    lines = [l for l in p.stderr.splitlines() if l.startswith("hc-run:")]
    check(p.returncode == 1 and p.elapsed < 30, "exit %d after %.1f s" % (p.returncode, p.elapsed))
    check(len(lines) == 1 and lines[0].startswith("hc-run: rank 1: ") and "rank 1 cannot start" in lines[0],
          "stderr:\n" + p.stderr)
    check("Train Loss" not in p.stdout, "it trained:\n" + p.stdout)
    print("rank 1 cannot start: job ended in %.2f s, exit 1: %s" % (p.elapsed, lines[0]))


CASES = {
    "test-mode": case_test_mode,
    "np2-vs-np1": case_np2_vs_np1,
    "abi-mismatch": case_abi_mismatch,
    "bad-input": case_bad_input,
    "train": case_train,
    "train-np2": case_train_np2,
    "train-hflip": case_train_hflip,
    "bad-data": case_bad_data,
    "nonfinite": case_nonfinite,
    "rank-failure-error": lambda e: rank_failure(e, "error"),
    "rank-failure-exit": lambda e: rank_failure(e, "exit"),
    "rank-failure-segv": lambda e: rank_failure(e, "segv"),
    "rank-failure-kill": lambda e: rank_failure(e, "kill"),
    "rank-failure-setup": case_rank_failure_setup,
}


def case_main(cases, options=("--hc-run", "--toys", "--work"), context=Env):
    """Runs the case named on the command line; PASS/FAIL line, exit 0/1."""
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(cases))
    for o in options:
        ap.add_argument(o, required=True)
    a = ap.parse_args()
    ctx = context(a)
    try:
        cases[a.case](ctx)
    except Failure as f:
        print("FAIL %s: %s" % (a.case, f))
        return 1
    print("PASS %s" % a.case)
    return 0


if __name__ == "__main__":
    sys.exit(case_main(CASES))
