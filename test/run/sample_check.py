#!/usr/bin/env -S /usr/bin/python3
"""hc-compile --sampler and hc-run sample on a tiny DiT, against float64 oracles.

usage: sample_check.py CASE --bin DIR --work DIR

  setup       export tiny DiTs (8x8, 4 channels, 3 classes, random init):
              learned sigma, fixed variance (--no-learn-sigma) and one without
              a null class; compile each with --sampler --batch 6; write a
              checkpoint whose EMA (ema:NAME) differs from its raw weights.
  arithmetic  hc-run sample --dump-steps, DDPM and DDIM, guidance on (scale
              4, all 4 channels) and off, respaced ("10", "4,3"), down to t = 0:
              every step's x_{t-1} equals models/sampler_reference.py's
              float64 step fed the same x_t, model outputs and noise, to 1e-5
              relative; the timesteps fed are the reference's respacing; the
              model outputs are the PyTorch DiT's with the EMA weights (1e-4);
              and the check is shown to fail on upstream's 3-channel guidance
              and on a guidance scale of 5 for 4.
  checkpoint  an hc-run checkpoint (trained 3 steps with --ema 0.5): the model
              outputs are the PyTorch DiT's with its EMA, not its raw
              parameters; a damaged checkpoint is refused (checksum).
  fid         models/sample_quality.py's Frechet distance equals the closed
              form for diagonal Gaussians.
  packed      kept weight panels (hc-constant-weights): every linear of the
              sampler's schedule (fp32 and bf16) has weight = "constant", no
              linear of the training step's; the samples are the same bits
              as with HC_GEMM_PACKED_MB=0 (every call packs W again); under
              a --mem-budget with room for half of the kept panels, only
              some are marked, within the room, and the samples stay.
  profile     hc-run sample --profile: the JSON's invariants for a sampler
              (each model call a step, the first left out; forward kernels
              only; times within the call; model FLOPs the forward's products
              once, not a training step's three times) and the same samples
              as without it; --profile over an input refused.
  refusals    bad flags (one line naming the flag, exit 2), guidance on a model
              without a null class, a training library given to sample and a
              sampler to training, an output over an input, hc-compile
              --sampler on a graph with no noise input.
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
import sampler_reference as ref  # noqa: E402
import safetensors_np  # noqa: E402
from run_check import case_main, check  # noqa: E402

PY = "/usr/bin/python3"
C, S, CLASSES, BATCH = 4, 8, 3, 6
TOL_STEP, TOL_MODEL = 1e-5, 1e-4
MODELS = {"sig": ["--learn-sigma"], "fixed": ["--no-learn-sigma"],
          "nonull": ["--class-dropout-prob", "0"]}


def run(cmd, cwd, expect=0):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    check(p.returncode == expect, "%s: exit %d (expected %d)\n%s%s"
          % (" ".join(cmd), p.returncode, expect, p.stdout[-2000:], p.stderr[-2000:]))
    return p


def case_setup(a):
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    for name, extra in MODELS.items():
        run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny",
             "--image-size", str(S), "--in-channels", str(C), "--num-classes", str(CLASSES),
             "--init", "random", "--dynamic-batch", "--quiet", "-o", name + ".onnx"] + extra,
            a.work)
        run([os.path.join(a.bin, "hc-compile"), name + ".onnx", "--sampler", "--batch",
             str(BATCH), "-o", name + ".so"], a.work)
        # Raw weights halved, EMA = the exported weights: sampling must use the EMA.
        init = safetensors_np.load(os.path.join(a.work, name + ".so.init.safetensors"))
        tensors = {k: (v * 0.5).astype(np.float32) for k, v in init.items()}
        tensors.update({"ema:" + k: v for k, v in init.items()})
        safetensors_np.save(os.path.join(a.work, name + ".ckpt.safetensors"), tensors)
    run([os.path.join(a.bin, "hc-compile"), "sig.onnx", "--batch", "2", "-o", "train.so"], a.work)
    print("exported and compiled: %s, train.so" % ", ".join(n + ".so" for n in MODELS))


def torch_model(a, name, learn_sigma):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "models"))
    import dit as ditlib
    m = ditlib.make_dit("tiny", image_size=S, in_channels=C, num_classes=CLASSES,
                        learn_sigma=learn_sigma, init="random")
    ema = {k[4:]: torch.from_numpy(v) for k, v in
           safetensors_np.load(os.path.join(a.work, name + ".ckpt.safetensors")).items()
           if k.startswith("ema:")}
    m.load_state_dict(ema, strict=True)
    return m.double().eval()


def sample(a, name, sampler, steps, cfg, dump):
    shutil.rmtree(os.path.join(a.work, dump), ignore_errors=True)
    os.makedirs(os.path.join(a.work, dump))
    return run([os.path.join(a.bin, "hc-run"), "sample", name + ".so", "--ckpt",
                name + ".ckpt.safetensors", "--classes", "0,2", "--per-class", "1",
                "--cfg-scale", str(cfg), "--sampler", sampler, "--sampling-steps", steps,
                "--seed", "7", "--dump-steps", dump, "--save-npy", dump + "/samples.npy",
                "--out", dump + "/grid.png", "--no-progress"], a.work)


def case_packed(a):
    hc_compile = os.path.join(a.bin, "hc-compile")
    for lib, args in (("train", ["--batch", "2"]), ("sig-fp32", ["--sampler", "--batch", str(BATCH)]),
                      ("sig-bf16", ["--sampler", "--batch", str(BATCH), "--precision", "bf16"])):
        run([hc_compile, "sig.onnx", "--emit=schedule", "-o", lib + ".mlir"] + args, a.work)
        with open(os.path.join(a.work, lib + ".mlir")) as f:
            calls = [line for line in f if 'hcs.call "linear"' in line]
        marked = sum('weight = "constant"' in line for line in calls)
        want = 0 if lib == "train" else len(calls)
        check(calls and marked == want, "%s: %d of %d linear calls have weight = \"constant\", "
              "expected %d" % (lib, marked, len(calls), want))
        if lib == "train":
            continue
        run([hc_compile, "sig.onnx", "-o", lib + ".so"] + args, a.work)
        got = {}
        for mb in ("0", "4096"):
            out = "packed-%s-%s.npy" % (lib, mb)
            p = subprocess.run([os.path.join(a.bin, "hc-run"), "sample", lib + ".so", "--ckpt",
                                "sig.ckpt.safetensors", "--classes", "0,2", "--per-class", "1",
                                "--cfg-scale", "4", "--sampler", "ddim", "--sampling-steps", "4,3",
                                "--seed", "7", "--save-npy", out, "--no-progress"],
                               cwd=a.work, capture_output=True, text=True, timeout=240,
                               env=dict(os.environ, HC_GEMM_PACKED_MB=mb))
            check(p.returncode == 0, "%s with HC_GEMM_PACKED_MB=%s: exit %d\n%s"
                  % (lib, mb, p.returncode, p.stderr[-2000:]))
            got[mb] = np.load(os.path.join(a.work, out))
        check(got["0"].tobytes() == got["4096"].tobytes(),
              "%s: samples with kept panels differ from packing every call (max |diff| %.3g)"
              % (lib, float(np.max(np.abs(got["0"] - got["4096"])))))
        print("%s: %d linear calls keep W's panels; samples bit-identical to packing each call"
              % (lib, marked))
    packed_under_budget(a, hc_compile)


def packed_under_budget(a, hc_compile):
    """--mem-budget counts the kept panels: a budget with room for about half
    of them marks some weights, not all, records no more than the room, and
    samples the same bits."""
    import re
    sampler = ["--sampler", "--batch", str(BATCH)]
    kept_attr = re.compile(r"hcs\.kept_weights_bytes = (\d+)")
    # A budget with room for all: every weight counted
    run([hc_compile, "sig.onnx", "--emit=schedule", "-o", "sig-room.mlir", "--mem-budget",
         str(10 ** 12)] + sampler, a.work)
    with open(os.path.join(a.work, "sig-room.mlir")) as f:
        text = f.read()
    every = int(kept_attr.search(text).group(1))
    total = text.count('hcs.call "linear"')
    check(text.count('weight = "constant"') == total, "a budget with room for all "
          "marked %d of %d linear calls" % (text.count('weight = "constant"'), total))
    p = run([hc_compile, "sig.onnx", "--mem-budget", "1", "-o", "nobudget.so"] + sampler,
            a.work, expect=2)
    need = int(re.search(r"the smallest plan found needs (\d+) bytes", p.stderr).group(1))
    budget = ["--mem-budget", str(need + every // 2)]
    run([hc_compile, "sig.onnx", "--emit=schedule", "-o", "sig-budget.mlir"] + sampler + budget,
        a.work)
    with open(os.path.join(a.work, "sig-budget.mlir")) as f:
        text = f.read()
    marked = text.count('weight = "constant"')
    m = kept_attr.search(text)
    check(m and 0 < int(m.group(1)) <= every // 2 and 0 < marked < total,
          "--mem-budget %d (room %d for kept panels of %d): %d of %d linear calls marked, "
          "kept_weights_bytes %s" % (need + every // 2, every // 2, every, marked, total,
                                     m.group(1) if m else "absent"))
    run([hc_compile, "sig.onnx", "-o", "sig-budget.so"] + sampler + budget, a.work)
    outs = []
    for lib in ("sig-fp32", "sig-budget"):
        outs.append(os.path.join(a.work, "budget-%s.npy" % lib))
        run([os.path.join(a.bin, "hc-run"), "sample", lib + ".so", "--ckpt", "sig.ckpt.safetensors",
             "--classes", "0,2", "--per-class", "1", "--cfg-scale", "4", "--sampler", "ddim",
             "--sampling-steps", "4,3", "--seed", "7", "--save-npy", outs[-1], "--no-progress"],
            a.work)
    check(np.load(outs[0]).tobytes() == np.load(outs[1]).tobytes(),
          "samples under --mem-budget differ from the unbudgeted sampler's")
    print("--mem-budget with room for %d of %d kept bytes: %d of %d linear calls keep W's "
          "panels (%s bytes); samples bit-identical" % (every // 2, every, marked, total,
                                                       m.group(1)))


def read_png(path):
    """(width, height, colour type, rows as uint8 [H, W*channels]); checks every CRC."""
    import struct
    import zlib
    data = open(path, "rb").read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "%s: not a PNG signature" % path)
    pos, chunks = 8, {}
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        check(zlib.crc32(kind + body) == crc, "%s: bad CRC in %s" % (path, kind))
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + n
    w, h, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    check(depth == 8 and b"IEND" in chunks, "%s: depth %d or no IEND" % (path, depth))
    ch = 3 if colour == 2 else 1
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(h, 1 + w * ch)
    check(not raw[:, 0].any(), "%s: a row uses a PNG filter the writer does not" % path)
    return w, h, colour, raw[:, 1:]


def check_grid(path, samples, classes, per_class):
    """The grid shows sample j of class row r at its cell, in grey."""
    w, h, colour, pix = read_png(path)
    pad, label = 2, 3 * 6 * 2 + 2
    check(colour == 0 and w == label + per_class * (S + pad) + pad and
          h == len(classes) * (S + pad) + pad, "%s: %dx%d colour %d" % (path, w, h, colour))
    for r in range(len(classes)):
        for j in range(per_class):
            cell = pix[pad + r * (S + pad):pad + r * (S + pad) + S,
                       label + j * (S + pad):label + j * (S + pad) + S]
            want = np.rint(np.clip((samples[r * per_class + j, 0] + 1) * 127.5, 0, 255))
            check(np.abs(cell.astype(int) - want).max() <= 1,
                  "%s: cell (%d, %d) is not sample %d" % (path, r, j, r * per_class + j))
        check((pix[pad + r * (S + pad):pad + r * (S + pad) + S, :label] < 128).any(),
              "%s: row %d has no class label drawn" % (path, r))


def replay(d, sched, sampler, cfg, learn_sigma, **mutation):
    """Worst per-step relative error of hc's x_{t-1} against the reference."""
    x, out, noise = d["x"], d["model_out"], d["noise"]
    K = len(sched.betas)
    worst = 0.0
    for k in range(K):
        i = K - 1 - k
        want = ref.step(sched, i, x[k], out[k], noise[k], C, cfg, learn_sigma, sampler,
                        clip=True, **mutation)
        err = np.max(np.abs(x[k + 1] - want)) / max(np.max(np.abs(want)), 1e-30)
        worst = max(worst, err)
    return worst


def case_arithmetic(a):
    import torch
    runs = [("sig", "ddpm", "10", 4.0), ("sig", "ddim", "4,3", 4.0),
            ("fixed", "ddpm", "10", 1.0), ("fixed", "ddim", "10", 2.5),
            ("sig", "ddim", "ddim25", 4.0)]
    for name, sampler, steps, cfg in runs:
        learn_sigma = name == "sig"
        dump = "dump-%s-%s-%s-%g" % (name, sampler, steps.replace(",", "_"), cfg)
        sample(a, name, sampler, steps, cfg, dump)
        d = {k: np.load(os.path.join(a.work, dump, k + ".npy"))
             for k in ("x", "model_out", "noise", "t", "y")}
        sched = ref.Schedule(ref.respacing(1000, steps))
        K = len(sched.betas)
        what = "%s %s steps %s cfg %g" % (name, sampler, steps, cfg)
        check(list(d["t"]) == list(sched.timestep_map[::-1]),
              "%s: timesteps fed %s, reference respacing %s" % (what, list(d["t"]),
                                                               list(sched.timestep_map[::-1])))
        check(d["t"][-1] == 0, "%s: the last step is not t = 0" % what)
        n = 2
        want_y = [0, 2, 0] + ([CLASSES] * 3 if cfg != 1.0 else [0, 0, 0])
        check(list(d["y"]) == want_y, "%s: labels fed %s, expected %s" % (what, list(d["y"]), want_y))
        worst = replay(d, sched, sampler, cfg, learn_sigma)
        check(worst <= TOL_STEP, "%s: a step differs from the float64 reference by %.3g "
              "relative (tolerance %g)" % (what, worst, TOL_STEP))
        samples = np.load(os.path.join(a.work, dump, "samples.npy"))
        check(np.array_equal(samples, d["x"][K]), "%s: --save-npy is not the last step's x" % what)
        check(list(np.load(os.path.join(a.work, dump, "samples.labels.npy"))) == [0, 2],
              "%s: samples.labels.npy is not the classes in order" % what)
        check_grid(os.path.join(a.work, dump, "grid.png"), samples, [0, 2], 1)
        # The model outputs are the PyTorch DiT's with the EMA weights.
        m = torch_model(a, name, learn_sigma)
        rows = 2 * n if cfg != 1.0 else n
        idx = [0, 1, 3, 4][:rows]
        model_err = 0.0
        with torch.no_grad():
            for k in range(K):
                xk = np.concatenate([d["x"][k]] * (2 if cfg != 1.0 else 1))
                got = d["model_out"][k][idx]
                want = m(torch.from_numpy(np.float64(xk)), torch.full((rows,), int(d["t"][k])),
                         torch.tensor(np.array(d["y"])[idx])).numpy()
                model_err = max(model_err, np.max(np.abs(got - want)) / np.max(np.abs(want)))
        check(model_err <= TOL_MODEL, "%s: model outputs differ from PyTorch's with the EMA "
              "weights by %.3g relative" % (what, model_err))
        print("%-32s K=%2d: worst step error %.2e relative, model %.2e (EMA weights)"
              % (what, K, worst, model_err))
        if cfg == 4.0 and sampler == "ddpm":
            # The check can fail: upstream's guidance of only 3 channels, and
            # a scale off by 1%, are both caught.
            quirk = replay(d, sched, sampler, cfg, learn_sigma, guide_channels=3)
            off = replay(d, sched, sampler, cfg + 1.0, learn_sigma)
            check(quirk > 10 * TOL_STEP and off > 10 * TOL_STEP,
                  "%s: the check cannot tell 3-channel guidance (%.3g) or scale 5 for 4 (%.3g)"
                  % (what, quirk, off))
            print("%-32s would fail: 3-channel guidance %.2e, scale 5 for 4 %.2e"
                  % ("", quirk, off))


def case_checkpoint(a):
    """An hc-run checkpoint: its EMA is what is sampled; a damaged one is refused."""
    import torch
    np.save(os.path.join(a.work, "ck_x.npy"),
            np.random.default_rng(1).uniform(-1, 1, (4, C, S, S)).astype(np.float32))
    np.save(os.path.join(a.work, "ck_y.npy"), np.array([0, 1, 2, 1], np.int64))
    shutil.rmtree(os.path.join(a.work, "ck"), ignore_errors=True)
    run([os.path.join(a.bin, "hc-run"), "train.so", "--data", "ck_x.npy", "--labels", "ck_y.npy",
         "--steps", "3", "--ckpt-dir", "ck", "--ema", "0.5", "--no-progress"], a.work)
    ck = os.path.join("ck", "ckpt-00000003.safetensors")
    tensors = safetensors_np.load(os.path.join(a.work, ck))
    dump = "dump-ckpt"
    shutil.rmtree(os.path.join(a.work, dump), ignore_errors=True)
    os.makedirs(os.path.join(a.work, dump))
    p = run([os.path.join(a.bin, "hc-run"), "sample", "sig.so", "--ckpt", ck, "--classes", "1",
             "--per-class", "1", "--sampling-steps", "2", "--dump-steps", dump, "--no-progress"],
            a.work)
    check("EMA weights" in p.stdout, "the first line does not say EMA weights:\n" + p.stdout)
    d = {k: np.load(os.path.join(a.work, dump, k + ".npy")) for k in ("x", "model_out", "t", "y")}
    import dit as ditlib
    errs = {}
    for which in ("ema:", ""):
        m = ditlib.make_dit("tiny", image_size=S, in_channels=C, num_classes=CLASSES,
                            learn_sigma=True, init="random")
        m.load_state_dict({k: torch.from_numpy(tensors[which + k]) for k in m.state_dict()})
        with torch.no_grad():
            want = m.double()(torch.from_numpy(np.float64(np.concatenate([d["x"][0]] * 2))),
                              torch.full((2,), int(d["t"][0])),
                              torch.tensor(d["y"][[0, 3]])).numpy()
        got = d["model_out"][0][[0, 3]]
        errs[which or "raw"] = np.max(np.abs(got - want)) / np.max(np.abs(want))
    check(errs["ema:"] <= TOL_MODEL < errs["raw"],
          "model outputs vs EMA %.3g, vs raw parameters %.3g" % (errs["ema:"], errs["raw"]))
    print("hc checkpoint: sampled with its EMA (%.2e; raw parameters would be %.2e)"
          % (errs["ema:"], errs["raw"]))
    bad = os.path.join(a.work, "ck_bad.safetensors")
    data = bytearray(open(os.path.join(a.work, ck), "rb").read())
    data[-3] ^= 0x40
    open(bad, "wb").write(bytes(data))
    refused(a, [os.path.join(a.bin, "hc-run"), "sample", "sig.so", "--ckpt", "ck_bad.safetensors",
                "--out", "g.png"], ["--ckpt", "ck_bad.safetensors", "checksum"])


def case_fid(a):
    """models/sample_quality.py's Frechet distance against the closed form
    for diagonal Gaussians: |mu_a - mu_b|^2 + sum (sa + sb - 2 sqrt(sa sb))."""
    import sample_quality
    r = np.random.default_rng(3)
    sa, sb = r.uniform(0.5, 2, 6), r.uniform(0.5, 2, 6)
    mu_a, mu_b = r.normal(0, 1, 6), r.normal(0, 1, 6)
    # Exact moments: samples whitened, then scaled (covariances exactly diagonal).
    z = r.normal(size=(4000, 6))
    z = (z - z.mean(0)) @ np.linalg.inv(np.linalg.cholesky(np.cov(z, rowvar=False))).T
    fa, fb = mu_a + z * np.sqrt(sa), mu_b + z * np.sqrt(sb)
    want = ((mu_a - mu_b) ** 2).sum() + (sa + sb - 2 * np.sqrt(sa * sb)).sum()
    got = sample_quality.frechet_distance(fa, fb)
    check(abs(got - want) <= 1e-9 * max(1, want), "FID %.12g, closed form %.12g" % (got, want))
    check(abs(sample_quality.frechet_distance(fa, fa)) < 1e-9, "FID of a set with itself is not 0")
    print("frechet_distance: %.10f (closed form %.10f)" % (got, want))


def case_profile(a):
    import json
    import re
    hc_run = os.path.join(a.bin, "hc-run")
    base = [hc_run, "sample", "sig.so", "--ckpt", "sig.ckpt.safetensors", "--classes", "0,2",
            "--per-class", "1", "--cfg-scale", "4", "--sampler", "ddim", "--sampling-steps", "4,3",
            "--seed", "7", "--no-progress", "--save-npy"]
    run(base + ["prof-plain.npy"], a.work)
    p = run(base + ["prof.npy", "--profile", "prof.json"], a.work)
    same = np.load(os.path.join(a.work, "prof-plain.npy")).tobytes() == \
        np.load(os.path.join(a.work, "prof.npy")).tobytes()
    check(same, "--profile changed the samples")
    calls = int(re.search(r"done: (\d+) model calls", p.stdout).group(1))
    j = json.load(open(os.path.join(a.work, "prof.json")))
    check(j["unit"] == "model call" and j["steps"] == calls - 1 and calls >= 2,
          "unit %r, %s steps for %d model calls" % (j["unit"], j["steps"], calls))
    check("hc-run sample --profile: %d model call(s)" % (calls - 1) in p.stdout, p.stdout)
    kinds = {k["kernel"]: k for k in j["kinds"]}
    for k in ("linear", "attention", "modulated_layer_norm"):
        check(kinds.get(k, {}).get("calls_per_step", 0) >= 1, "kind %s missing: %s" % (k, sorted(kinds)))
    backward = [k for k in kinds if k.endswith("_grad") or k in ("adamw", "mse_loss")]
    check(not backward, "a sampler's profile has training kernels %s" % backward)
    total = sum(k["seconds_per_step"] for k in j["kinds"])
    check(abs(total - j["profiled_s"]) <= 1e-9 + 1e-6 * total and total <= j["step_s"] * 1.02 + 1e-4,
          "kinds add to %g s, profiled %g, call %g" % (total, j["profiled_s"], j["step_s"]))
    forward = sum(k["flops_per_step"] for k in j["kinds"])
    check(forward > 0 and abs(j["model_flops_per_step"] - forward) <= 1e-9 * forward,
          "model flops %g, the forward's products %g" % (j["model_flops_per_step"], forward))
    mfu = forward / (j["machine"]["fma_peak_gflops"] * 1e9 * j["step_s"])
    check(abs(j["mfu"] - mfu) <= 1e-9 * mfu, "mfu %g, expected %g" % (j["mfu"], mfu))
    refused(a, base + ["prof2.npy", "--profile", "sig.ckpt.safetensors"],
            ["--profile", "would be overwritten"])
    print("sample --profile: %d of %d model calls, %.1f%% MFU, linear %.0f%% of a call"
          % (j["steps"], calls, 100 * j["mfu"], 100 * kinds["linear"]["share"]))


def refused(a, args, words, code=2):
    p = run(args, a.work, expect=code)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(len(lines) == 1 and all(w in lines[0] for w in words),
          "%s: expected one line naming %s, got:\n%s" % (" ".join(args), words, p.stderr))
    print("refused: %s" % lines[0])


def case_refusals(a):
    hc_run = os.path.join(a.bin, "hc-run")
    base = [hc_run, "sample", "sig.so", "--ckpt", "sig.ckpt.safetensors", "--out", "g.png"]
    for flag, value in (("--sampler", "euler"), ("--per-class", "0"),
                        ("--sampling-steps", "0"), ("--sampling-steps", "1001"),
                        ("--classes", "3"), ("--classes", "1,x"), ("--cfg-scale", "-1"),
                        ("--cfg-scale", "nan"), ("--seed", "-4")):
        refused(a, base + [flag, value], [flag, value.split(",")[-1]])
    refused(a, base + ["--bogus"], ["--bogus"])
    refused(a, [hc_run, "sample", "sig.so", "--out", "g.png"], ["--ckpt"])
    refused(a, [hc_run, "sample", "sig.so", "--ckpt", "sig.ckpt.safetensors"], ["--out"])
    refused(a, base + ["--sampling-steps", "1"], ["--sampling-steps", "at least 2"])
    refused(a, base + ["--sampling-steps", "ddim999"], ["--sampling-steps", "no integer stride"])
    refused(a, base + ["--sampling-steps", "ddim7x"], ["--sampling-steps ddimN", "7x"])
    refused(a, [hc_run, "sample", "nonull.so", "--ckpt", "nonull.ckpt.safetensors",
                "--out", "g.png"], ["--cfg-scale", "null class"])
    run([hc_run, "sample", "nonull.so", "--ckpt", "nonull.ckpt.safetensors", "--out", "g.png",
         "--cfg-scale", "1", "--sampling-steps", "3", "--no-progress"], a.work)
    refused(a, [hc_run, "sample", "train.so", "--ckpt", "sig.ckpt.safetensors", "--out",
                "g.png"], ["train.so", "training step library", "--sampler"])
    np.save(os.path.join(a.work, "x.npy"), np.zeros((4, C, S, S), np.float32))
    refused(a, [hc_run, "sig.so", "--data", "x.npy", "--steps", "1"],
            ["sig.so", "sampling library", "hc-run sample"])
    refused(a, base[:-2] + ["--save-npy", "sig.ckpt.safetensors"],
            ["--save-npy", "would be overwritten"])
    refused(a, base[:-2] + ["--out", "sig.so"], ["--out", "would be overwritten"])
    # Issue 46: sample outputs obey train mode's rules: no checkpoint names
    # (in the weights' folder or anywhere), never through a link.
    refused(a, base[:-2] + ["--out", "ckpt-00001250.safetensors"], ["--out", "checkpoint"])
    refused(a, base[:-2] + ["--out", "ckpt-x.png"], ["--out", "checkpoint name"])
    os.makedirs(os.path.join(a.work, "elsewhere"), exist_ok=True)
    refused(a, base[:-2] + ["--save-npy", "elsewhere/ckpt-00000007.safetensors"],
            ["--save-npy", "named like a checkpoint"])
    victim = os.path.join(a.work, "victim.txt")
    open(victim, "w").write("precious\n")
    link = os.path.join(a.work, "g-link.png")
    if not os.path.lexists(link):
        os.symlink(victim, link)
    refused(a, base[:-2] + ["--out", "g-link.png"], ["--out", "symbolic link"])
    if open(victim).read() != "precious\n":
        check(False, "--out through a link wrote its target")
    # A graph whose loss has no noise input: no model output to cut at.
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("Mul", ["x_t", "w"], ["m"], name="scale_node"),
         helper.make_node("ReduceMean", ["m"], ["loss"], keepdims=0, name="mean_node")],
        "nonoise", [helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2, C, S, S])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [helper.make_tensor("w", TensorProto.FLOAT, [1], [2.0])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(a.work, "nonoise.onnx"))
    refused(a, [os.path.join(a.bin, "hc-compile"), "nonoise.onnx", "--sampler", "-o", "n.so"],
            ["nonoise.onnx", "--sampler", "'noise' input"])
    refused(a, [os.path.join(a.bin, "hc-compile"), "sig.onnx", "--sampler", "--batch", "2",
                "--lr", "1e-3", "-o", "n.so"], ["--lr", "--sampler"])


if __name__ == "__main__":
    sys.exit(case_main({"setup": case_setup, "arithmetic": case_arithmetic,
                        "refusals": case_refusals, "checkpoint": case_checkpoint,
                        "fid": case_fid, "packed": case_packed, "profile": case_profile}, options=("--bin", "--work"),
                       context=lambda a: a))
