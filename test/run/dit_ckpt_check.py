#!/usr/bin/env -S /usr/bin/python3
"""Checkpoints of a real (tiny) DiT trained by hc-run, and the PyTorch loader.

usage: dit_ckpt_check.py CASE --bin DIR --work DIR

  setup         export the tiny DiT (models/export_dit.py), compile it with
                hc-compile (AdamW at batch 2 and 1, SGD), make a data set and
                train 4 steps unbroken with --ema and checkpoints at 2 and 4.
  resume        resume at step 2 then run to 4 equals the unbroken run bit for
                bit (parameters, AdamW moments and step, EMA), at -np 1 and
                -np 2; the SGD library refuses the AdamW checkpoint.
  torch-loader  models/load_checkpoint.py loads the checkpoints into the
                PyTorch DiT strictly: its loss on step 3's batch (re-derived
                from the sampling spec) equals hc-run's logged loss of step 3;
                the EMA and a DiT-style .pt (torch AdamW state) load; a
                checkpoint missing a tensor is refused with one line.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import st  # noqa: E402
from run_check import MPI, case_main, check, sample_batch  # noqa: E402

PY = "/usr/bin/python3"
SEED, STEPS, EVERY = 5, 4, 2


def run(cmd, cwd, expect=0, env=None):
    e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    e.update(env or {})
    p = subprocess.run(cmd, cwd=cwd, env=e, capture_output=True, text=True, timeout=240)
    check(p.returncode == expect, "%s: exit %d (expected %d)\n%s%s"
          % (" ".join(cmd), p.returncode, expect, p.stdout[-2000:], p.stderr[-2000:]))
    return p


def train(a, so, ckdir, steps, *extra, np_=None):
    cmd = ([] if np_ is None else MPI + ["-np", str(np_)]) + [os.path.join(a.bin, "hc-run"), so]
    cmd += ["--data", "x.npy", "--labels", "y.npy", "--steps", str(steps), "--seed", str(SEED),
            "--ckpt-dir", ckdir, "--ckpt-every", str(EVERY), "--ema", "--log-every", "1", "--no-progress"]
    return run(cmd + list(extra), a.work)


def ckpt(a, d, step):
    return os.path.join(a.work, d, "ckpt-%08d.safetensors" % step)


def case_setup(a):
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size", "8",
         "--num-classes", "10", "--dynamic-batch", "-o", "model.onnx", "--quiet"], a.work)
    hc_compile = os.path.join(a.bin, "hc-compile")
    for so, extra in (("b2.so", ["--batch", "2"]), ("b1.so", ["--batch", "1"]),
                      ("sgd.so", ["--batch", "2", "--optimizer", "sgd"])):
        run([hc_compile, "model.onnx", "--lr", "1e-3", "-o", so] + extra, a.work)
    r = np.random.default_rng(0)
    np.save(os.path.join(a.work, "x.npy"), r.uniform(-1, 1, (12, 4, 8, 8)).astype(np.float32))
    np.save(os.path.join(a.work, "y.npy"), r.integers(0, 10, 12).astype(np.int64))
    p = train(a, "b2.so", "U", STEPS, "--metrics", "U.jsonl")
    print(p.stdout.strip())


def same(a, x, y, what):
    tx, ty = st.load(x), st.load(y)
    check(list(tx) == list(ty), "%s: tensor names differ" % what)
    bad = [k for k in tx if tx[k].tobytes() != ty[k].tobytes()]
    check(not bad, "%s: %d tensors differ, e.g. %s" % (what, len(bad), bad[:3]))
    return tx


def case_resume(a):
    for d in ("B", "A2", "B2", "S"):
        shutil.rmtree(os.path.join(a.work, d), ignore_errors=True)
    train(a, "b2.so", "B", EVERY)
    p = train(a, "b2.so", "B", STEPS, "--resume")
    check("resuming from B/ckpt-%08d" % EVERY in p.stdout, p.stdout)
    t = same(a, ckpt(a, "U", STEPS), ckpt(a, "B", STEPS), "np1")
    t2 = st.load(ckpt(a, "U", EVERY))
    kinds = {k.split(":")[0] if ":" in k else "param" for k in t}
    check(kinds == {"param", "ema", "adamw.m", "adamw.v"} and "adamw.step" in t and int(t["adamw.step"]) == STEPS,
          "checkpoint tensors: %s" % sorted(kinds))
    moved = [k for k in t if k.startswith("adamw.m:") and not np.array_equal(t[k], t2[k])]
    check(len(moved) > 10, "AdamW moments did not change between steps 2 and 4")
    train(a, "b1.so", "A2", STEPS, np_=2)
    train(a, "b1.so", "B2", EVERY, np_=2)
    train(a, "b1.so", "B2", STEPS, "--resume", np_=2)
    same(a, ckpt(a, "A2", STEPS), ckpt(a, "B2", STEPS), "np2")
    shutil.copytree(os.path.join(a.work, "U"), os.path.join(a.work, "S"))
    cmd = [os.path.join(a.bin, "hc-run"), "sgd.so", "--data", "x.npy", "--labels", "y.npy", "--steps", "6",
           "--ckpt-dir", "S", "--resume"]
    p = run(cmd, a.work, expect=2)
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1 and "a checkpoint of another model" in lines[0], "sgd.so resuming: %s" % p.stderr)
    print("tiny DiT: resume at %d -> %d equals unbroken bit for bit (%d tensors: params, AdamW m/v/step, EMA) at "
          "np1 and np2; %s" % (EVERY, STEPS, len(t), lines[0]))


def loader(a, *args, expect=0):
    return run([PY, os.path.join(ROOT, "models/load_checkpoint.py")] + list(args), a.work, expect=expect)


def case_torch_loader(a):
    images, labels = np.load(os.path.join(a.work, "x.npy")), np.load(os.path.join(a.work, "y.npy"))
    x, t, y, e = sample_batch(SEED, EVERY, images, labels, 2, 0.1, 10)
    inputs = os.path.join(a.work, "in3")
    os.makedirs(inputs, exist_ok=True)
    for name, v in (("x_t", x.reshape(images[:2].shape)), ("t", t), ("y", y), ("noise", e.reshape(images[:2].shape))):
        np.save(os.path.join(inputs, name + ".npy"), v)
    p = loader(a, ckpt(a, "U", EVERY), "--weights", "model", "--inputs", "in3")
    check("strictly" in p.stdout, p.stdout)
    torch_loss = float(p.stdout.split("loss ")[1].split()[0])
    logged = {r["step"]: r["loss"] for r in map(json.loads, open(os.path.join(a.work, "U.jsonl")))}
    err = abs(torch_loss - logged[EVERY + 1]) / abs(logged[EVERY + 1])
    check(err <= 2e-5, "PyTorch loss %.9g with the step-%d weights, hc-run logged %.9g at step %d"
          % (torch_loss, EVERY, logged[EVERY + 1], EVERY + 1))
    check(abs(logged[EVERY + 1] - logged[EVERY]) > 1e-3 * abs(logged[EVERY]), "losses of steps 2 and 3 too close")

    p = loader(a, ckpt(a, "U", STEPS), "--save-pt", "dit.pt")
    check("ema weights" in p.stdout and "output [2, 8, 8, 8]" in p.stdout, p.stdout)
    import torch
    pt = torch.load(os.path.join(a.work, "dit.pt"))
    c = st.load(ckpt(a, "U", STEPS))
    check(sorted(pt) == ["args", "ema", "model", "opt"], "dit.pt keys %s" % sorted(pt))
    check(all(np.array_equal(pt["ema"][k].numpy(), c["ema:" + k]) for k in pt["ema"]), "dit.pt ema differs")
    states = pt["opt"]["state"]
    check(len(states) == len(pt["model"]) - 1 and all(float(s["step"]) == STEPS for s in states.values()),
          "dit.pt AdamW state: %d entries for %d parameters" % (len(states), len(pt["model"])))

    broken = os.path.join(a.work, "broken.safetensors")
    c, meta = st.load(ckpt(a, "U", STEPS), with_metadata=True)
    del c["blocks.0.attn.qkv.weight"]
    st.save(broken, c, meta)
    p = loader(a, broken, "--weights", "model", expect=2)
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1 and "Missing key" in lines[0] and "blocks.0.attn.qkv.weight" in lines[0],
          "a checkpoint without a tensor: %s" % p.stderr)
    print("PyTorch DiT with the step-%d checkpoint: loss %.7f vs hc-run's step-%d %.7f (rel %.1e); EMA and "
          "DiT-style .pt (AdamW state) load; missing tensor refused: %s"
          % (EVERY, torch_loss, EVERY + 1, logged[EVERY + 1], err, lines[0][:120]))


CASES = {"setup": case_setup, "resume": case_resume, "torch-loader": case_torch_loader}


if __name__ == "__main__":
    sys.exit(case_main(CASES, ("--bin", "--work"), lambda a: a))
