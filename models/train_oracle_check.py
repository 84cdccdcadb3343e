#!/usr/bin/env -S /usr/bin/python3
"""Check torch_reference.py's training-step mode (--train-steps) end to end.

usage: /usr/bin/python3 models/train_oracle_check.py [--workdir DIR] [--keep]
           [--fd-per-param 2] [--seed 7]

Exports tiny (image 16, 10 classes, batch 2, init random, with output) and
runs the oracle's CLI exactly as users do, then checks:

  * train mode writes the same x_t/t/y/noise as the default mode, and its
    first train_loss equals the default mode's loss_f64 bit for bit;
  * adamw and sgd, 3 steps, float64: every trainable gradient has a nonzero
    norm; params_after differs from params_before for exactly the trainable
    tensors (frozen ones are bit-identical); the loss goes down;
  * the float64 first-step gradients against central finite differences of
    the float64 loss (module rebuilt here from the export + params_before)
    at random entries of every trainable tensor;
  * one step with weight decay 0.01 against the optimizer formulas written
    out in numpy (AdamW: decoupled decay; SGD: decay added to the gradient);
  * --freeze (named tensors frozen, absent from grads/, unchanged), an unknown
    --freeze name and training options without --train-steps (exit 2, one line);
  * --dtype float32 against the float64 run.
Exit 0 when everything passes, 1 otherwise.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
PY = "/usr/bin/python3"
REF = os.path.join(HERE, "torch_reference.py")

FAILS = []


def check(cond, what):
    print("  [%s] %s" % ("ok" if cond else "FAIL", what))
    if not cond:
        FAILS.append(what)
    return cond


def sh(args):
    r = subprocess.run([PY] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return r.returncode, r.stdout, r.stderr


def oracle(model, out, *extra, seed=7):
    rc, so, se = sh([REF, model, "--batch", "2", "--seed", str(seed), "--out", out] + list(extra))
    if rc != 0:
        sys.stderr.write(so + se)
        raise SystemExit("torch_reference.py %s failed (rc %d)" % (" ".join(extra), rc))
    return so


def load_dir(d, sub):
    p = os.path.join(d, sub)
    return {f[:-4]: np.load(os.path.join(p, f)) for f in sorted(os.listdir(p)) if f.endswith(".npy")}


def loss_fn(model_path, ref_dir):
    """float64 loss(params dict) with the module rebuilt from the export."""
    import torch
    import torch_reference as tr
    m, cfg = tr.load_model(model_path)
    module = tr.build_module(m, cfg).double()
    inp = {k: np.load(os.path.join(ref_dir, k + ".npy")) for k in ("x_t", "t", "y", "noise")}
    args = (torch.from_numpy(inp["x_t"]).double(), torch.from_numpy(inp["t"]),
            torch.from_numpy(inp["y"]), torch.from_numpy(inp["noise"]).double())
    params = dict(module.dit.named_parameters())

    def f(values):
        with torch.no_grad():
            for n, v in values.items():
                params[n].copy_(torch.from_numpy(v))
            return float(module(*args)[0])
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--fd-per-param", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="hc-train-oracle-")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "t.onnx")
    rc, so, se = sh([os.path.join(HERE, "export_dit.py"), "--model", "tiny", "--image-size", "16",
                     "--num-classes", "10", "--batch", "2", "--init", "random",
                     "--with-output", "--quiet", "-o", model])
    if rc:
        sys.stderr.write(so + se)
        return 1

    print("default mode vs train mode inputs")
    d_def = os.path.join(work, "default")
    oracle(model, d_def, seed=a.seed)
    runs = {}
    for opt in ("adamw", "sgd"):
        d = os.path.join(work, opt)
        print(oracle(model, d, "--train-steps", "3", "--optimizer", opt, seed=a.seed).strip())
        runs[opt] = d
    for k in ("x_t", "t", "y", "noise"):
        same = all(np.array_equal(np.load(os.path.join(d_def, k + ".npy")),
                                  np.load(os.path.join(d, k + ".npy"))) for d in runs.values())
        check(same, "%s.npy identical in default and train mode" % k)
    l64 = float(np.load(os.path.join(d_def, "loss_f64.npy")))

    grads64 = None
    for opt, d in runs.items():
        print("%s, 3 steps, float64" % opt)
        meta = json.load(open(os.path.join(d, "train_meta.json")))
        tl = np.load(os.path.join(d, "train_loss.npy"))
        grads, before, after = load_dir(d, "grads"), load_dir(d, "params_before"), load_dir(d, "params_after")
        if opt == "adamw":
            grads64 = grads
        trainable, frozen = meta["trainable"], meta["frozen"]
        check(frozen == ["pos_embed"], "frozen = %s" % frozen)
        check(sorted(grads) == sorted(trainable), "grads/ holds exactly the %d trainable" % len(trainable))
        check(sorted(before) == sorted(after) == sorted(trainable + frozen),
              "params_before/after hold all %d parameters" % len(before))
        check(tl.dtype == np.float64 and tl.shape == (3,), "train_loss float64 [3]: %s"
              % ", ".join("%.17g" % v for v in tl))
        check(tl[0] == l64, "train_loss[0] == default mode's loss_f64 bit for bit")
        check(tl[2] < tl[1] < tl[0], "loss decreases")
        norms = {n: float(np.linalg.norm(g)) for n, g in grads.items()}
        zero = [n for n, v in norms.items() if v == 0]
        check(not zero, "every trainable gradient has nonzero norm (min %.3e at %s; max %.3e at %s)%s"
              % (min(norms.values()), min(norms, key=norms.get), max(norms.values()),
                 max(norms, key=norms.get), (" ZERO: " + ", ".join(zero)) if zero else ""))
        changed = [n for n in before if not np.array_equal(before[n], after[n])]
        check(sorted(changed) == sorted(trainable),
              "params changed exactly for the trainable (%d changed, frozen unchanged)" % len(changed))
        same_el = {n: int(np.sum(before[n] == after[n])) for n in trainable}
        same_el = {n: c for n, c in same_el.items() if c}
        print("    trainable elements left unchanged: %s" % (
            ", ".join("%s %d/%d" % (n, c, before[n].size) for n, c in same_el.items()) or "none"))
        zero_g = {n: int(np.sum(grads[n] == 0)) for n in trainable}
        print("    exactly-zero gradient entries: %s" % (
            ", ".join("%s %d" % (n, c) for n, c in zero_g.items() if c) or "none"))
        if opt == "sgd":
            check(np.array_equal(grads["x_embedder.proj.weight"], load_dir(runs["adamw"], "grads")
                                 ["x_embedder.proj.weight"]), "first-step grads identical for adamw and sgd")

    print("float64 gradients vs central finite differences of the float64 loss")
    before = load_dir(runs["adamw"], "params_before")
    f = loss_fn(model, runs["adamw"])
    check(f(before) == l64, "rebuilt loss == loss_f64")
    # Central differences at h = 1e-2 and 1e-3, Richardson-combined (error
    # ~h^4): measured noise floor ~1e-13 absolute (the loss is ~1, so its
    # float64 rounding over 2h). Entries: the largest |grad| of each tensor
    # plus random nonzero ones, so tiny q/k gradients (~1e-9, attention
    # near-uniform at this init) are exercised too; those are judged by the
    # absolute error, the rest (|grad| >= 1e-6) by the relative one.
    rng = np.random.default_rng(a.seed)
    rows = []
    for n in sorted(grads64):
        g = grads64[n]
        flat = np.flatnonzero(g.reshape(-1) != 0)
        pick = [int(np.argmax(np.abs(g)))]
        pick += [int(i) for i in rng.choice(flat, size=min(a.fd_per_param, flat.size), replace=False)]
        for idx in pick:
            ii = np.unravel_index(idx, g.shape)
            p0 = before[n][ii]
            est = {}
            for h in (1e-2, 1e-3):
                vals = dict(before)
                v = before[n].copy()
                v[ii] = p0 + h
                vals[n] = v
                fp = f(vals)
                v = before[n].copy()
                v[ii] = p0 - h
                vals[n] = v
                fm = f(vals)
                est[h] = (fp - fm) / (2 * h)
            fd = est[1e-3] + (est[1e-3] - est[1e-2]) / 99.0
            ae = abs(fd - g[ii])
            rows.append((ae / abs(g[ii]), ae, n, ii, g[ii], fd))
    f(before)
    big = [r for r in rows if abs(r[4]) >= 1e-6]
    small = [r for r in rows if abs(r[4]) < 1e-6]
    for rel, ae, n, ii, gv, fd in sorted(big, key=lambda r: -r[0])[:4]:
        print("    %-40s %-12s grad %+.12e fd %+.12e rel %.2e"
              % (n, "(%s)" % ",".join(map(str, ii)), gv, fd, rel))
    rels = np.array([r[0] for r in big])
    check(len(big) > 0 and rels.max() < 1e-6,
          "%d entries with |grad| >= 1e-6 (%d tensors, |grad| %.1e..%.1e): rel err max %.2e, "
          "median %.2e" % (len(big), len({r[2] for r in big}), min(abs(r[4]) for r in big),
                           max(abs(r[4]) for r in big), rels.max(), float(np.median(rels))))
    if small:
        check(max(r[1] for r in small) < 1e-12,
              "%d entries with |grad| < 1e-6 (%.1e..%.1e): abs err max %.2e (noise floor ~1e-13)"
              % (len(small), min(abs(r[4]) for r in small), max(abs(r[4]) for r in small),
                 max(r[1] for r in small)))

    print("one step with weight decay 0.01 vs the optimizer formulas")
    for opt, lr in (("adamw", 1e-3), ("sgd", 0.5)):
        d = os.path.join(work, opt + "_wd")
        extra = ["--train-steps", "1", "--optimizer", opt, "--lr", str(lr), "--weight-decay", "0.01"]
        if opt == "adamw":
            extra += ["--beta1", "0.8", "--beta2", "0.95", "--eps", "1e-6"]
        oracle(model, d, *extra, seed=a.seed)
        g, b, af = load_dir(d, "grads"), load_dir(d, "params_before"), load_dir(d, "params_after")
        err = 0.0
        for n in g:
            if opt == "adamw":
                m_hat = (1 - 0.8) * g[n] / (1 - 0.8)
                v_hat = (1 - 0.95) * g[n] ** 2 / (1 - 0.95)
                want = b[n] * (1 - lr * 0.01) - lr * m_hat / (np.sqrt(v_hat) + 1e-6)
            else:
                want = b[n] - lr * (g[n] + 0.01 * b[n])
            err = max(err, float(np.max(np.abs(want - af[n]))))
        check(err < 1e-15, "%s lr %g: max |params_after - formula| = %.2e" % (opt, lr, err))

    print("--freeze and bad input")
    d = os.path.join(work, "freeze")
    fr = "blocks.0.attn.qkv.weight,final_layer.linear.bias"
    oracle(model, d, "--train-steps", "2", "--optimizer", "sgd", "--freeze", fr, seed=a.seed)
    meta = json.load(open(os.path.join(d, "train_meta.json")))
    g, b, af = load_dir(d, "grads"), load_dir(d, "params_before"), load_dir(d, "params_after")
    fz = fr.split(",")
    check(sorted(meta["frozen"]) == sorted(fz + ["pos_embed"]) and not set(fz) & set(g)
          and len(meta["trainable"]) == 29 and sorted(g) == sorted(meta["trainable"]),
          "--freeze %s: frozen %s, 29 trainable, no grads for them" % (fr, meta["frozen"]))
    check(all(np.array_equal(b[n], af[n]) for n in meta["frozen"])
          and all(not np.array_equal(b[n], af[n]) for n in meta["trainable"]),
          "frozen unchanged, trainable changed")
    check(all(np.array_equal(g[n], grads64[n]) for n in g),
          "freezing leaves the other first-step gradients bit-identical")
    for args, what in (
            (["--train-steps", "1", "--optimizer", "sgd", "--freeze", "blocks.0.nope"], "unknown --freeze"),
            (["--optimizer", "adamw"], "--optimizer without --train-steps"),
            (["--train-steps", "1"], "--train-steps without --optimizer"),
            (["--train-steps", "0", "--optimizer", "sgd"], "--train-steps 0"),
            (["--train-steps", "1", "--optimizer", "sgd", "--beta1", "0.5"], "--beta1 with sgd"),
            (["--train-steps", "1", "--optimizer", "adam"], "--optimizer adam")):
        rc, so, se = sh([REF, model, "--batch", "2", "--out", os.path.join(work, "bad")] + args)
        lines = se.strip().splitlines()
        check(rc == 2 and len(lines) == 1, "%s: exit %d, %s" % (what, rc, lines[-1] if lines else "no message"))

    print("--dtype float32 vs float64")
    d = os.path.join(work, "adamw32")
    oracle(model, d, "--train-steps", "3", "--optimizer", "adamw", "--dtype", "float32", seed=a.seed)
    g32, tl32 = load_dir(d, "grads"), np.load(os.path.join(d, "train_loss.npy"))
    tl64 = np.load(os.path.join(runs["adamw"], "train_loss.npy"))
    check(tl32[0] == float(np.load(os.path.join(d, "loss.npy"))),
          "float32 train_loss[0] == loss.npy (float32 run) bit for bit")
    grel = max(float(np.linalg.norm(g32[n] - grads64[n]) / np.linalg.norm(grads64[n])) for n in g32)
    lrel = float(np.max(np.abs(tl32 - tl64) / tl64))
    a32, a64 = load_dir(d, "params_after"), load_dir(runs["adamw"], "params_after")
    prel = max(float(np.max(np.abs(a32[n] - a64[n]))) for n in a32)
    check(grel < 1e-4 and lrel < 1e-6,
          "float32 vs float64: grad rel (per-tensor norm) max %.2e, train_loss rel max %.2e, "
          "params_after max abs diff %.2e" % (grel, lrel, prel))

    if not a.keep and not a.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print("%s (%d failure%s)" % ("PASS" if not FAILS else "FAIL", len(FAILS), "" if len(FAILS) == 1 else "s"))
    return 0 if not FAILS else 1


if __name__ == "__main__":
    sys.exit(main())
