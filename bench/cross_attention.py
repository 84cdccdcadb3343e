#!/usr/bin/env -S /usr/bin/python3
"""Cross-attention against self-attention in one DiT step, from hc-run
--profile (issue 53): DiT-S/2 on 32x32 latents (N = 256 image tokens)
conditioned on a token sequence of L = 120 (PixArt-alpha's caption length),
so every block runs one self-attention (256 x 256) and one cross-attention
(256 x 120) with the same heads and head size.

usage: /usr/bin/python3 bench/cross_attention.py --work DIR [--bin build/bin]
           [--batch 8] [--steps 4] [--rounds 3] [--tokens 120] [--token-dim 384]

Per round one hc-run --profile of --steps train-mode steps (the first left
out by the profiler); the table gives each kernel kind's GFLOP/s per round
(the compiler's FLOP counts: 4 B N L D forward, 2.5x that backward), the
medians, and cross over self. The FMA peak is the profiler's, measured in
the same run. Timings are not assertions.
"""
import argparse
import json
import os
import platform
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
sys.path.insert(0, HERE)
from automem_budget import cpu_name, run  # noqa: E402

KINDS = ("attention", "cross_attention", "attention_grad", "cross_attention_grad")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=120)
    ap.add_argument("--token-dim", type=int, default=384)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    w = lambda *p: os.path.join(a.work, *p)
    import numpy as np
    run([PY, os.path.join(ROOT, "models", "export_dit.py"), "--model", "DiT-S/2", "--image-size",
         "32", "--in-channels", "4", "--num-classes", "0", "--dynamic-batch", "--quiet",
         "--cond", "tokens:txt:%d:%d" % (a.tokens, a.token_dim), "-o", w("model.onnx")])
    run([os.path.join(a.bin, "hc-compile"), w("model.onnx"), "--batch", str(a.batch), "-o",
         w("step.so")])
    rng = np.random.default_rng(0)
    np.save(w("x.npy"), rng.standard_normal((4 * a.batch, 4, 32, 32), dtype=np.float32))
    np.save(w("txt.npy"), rng.standard_normal((4 * a.batch, a.tokens, a.token_dim),
                                              dtype=np.float32))
    env = dict(os.environ, HC_NUM_THREADS=str(os.cpu_count()))
    rounds = []
    for r in range(a.rounds):
        prof = w("profile.%d.json" % r)
        run([os.path.join(a.bin, "hc-run"), w("step.so"), "--data", w("x.npy"), "--cond",
             "txt=" + w("txt.npy"), "--steps", str(a.steps), "--no-progress", "--profile", prof],
            env=env)
        with open(prof) as f:
            p = json.load(f)
        kinds = {k["kernel"]: k for k in p["kinds"]}
        missing = [k for k in KINDS if k not in kinds]
        if missing:
            sys.exit("bench: the profile has no %s kind (%s)" % (", ".join(missing), prof))
        rounds.append({k: kinds[k]["gflops"] for k in KINDS})
        rounds[-1]["peak"] = p["machine"]["fma_peak_gflops"]
        rounds[-1]["isa"] = p["machine"]["isa"]
        rounds[-1]["threads"] = p["machine"]["threads"]
    print("cross_attention: %s (%s, %s, %d threads), DiT-S/2 N = 256, L = %d, batch %d, "
          "%d steps x %d rounds" % (cpu_name(), platform.machine(), rounds[0]["isa"],
                                     rounds[0]["threads"], a.tokens, a.batch, a.steps, a.rounds))
    print("%-8s %10s %10s %10s %10s %10s" % ("round", "self fwd", "cross fwd", "self bwd",
                                             "cross bwd", "FMA peak"))
    for i, r in enumerate(rounds):
        print("%-8d %10.1f %10.1f %10.1f %10.1f %10.1f" % (i + 1, r["attention"],
              r["cross_attention"], r["attention_grad"], r["cross_attention_grad"], r["peak"]))
    med = {k: statistics.median(r[k] for r in rounds) for k in KINDS + ("peak",)}
    print("%-8s %10.1f %10.1f %10.1f %10.1f %10.1f  GFLOP/s" % (
        "median", med["attention"], med["cross_attention"], med["attention_grad"],
        med["cross_attention_grad"], med["peak"]))
    print("cross / self: forward %.2fx, backward %.2fx; of the FMA peak: self %.0f%% / %.0f%%, "
          "cross %.0f%% / %.0f%%" % (
              med["cross_attention"] / med["attention"],
              med["cross_attention_grad"] / med["attention_grad"],
              100 * med["attention"] / med["peak"], 100 * med["attention_grad"] / med["peak"],
              100 * med["cross_attention"] / med["peak"],
              100 * med["cross_attention_grad"] / med["peak"]))


if __name__ == "__main__":
    main()
