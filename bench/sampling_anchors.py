#!/usr/bin/env -S /usr/bin/python3
"""Sampling speed against PyTorch 2.x on the same machine, in the same run
(issue 48, item 4): `hc-run sample` (fp32 and bf16) against PyTorch's
guided sampling loop (models/sample_torch.py: eager, torch.compile, and
torch.compile with inductor's freezing as PyTorch recommends for CPU
inference; fp32 and bf16 autocast) on the same weights, the same classes and the same
number of model evaluations.

usage: /usr/bin/python3 bench/sampling_anchors.py --bin build/bin --work DIR
           [--models demo,DiT-S/2] [--samplers ddim50,ddpm250] [--images 4]
           [--rounds 3] [--threads N] [--systems hc-fp32,...]

Each model is exported with DiT's objective (learned sigma, 1000 steps;
demo: 1 channel 32x32, 10 classes; DiT-S/2: latent 4x32x32, 1000 classes)
and compiled with `hc-compile --sampler --batch 2*images` (guidance doubles
the batch, as DiT's forward_with_cfg). Everyone starts from the weights
hc-compile writes beside the library, redrawn N(0, 0.02) (DiT's
init zeroes the final layer: every image would be the same), makes --images images of classes
1..images at guidance scale 4 and starts from the same x_T: an untimed
`hc-run sample --dump-steps` gives x_T and the ancestral noise, which the
PyTorch loop reads, so each fp32 row's images are compared with hc fp32's
(largest absolute difference and relative L2 error). The time is the
sampling loop alone (hc-run's "done:" line; PyTorch's loop after two
warm-up calls that compile torch.compile's rows); a row is the median over
--rounds interleaved rounds, in images per second and against hc at the
same precision, with its MFU: the forward's matrix products per model call
(hc's description of the sampler) times the calls, over the time and the
peak of its precision measured before each round and after the last (the
highest; FMA for fp32, the bf16 products' for bf16), its ceiling,
1 / MFU: how much faster than that row any implementation could be on this
CPU, and its peak RSS (the process's, from wait4).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEBIAN_PY = "/usr/bin/python3"
sys.path.insert(0, HERE)
from anchors import anchors, cpu_facts, peak, torch_version  # noqa: E402
from step_description import description  # noqa: E402

MODELS = {"demo": (32, 1, 10), "DiT-S/2": (32, 4, 1000), "DiT-B/2": (32, 4, 1000)}


def run(cmd, env=None, timeout=3600, rss=None):
    """cmd's standard output; its peak RSS in MB appended to `rss` (the
    process's own, from wait4: a torch.compile row's compile workers are
    not in it)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                p.returncode = -9
                raise subprocess.TimeoutExpired(cmd, timeout)
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if p.returncode != 0:
        last = (stderr or stdout).strip().splitlines() or ["(no output)"]
        raise RuntimeError("%s exit %d: %s" % (os.path.basename(cmd[0]), p.returncode, last[-1]))
    if rss is not None:
        rss.append(usage.ru_maxrss / 1024.0)  # KiB on Linux
    return stdout


def prepare(a, model):
    size, channels, classes = MODELS[model]
    d = os.path.join(a.work, model.replace("/", ""))
    os.makedirs(d, exist_ok=True)
    m = {"model": model, "size": size, "channels": channels, "classes": classes, "dir": d,
         "onnx": os.path.join(d, "model.onnx"), "so": {}}
    if not os.path.exists(m["onnx"]):
        run([DEBIAN_PY, os.path.join(ROOT, "models", "export_dit.py"), "--model", model,
             "--image-size", str(size), "--in-channels", str(channels), "--num-classes",
             str(classes), "--dynamic-batch", "--quiet", "-o", m["onnx"]])
    for precision in ("fp32", "bf16"):
        so = os.path.join(d, "sample-%s.so" % precision)
        run([os.path.join(a.bin, "hc-compile"), m["onnx"], "--sampler", "--batch",
             str(2 * a.images), "--precision", precision, "-o", so])
        m["so"][precision] = so
    # The forward's matrix products per model call (hc's description of the
    # sampler: the same FLOPs every system computes per call).
    m["flops"] = description(m["so"]["fp32"], os.path.join(os.path.dirname(a.bin), "lib"))[
        "model_flops_per_step"]
    # Weights drawn N(0, 0.02) under the init file's names: DiT's own init
    # zeroes the final layer, whose output 0 would make every system's
    # images the same whatever it computed.
    sys.path.insert(0, os.path.join(ROOT, "models"))
    import safetensors_np
    init = safetensors_np.load(m["so"]["fp32"] + ".init.safetensors")
    rng = np.random.default_rng(0)
    m["init"] = os.path.join(d, "random.safetensors")
    safetensors_np.save(m["init"], {k: (0.02 * rng.standard_normal(v.shape)).astype(np.float32)
                                    for k, v in sorted(init.items())})
    m["labels"] = ",".join(str(1 + i) for i in range(a.images))
    return m


def hc_cmd(a, m, precision, sampler, out, extra=()):
    kind, steps = re.fullmatch(r"(ddpm|ddim)(\d+)", sampler).groups()
    return [os.path.join(a.bin, "hc-run"), "sample", m["so"][precision], "--ckpt", m["init"],
            "--classes", m["labels"], "--per-class", "1", "--cfg-scale", "4",
            "--sampler", kind, "--sampling-steps", ("ddim" + steps) if kind == "ddim" else steps,
            "--save-npy", out, "--no-progress"] + list(extra)


def torch_cmd(a, py, m, sampler, dump, out, extra):
    kind, steps = re.fullmatch(r"(ddpm|ddim)(\d+)", sampler).groups()
    return [py, os.path.join(ROOT, "models", "sample_torch.py"), "--model", m["model"],
            "--image-size", str(m["size"]), "--in-channels", str(m["channels"]),
            "--num-classes", str(m["classes"]), "--init-weights", m["init"],
            "--classes", m["labels"], "--start", os.path.join(dump, "start.npy"),
            "--noise", os.path.join(dump, "noise.npy"), "--sampler", kind,
            "--sampling-steps", ("ddim" + steps) if kind == "ddim" else steps,
            "--cfg-scale", "4", "--threads", str(a.threads), "--save-npy", out] + extra


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="demo,DiT-S/2")
    ap.add_argument("--samplers", default="ddim50,ddpm250")
    ap.add_argument("--images", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--systems", default=None)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch_py, _ = anchors()
    t2 = torch_version(torch_py)
    omp = dict(os.environ, OMP_WAIT_POLICY="ACTIVE")
    systems = [("hc-fp32", "hc fp32", "fp32"), ("hc-bf16", "hc bf16", "bf16"),
               ("torch-eager", "PyTorch %s eager fp32" % t2, "fp32"),
               ("torch-compile", "PyTorch %s torch.compile fp32" % t2, "fp32"),
               ("torch-compile-frozen", "PyTorch %s torch.compile frozen fp32" % t2, "fp32"),
               ("torch-bf16", "PyTorch %s eager bf16 autocast" % t2, "bf16"),
               ("torch-compile-bf16", "PyTorch %s torch.compile bf16 autocast" % t2, "bf16"),
               ("torch-compile-frozen-bf16", "PyTorch %s torch.compile frozen bf16 autocast" % t2,
                "bf16")]
    if a.systems:
        systems = [s for s in systems if s[0] in a.systems.split(",")]
    extra = {"torch-eager": [], "torch-compile": ["--compile"],
             "torch-compile-frozen": ["--compile", "--freeze"],
             "torch-bf16": ["--autocast", "bf16"],
             "torch-compile-bf16": ["--compile", "--autocast", "bf16"],
             "torch-compile-frozen-bf16": ["--compile", "--freeze", "--autocast", "bf16"]}
    cpu, isa = cpu_facts()
    print("sampling_anchors: %s (%s), %d threads, %d images per run (batch %d with guidance), %s" % (
        cpu, ", ".join(isa), a.threads, a.images, 2 * a.images,
        subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                       stdout=subprocess.PIPE, text=True).stdout.strip()), flush=True)
    for model in a.models.split(","):
        m = prepare(a, model)
        for sampler in a.samplers.split(","):
            # x_T and the ancestral noise, from an untimed hc fp32 run.
            dump = os.path.join(m["dir"], "dump-" + sampler)
            os.makedirs(dump, exist_ok=True)
            run(hc_cmd(a, m, "fp32", sampler, os.path.join(dump, "hc.npy"),
                       ["--dump-steps", dump]))
            x = np.load(os.path.join(dump, "x.npy"))
            np.save(os.path.join(dump, "start.npy"), x[0])
            reference = np.load(os.path.join(dump, "hc.npy")).astype(np.float64)
            times, why, match, peaks = {k: [] for k, _, _ in systems}, {}, {}, []
            rss = {k: [] for k, _, _ in systems}
            for r in range(a.rounds):
                peaks.append(peak(a))
                for key, _, precision in systems:
                    if key in why:
                        continue
                    out = os.path.join(m["dir"], "%s-%s.npy" % (key, sampler))
                    try:
                        if key.startswith("hc-"):
                            text = run(hc_cmd(a, m, precision, sampler, out), rss=rss[key])
                            calls, secs = re.search(r"done: (\d+) model calls in ([\d.]+) s",
                                                    text).groups()
                            times[key].append(float(secs))
                        else:
                            res = json.loads(run(torch_cmd(a, torch_py, m, sampler, dump, out,
                                                           extra[key]), env=omp,
                                                 rss=rss[key]).splitlines()[-1])
                            times[key].append(res["seconds"])
                        img = np.load(out).astype(np.float64)
                        match[key] = (float(np.abs(img - reference).max()),
                                      float(np.linalg.norm(img - reference) / np.linalg.norm(reference)))
                    except (RuntimeError, subprocess.TimeoutExpired, AttributeError) as e:
                        why[key] = str(e).splitlines()[0][:160]
            # and once more after the last: a disturbed measurement only reads low
            peaks.append(peak(a))
            calls = int(re.search(r"\d+", sampler).group())
            top = {"fp32": max(p[0] for p in peaks), "bf16": max(p[1] for p in peaks)}
            flops = calls * m["flops"]
            print("\n%s, %s, %d model calls of batch %d, median of %d rounds; model FLOPs %.3g per "
                  "run; peaks (the highest of %d): FMA %.1f, bf16 products %.1f GFLOP/s:" % (
                      model, sampler, calls, 2 * a.images, a.rounds, flops, len(peaks),
                      top["fp32"] / 1e9, top["bf16"] / 1e9))
            w = max(len(label) for _, label, _ in systems)
            print("  %-*s %9s %9s %7s %9s %9s %9s  %s" % (
                w, "system", "s/run", "img/s", "MFU", "t / hc", "ceiling", "peak RSS",
                "vs hc fp32's images: max |diff|, rel L2"))
            for key, label, precision in systems:
                if key in why or not times[key]:
                    print("  %-*s %s" % (w, label, "no row: " + why.get(key, "no run")))
                    continue
                t = statistics.median(times[key])
                hc = times.get("hc-" + precision)
                ratio = "%.2fx" % (t / statistics.median(hc)) if hc and key[:3] != "hc-" else ""
                md, rl = match.get(key, (float("nan"), float("nan")))
                print("  %-*s %9.3f %9.3f %6.1f%% %9s %8.2fx %6.0f MB  %.2e, %.2e" % (
                    w, label, t, a.images / t, 100 * flops / (t * top[precision]), ratio,
                    t * top[precision] / flops, max(rss[key]), md, rl))
            print("  MFU: model FLOPs over s/run and the peak of the row's precision (fp32: FMA;\n"
                  "  bf16: the fastest of AMX, vdpbf16ps and FMA on this CPU); ceiling:\n"
                  "  1 / MFU, the most any implementation can be faster than the row")
            for precision in ("fp32", "bf16"):
                hc = times.get("hc-" + precision, [])
                others = [times[k] for k, _, p in systems
                          if p == precision and k[:3] != "hc-" and len(times[k]) == len(hc)]
                if hc and others:
                    print("  per round, the fastest other %s row over hc-%s: %s" % (
                        precision, precision, ", ".join(
                            "%.2fx" % (min(o[i] for o in others) / hc[i]) for i in range(len(hc)))))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
