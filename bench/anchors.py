#!/usr/bin/env -S /usr/bin/python3
"""hc against today's anchors on the same machine, in the same run (issue 48):
PyTorch 2.x eager and torch.compile, fp32 and bf16 autocast; ONNX Runtime
training; Debian's PyTorch 1.13, kept for history.

usage: /usr/bin/python3 bench/anchors.py --bin build/bin --work DIR
           [--models DiT-S/2,DiT-B/2] [--batch 32] [--rounds 5] [--steps 2]
           [--threads N] [--systems hc-fp32,...] [--timeout 3600]

Every system trains the same DiT (latent 4x32x32, 1000 classes, learned
sigma, the `mse` objective) at global batch --batch from the same initial
weights (the ones hc-compile writes beside the library) on random latents,
with AdamW at lr 1e-4, on --threads threads (default: every core). A step
is the whole of it: drawing t, noise and the label dropout, forward, loss,
backward and the update. Each run takes --warmup steps (default 4: PyTorch
eager's fp32 step falls from 11-13 s to 7.4 s over its first 5 steps on S/2
while its allocator settles, and torch.compile's first step compiles) and
then --steps timed ones; its time is their median. Rounds interleave the
systems; the table gives the median over rounds, MFU (model FLOPs: 3x the
forward's matrix products, from hc's step description) against the highest
peak of the row's precision measured in the rounds (FMA for fp32, the bf16
products' for bf16), the largest peak RSS, each time over hc's
at the same precision, and the most CPU time the hypervisor gave other
guests during the row's runs (steal, from /proc/stat). The highest peak,
because a disturbed measurement can only come out low: on the shared Zen 3
one round measured 92 GFLOP/s against 172-184 in the others, and the median
of two then halved the peak. A system that fails gets a row saying why.

Environments: tools/install-anchors.sh (PyTorch 2.x and ONNX Runtime
training, from PyPI); /usr/bin/python3 for Debian's PyTorch 1.13. Each
anchor is used as its documentation recommends for CPU training:
torch.set_num_threads(cores), torch.compile with inductor's default mode,
torch.autocast("cpu", bfloat16) over forward and loss with float32 master
weights, AdamW(fused=True) in 2.x (1.13 has no fused CPU AdamW); ONNX
Runtime training with intra_op_num_threads = cores (bench/anchors_ort.py).
PyTorch 2.x rows run with OMP_WAIT_POLICY=ACTIVE (OpenMP threads spin
between parallel regions): on S/2, compiled bf16 took 3.78-3.87 s/step with
it against 3.96-4.09 s passive. Debian's 1.13 keeps PASSIVE (train_torch.py's
default): its GEMMs run on OpenBLAS's own threads, which spinning OpenMP
threads starve (30.1 s/step active against 12.2 s passive, same machine).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEBIAN_PY = "/usr/bin/python3"
sys.path.insert(0, os.path.join(ROOT, "models"))
sys.path.insert(0, HERE)
from automem_budget import cpu_name  # noqa: E402
from step_description import description  # noqa: E402


def anchors():
    out = subprocess.run([os.path.join(ROOT, "tools", "install-anchors.sh"), "--where"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return out[-1], out[0].split(": ", 1)[1]


def cpu_facts():
    """The CPU's name with its family and model (a VM's name is often just
    "AMD EPYC": the family and model tell Zen 3 from Zen 4), and the ISA
    extensions the table reports."""
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if not key.strip():
                break  # the first CPU's block only
            fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    isa = [x for x in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if x in flags]
    name = cpu_name()
    if "cpu family" in fields and "model" in fields:
        name += " (family %s model %s)" % (fields["cpu family"], fields["model"])
    return name, isa


def torch_version(py):
    r = subprocess.run([py, "-c", "import torch; print(torch.__version__)"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unavailable"


class Failed(Exception):
    pass


def execute(cmd, env, timeout):
    try:
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed("timed out after %d s" % timeout)
    if r.returncode != 0:
        lines = [l for l in r.stdout.strip().splitlines() if l.strip()]
        raise Failed("exit %d: %s" % (r.returncode, lines[-1][:160] if lines else ""))
    return r.stdout


def metrics_of(path, warmup):
    rows = [json.loads(l) for l in open(path)]
    timed = [1.0 / r["steps_per_sec"] for r in rows[warmup:]]
    if not timed:
        raise Failed("no timed steps in %s" % path)
    return statistics.median(timed), max(r["peak_rss_mb"] for r in rows), rows[-1]["loss"]


def systems(a, torch_py, ort_py):
    """(key, label, precision, extra environment, command builder)."""
    def hc(precision):
        def cmd(m, metrics, steps):
            return [os.path.join(a.bin, "hc-run"), m["so"][precision], "--data", m["x"],
                    "--labels", m["y"], "--steps", str(steps), "--log-every", "1",
                    "--metrics", metrics, "--no-progress"]
        return cmd

    def torch_row(py, extra):
        def cmd(m, metrics, steps):
            return [py, os.path.join(ROOT, "models", "train_torch.py"), "--data", m["dir"],
                    "--model", m["model"], "--image-size", "32", "--in-channels", "4",
                    "--num-classes", "1000", "--batch", str(a.batch), "--steps", str(steps),
                    "--log-every", "1", "--metrics", metrics, "--threads", str(a.threads),
                    "--init-weights", m["init"], "--quiet"] + extra
        return cmd

    def ort(m, metrics, steps):
        return [ort_py, os.path.join(HERE, "anchors_ort.py"), "--onnx", m["onnx"],
                "--data", m["x"], "--labels", m["y"], "--work", m["ort_work"],
                "--batch", str(a.batch), "--steps", str(steps), "--threads", str(a.threads),
                "--metrics", metrics]
    t2, t1 = torch_version(torch_py), torch_version(DEBIAN_PY)
    fused = ["--fused-adamw"]
    omp = {"OMP_WAIT_POLICY": "ACTIVE"}
    return [
        ("hc-fp32", "hc fp32", "fp32", {}, hc("fp32")),
        ("hc-bf16", "hc bf16", "bf16", {}, hc("bf16")),
        ("torch-eager", "PyTorch %s eager fp32" % t2, "fp32", omp, torch_row(torch_py, fused)),
        ("torch-compile", "PyTorch %s torch.compile fp32" % t2, "fp32", omp,
         torch_row(torch_py, fused + ["--compile"])),
        ("torch-bf16", "PyTorch %s eager bf16 autocast" % t2, "bf16", omp,
         torch_row(torch_py, fused + ["--autocast", "bf16"])),
        ("torch-compile-bf16", "PyTorch %s torch.compile bf16 autocast" % t2, "bf16", omp,
         torch_row(torch_py, fused + ["--compile", "--autocast", "bf16"])),
        ("ort", "ONNX Runtime training 1.19.2 fp32", "fp32", {}, ort),
        ("torch113", "PyTorch %s eager fp32 (Debian)" % t1, "fp32",
         {"OMP_WAIT_POLICY": "PASSIVE"}, torch_row(DEBIAN_PY, [])),
    ]


def prepare(a, model):
    import numpy as np
    tag = model.replace("DiT-", "").replace("/", "")
    d = os.path.join(a.work, tag)
    os.makedirs(d, exist_ok=True)
    m = {"model": model, "dir": d, "onnx": os.path.join(d, "model.onnx"),
         "x": os.path.join(d, "images.npy"), "y": os.path.join(d, "labels.npy"),
         "ort_work": os.path.join(d, "ort"), "so": {}}
    if not os.path.exists(m["onnx"]):
        execute([DEBIAN_PY, os.path.join(ROOT, "models", "export_dit.py"), "--model", model,
                 "--image-size", "32", "--in-channels", "4", "--num-classes", "1000",
                 "--dynamic-batch", "--quiet", "-o", m["onnx"]], None, 1800)
    rng = np.random.default_rng(0)
    np.save(m["x"], rng.standard_normal((4 * a.batch, 4, 32, 32), dtype=np.float32))
    np.save(m["y"], rng.integers(0, 1000, 4 * a.batch).astype(np.int64))
    for precision in ("fp32", "bf16"):
        so = os.path.join(d, "%s.so" % precision)
        execute([os.path.join(a.bin, "hc-compile"), m["onnx"], "--batch", str(a.batch),
                 "--precision", precision, "-o", so], None, 1800)
        m["so"][precision] = so
    m["init"] = m["so"]["fp32"] + ".init.safetensors"
    # build/bin's libraries are in build/lib.
    libdir = os.path.join(os.path.dirname(a.bin), "lib")
    m["flops"] = description(m["so"]["fp32"], libdir)["model_flops_per_step"]
    return m


def cpu_ticks():
    """(steal, all) jiffies summed over the CPUs (/proc/stat): the share of
    a run's CPU time the hypervisor gave to other guests."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[7] if len(v) > 7 else 0, sum(v[:8])


def peak(a):
    out = execute([os.path.join(a.bin, "hc-bench-gemm"), "--peak-only", "--threads",
                   str(a.threads)], None, 120)
    f = dict(kv.split("=") for kv in out.split()[1:])
    fma = float(f["fma_gflops"]) * 1e9
    # bf16 products: the fastest unit that runs them, AMX tiles, vdpbf16ps
    # (0 where the CPU has neither) or the FMAs on rounded operands (hc's
    # emulation, PyTorch's too): the Emerald Rapids VM's vdpbf16ps runs at
    # half the FMA rate, where hc multiplies on the FMAs.
    bf16 = max(float(f["bf16_gflops"]), float(f.get("amx_gflops", 0))) * 1e9
    return fma, max(bf16, fma)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="DiT-S/2,DiT-B/2")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--systems", default=None, help="keys, comma-separated (default: all)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per run")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    os.makedirs(a.work, exist_ok=True)
    torch_py, ort_py = anchors()
    rows = systems(a, torch_py, ort_py)
    if a.systems:
        keep = a.systems.split(",")
        unknown = set(keep) - {r[0] for r in rows}
        if unknown:
            ap.error("unknown --systems %s (known: %s)" % (",".join(sorted(unknown)),
                                                           ",".join(r[0] for r in rows)))
        rows = [r for r in rows if r[0] in keep]
    cpu, isa = cpu_facts()
    env = dict(os.environ, HC_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    print("anchors: %s, %d threads, ISA %s; batch %d, %d rounds of %d warm-up and %d timed "
          "steps; %s" % (cpu, a.threads, " ".join(isa), a.batch, a.rounds, a.warmup, a.steps,
             time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())), flush=True)
    for model in a.models.split(","):
        m = prepare(a, model)
        times = {r[0]: [] for r in rows}
        rss, loss, why, peaks, steal = {}, {}, {}, [], {}
        for rnd in range(a.rounds):
            peaks.append(peak(a))
            line = []
            for key, label, precision, extra_env, cmd in rows:
                if key in why:
                    continue
                metrics = os.path.join(m["dir"], "m-%s.jsonl" % key)
                if os.path.exists(metrics):
                    os.remove(metrics)
                try:
                    s0, all0 = cpu_ticks()
                    execute(cmd(m, metrics, a.warmup + a.steps), dict(env, **extra_env),
                            a.timeout)
                    s1, all1 = cpu_ticks()
                    t, r, l = metrics_of(metrics, a.warmup)
                except Failed as e:
                    why[key] = str(e)
                    line.append("%s failed" % key)
                    continue
                times[key].append(t)
                steal.setdefault(key, []).append((s1 - s0) / max(1, all1 - all0))
                rss[key] = max(rss.get(key, 0), r)
                loss[key] = l
                line.append("%s %.3f (steal %.1f%%)" % (key, t, 100 * steal[key][-1]))
            print("%s round %d (peak %.1f GFLOP/s): %s" % (model, rnd + 1, peaks[-1][0] / 1e9,
                                                          ", ".join(line)), flush=True)
        report(a, m, rows, times, rss, loss, why, peaks, steal)


def report(a, m, rows, times, rss, loss, why, peaks, steal):
    top = {"fp32": max(p[0] for p in peaks), "bf16": max(p[1] for p in peaks)}
    med = {k: statistics.median(v) for k, v in times.items() if v}
    print("\n== %s, batch %d, %d threads: model FLOPs %.3g per step; FMA peak %.1f GFLOP/s, "
          "bf16 products' peak %.1f GFLOP/s (the highest of the rounds' peaks) ==" % (
              m["model"], a.batch, a.threads, m["flops"], top["fp32"] / 1e9, top["bf16"] / 1e9))
    print("%-44s %9s %9s %7s %10s %10s %9s %9s %6s" % ("system", "s/step", "min", "MFU",
                                                       "peak RSS", "vs hc", "ceiling", "loss",
                                                       "steal"))
    for key, label, precision, _, _ in rows:
        if key in why and key not in med:
            print("%-44s not measured: %s" % (label, why[key]))
            continue
        t = med[key]
        base = med.get("hc-" + precision)
        peak_ = top[precision]
        print("%-44s %9.3f %9.3f %6.1f%% %7.0f MB %9s %8.2fx %9.4f %5.1f%%%s" % (
            label, t, min(times[key]), 100 * m["flops"] / (t * peak_), rss[key],
            "%.2fx" % (t / base) if base else "-", t * peak_ / m["flops"], loss[key],
            100 * max(steal[key]), "  (failed later: %s)" % why[key] if key in why else ""))
    print("vs hc: the row's s/step over hc's at the same precision (above 1: hc is faster)\n"
          "MFU: model FLOPs over s/step and the peak of the row's precision (fp32: FMA; bf16:\n"
          "the bf16 products' peak: the fastest of AMX, vdpbf16ps and FMA on this CPU)\n"
          "ceiling: 1 / MFU, the most any implementation can be faster than this row on this CPU\n"
          "steal: the most CPU time, over the rounds, the hypervisor gave other guests during\n"
          "the row's runs (/proc/stat; 0 on bare metal; caches and memory shared with other\n"
          "guests slow a run without showing here)")
    # Per round: hc against that round's fastest other row at its precision
    # (the rounds are interleaved, so each ratio shares one state of the host).
    for precision in sorted({r[2] for r in rows}):
        hc = times.get("hc-" + precision, [])
        others = [times[r[0]] for r in rows if r[2] == precision and not r[0].startswith("hc-")
                  and len(times[r[0]]) == len(hc)]
        if hc and others:
            print("per round, the fastest other %s row over hc-%s: %s" % (
                precision, precision, ", ".join("%.2fx" % (min(o[i] for o in others) / hc[i])
                                                for i in range(len(hc)))))
    print(flush=True)


if __name__ == "__main__":
    main()
