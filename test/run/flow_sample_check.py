#!/usr/bin/env -S /usr/bin/python3
"""hc-run sample's flow samplers on tiny flow DiTs, against float64 oracles.

usage: flow_sample_check.py CASE --bin DIR --work DIR

  setup       export tiny flow DiTs (8x8, 4 channels, 3 classes, random
              init): linear/velocity, gvp/noise, vp/score; compile each with
              --sampler --batch 4.
  arithmetic  hc-run sample --dump-steps with euler, heun, sde-euler and
              sde-heun (each last step: Mean, Tweedie, Euler, none), guidance
              4 on all 4 channels: every step's x equals models/transport.py's
              float64 step fed the same x, model outputs and noise, to 1e-5
              relative; the times fed are the reference grid; every model
              output is the PyTorch DiT's (float64) at that x, t and label
              (1e-4); and the replay is shown to fail with t flipped, with
              upstream SiT's 3-channel guidance, and with a wrong derivative.
  dopri5      hc-run sample --sampler dopri5 at tight tolerances against
              torchdiffeq's dopri5 in float64 (the anchors environment) on
              the PyTorch DiT with the same weights, noise and guidance: the
              final samples within 1e-4; the evaluations are reported.
  refusals    a flow checkpoint given to a DDPM sampler and the reverse, DDPM
              samplers on a flow model and flow ones on a DDPM model, each in
              one line with exit 2.
"""
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "models"))
import safetensors_np  # noqa: E402
import transport  # noqa: E402
from run_check import check  # noqa: E402
from sample_check import run  # noqa: E402  (a command, its exit code checked)

PY = "/usr/bin/python3"
C, S, CLASSES, BATCH, CFG = 4, 8, 3, 4, 4.0
TOL_STEP, TOL_MODEL = 1e-5, 1e-4
MODELS = {"lin_v": ("linear", "velocity"), "gvp_n": ("gvp", "noise"), "vp_s": ("vp", "score")}


def case_setup(a):
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    for name, (path, pred) in MODELS.items():
        run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny",
             "--image-size", str(S), "--in-channels", str(C), "--num-classes", str(CLASSES),
             "--init", "random", "--dynamic-batch", "--quiet", "--objective", "flow",
             "--path", path, "--prediction", pred, "-o", name + ".onnx"], a.work)
        run([os.path.join(a.bin, "hc-compile"), name + ".onnx", "--sampler", "--batch",
             str(BATCH), "-o", name + ".so"], a.work)
    print("exported and compiled: %s" % ", ".join(n + ".so" for n in MODELS))


def sample(a, name, sampler, dump, extra=()):
    shutil.rmtree(os.path.join(a.work, dump), ignore_errors=True)
    os.makedirs(os.path.join(a.work, dump))
    return run([os.path.join(a.bin, "hc-run"), "sample", name + ".so", "--ckpt",
                name + ".so.init.safetensors", "--classes", "0,2", "--per-class", "1",
                "--cfg-scale", str(CFG), "--sampler", sampler, "--seed", "7",
                "--dump-steps", dump, "--save-npy", dump + "/samples.npy", "--no-progress"]
               + list(extra), a.work)


def load_dump(a, dump):
    return {k: np.load(os.path.join(a.work, dump, k + ".npy")).astype(
        np.float64 if k != "y" else np.int64)
        for k in ("eval_t", "eval_x", "model_out", "step_t", "x", "noise", "y")}


def guided_outputs(d, cfg, channels=C):
    """Per evaluation, the guided output of the 2 images' first C channels."""
    out = d["model_out"].reshape(len(d["eval_t"]), BATCH, -1, S * S)
    n, half = 2, BATCH // 2
    cond, uncond = out[:, :n, :C], out[:, half:half + n, :C]
    g = cond.copy()
    g[:, :, :channels] = transport.guided(cond[:, :, :channels], uncond[:, :, :channels], cfg)
    return g.reshape(len(d["eval_t"]), n, C * S * S)


class Flipped(transport.Objective):
    """The objective read with t's convention flipped (1 - t)."""

    def drift(self, x, t, out):
        return super().drift(x, 1 - t, out)

    def score(self, x, t, out):
        return super().score(x, 1 - t, out)

    def diffusion(self, t, form="sigma", norm=1.0):
        return super().diffusion(1 - t, form, norm)


class WrongDerivative(transport.Objective):
    """alpha' and sigma' 10% too large."""

    def alpha(self, t):
        a, da = super().alpha(t)
        return a, 1.1 * da

    def sigma(self, t):
        s, ds = super().sigma(t)
        return s, 1.1 * ds

    def alpha_ratio(self, t):
        return 1.1 * super().alpha_ratio(t)

    def drift_coefficients(self, t):
        # VP's drift is beta_t / 2 = alpha'/alpha itself (SiT's form).
        k, d = super().drift_coefficients(t)
        return (1.1 * k, 1.1 * d) if self.path == "vp" else (k, d)


def replay(d, obj, method, last="Mean", cfg=CFG, channels=C):
    """Worst relative error of hc's steps against the float64 reference, and
    of the evaluation points hc fed the model (Heun's second stages)."""
    x, ex, t = d["x"], d["eval_x"], d["eval_t"]
    out = guided_outputs(d, cfg, channels)
    sde = method.startswith("sde")
    lss = 0.0 if last == "none" else 0.04
    t0, t1 = obj.sde_interval("sigma", lss) if sde else obj.ode_interval()
    steps = len(d["step_t"]) - (1 if sde and last != "none" else 0)
    times = transport.grid(t0, t1, steps)
    dt = (t1 - t0) / steps
    per = 2 if method.endswith("heun") else 1
    err = lambda got, want: np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)
    worst = 0.0
    for k in range(steps):
        tk, e = times[k], per * k
        if method == "euler":
            want = transport.euler_step(obj, x[k], tk, dt, out[e])
        elif method == "heun":
            k1, mid = transport.heun_stage(obj, x[k], tk, dt, out[e])
            worst = max(worst, err(ex[e + 1], mid))
            want = transport.heun_step(obj, x[k], tk, dt, k1, ex[e + 1], out[e + 1])
        elif method == "sde-euler":
            want = transport.sde_euler_step(obj, x[k], tk, dt, out[e], d["noise"][k])
        else:
            xhat = transport.sde_heun_noise(obj, x[k], tk, dt, d["noise"][k])
            worst = max(worst, err(ex[e], xhat))
            k1, mid = transport.sde_heun_stage(obj, ex[e], tk, dt, out[e])
            worst = max(worst, err(ex[e + 1], mid))
            want = transport.sde_heun_step(obj, ex[e], tk, dt, k1, ex[e + 1], out[e + 1])
        worst = max(worst, err(x[k + 1], want))
    if sde and last != "none":
        want = transport.last_step(obj, x[steps], t1, out[-1], last, lss)
        worst = max(worst, err(x[steps + 1], want))
    return worst, times


def torch_model(a, name):
    import torch
    import dit as ditlib
    m = ditlib.make_dit("tiny", image_size=S, in_channels=C, num_classes=CLASSES,
                        learn_sigma=False, init="random")
    w = safetensors_np.load(os.path.join(a.work, name + ".so.init.safetensors"))
    m.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()}, strict=True)
    return m.double().eval()


def case_arithmetic(a):
    import torch
    runs = [(name, method, last) for name in MODELS
            for method in ("euler", "heun", "sde-euler", "sde-heun")
            for last in (("Mean", "Tweedie", "Euler", "none") if method.startswith("sde")
                         else ("-",))]
    for name, method, last in runs:
        path, pred = MODELS[name]
        obj = transport.Objective(path, pred)
        steps = ["--sampling-steps", "6"]
        extra = steps + (["--last-step", last] if last != "-" else [])
        dump = "dump-%s-%s-%s" % (name, method, last)
        sample(a, name, method, dump, extra)
        d = load_dump(a, dump)
        worst, times = replay(d, obj, method, last if last != "-" else "Mean")
        what = "%s %s %s" % (name, method, last)
        per = 2 if method.endswith("heun") else 1
        want_t = [times[k] + (j * (times[1] - times[0])) for k in range(len(times) - 1)
                  for j in range(per)]
        if method.startswith("sde") and last != "none":
            want_t.append(times[-1])
        check(len(d["eval_t"]) == len(want_t) and
              np.max(np.abs(d["eval_t"] - np.float32(want_t))) <= 1e-7,
              "%s: times fed %s, reference %s" % (what, d["eval_t"], want_t))
        check(worst <= TOL_STEP, "%s: a step differs from the float64 reference by %.3g "
              "relative (tolerance %g)" % (what, worst, TOL_STEP))
        samples = np.load(os.path.join(a.work, dump, "samples.npy"))
        check(np.array_equal(samples.reshape(2, -1), d["x"][-1]),
              "%s: --save-npy is not the last step's x" % what)
        # The model outputs are the PyTorch DiT's at the fed x, t and labels.
        m = torch_model(a, name)
        model_err = 0.0
        with torch.no_grad():
            for e in range(len(d["eval_t"])):
                xe = np.concatenate([d["eval_x"][e]] * 2).reshape(BATCH, C, S, S)
                want = m(torch.from_numpy(xe), torch.full((BATCH,), float(np.float32(d["eval_t"][e])),
                                                          dtype=torch.float64),
                         torch.tensor([0, 2, CLASSES, CLASSES])).numpy().reshape(BATCH, -1)
                got = d["model_out"][e]
                model_err = max(model_err, np.max(np.abs(got - want)) / np.max(np.abs(want)))
        check(list(d["y"]) == [0, 2, CLASSES, CLASSES], "%s: labels fed %s" % (what, list(d["y"])))
        check(model_err <= TOL_MODEL, "%s: model outputs differ from PyTorch's by %.3g"
              % (what, model_err))
        with np.errstate(divide="ignore", invalid="ignore"):  # a flipped VP meets sigma 0
            plants = {"t flipped": replay(d, Flipped(path, pred), method, last)[0],
                      "3-channel guidance": replay(d, obj, method, last, channels=3)[0],
                      "derivatives 10% off": replay(d, WrongDerivative(path, pred), method,
                                                    last)[0]}
        if pred == "velocity" and not method.startswith("sde"):
            del plants["t flipped"], plants["derivatives 10% off"]  # the ODE is the output itself
        caught = {k: v for k, v in plants.items() if v > 10 * TOL_STEP}
        check(len(caught) == len(plants), "%s: planted errors not caught: %s" % (
            what, {k: v for k, v in plants.items() if k not in caught}))
        print("%-26s evals %3d: worst step error %.2e, model %.2e; planted %s"
              % (what, len(d["eval_t"]), worst, model_err,
                 ", ".join("%s %.1e" % kv for kv in plants.items())))


def anchors_python():
    p = subprocess.run([os.path.join(ROOT, "tools", "install-anchors.sh"), "--where"],
                       capture_output=True, text=True)
    py = p.stdout.strip().splitlines()[-1] if p.returncode == 0 and p.stdout.strip() else ""
    check(os.path.exists(py), "the anchors environment is missing (tools/install-anchors.sh): "
          "torchdiffeq is the dopri5 oracle")
    return py


def case_dopri5(a):
    py = anchors_python()
    for name in MODELS:
        path, pred = MODELS[name]
        dump = "dopri-%s" % name
        p = sample(a, name, "dopri5", dump, ["--atol", "1e-9", "--rtol", "1e-9"])
        nfe = [l for l in p.stdout.splitlines() if l.startswith("dopri5:")]
        check(nfe, "%s: no evaluation count reported:\n%s" % (name, p.stdout))
        d = load_dump(a, dump)
        np.save(os.path.join(a.work, dump, "x0.npy"), d["x"][0])
        r = run([py, os.path.join(HERE, "flow_dopri5_reference.py"), "--weights",
                 name + ".so.init.safetensors", "--path", path, "--prediction", pred,
                 "--x0", dump + "/x0.npy", "--out", dump + "/torchdiffeq.npy",
                 "--cfg", str(CFG)], a.work)
        want = np.load(os.path.join(a.work, dump, "torchdiffeq.npy"))
        got = d["x"][-1]
        # Relative to the samples' largest value: a noise model's drift divides
        # by sigma_t (1.6e-3 at GVP's t1), which magnifies float32 round-off.
        e = np.max(np.abs(got - want))
        rel = e / np.max(np.abs(want))
        check(rel <= 1e-4, "%s: dopri5 ends %.3g (%.3g relative) from torchdiffeq's float64 "
              "dopri5" % (name, e, rel))
        print("%-8s %s; torchdiffeq %s; final samples differ by %.2e (max abs, largest "
              "value %.3g: %.2e relative)" % (name, nfe[0], r.stdout.strip(), e,
                                               np.max(np.abs(want)), rel))


def case_refusals(a):
    # A DDPM model, its sampler and a flow checkpoint made from a flow train step.
    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size",
         str(S), "--in-channels", str(C), "--num-classes", str(CLASSES), "--init", "random",
         "--dynamic-batch", "--quiet", "--no-learn-sigma", "-o", "ddpm.onnx"], a.work)
    run([os.path.join(a.bin, "hc-compile"), "ddpm.onnx", "--sampler", "--batch", "4",
         "-o", "ddpm.so"], a.work)
    for name, src in (("ddpm_train", "ddpm.onnx"), ("flow_train", "lin_v.onnx")):
        run([os.path.join(a.bin, "hc-compile"), src, "--batch", "2", "-o", name + ".so"], a.work)
        np.save(os.path.join(a.work, "x.npy"),
                np.random.default_rng(0).uniform(-1, 1, (4, C, S, S)).astype(np.float32))
        np.save(os.path.join(a.work, "y.npy"), np.array([0, 1, 2, 1], np.int64))
        shutil.rmtree(os.path.join(a.work, "ck_" + name), ignore_errors=True)
        run([os.path.join(a.bin, "hc-run"), name + ".so", "--data", "x.npy", "--labels",
             "y.npy", "--steps", "2", "--ckpt-dir", "ck_" + name, "--no-progress"], a.work)
    hc_run = os.path.join(a.bin, "hc-run")
    cases = [
        (["sample", "ddpm.so", "--ckpt", "ck_flow_train", "--save-npy", "r.npy"],
         "was trained with objective 'flow: linear path"),
        (["sample", "lin_v.so", "--ckpt", "ck_ddpm_train", "--save-npy", "r.npy"],
         "was trained with objective 'mse', but lin_v.so samples 'flow: linear path"),
        (["sample", "lin_v.so", "--ckpt", "lin_v.so.init.safetensors", "--sampler", "ddim",
          "--save-npy", "r.npy"], "--sampler ddim: lin_v.so is a flow model"),
        (["sample", "ddpm.so", "--ckpt", "ddpm.so.init.safetensors", "--sampler", "heun",
          "--save-npy", "r.npy"], "--sampler heun: ddpm.so is a DDPM model"),
        (["sample", "lin_v.so", "--ckpt", "lin_v.so.init.safetensors", "--sampler", "dopri5",
          "--sampling-steps", "10", "--save-npy", "r.npy"], "dopri5 chooses its own steps"),
        (["sample", "lin_v.so", "--ckpt", "lin_v.so.init.safetensors", "--sampler", "heun",
          "--atol", "1e-3", "--save-npy", "r.npy"], "--atol/--rtol set dopri5's tolerances"),
        (["flow_train.so", "--data", "x.npy", "--labels", "y.npy", "--steps", "1",
          "--logit-std", "2"], "--logit-mean/--logit-std need --time-sampling logit-normal"),
        (["ddpm_train.so", "--data", "x.npy", "--labels", "y.npy", "--steps", "1",
          "--time-sampling", "logit-normal"], "trains DDPM's integer timesteps"),
    ]
    for args, want in cases:
        p = run([hc_run] + args, a.work, expect=2)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        check(len(lines) == 1 and want in lines[0],
              "%s: expected one line with %r, got:\n%s" % (" ".join(args), want, p.stderr))
        check(not os.path.exists(os.path.join(a.work, "r.npy")), "an output was written")
        print("refused: %s" % lines[0])
    # A resume with another time sampling is refused too.
    shutil.rmtree(os.path.join(a.work, "ck_ln"), ignore_errors=True)
    run([hc_run, "flow_train.so", "--data", "x.npy", "--labels", "y.npy", "--steps", "1",
         "--ckpt-dir", "ck_ln", "--no-progress"], a.work)
    p = run([hc_run, "flow_train.so", "--data", "x.npy", "--labels", "y.npy", "--steps", "2",
             "--ckpt-dir", "ck_ln", "--resume", "--time-sampling", "logit-normal",
             "--no-progress"], a.work, expect=2)
    check("was trained with time sampling 'uniform'" in p.stderr, p.stderr)
    print("refused: %s" % p.stderr.strip().splitlines()[-1])


class Ctx:
    def __init__(self, a):
        self.bin, self.work = a.bin, a.work


if __name__ == "__main__":
    import argparse
    from run_check import Failure
    ap = argparse.ArgumentParser()
    cases = {"setup": case_setup, "arithmetic": case_arithmetic, "dopri5": case_dopri5,
             "refusals": case_refusals}
    ap.add_argument("case", choices=sorted(cases))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    try:
        cases[a.case](Ctx(a))
    except Failure as f:
        print("FAIL %s: %s" % (a.case, f))
        sys.exit(1)
    print("PASS %s" % a.case)
