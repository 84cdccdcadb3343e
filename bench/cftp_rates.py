#!/usr/bin/env -S /usr/bin/python3
"""Measures the kernel rates hc-cftp's cost model reads (hc-compile --rates FILE)
from hc-run --profile of a real step on this machine, and writes them as
`key value` lines.

usage: /usr/bin/python3 bench/cftp_rates.py --bin build/bin --work DIR
           [--model DiT-S/2] [--image 32] [--batch 8] [--steps 4] [-o FILE]

Two profiled runs of the same library (--cftp off): one kernel thread and
two; and one of its --precision bf16 twin on one thread. From the
one-thread runs, per thread:
  gemm_gflops_per_thread       FLOPs / seconds over the GEMM-class kernels
  attention_gflops_per_thread  the same over attention and its gradient
  gemm_bf16_gflops_per_thread, attention_bf16_gflops_per_thread
                               the same two in the bf16 library
  stream_gbps_per_thread       bytes moved / seconds over the kernels with
                               no FLOP rule (memory-bound)
  call_us                      median seconds per call of the kinds whose
                               calls move under 64 KiB (all overhead)
From the two-thread run:
  fork_us                      the same small kinds' extra seconds per call
                               on two threads (dispatch to a worker and back)
Not measured here (a line says so in the file): sync_us, the cost of a
cross-cluster wait that blocks, taken as 1 us (the hand-off itself is well
under that: gtest RunClusters.ProgressWaitsHandOffWithoutLostWakeups).
Run it under the bench lock (timed): flock /work/bench.lock /work/prof/quiet.sh ...
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
GEMM = {"linear", "linear_grad_input", "linear_grad_weight", "matmul", "linear_gelu",
        "linear_grad_input_gelu"}
ATTN = {"attention", "attention_grad", "cross_attention", "cross_attention_grad"}
NOT_KERNELS = {"allreduce_start", "allreduce_wait", "cluster_wait"}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def profile(a, so, threads, tag="fp32"):
    out = os.path.join(a.work, "profile-%s-%dt.json" % (tag, threads))
    env = dict(os.environ, HC_NUM_THREADS=str(threads))
    sh([os.path.join(a.bin, "hc-run"), so, "--data", "x.npy", "--labels", "y.npy", "--steps", str(a.steps),
        "--no-progress", "--profile", out], cwd=a.work, env=env)
    return json.load(open(out))


def small_call_seconds(p):
    per = {}
    for k in p["kinds"]:
        if k["kernel"] in NOT_KERNELS or k["calls_per_step"] <= 0:
            continue
        if k["bytes_per_step"] / k["calls_per_step"] < 64 * 1024:
            per[k["kernel"]] = k["seconds_per_step"] / k["calls_per_step"]
    return per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="DiT-S/2")
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("-o", "--out", default="")
    a = ap.parse_args()
    a.bin, a.work = os.path.abspath(a.bin), os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    onnx = os.path.join(a.work, "model.onnx")
    if not os.path.exists(onnx):
        sh([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", a.model, "--image-size", str(a.image),
            "--dynamic-batch", "-o", onnx, "--quiet"])
    so, so16 = os.path.join(a.work, "off.so"), os.path.join(a.work, "off-bf16.so")
    sh([os.path.join(a.bin, "hc-compile"), onnx, "--batch", str(a.batch), "--cftp", "off", "-o", so])
    sh([os.path.join(a.bin, "hc-compile"), onnx, "--batch", str(a.batch), "--cftp", "off",
        "--precision", "bf16", "-o", so16])
    import numpy as np
    r = np.random.default_rng(0)
    np.save(os.path.join(a.work, "x.npy"), r.uniform(-1, 1, (64, 4, a.image, a.image)).astype(np.float32))
    np.save(os.path.join(a.work, "y.npy"), r.integers(0, 1000, 64).astype(np.int64))
    one, two = profile(a, so, 1), profile(a, so, 2)
    one16 = profile(a, so16, 1, "bf16")

    def rate(p, names, field):
        ks = [k for k in p["kinds"] if k["kernel"] in names]
        return sum(k[field] for k in ks) / sum(k["seconds_per_step"] for k in ks)

    memory = {k["kernel"] for k in one["kinds"]
              if k["flops_per_step"] == 0 and k["kernel"] not in NOT_KERNELS}
    s1, s2 = small_call_seconds(one), small_call_seconds(two)
    call = statistics.median(s1.values())
    fork = statistics.median(max(s2[k] - s1[k], 0.0) for k in s1 if k in s2)
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    lines = [
        "# hc-cftp kernel rates (bench/cftp_rates.py), %s" % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "# %s; %s %dx%d batch %d, %d profiled steps at 1 and 2 threads (--cftp off)"
        % (cpu, a.model, a.image, a.image, a.batch, one["steps"]) + "; bf16: the --precision bf16 library at 1",
        "gemm_gflops_per_thread=%.1f" % (rate(one, GEMM, "flops_per_step") / 1e9),
        "attention_gflops_per_thread=%.1f" % (rate(one, ATTN, "flops_per_step") / 1e9),
        "gemm_bf16_gflops_per_thread=%.1f" % (rate(one16, GEMM, "flops_per_step") / 1e9),
        "attention_bf16_gflops_per_thread=%.1f" % (rate(one16, ATTN, "flops_per_step") / 1e9),
        "stream_gbps_per_thread=%.2f" % (rate(one, memory, "bytes_per_step") / 1e9),
        "call_us=%.2f" % max(call * 1e6, 0.01),
        "fork_us=%.2f" % max(fork * 1e6, 0.01),
        "# not measured: a blocking cross-cluster wait, taken as 1 us",
        "sync_us=1",
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
