#!/usr/bin/env -S /usr/bin/python3
"""A DiT exported by PyTorch 2.11 (the shared exports-torch2 folder, see its
README.md): the TorchScript exporter (legacy17_*) or the dynamo exporter
(dynamo18_*, dynamo21_*; issue 27), compiled and run by hc against the
PyTorch results stored beside it (NAME.ref.npz):

  * --map-params (the dynamo exporter's default optimize=True, whose weights
    are folded into unnamed initializers): hc-compile refuses the file as
    it is (one line naming optimize=False and models/map_params.py, exit 2);
    map_params.py, fed the ref.npz's init/* tensors as the module's
    state_dict, rewrites it and the rewritten file meets the checks below;
  * every key of ref.npz is a trained tensor of hc's (loss, and init/,
    grad/, adamw3/, sgd3/ of the same parameters, each trained by hc);

  * it compiles, and --emit=hc holds one hc.attention per block and no
    softmax (flash attention runs);
  * hc's initial parameters are the file's (init/*), bit for bit;
  * first step (hc-run's test mode on NAME.inputs): loss <= 1e-5 and every
    gradient <= 1e-4 relative (||a - b|| / ||b|| per tensor);
  * every parameter's change after 3 steps <= 1e-4 relative, for AdamW
    (lr 1e-4, eps 1e-8, no weight decay; judged on the elements whose
    reference gradient exceeds 1e-4 of the tensor's largest: the attention
    key bias has a true gradient of zero, which Adam turns into full steps of
    random sign) and for SGD (lr 0.1, every element);
  * hc-run's train mode trains it (no hc metadata: the classes come from the
    label table).

The folder is ../shared/exports-torch2 from the repository (CI has it
there); a missing folder or file is a failure, never a skip.

--live "ARGS": a live export instead (issue 48): models/export_torch2.py ARGS
run by the anchors environment's PyTorch 2.x writes NAME's three files into
WORK.export first, with PyTorch's own step beside them, and they are checked
the same way.

--user-module MODULE --exporter E --python system|anchors: a user's own
module (test/e2e/user_module_export.py: timm, uncond, mlp2sdpa) exported by
models/export_training.py under Debian's torch 1.13 (system) or the anchors'
2.x, checked the same way (its frozen parameters come from its hc.frozen
metadata, and an unconditional one trains without labels)."""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

import numpy as np

from common import ROOT, anchors_python, read_safetensors, rel, run

DEFAULT_DIR = os.path.join(os.path.dirname(ROOT), "shared", "exports-torch2")
OPTIMIZERS = {
    "adamw3": ["--optimizer", "adamw", "--lr", "1e-4", "--beta1", "0.9",
               "--beta2", "0.999", "--eps", "1e-8", "--weight-decay", "0"],
    "sgd3": ["--optimizer", "sgd", "--lr", "0.1", "--weight-decay", "0"],
}
MASK = 1e-4  # Adam: elements with |grad| > MASK * max|grad| of the tensor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--name", required=True, help="e.g. t2_legacy17_unbind")
    ap.add_argument("--dir", default=DEFAULT_DIR)
    ap.add_argument("--blocks", type=int, default=2, help="attention blocks in the model")
    ap.add_argument("--attentions-per-block", type=int, default=1,
                    help="2 with a token conditioning (a cross-attention per block)")
    ap.add_argument("--map-params", action="store_true",
                    help="an optimized dynamo export: refused as is, then mapped")
    ap.add_argument("--live", metavar="ARGS",
                    help="export with the anchors' PyTorch 2.x: models/export_torch2.py ARGS")
    ap.add_argument("--user-module", choices=("timm", "uncond", "mlp2sdpa"))
    ap.add_argument("--exporter", default="torchscript", choices=("torchscript", "dynamo"))
    ap.add_argument("--python", default="system", choices=("system", "anchors"))
    a = ap.parse_args()
    if a.user_module:
        a.dir = a.work + ".export"
        shutil.rmtree(a.dir, ignore_errors=True)
        os.makedirs(a.dir)
        py = anchors_python() if a.python == "anchors" else "/usr/bin/python3"
        print(run([py, os.path.join(ROOT, "test", "e2e", "user_module_export.py"),
                   "--out", a.dir, "--name", a.name, "--module", a.user_module,
                   "--exporter", a.exporter]).strip().splitlines()[-1])
    elif a.live:
        a.dir = a.work + ".export"
        shutil.rmtree(a.dir, ignore_errors=True)
        os.makedirs(a.dir)
        print(run([anchors_python(), os.path.join(ROOT, "models", "export_torch2.py"),
                   "--out", a.dir, "--name", a.name] + a.live.split()).strip().splitlines()[-1])
    model = os.path.join(a.dir, a.name + ".onnx")
    inputs = os.path.join(a.dir, a.name + ".inputs")
    for path in (model, inputs, os.path.join(a.dir, a.name + ".ref.npz")):
        if not os.path.exists(path):
            sys.exit("FAILED: %s is missing (the exports-torch2 folder belongs at %s)"
                     % (path, DEFAULT_DIR))
    ref = np.load(os.path.join(a.dir, a.name + ".ref.npz"))
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    w = lambda *p: os.path.join(a.work, *p)
    hc_compile, hc_run = os.path.join(a.bin, "hc-compile"), os.path.join(a.bin, "hc-run")
    errors = []
    groups = collections.defaultdict(set)
    for k in ref.files:
        prefix, _, name = k.partition("/")
        if prefix == "loss" and not name:
            continue
        if prefix not in ("init", "grad", "adamw3", "sgd3") or not name:
            sys.exit("FAILED: %s.ref.npz key %r is not one this test checks" % (a.name, k))
        groups[prefix].add(name)
    if "loss" not in ref.files or len({frozenset(v) for v in groups.values()}) != 1 \
            or len(groups) != 4:
        sys.exit("FAILED: %s.ref.npz lacks the loss or does not hold init/, grad/, "
                 "adamw3/ and sgd3/ of the same parameters" % a.name)
    if a.map_params:
        p = subprocess.run([hc_compile, model, "--batch", "2", "-o", w("refused.so")],
                           capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        print("as exported: exit %d, %s" % (p.returncode, lines[-1] if lines else ""))
        if p.returncode != 2 or len(lines) != 1 or "optimize=False" not in lines[0]:
            errors.append("the optimized export is not refused in one line (exit %d): %r"
                          % (p.returncode, p.stderr))
        mapped = w(a.name + ".mapped.onnx")
        print(run([sys.executable, os.path.join(ROOT, "models", "map_params.py"), model,
                   "--state-dict", os.path.join(a.dir, a.name + ".ref.npz"),
                   "--key-prefix", "init/", "-o", mapped]).strip())
        model = mapped
    # pos_embed (requires_grad=False) is not in the state_dict, so
    # map_params.py made it a constant; a plain export needs --freeze.
    compile_args = [model, "--batch", "2"] + (
        [] if a.map_params or a.user_module else ["--freeze", "model.pos_embed"])

    ir = run([hc_compile] + compile_args + ["--emit=hc"])
    ops = collections.Counter(re.findall(r"= (hc\.[a-z_]+)", ir))
    print("attention: %d hc.attention, %d hc.softmax, %d hc.matmul"
          % (ops["hc.attention"], ops["hc.softmax"], ops["hc.matmul"]))
    want_attention = a.blocks * a.attentions_per_block
    if ops["hc.attention"] != want_attention or ops["hc.softmax"] or ops["hc.matmul"]:
        errors.append("want %d hc.attention and no softmax or matmul" % want_attention)

    def want(prefix):
        return {k[len(prefix) + 1:]: ref[k].astype(np.float64)
                for k in ref.files if k.startswith(prefix + "/")}

    init, grads_ref = want("init"), want("grad")
    if not grads_ref or sorted(init) != sorted(grads_ref):
        sys.exit("FAILED: %s.ref.npz lacks init/ or grad/ tensors" % a.name)
    worst = collections.defaultdict(float)
    worst_name = {}

    def note(kind, name, e):
        if e >= worst[kind]:
            worst[kind], worst_name[kind] = e, name
    for key, hyper in OPTIMIZERS.items():
        so = w(key + ".so")
        run([hc_compile] + compile_args + hyper + ["-o", so])
        if key == "adamw3":
            start = read_safetensors(so + ".init.safetensors")
            for name, value in init.items():
                if name not in start or not np.array_equal(start[name], value):
                    errors.append("initial %s differs from the file's" % name)
            out = run([hc_run, so, "--inputs", inputs, "--steps", "1",
                       "--save-grads", w("g.safetensors")])
            loss = [float(l.split()[1]) for l in out.splitlines() if l.startswith("loss ")]
            e = rel(loss, [float(ref["loss"])])
            worst["loss"] = e
            if len(loss) != 1 or e > 1e-5:
                errors.append("loss %s vs %r: %.3e" % (loss, float(ref["loss"]), e))
            grads = read_safetensors(w("g.safetensors"))
            if sorted(grads) != sorted(grads_ref):
                errors.append("gradient sets differ: %s" % sorted(set(grads) ^ set(grads_ref)))
            for name, g in grads_ref.items():
                if np.linalg.norm(g) == 0:
                    errors.append("reference gradient of %s is zero" % name)
                    continue
                e = rel(grads.get(name, np.zeros_like(g)), g)
                note("grad", name, e)
                if e > 1e-4:
                    errors.append("grad %s %.3e" % (name, e))
        run([hc_run, so, "--inputs", inputs, "--steps", "3",
             "--save-params", w(key + ".safetensors")])
        after, after_ref = read_safetensors(w(key + ".safetensors")), want(key)
        for name, before in init.items():
            got, exp = after[name] - before, after_ref[name] - before
            if key == "adamw3":
                g = np.abs(grads_ref[name])
                keep = g > MASK * g.max()
                got, exp = got[keep], exp[keep]
            if np.linalg.norm(exp) == 0:
                errors.append("%s: reference change of %s is zero" % (key, name))
                continue
            e = rel(got, exp)
            note(key, name, e)
            if e > 1e-4:
                errors.append("%s change of %s %.3e" % (key, name, e))
        if "model.pos_embed" in after and not np.array_equal(
                after["model.pos_embed"], start["model.pos_embed"]):
            errors.append("%s: the frozen pos_embed moved" % key)
    # Train mode on this plain export (no hc metadata): classes from its
    # label table; 3 steps on random data move the parameters, losses finite.
    rng = np.random.default_rng(0)
    x = np.load(os.path.join(inputs, "x_t.npy"))
    np.save(w("x.npy"), rng.standard_normal((8,) + x.shape[1:]).astype(np.float32))
    np.save(w("y.npy"), rng.integers(0, 10, 8).astype(np.int64))
    labels = ["--labels", w("y.npy")] if os.path.exists(os.path.join(inputs, "y.npy")) else []
    # Conditionings (a plain export: hc-run finds them from the inputs): one
    # random row per sample each.
    for f in sorted(os.listdir(inputs)):
        name = f[:-4]
        if name in ("x_t", "t", "y", "noise", "x_start") or name.endswith("_drop"):
            continue
        c = np.load(os.path.join(inputs, f))
        np.save(w("cond_" + f), rng.standard_normal((8,) + c.shape[1:]).astype(np.float32))
        labels += ["--cond", "%s=%s" % (name, w("cond_" + f))]
    out = run([hc_run, w("adamw3.so"), "--data", w("x.npy")] + labels +
              ["--steps", "3", "--no-progress", "--log-every", "1",
               "--save-params", w("train.safetensors")])
    losses = [float(m) for m in re.findall(r"Train Loss: ([^,\s]+)", out)]
    trained = read_safetensors(w("train.safetensors"))
    print("train mode: losses %s" % losses)
    if len(losses) != 3 or not np.all(np.isfinite(losses)) or all(
            np.array_equal(trained[k], start[k]) for k in init):
        errors.append("train mode on the plain export: losses %s" % losses)
    print("worst relative errors: loss %.3e, first-step gradient %.3e (%s), change after "
          "3 AdamW steps %.3e (%s), after 3 SGD steps %.3e (%s)"
          % (worst["loss"], worst["grad"], worst_name.get("grad"), worst["adamw3"],
             worst_name.get("adamw3"), worst["sgd3"], worst_name.get("sgd3")))
    shutil.rmtree(a.work, ignore_errors=True)
    if a.live:
        shutil.rmtree(a.dir, ignore_errors=True)
    if errors:
        sys.exit("FAILED: " + "; ".join(errors[:10]))


if __name__ == "__main__":
    main()
