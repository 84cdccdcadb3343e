#!/usr/bin/env python3
"""hc against the machine's own PyTorch 2.x on a lent many-core machine
(the `device` of the project's tools: no MLIR, no Debian packages, no
network), one round, indicative (bench/anchors.py is the interleaved,
5-round table of the developer's machine).

Carried from the developer's machine (build/, ignored by git; build/devrun
is what bench/device_prepare.sh makes):
  build/bin/hc-run, build/bin/hc-bench-gemm, build/lib/libhcrt.so,
  build/devrun/s2_fp32.so, s2_bf16.so (hc-compile --batch 32 --topology of
  the lent machine), s2.init.header.json (the init file's safetensors
  header: weights are drawn here, N(0, 0.02), never carried),
  build/devrun/debs/*.deb (Debian 12's Open MPI and the libraries hc-run
  links, unpacked with dpkg -x).

  build/test/runtime/hcrt-kernel-tests (--gtest FILTER: the kernel tests
  run there first, on that CPU's paths: AMX's real tiles).

usage: python3 bench/device_anchors.py --out DIR [--work DIR] [--threads N]
       [--steps 6] [--systems LIST] [--gtest FILTER] [--gemm] [--profile]
--gemm: hc-bench-gemm --precision bf16 on S/2's shapes (M = 8192) at the
  given threads and at 1, with AMX and with HC_AMX=0.
--profile: one more hc-bf16 run under hc-run --profile (its table kept).
hc-bf16-noamx: hc-bf16 with HC_AMX=0 (the bf16 GEMMs off the tiles).
Every system trains DiT-S/2 (4x32x32 latents, 1000 classes) at batch 32
from the same weights with AdamW; the first half of the steps are warm-up,
the table gives the median of the rest, MFU against hc-bench-gemm's FMA
peak measured in the same run, and peak RSS."""
import argparse
import glob
import json
import os
import statistics
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RUN = os.path.join(ROOT, "build", "devrun")


def unpack_debs(dest):
    for deb in sorted(glob.glob(os.path.join(RUN, "debs", "*.deb"))):
        subprocess.run(["dpkg-deb", "-x", deb, dest], check=True)
    lib = os.path.join(dest, "usr", "lib", "x86_64-linux-gnu")
    return {"OPAL_PREFIX": os.path.join(dest, "usr"),
            "PMIX_INSTALL_PREFIX": os.path.join(lib, "pmix2"),
            "LD_LIBRARY_PATH": ":".join([os.path.join(ROOT, "build", "lib"), lib,
                                         os.path.join(lib, "openmpi", "lib"),
                                         os.path.join(dest, "lib", "x86_64-linux-gnu")])}


def random_weights(path):
    """The init file's tensors, drawn N(0, 0.02), under the carried header."""
    header = json.loads(open(os.path.join(RUN, "s2.init.header.json")).read())
    rng = np.random.default_rng(0)
    out = {}
    end = 0
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", name
        end = max(end, e["data_offsets"][1])
    buf = np.zeros(end // 4, np.float32)
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, t = e["data_offsets"]
        buf[b // 4:t // 4] = rng.standard_normal((t - b) // 4).astype(np.float32) * 0.02
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + buf.tobytes())
    return path


def median_step(metrics, warm):
    rows = [json.loads(l) for l in open(metrics)]
    timed = [1.0 / r["steps_per_sec"] for r in rows[warm:] if r.get("steps_per_sec")]
    return statistics.median(timed), max(r.get("peak_rss_mb", 0) for r in rows), rows[-1]["loss"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", help="scratch (data, weights): default OUT/work")
    ap.add_argument("--gtest", help="run hcrt-kernel-tests with this filter first")
    ap.add_argument("--gemm", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--systems", default="hc-fp32,hc-bf16,torch-eager,torch-compile,"
                                         "torch-bf16,torch-compile-bf16")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = a.work or os.path.join(a.out, "work")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, **unpack_debs(os.path.join(work, "deb")),
               HC_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    def tool(name, args, out, extra_env=None, timeout=300):
        p = subprocess.run([os.path.join(ROOT, "build", *name)] + args,
                           env=dict(env, **(extra_env or {})), capture_output=True,
                           text=True, timeout=timeout)
        with open(os.path.join(a.out, out), "a") as f:
            f.write("$ %s %s%s (exit %d)\n%s%s\n" % (
                " ".join("%s=%s" % kv for kv in (extra_env or {}).items()), name[-1],
                " " + " ".join(args), p.returncode, p.stdout[-6000:], p.stderr[-2000:]))
        print("%s: exit %d" % (name[-1], p.returncode), flush=True)
    if a.gtest:
        tool(("test", "runtime", "hcrt-kernel-tests"), ["--gtest_filter=" + a.gtest], "gtest.txt")
    if a.gemm:
        for th in (str(a.threads), "1"):
            for amx in ("1", "0"):
                tool(("bin", "hc-bench-gemm"), ["--precision", "bf16", "--model", "S", "--m",
                                                "8192", "--threads", th, "--reps", "5"],
                     "gemm.txt", {"HC_AMX": amx})
    rng = np.random.default_rng(0)
    np.save(os.path.join(work, "images.npy"), rng.standard_normal((128, 4, 32, 32), dtype=np.float32))
    np.save(os.path.join(work, "labels.npy"), rng.integers(0, 1000, 128).astype(np.int64))
    init = random_weights(os.path.join(work, "init.safetensors"))
    flags = open("/proc/cpuinfo").read()
    isa = [x for x in ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if " " + x in flags]
    model = next((l.split(":", 1)[1].strip() for l in flags.splitlines()
                  if l.startswith("model name")), "?")
    import torch
    lines = ["# DiT-S/2 batch 32, %s, %d threads, ISA %s, PyTorch %s, one round, %d steps "
             "(median of the last %d)" % (model, a.threads, " ".join(isa), torch.__version__,
                                          a.steps, a.steps - a.steps // 2)]
    peak = subprocess.run([os.path.join(ROOT, "build", "bin", "hc-bench-gemm"), "--peak-only",
                           "--threads", str(a.threads)], env=env, capture_output=True,
                          text=True, timeout=120)
    lines.append("# peak: " + (peak.stdout.strip() or peak.stderr.strip()[-200:]))
    fma = float(dict(kv.split("=") for kv in peak.stdout.split()[1:]).get("fma_gflops", "nan")) \
        if peak.returncode == 0 else float("nan")
    flops = 1162689380352.0
    torch_cmd = [sys.executable, os.path.join(ROOT, "models", "train_torch.py"), "--data", work,
                 "--model", "DiT-S/2", "--image-size", "32", "--in-channels", "4",
                 "--num-classes", "1000", "--batch", "32", "--steps", str(a.steps),
                 "--log-every", "1", "--threads", str(a.threads), "--init-weights", init,
                 "--quiet", "--fused-adamw"]
    systems = {
        "hc-fp32": [os.path.join(ROOT, "build", "bin", "hc-run"), os.path.join(RUN, "s2_fp32.so")],
        "hc-bf16": [os.path.join(ROOT, "build", "bin", "hc-run"), os.path.join(RUN, "s2_bf16.so")],
        "hc-bf16-noamx": [os.path.join(ROOT, "build", "bin", "hc-run"),
                          os.path.join(RUN, "s2_bf16.so")],
        "torch-eager": torch_cmd, "torch-compile": torch_cmd + ["--compile"],
        "torch-bf16": torch_cmd + ["--autocast", "bf16"],
        "torch-compile-bf16": torch_cmd + ["--compile", "--autocast", "bf16"]}
    results = {}
    for key in a.systems.split(","):
        metrics = os.path.join(work, key + ".jsonl")
        cmd = systems[key] + ["--metrics", metrics]
        if key.startswith("hc"):
            cmd += ["--init", init, "--data", os.path.join(work, "images.npy"), "--labels",
                    os.path.join(work, "labels.npy"), "--steps", str(a.steps), "--log-every",
                    "1", "--no-progress"]
        e = dict(env, OMP_WAIT_POLICY="ACTIVE") if key.startswith("torch") else env
        if key == "hc-bf16-noamx":
            e = dict(env, HC_AMX="0")
        t0 = time.time()
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=420)
        if p.returncode != 0:
            results[key] = "failed (exit %d): %s" % (p.returncode,
                                                     (p.stderr or p.stdout).strip()[-300:])
        else:
            s, rss, loss = median_step(metrics, a.steps // 2)
            results[key] = (s, rss, loss, time.time() - t0)
        lines.append("%-20s %s" % (key, results[key]))
        print(lines[-1], flush=True)
    lines.append("")
    base = {"fp32": results.get("hc-fp32"), "bf16": results.get("hc-bf16")}
    lines.append("%-20s %9s %7s %9s %10s" % ("system", "s/step", "MFU", "RSS MB", "x hc"))
    for key, r in results.items():
        if isinstance(r, str):
            lines.append("%-20s %s" % (key, r))
            continue
        ref = base["bf16" if "bf16" in key else "fp32"]
        ratio = r[0] / ref[0] if isinstance(ref, tuple) else float("nan")
        lines.append("%-20s %9.3f %6.1f%% %9.0f %9.2fx" % (key, r[0], 100 * flops / r[0] / (fma * 1e9),
                                                         r[1], ratio))
    if a.profile:
        prof = os.path.join(work, "profile.json")
        tool(("bin", "hc-run"), [os.path.join(RUN, "s2_bf16.so"), "--init", init, "--data",
                                 os.path.join(work, "images.npy"), "--labels",
                                 os.path.join(work, "labels.npy"), "--steps", "4",
                                 "--no-progress", "--profile", prof], "profile.txt")
    text = "\n".join(lines) + "\n"
    print(text)
    open(os.path.join(a.out, "table.txt"), "w").write(text)


if __name__ == "__main__":
    main()
