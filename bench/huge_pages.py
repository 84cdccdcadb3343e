#!/usr/bin/env -S /usr/bin/python3
"""Transparent huge pages for the step's arenas, on and off (issue 35).

usage: /usr/bin/python3 bench/huge_pages.py --bin build/bin --work DIR --onnx MODEL.onnx
           [--batch 32] [--rounds 5] [--steps 4] [--threads 2]

Compiles the model once and trains it in train mode on random data,
interleaving HC_HUGE_PAGES=1 (the default: arenas 2 MiB-aligned with
madvise(MADV_HUGEPAGE)) and HC_HUGE_PAGES=0 (MADV_NOHUGEPAGE) round by
round. A run's step time is the median of its steps after the first; the
process's AnonHugePages is read once from /proc/PID/smaps_rollup a few
seconds in (--sample-after).
Prints per round and the medians; the machine's THP mode is printed too.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from automem_budget import cpu_name, run  # noqa: E402


def train(args, lib, data, labels, huge):
    metrics = os.path.join(args.work, "metrics-huge%d.jsonl" % huge)
    if os.path.exists(metrics):
        os.remove(metrics)
    env = dict(os.environ, HC_NUM_THREADS=str(args.threads), HC_HUGE_PAGES=str(huge))
    p = subprocess.Popen([os.path.join(args.bin, "hc-run"), lib, "--data", data, "--labels",
                          labels, "--steps", str(args.steps), "--log-every", "1", "--metrics",
                          metrics, "--no-progress"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    # One look, a few seconds in (the arenas are touched by then): reading
    # smaps_rollup walks the page tables, which, repeated, slows a process
    # without huge pages measurably.
    most = 0
    time.sleep(args.sample_after)
    try:
        with open("/proc/%d/smaps_rollup" % p.pid) as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    most = int(line.split()[1]) * 1024
    except OSError:
        pass
    p.wait()
    if p.returncode != 0:
        sys.exit("hc-run failed: " + p.stderr.read())
    rows = [json.loads(line) for line in open(metrics)]
    return statistics.median(1.0 / r["steps_per_sec"] for r in rows[1:]), most


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sample-after", type=float, default=5.0,
                    help="seconds into a run to read its AnonHugePages")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    import numpy as np
    lib = os.path.join(args.work, "step.so")
    run([os.path.join(args.bin, "hc-compile"), args.onnx, "--batch", str(args.batch), "-o", lib])
    rng = np.random.default_rng(0)
    data, labels = os.path.join(args.work, "x.npy"), os.path.join(args.work, "y.npy")
    shape = None
    for line in run([os.path.join(args.bin, "hc-compile"), args.onnx, "--batch", "1",
                     "--emit=schedule"]).splitlines():
        if 'hcs.input "x_t"' in line:
            shape = [int(d) for d in line.split("memref<")[1].split("xf32")[0].split("x")][1:]
            break
    np.save(data, rng.standard_normal([8 * args.batch] + shape, dtype=np.float32))
    np.save(labels, rng.integers(0, 1000, 8 * args.batch).astype(np.int64))
    mode = open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()
    print("huge_pages: %s, %s batch %d, %d threads; THP mode: %s" % (
        cpu_name(), os.path.basename(args.onnx), args.batch, args.threads, mode))
    on, off = [], []
    for r in range(args.rounds):
        t1, h1 = train(args, lib, data, labels, 1)
        t0, h0 = train(args, lib, data, labels, 0)
        on.append(t1)
        off.append(t0)
        print("round %d: huge pages %.3f s/step (%.0f MB of THP) | plain %.3f s/step (%.0f MB)"
              % (r + 1, t1, h1 / 1e6, t0, h0 / 1e6))
    print("median s/step: huge pages %.3f, plain %.3f: huge/plain %.3f" % (
        statistics.median(on), statistics.median(off),
        statistics.median(on) / statistics.median(off)))


if __name__ == "__main__":
    main()
