#!/usr/bin/env -S /usr/bin/python3
"""hc-run's train mode feeding conditionings beyond the label (--cond
NAME=FILE.npy, issue 53): a tiny DiT with a vector, a field and a token
sequence besides class labels.

  batch     train mode's first batch with --hflip: the step-1 loss equals,
            bit for bit, the loss of the batch re-derived here (run_check's
            Philox draws; each conditioning's null form drawn per sample with
            draw kind 0x75, element k; a field mirrored with its sample and
            zeroed when dropped) fed through --inputs. The same batch with the
            field left unmirrored, the field not zeroed, or a vector's drop
            ignored gives another loss.
  ranks     3 steps: mpirun -np 2 at batch 2 against -np 1 at batch 4 (the
            same global batches): losses within 1e-6, parameters within 1e-4.
  validation  --val-data with --val-cond: the logged val_loss equals the
            loss of the validation batch re-derived here (fixed keys, no
            dropout, no flip) fed through --inputs.
  resume    checkpoints record the conditioning files; a resume on another
            file is refused (exit 2) unless --allow-data-change.
  refusals  every bad --cond is one line and exit 2, and so is a graph with a
            token padding mask (an input txt_mask).

usage: cond_train_check.py --bin DIR --work DIR
"""
import json
import os
import subprocess
import sys

import numpy as np

from common import PY, ROOT, bin_and_work, loss_of, ranks_agree, run

sys.path.insert(0, os.path.join(ROOT, "test", "run"))
import run_check  # noqa: E402  (the Philox spec of train mode's draws)

C, S, CLASSES, N, SEED = 4, 8, 3, 37, 1  # seed 1: a drop of each form and a mirrored kept field in step 1
CONDS = [("sun", "vector", (5,)), ("low", "field", (2, S, S)), ("txt", "tokens", (3, 6))]
OP_COND_DROP = 0x75
P_DROP = 0.3  # export_dit.py --cond-dropout: drops in every form within 4 samples


def spec_batch(x, y, conds, gbatch, seed, step=0, mirror_field=True, zero_field=True,
               vector_drop=True):
    """Train mode's global batch of `step` (DDPM objective) as hc-run must
    make it; the planted variants break one rule each."""
    n = x.shape[0]
    flips = []
    xt, t, yy, eps = run_check.sample_batch(seed, step, x, y, gbatch, 0.1, CLASSES,
                                            hflip=True, flips=flips)
    per_epoch = (n // gbatch) * gbatch
    inputs = {"x_t": xt.reshape((gbatch,) + x.shape[1:]), "t": t, "y": yy,
              "noise": eps.reshape((gbatch,) + x.shape[1:])}
    drops = {name: [] for name, _, _ in CONDS}
    for k, (name, kind, _) in enumerate(CONDS):
        rows, flags = [], []
        for g in range(gbatch):
            pos = step * gbatch + g
            row = run_check.permutation(seed, pos // per_epoch, n)[pos % per_epoch]
            drop = run_check.uniform01(seed, step, g, OP_COND_DROP, k) < P_DROP
            drops[name].append(drop)
            v = conds[name][row]
            if kind == "field":
                if flips[g] and mirror_field:
                    v = v[..., ::-1]
                if drop and zero_field:
                    v = np.zeros_like(v)
            rows.append(np.ascontiguousarray(v))
            flags.append(1.0 if drop and (vector_drop or kind != "vector") else 0.0)
        inputs[name] = np.stack(rows).astype(np.float32)
        if kind != "field":
            inputs[name + "_drop"] = np.array(flags, np.float32)
    return inputs, flips, drops


def expect_refusal(cmd, what, contains, errors):
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    ok = p.returncode == 2 and len(lines) == 1 and contains in p.stderr
    print("  %-34s exit %d: %s" % (what, p.returncode, lines[-1] if lines else "(nothing)"))
    if not ok:
        errors.append("%s: exit %d, stderr %r (want exit 2, one line with %r)"
                      % (what, p.returncode, p.stderr, contains))


def masked_graph(src, dst):
    """`src` with an input txt_mask [B, L] applied to txt (txt * mask[..., None])."""
    import onnx
    from onnx import TensorProto, helper
    m = onnx.load(src)
    g = m.graph
    txt = [i for i in g.input if i.name == "txt"][0]
    batch = txt.type.tensor_type.shape.dim[0]
    length = txt.type.tensor_type.shape.dim[1].dim_value
    mask = helper.make_tensor_value_info("txt_mask", TensorProto.FLOAT, [None, length])
    mask.type.tensor_type.shape.dim[0].CopyFrom(batch)
    g.input.append(mask)
    for node in g.node:
        node.input[:] = ["txt_masked" if i == "txt" else i for i in node.input]
    axes = helper.make_tensor("txt_mask_axes", TensorProto.INT64, [1], [2])
    g.initializer.append(axes)
    g.node.insert(0, helper.make_node("Mul", ["txt", "txt_mask_3d"], ["txt_masked"]))
    g.node.insert(0, helper.make_node("Unsqueeze", ["txt_mask", "txt_mask_axes"], ["txt_mask_3d"]))
    onnx.save(m, dst)


def main():
    a, w = bin_and_work()
    hc_run, hc_compile = os.path.join(a.bin, "hc-run"), os.path.join(a.bin, "hc-compile")
    errors = []
    specs = ["vector:sun:5", "concat:low:2", "tokens:txt:3:6"]
    export = [PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size",
              str(S), "--in-channels", str(C), "--num-classes", str(CLASSES), "--init",
              "random", "--dynamic-batch", "--quiet", "--cond-dropout", str(P_DROP)]
    for s in specs:
        export += ["--cond", s]
    run(export + ["-o", w("m.onnx")])
    for b in (2, 4):
        run([hc_compile, w("m.onnx"), "--batch", str(b), "--lr", "1e-3", "-o", w("b%d.so" % b)])

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (N, C, S, S)).astype(np.float32)
    y = rng.integers(0, CLASSES, N).astype(np.int64)
    conds = {name: rng.standard_normal((N,) + shape).astype(np.float32)
             for name, _, shape in CONDS}
    np.save(w("x.npy"), x)
    np.save(w("y.npy"), y)
    for name, arr in conds.items():
        np.save(w(name + ".npy"), arr)
    paths = {name: w(name + ".npy") for name in conds}
    flags_for = lambda d: sum((["--cond", "%s=%s" % kv] for kv in d.items()), [])
    cond_flags = flags_for(paths)
    data = ["--data", w("x.npy"), "--labels", w("y.npy"), "--seed", str(SEED), "--no-progress"]

    # batch: train mode's first batch against the re-derived one
    run([hc_run, w("b4.so")] + data + cond_flags + ["--steps", "1", "--hflip",
                                                   "--metrics", w("m1.jsonl")])
    with open(w("m1.jsonl")) as f:
        train_loss = json.loads(f.readline())["loss"]
    spec, flips, drops = spec_batch(x, y, conds, 4, SEED)
    want = loss_of(hc_run, w("b4.so"), w("spec"), spec)
    planted = {
        "field not mirrored": spec_batch(x, y, conds, 4, SEED, mirror_field=False)[0],
        "dropped field not zeroed": spec_batch(x, y, conds, 4, SEED, zero_field=False)[0],
        "vector drop ignored": spec_batch(x, y, conds, 4, SEED, vector_drop=False)[0],
    }
    print("step 1: train mode %.9g, re-derived batch %.9g; flips %s, drops %s"
          % (train_loss, want, flips, {k: v for k, v in drops.items()}))
    if train_loss != want:
        errors.append("train mode's step-1 loss %.17g is not the re-derived batch's %.17g"
                      % (train_loss, want))
    for what, inputs in planted.items():
        got = loss_of(hc_run, w("b4.so"), w("plant_" + what.replace(" ", "_")), inputs)
        print("  planted %-26s %.9g" % (what, got))
        if got == want:
            errors.append("planted '%s' leaves the loss unchanged: the check is blind" % what)

    # ranks: -np 2 at batch 2 against -np 1 at batch 4
    train = data + cond_flags + ["--steps", "3", "--hflip", "--log-every", "1"]
    l1, el, ep = ranks_agree(hc_run, w("b4.so"), w("b2.so"), train, w)
    print("-np 2 vs -np 1, 3 steps: losses %s rel %.2e, parameters rel %.2e"
          % (["%.6g" % v for v in l1], el, ep))
    if el > 1e-6 or ep > 1e-4:
        errors.append("-np 2 differs from -np 1 (loss %.3e, parameters %.3e)" % (el, ep))

    # validation: --val-cond, scored without dropout or flip
    vx, vy = x[:8], y[:8]
    np.save(w("vx.npy"), vx)
    np.save(w("vy.npy"), vy)
    val_flags = ["--val-data", w("vx.npy"), "--val-labels", w("vy.npy")]
    for name in conds:
        np.save(w("v_" + name + ".npy"), conds[name][:8])
        val_flags += ["--val-cond", "%s=%s" % (name, w("v_" + name + ".npy"))]
    run([hc_run, w("b4.so")] + data + cond_flags + val_flags +
        ["--steps", "1", "--metrics", w("val.jsonl"), "--save-params", w("val_p.safetensors")])
    val_loss = [json.loads(l) for l in open(w("val.jsonl")) if "val_loss" in l][0]["val_loss"]
    parts = []
    for first in (0, 4):
        xt, t, yy, eps = run_check.validation_batch(vx, vy, first, 4, CLASSES)
        inputs = {"x_t": xt.reshape((4, C, S, S)), "t": t, "y": yy,
                  "noise": eps.reshape((4, C, S, S))}
        for name, kind, _ in CONDS:
            inputs[name] = conds[name][first:first + 4]
            if kind != "field":
                inputs[name + "_drop"] = np.zeros(4, np.float32)
        folder = w("valspec%d" % first)
        os.makedirs(folder)
        for k, v in inputs.items():
            np.save(os.path.join(folder, k + ".npy"), v)
        out = run([hc_run, w("b4.so"), "--inputs", folder, "--steps", "1", "--init",
                   w("val_p.safetensors")])
        parts.append(float([l for l in out.splitlines() if l.startswith("loss ")][0].split()[1]))
    val_want = float(np.mean(parts))
    print("validation: val_loss %.9g, re-derived %.9g" % (val_loss, val_want))
    if abs(val_loss - val_want) > 1e-6 * abs(val_want):
        errors.append("val_loss %.9g is not the re-derived batches' %.9g" % (val_loss, val_want))

    # resume: the conditioning files are part of the data's identity
    run([hc_run, w("b4.so")] + data + cond_flags + ["--steps", "2", "--ckpt-dir", w("ck")])
    other = conds["sun"].copy()
    other[0, 0] += 1
    np.save(w("sun2.npy"), other)
    resume = [hc_run, w("b4.so")] + data + flags_for(dict(paths, sun=w("sun2.npy"))) + [
        "--steps", "3", "--ckpt-dir", w("ck"), "--resume"]
    print("refusals (each one line, exit 2):")
    expect_refusal(resume, "resume on another --cond file", "not the conditioning", errors)
    run(resume + ["--allow-data-change"])

    # refusals
    base = [hc_run, w("b4.so")] + data + ["--steps", "1"]
    np.save(w("bad_shape.npy"), np.zeros((N, 6), np.float32))
    np.save(w("bad_count.npy"), np.zeros((N - 1, 5), np.float32))
    np.save(w("bad_dtype.npy"), np.zeros((N, 5), np.float64))
    nan = conds["sun"].copy()
    nan[:, 2] = np.nan
    np.save(w("nan.npy"), nan)
    without_sun = flags_for({n: p for n, p in paths.items() if n != "sun"})
    with_sun = lambda path: flags_for(dict(paths, sun=path))
    cases = [
        ("missing conditioning", base + without_sun, "give --cond sun=FILE.npy"),
        ("wrong shape", base + with_sun(w("bad_shape.npy")), "is float32 [N,5]"),
        ("wrong count", base + with_sun(w("bad_count.npy")), "36 samples"),
        ("wrong dtype", base + with_sun(w("bad_dtype.npy")), "f8"),
        ("missing file", base + with_sun(w("absent.npy")), "cannot open"),
        ("non-finite value", base + with_sun(w("nan.npy")), "holds NaN"),
        ("a name the graph lacks", base + cond_flags + ["--cond", "moon=" + w("sun.npy")],
         "no conditioning named 'moon'"),
        ("a name given twice", base + cond_flags + ["--cond", "sun=" + w("sun.npy")],
         "given twice"),
        ("malformed flag", base + cond_flags + ["--cond", w("sun.npy")], "NAME=FILE.npy"),
        ("--cond-dropout against metadata", base + cond_flags + ["--cond-dropout", "0.5"],
         "contradicts"),
        ("--val-data without --val-cond", base + cond_flags + ["--val-data", w("vx.npy"),
                                                               "--val-labels", w("vy.npy")],
         "give --val-cond"),
    ]
    for what, cmd, contains in cases:
        expect_refusal(cmd, what, contains, errors)
    # A graph that masks its tokens (an input txt_mask [B, L] multiplied
    # into txt, as a padding mask would be): padded sequences are out of
    # scope, refused by name.
    masked_graph(w("m.onnx"), w("masked.onnx"))
    run([hc_compile, w("masked.onnx"), "--batch", "4", "--lr", "1e-3", "-o", w("masked.so")])
    expect_refusal([hc_run, w("masked.so")] + data + cond_flags + ["--steps", "1"],
                   "a token padding mask", "looks like an attention mask", errors)
    if errors:
        sys.exit("FAILED:\n  " + "\n  ".join(errors))
    print("PASS")


if __name__ == "__main__":
    main()
