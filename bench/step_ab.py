#!/usr/bin/env -S /usr/bin/python3
"""One DiT step, two builds of hc, the same machine, interleaved rounds: a
regression check for changes that touch every step (issue 46's update
gate, issue 47's access model).

usage: /usr/bin/python3 bench/step_ab.py --bin-a OLD/build/bin --bin-b build/bin
           --work DIR [--model DiT-S/2] [--batch 32] [--rounds 5] [--steps 3]
           [--no-ckpt] [--compile-a "FLAGS"] [--compile-b "FLAGS"]

--compile-a / --compile-b: hc-compile flags of one side (one build with
two plans: --bin-a build/bin --bin-b build/bin --compile-b
"--cftp-partial-grads on").

Each build compiles the same export with its own hc-compile and trains it
with its own hc-run (2 kernel threads, train mode, random data). B also
runs with --ckpt-dir (preemption armed: the step's update gate is on).
A run's time is the median of its steps after the first; the table gives
each round and the medians over rounds. Timings are not assertions.
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
sys.path.insert(0, HERE)
from automem_budget import cpu_name, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-a", required=True)
    ap.add_argument("--bin-b", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="DiT-S/2")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-ckpt", action="store_true", help="A and B only (no B with --ckpt-dir)")
    ap.add_argument("--compile-a", default="", help="hc-compile flags of A (space-separated)")
    ap.add_argument("--compile-b", default="", help="hc-compile flags of B (space-separated)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    onnx = os.path.join(a.work, "model.onnx")
    if not os.path.exists(onnx):
        run([PY, os.path.join(ROOT, "models", "export_dit.py"), "--model", a.model, "--image-size", "32",
             "--in-channels", "4", "--dynamic-batch", "--quiet", "-o", onnx])
    import numpy as np
    rng = np.random.default_rng(0)
    data, labels = os.path.join(a.work, "x.npy"), os.path.join(a.work, "y.npy")
    np.save(data, rng.standard_normal((4 * a.batch, 4, 32, 32), dtype=np.float32))
    np.save(labels, rng.integers(0, 1000, 4 * a.batch).astype(np.int64))
    libs = {}
    for tag, bin_, flags in (("A", a.bin_a, a.compile_a), ("B", a.bin_b, a.compile_b)):
        so = os.path.join(a.work, "%s.so" % tag)
        run([os.path.join(bin_, "hc-compile"), onnx, "--batch", str(a.batch), "-o", so] +
            flags.split())
        libs[tag] = (bin_, so)
    variants = [("A", "A", []), ("B", "B", [])]
    if not a.no_ckpt:
        variants.append(("B+ckpt", "B", ["--ckpt-dir", os.path.join(a.work, "ck")]))
    times = {v[0]: [] for v in variants}
    env = dict(os.environ, HC_NUM_THREADS="2")
    cpu = cpu_name()
    print("step_ab: %s (%s), %s batch %d, 2 threads; A = %s %s, B = %s %s" % (
        cpu, platform.machine(), a.model, a.batch, a.bin_a, a.compile_a, a.bin_b, a.compile_b))
    for r in range(a.rounds):
        line = []
        for name, tag, extra in variants:
            bin_, so = libs[tag]
            metrics = os.path.join(a.work, "m-%s.jsonl" % name)
            if os.path.exists(metrics):
                os.remove(metrics)
            subprocess.run(["rm", "-rf", os.path.join(a.work, "ck")])
            run([os.path.join(bin_, "hc-run"), so, "--data", data, "--labels", labels, "--steps",
                 str(a.steps), "--log-every", "1", "--metrics", metrics, "--no-progress"] + extra, env)
            rows = [json.loads(l) for l in open(metrics)]
            t = statistics.median(1.0 / x["steps_per_sec"] for x in rows[1:])
            times[name].append(t)
            line.append("%s %.3f s (loss %.6f)" % (name, t, rows[-1]["loss"]))
        print("round %d: %s" % (r + 1, " | ".join(line)))
    med = {n: statistics.median(v) for n, v in times.items()}
    print("median s/step: " + ", ".join("%s %.3f" % kv for kv in med.items()))
    print("B / A: %.3fx (bar 1.02x)" % (med["B"] / med["A"]) + (
        "" if a.no_ckpt else "; B with --ckpt-dir / A: %.3fx" % (med["B+ckpt"] / med["A"])))


if __name__ == "__main__":
    main()
