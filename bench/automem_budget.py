#!/usr/bin/env -S /usr/bin/python3
"""A memory-budgeted DiT step against the unbudgeted one (issue 35).

usage: /usr/bin/python3 bench/automem_budget.py --bin build/bin --work DIR
           [--model DiT-S/2] [--batch 32] [--image 32 --channels 4]
           [--fraction 0.6] [--rounds 5] [--steps 4] [--onnx FILE]

1. exports the model (models/export_dit.py; or takes --onnx), compiles it
   unbudgeted, runs it once and reads its peak RSS (hc-run's metrics,
   VmHWM);
2. compiles it again with --mem-budget = fraction x that peak
   (hc-automem recomputes activations, chosen by its cost model, until the
   plan fits);
3. runs both, interleaved round by round, 2 kernel threads, train mode on
   random data; a run's step time is the median of its steps after the
   first; prints per round and the medians over rounds, the peak RSS of
   each run against the budget, and what the plan decided.
Timings are not assertions: this is a benchmark, run it on a quiet machine.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
sys.path.insert(0, os.path.join(ROOT, "models"))
from step_description import description  # noqa: E402


def run(cmd, env=None):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout[-3000:]))
    return r.stdout


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def train(args, lib, data, labels, tag):
    metrics = os.path.join(args.work, "metrics-%s.jsonl" % tag)
    if os.path.exists(metrics):
        os.remove(metrics)
    env = dict(os.environ, HC_NUM_THREADS=str(args.threads))
    run([os.path.join(args.bin, "hc-run"), lib, "--data", data, "--labels", labels,
         "--steps", str(args.steps), "--log-every", "1", "--metrics", metrics,
         "--no-progress"], env)
    rows = [json.loads(line) for line in open(metrics)]
    times = [1.0 / r["steps_per_sec"] for r in rows[1:]]
    return statistics.median(times), max(r["peak_rss_mb"] for r in rows) * 2**20, rows[-1]["loss"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="DiT-S/2")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--channels", type=int, default=4)
    ap.add_argument("--fraction", type=float, default=0.6)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--onnx", help="an exported model (default: export one)")
    ap.add_argument("--libdir", help="where libhcrt.so is (default: BIN/../lib)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    args.libdir = args.libdir or os.path.join(os.path.dirname(os.path.abspath(args.bin)), "lib")
    onnx = args.onnx
    if not onnx:
        onnx = os.path.join(args.work, "model.onnx")
        run([PY, os.path.join(ROOT, "models", "export_dit.py"), "--model", args.model,
             "--image-size", str(args.image), "--in-channels", str(args.channels),
             "--dynamic-batch", "--quiet", "-o", onnx])
    import numpy as np
    rng = np.random.default_rng(0)
    data = os.path.join(args.work, "x.npy")
    labels = os.path.join(args.work, "y.npy")
    np.save(data, rng.standard_normal((8 * args.batch, args.channels, args.image, args.image),
                                      dtype=np.float32))
    np.save(labels, rng.integers(0, 1000, 8 * args.batch).astype(np.int64))
    compile_ = os.path.join(args.bin, "hc-compile")
    base = os.path.join(args.work, "base.so")
    run([compile_, onnx, "--batch", str(args.batch), "-o", base])
    _, peak, _ = train(args, base, data, labels, "probe")
    budget = int(args.fraction * peak)
    budgeted = os.path.join(args.work, "budget.so")
    run([compile_, onnx, "--batch", str(args.batch), "--mem-budget", str(budget), "-o", budgeted])
    plan = description(budgeted, args.libdir)["memory_plan"]
    print("automem_budget: %s, %s at batch %d (%dx%dx%d), %d threads, %s" % (
        cpu_name(), args.model, args.batch, args.channels, args.image, args.image,
        args.threads, subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                     stdout=subprocess.PIPE, text=True).stdout.strip()))
    print("unbudgeted peak RSS %.0f MB; budget %.2f x = %d bytes (%.0f MB)" % (
        peak / 1e6, args.fraction, budget, budget / 1e6))
    print("plan: %d recomputed calls (cost model: %.3f s/step), planned %.0f MB, "
          "activations %.0f MB" % (plan["recomputed_calls"], plan["recompute_seconds_predicted"],
                                   plan["planned_bytes"] / 1e6,
                                   plan["tiers"][-1]["arena_bytes"]["act"] / 1e6))
    print("segments recomputed: %d; the other plans: %s" % (plan.get("segments", 0),
                                                            plan.get("other_plan") or "none"))
    base_t, bud_t, base_rss, bud_rss = [], [], [], []
    for r in range(args.rounds):
        t0, rss0, l0 = train(args, base, data, labels, "base")
        t1, rss1, l1 = train(args, budgeted, data, labels, "budget")
        base_t.append(t0)
        bud_t.append(t1)
        base_rss.append(rss0)
        bud_rss.append(rss1)
        print("round %d: unbudgeted %.3f s/step %.0f MB loss %.6f | budgeted %.3f s/step "
              "%.0f MB loss %.6f" % (r + 1, t0, rss0 / 1e6, l0, t1, rss1 / 1e6, l1))
    mb, mu = statistics.median(bud_t), statistics.median(base_t)
    print("median s/step: unbudgeted %.3f, budgeted %.3f: %.3fx (bar 1.15x)" % (mu, mb, mb / mu))
    print("peak RSS: unbudgeted %.0f MB, budgeted %.0f MB = %.3f x budget (bar 1.10)" % (
        max(base_rss) / 1e6, max(bud_rss) / 1e6, max(bud_rss) / budget))


if __name__ == "__main__":
    main()
