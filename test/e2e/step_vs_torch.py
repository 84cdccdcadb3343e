#!/usr/bin/env -S /usr/bin/python3
"""The compiled step library (hc-compile -> dit_step.so, run by hc-run) against
PyTorch float32 on the same module, weights and inputs: loss, every gradient
of the first step, and the parameter change after 3 steps. With --ranks 2,
also `mpirun -np 2` at per-rank batch B against -np 1 at batch 2B on the same
global inputs.

Entries whose true gradient is zero (the attention key bias: softmax is
shift-invariant, so its gradient is float32 round-off, ~1e-12 of the
tensor's largest) are left out of the AdamW parameter-change comparison:
AdamW's m/sqrt(v) turns round-off of either side into a full-size step of
random sign. The float64 test (train_vs_torch.py) checks them exactly."""
import argparse
import os
import shutil
import sys

import numpy as np

from common import PY, ROOT, compare_step, export, read_safetensors, rel, run

sys.path.insert(0, os.path.join(ROOT, "models"))
import conditioning  # noqa: E402

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def read_config(model):
    import json
    import onnx
    meta = {p.key: p.value for p in onnx.load(model, load_external_data=False).metadata_props}
    return json.loads(meta["hc.dit_config"])


def check_train_x_start(hc_run, w, cfg):
    """A VLB objective's x_start in train mode: hc-run's first step equals,
    bit for bit, the same library fed the batch hc-run's data pipeline must
    make (test/run/run_check.py's spec, with x_start = its x0) through
    --inputs, and differs when x_start is zero (so the check can fail)."""
    import json
    sys.path.insert(0, os.path.join(ROOT, "test", "run"))
    import run_check
    x = np.load(w("x.npy"))
    y = np.load(w("y.npy"))
    x0s = []
    x_t, t, yy, eps = run_check.sample_batch(5, 0, x, y, 4, cfg["class_dropout_prob"],
                                             cfg["num_classes"], x0s=x0s)
    shape = (4,) + x.shape[1:]
    run([hc_run, w("b2.so"), "--data", w("x.npy"), "--labels", w("y.npy"), "--steps", "1",
         "--seed", "5", "--no-progress", "--metrics", w("m.jsonl")])
    with open(w("m.jsonl")) as f:
        train_loss = json.loads(f.readline())["loss"]
    errors, losses = [], []
    for name, x_start in (("spec", np.stack(x0s)), ("zero", np.zeros(shape, np.float32))):
        d = w("spec_" + name)
        os.makedirs(d, exist_ok=True)
        for k, v in (("x_t", x_t.reshape(shape)), ("t", t), ("y", yy),
                     ("noise", eps.reshape(shape)), ("x_start", x_start)):
            np.save(os.path.join(d, k + ".npy"), v)
        out = run([hc_run, w("b2.so"), "--inputs", d, "--steps", "1"])
        losses.append(float([l for l in out.splitlines() if l.startswith("loss ")][0].split()[1]))
    print("train mode with x_start: step-1 loss %.17g; the spec's batch through --inputs %.17g, "
          "with x_start zeroed %.17g" % (train_loss, losses[0], losses[1]))
    if train_loss != losses[0]:
        errors.append("train-mode loss %.17g is not the spec batch's %.17g" % (train_loss, losses[0]))
    if losses[1] == losses[0]:
        errors.append("x_start does not change the loss")
    return errors


def check_norms(out, ref, steps):
    """hc-run's printed pre-clip norms against clip_grad_norm_'s."""
    got = [float(l.split()[1]) for l in out.splitlines() if l.startswith("grad_norm ")]
    want = np.load(os.path.join(ref, "grad_norm.npy"))
    e = rel(got, want) if len(got) == steps else float("inf")
    print("pre-clip gradient norms %s, PyTorch %s: rel err %.3e"
          % (["%.6g" % g for g in got], ["%.6g" % x for x in want], e))
    return ["grad norms %.3e" % e] if e > 1e-5 else []


def compile_step(hc_bin, model, so, batch, hyper):
    run([os.path.join(hc_bin, "hc-compile"), model, "--batch", str(batch), "-o", so] + hyper)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--compile-arg", action="append", default=[],
                    help="an extra hc-compile flag (not given to PyTorch)")
    ap.add_argument("--schedule", default=None, metavar="ARGS",
                    help="learning-rate schedule flags given to hc-run and to PyTorch's "
                         "LambdaLR alike, e.g. '--lr-schedule cosine --warmup-steps 2'")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--clip-half", action="store_true",
                    help="hc-run --clip-grad-norm and torch.nn.utils.clip_grad_norm_ at half "
                         "the first step's norm (so the clip engages)")
    ap.add_argument("--plant", action="append", default=[],
                    help="after the checks: PyTorch's flow loss with this planted error "
                         "(planted_reference.py: t-flip, weight) must be told apart")
    ap.add_argument("export_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    w = lambda *p: os.path.join(a.work, *p)
    steps, batch = a.steps, 2
    schedule = a.schedule.split() if a.schedule else []
    export(w("model.onnx"), [x for x in a.export_args if x != "--"], batch=batch)
    hyper = ["--optimizer", a.optimizer, "--lr", "1e-3", "--weight-decay", "0.01"]
    errors = []
    hc_run = os.path.join(a.bin, "hc-run")
    clip = []
    if a.clip_half:
        # The first step's norm before clipping, from hc itself (the
        # reference's own is compared below).
        run([PY, os.path.join(ROOT, "models/torch_reference.py"), w("model.onnx"),
             "--batch", str(batch * a.ranks), "--out", w("in")])
        compile_step(a.bin, w("model.onnx"), w("probe.so"), batch * a.ranks, hyper)
        out = run([hc_run, w("probe.so"), "--inputs", w("in"), "--steps", "1"])
        norm = float([l for l in out.splitlines() if l.startswith("grad_norm ")][0].split()[1])
        clip = ["--clip-grad-norm", repr(norm / 2)]
        print("first step's gradient norm %.6g: clipping at %.6g" % (norm, norm / 2))
        schedule += clip
    if a.ranks == 1:
        run([PY, os.path.join(ROOT, "models/torch_reference.py"), w("model.onnx"),
             "--batch", str(batch), "--out", w("ref"), "--train-steps", str(steps),
             "--dtype", "float32"] + hyper + schedule)
        compile_step(a.bin, w("model.onnx"), w("step.so"), batch, hyper + a.compile_arg)
        out = run([hc_run, w("step.so"), "--inputs", w("ref"), "--steps", "1",
                   "--save-grads", w("g1.safetensors")] + schedule)
        out = run([hc_run, w("step.so"), "--inputs", w("ref"), "--steps", str(steps),
                   "--save-params", w("p.safetensors")] + schedule)
        if schedule and not clip:
            # The schedule must matter: the compiled constant rate moves the
            # parameters elsewhere.
            run([hc_run, w("step.so"), "--inputs", w("ref"), "--steps", str(steps),
                 "--save-params", w("p_const.safetensors")])
            pc, ps = read_safetensors(w("p_const.safetensors")), read_safetensors(w("p.safetensors"))
            if all(np.array_equal(pc[k], ps[k]) for k in pc):
                errors.append("the schedule changed nothing")
        losses = [float(l.split()[1]) for l in out.splitlines() if l.startswith("loss ")]
        if clip:
            errors += check_norms(out, w("ref"), steps)
        e = rel(losses, np.load(w("ref", "train_loss.npy")))
        print("loss (%d steps) rel err %.3e" % (steps, e))
        if e > 1e-5:
            errors.append("loss %.3e" % e)
        errors += compare_step(w("ref"), read_safetensors(w("g1.safetensors")),
                               read_safetensors(w("p.safetensors")), 1e-4,
                               mask_roundoff=a.optimizer == "adamw", float32=True)
        for plant in a.plant:
            # The same comparison against a reference with a planted error fails.
            run([PY, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                  "planted_reference.py"), plant, w("model.onnx"),
                 "--batch", str(batch), "--out", w("plant_" + plant), "--train-steps",
                 str(steps), "--dtype", "float32"] + hyper + schedule)
            pe = rel(losses, np.load(w("plant_" + plant, "train_loss.npy")))
            print("planted %s in PyTorch's loss: loss rel err %.3e (must exceed 1e-4)"
                  % (plant, pe))
            if pe <= 1e-4:
                errors.append("the planted %s is not caught (%.3e)" % (plant, pe))
    else:
        # Global inputs for 2B samples; -np 2 at batch B vs -np 1 at batch 2B.
        run([PY, os.path.join(ROOT, "models/torch_reference.py"), w("model.onnx"),
             "--batch", str(2 * batch), "--out", w("in")])
        compile_step(a.bin, w("model.onnx"), w("b1.so"), batch, hyper + a.compile_arg)
        compile_step(a.bin, w("model.onnx"), w("b2.so"), 2 * batch, hyper + a.compile_arg)
        if clip:
            # Clipping at -np 2 against PyTorch on the global batch.
            run([PY, os.path.join(ROOT, "models/torch_reference.py"), w("model.onnx"),
                 "--batch", str(2 * batch), "--out", w("in"), "--train-steps", str(steps),
                 "--dtype", "float32"] + hyper + clip)
            run(MPIRUN + ["-np", "2", hc_run, w("b1.so"), "--inputs", w("in"), "--steps", "1",
                "--save-grads", w("g2c.safetensors")] + clip)
            p2 = run(MPIRUN + ["-np", "2", hc_run, w("b1.so"), "--inputs", w("in"), "--steps",
                               str(steps), "--save-params", w("p2c.safetensors")] + clip)
            errors += check_norms(p2, w("in"), steps)
            errors += compare_step(w("in"), read_safetensors(w("g2c.safetensors")),
                                   read_safetensors(w("p2c.safetensors")), 1e-4,
                                   mask_roundoff=a.optimizer == "adamw", float32=True)
        one = run([hc_run, w("b2.so"), "--inputs", w("in"), "--steps", str(steps),
                   "--save-params", w("p1.safetensors")] + clip)
        two = run(MPIRUN + ["-np", "2", hc_run, w("b1.so"), "--inputs", w("in"),
                            "--steps", str(steps), "--save-params",
                            w("p2.{rank}.safetensors")] + clip)
        r0, r1 = read_safetensors(w("p2.0.safetensors")), read_safetensors(w("p2.1.safetensors"))
        if any(not np.array_equal(r0[k], r1[k]) for k in r0):
            errors.append("ranks 0 and 1 hold different parameters")
        else:
            print("ranks 0 and 1: parameters bit-identical")
        os.rename(w("p2.0.safetensors"), w("p2.safetensors"))
        l1 = [float(l.split()[1]) for l in one.splitlines() if l.startswith("loss ")]
        l2 = [float(l.split()[1]) for l in two.splitlines() if l.startswith("loss ")]
        print("losses -np 1:", l1, " -np 2:", l2)
        p1, p2 = read_safetensors(w("p1.safetensors")), read_safetensors(w("p2.safetensors"))
        worst = max(rel(p2[k], p1[k]) if np.linalg.norm(p1[k]) else 0 for k in p1)
        print("parameters after %d steps, -np 2 vs -np 1: worst rel err %.3e" % (steps, worst))
        if len(l1) != steps or rel(l2, l1) > 1e-5:
            errors.append("losses differ")
        if worst > 1e-5:
            errors.append("parameters differ %.3e" % worst)
        cfg = read_config(w("model.onnx"))
        # Train mode (hc-run's own data pipeline and diffusion sampling): the
        # same global batches and seed at -np 1 and -np 2, conditionings fed
        # from their own files (--cond).
        rng = np.random.default_rng(0)
        np.save(w("x.npy"), rng.uniform(-1, 1, (37, cfg["in_channels"], cfg["image_size"],
                                                cfg["image_size"])).astype(np.float32))
        train = ["--data", w("x.npy"), "--steps", str(steps), "--seed", "5", "--no-progress",
                 "--log-every", "1"]
        if cfg["num_classes"] > 0:
            np.save(w("y.npy"), rng.integers(0, cfg["num_classes"], 37).astype(np.int64))
            train += ["--labels", w("y.npy")]
        for spec in conditioning.parse_all(cfg.get("conds", ())):
            np.save(w("c_%s.npy" % spec.name),
                    rng.standard_normal(spec.shape(37, cfg["image_size"])).astype(np.float32))
            train += ["--cond", "%s=%s" % (spec.name, w("c_%s.npy" % spec.name))]
        run([hc_run, w("b2.so")] + train + ["--save-params", w("t1.safetensors")])
        run(MPIRUN + ["-np", "2", hc_run, w("b1.so")] + train +
            ["--save-params", w("t2.safetensors")])
        t1, t2 = read_safetensors(w("t1.safetensors")), read_safetensors(w("t2.safetensors"))
        worst = max(rel(t2[k], t1[k]) if np.linalg.norm(t1[k]) else 0 for k in t1)
        print("train mode, parameters after %d steps, -np 2 vs -np 1: worst rel err %.3e"
              % (steps, worst))
        if worst > 1e-5:
            errors.append("train-mode parameters differ %.3e" % worst)
        if os.path.exists(w("in", "x_start.npy")):
            errors += check_train_x_start(hc_run, w, cfg)
    shutil.rmtree(a.work, ignore_errors=True)
    if errors:
        sys.exit("FAILED: " + "; ".join(errors[:10]))


if __name__ == "__main__":
    main()
