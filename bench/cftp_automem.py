#!/usr/bin/env -S /usr/bin/python3
"""CFTP and AutoMem composed (issue 47): a budgeted step with tier copies on
two cluster streams against the same budget on one stream (--cftp off, the
plan hc-cftp fell back to before the access model), and both against the
unbudgeted two-stream step.

usage: /usr/bin/python3 bench/cftp_automem.py --bin build/bin --work DIR
           [--model DiT-S/2] [--batch 32] [--fraction 0.6] [--rounds 5]
           [--steps 4] [--precision fp32|bf16] [--disk] [--rates R]
           [--recompute auto|off] [--comm-cores N]
           [--bin-old OLD/build/bin]

--bin-old adds the same budget compiled and run by an older build (6cdebe6,
whose hc-cftp switched itself off under any budget that moved data): the
one-stream plan the issue compares against, by the build that made it.

The budget is --fraction of the unbudgeted plan's planned bytes (arenas and
reserve, from a compile with an unbounded budget); --disk puts the
overflow on a disk tier in WORK/offload. The libraries run interleaved
round by round in train mode on random data, 2 kernel threads; a run's
step time is the median of its steps after the first. Timings are not
assertions: run it on a quiet machine.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
sys.path.insert(0, os.path.join(ROOT, "models"))
from step_description import description  # noqa: E402

sys.path.insert(0, HERE)
from automem_budget import cpu_name, run  # noqa: E402


def cpu():
    """The CPU's name (automem_budget.cpu_name) and the widest ISA it offers."""
    flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
    isa = "avx512_bf16" if "avx512_bf16" in flags else "avx512f" if "avx512f" in flags else \
        "avx2" if "avx2" in flags else "generic"
    return "%s (%s)" % (cpu_name(), isa)


def train(args, lib, data, labels, tag, bin_dir):
    metrics = os.path.join(args.work, "metrics-%s.jsonl" % tag)
    if os.path.exists(metrics):
        os.remove(metrics)
    env = dict(os.environ, HC_NUM_THREADS=str(args.threads))
    run([os.path.join(bin_dir, "hc-run"), lib, "--data", data, "--labels", labels,
         "--steps", str(args.steps), "--log-every", "1", "--metrics", metrics,
         "--no-progress"], env)
    rows = [json.loads(line) for line in open(metrics)]
    times = [1.0 / r["steps_per_sec"] for r in rows[1:]]
    # seconds per step the kernels waited on tier copies (hc-run's metrics)
    stall = statistics.median([r.get("copy_stall_s", 0.0) for r in rows[1:]])
    return statistics.median(times), rows[-1]["loss"], rows[-1].get("copy_mb_disk", 0) + \
        rows[-1].get("copy_mb", 0), stall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="DiT-S/2")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--fraction", type=float, default=0.6)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--disk", action="store_true")
    ap.add_argument("--offload-dir", default="",
                    help="the disk tier's folder (default WORK/offload; a tmpfs such as /dev/shm "
                         "takes the device's noise out of the comparison)")
    ap.add_argument("--bin-old", default="", help="an older build's bin folder (a fourth system)")
    ap.add_argument("--systems", default="",
                    help="comma-separated subset of unbudgeted,budget-2streams,budget-1stream,old-budget "
                         "and the budget-lookaheadN of --lookaheads")
    ap.add_argument("--rates", default="",
                    help="hc-compile --rates (a --bin-old build before --rates took --mem-rates "
                         "memory=GBPS)")
    ap.add_argument("--recompute", default="auto", choices=["auto", "off"],
                    help="hc-compile --mem-recompute: off meets the budget by tier copies alone, "
                         "without distorting the kernels' rates as pricing recomputation out "
                         "through --rates did")
    ap.add_argument("--lookaheads", default="",
                    help="comma-separated hc-compile --mem-lookahead values: one more budgeted "
                         "system each, budget-lookaheadN (budget-2streams has the default, auto)")
    ap.add_argument("--comm-cores", type=int, default=0,
                    help="hc-compile --comm-cores (a core of its own for the copy engine)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    onnx = os.path.join(args.work, "model.onnx")
    if not os.path.exists(onnx):
        run([PY, os.path.join(ROOT, "models", "export_dit.py"), "--model", args.model,
             "--image-size", "32", "--in-channels", "4", "--dynamic-batch", "--quiet", "-o", onnx])
    import numpy as np
    rng = np.random.default_rng(0)
    data, labels = os.path.join(args.work, "x.npy"), os.path.join(args.work, "y.npy")
    np.save(data, rng.standard_normal((8 * args.batch, 4, 32, 32), dtype=np.float32))
    np.save(labels, rng.integers(0, 1000, 8 * args.batch).astype(np.int64))
    base = [os.path.join(args.bin, "hc-compile"), onnx, "--batch", str(args.batch),
            "--precision", args.precision] + \
        (["--comm-cores", str(args.comm_cores)] if args.comm_cores else [])
    probe = run(base + ["--mem-budget", str(1 << 50), "--emit=schedule"])
    planned = int(re.search(r"planned_bytes = (\d+) : i64", probe).group(1)) if \
        "planned_bytes" in probe else None
    if planned is None:
        arenas = {k: int(v) for k, v in re.findall(
            r"(\w+) = (\d+) : i64", re.search(r"hcs.arena_bytes = \{([^}]*)\}", probe).group(1))}
        planned = sum(arenas.values()) + int(re.search(r"reserve = (\d+)[,>]", probe).group(1))
    budget = int(args.fraction * planned)
    tier = ["--mem-budget", str(budget)] + (["--rates", args.rates] if args.rates else []) + \
        (["--mem-recompute", "off"] if args.recompute == "off" else [])
    if args.disk:
        offload = args.offload_dir or os.path.join(args.work, "offload")
        os.makedirs(offload, exist_ok=True)
        tier += ["--offload-dir", offload]
    libs, bins = {}, {}
    systems = [("unbudgeted", args.bin, []), ("budget-2streams", args.bin, tier),
               ("budget-1stream", args.bin, tier + ["--cftp", "off"])]
    for n in filter(None, args.lookaheads.split(",")):
        systems.append(("budget-lookahead%s" % n, args.bin, tier + ["--mem-lookahead", n]))
    if args.bin_old:
        # Builds before --mem-recompute priced recomputation out by rates
        # (--rates, or --mem-rates before it; hc-cftp was off then under a
        # budget that moved data, so the rates changed nothing else).
        old = tier
        helptext = subprocess.run([os.path.join(args.bin_old, "hc-compile"), "--help"],
                                  capture_output=True, text=True).stdout
        if args.recompute == "off" and "--mem-recompute" not in helptext:
            old = [f for f in tier if f not in ("--mem-recompute", "off")] + (
                ["--rates", "stream_gbps_per_thread=0.001"] if "--rates" in helptext
                else ["--mem-rates", "memory=0.001"])
        systems.append(("old-budget", args.bin_old, old))
    if args.systems:
        systems = [x for x in systems if x[0] in args.systems.split(",")]
    for name, bin_dir, flags in systems:
        so = os.path.join(args.work, "%s-%s.so" % (name, args.precision))
        cmd = [os.path.join(bin_dir, "hc-compile")] + base[1:] + flags
        run(cmd + ["-o", so])
        libs[name], bins[name] = so, bin_dir
        sched = run(cmd + ["--emit=schedule"])
        cftp = re.search(r"hcs.cftp = (\{[^}]*\})", sched)
        try:
            mem = description(so, os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "lib"))["memory_plan"]
        except Exception as e:  # an older build's description may differ
            print("%-16s (no memory plan read: %s)" % (name, e))
            mem = {}
        print("%-16s planned %.0f MB, recomputed calls %d, copies offload %.0f MB prefetch %.0f MB "
              "per step, hcs.cftp %s" % (
            name, mem.get("planned_bytes", 0) / 1e6, mem.get("recomputed_calls", 0), mem.get("offload_bytes_per_step", 0) / 1e6,
            mem.get("prefetch_bytes_per_step", 0) / 1e6,
            cftp.group(1)[:160] if cftp else "(none)"))
    print("cftp_automem: %s, %s batch %d %s, budget %.2f x %d = %d bytes%s, %d threads, %s" % (
        cpu(), args.model, args.batch, args.precision, args.fraction, planned, budget,
        " (disk tier in %s)" % (args.offload_dir or "WORK/offload") if args.disk else "", args.threads,
        subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                       stdout=subprocess.PIPE, text=True).stdout.strip()))
    times = {n: [] for n in libs}
    losses = {n: [] for n in libs}
    stalls = {n: [] for n in libs}
    for r in range(args.rounds):
        line = []
        for n, so in libs.items():
            t, loss, mb, stall = train(args, so, data, labels, n, bins[n])
            times[n].append(t)
            losses[n].append(loss)
            stalls[n].append(stall)
            line.append("%s %.3f s (loss %.6f, %.0f MB copied, %.3f s stalled)" % (
                n, t, loss, mb, stall))
        print("round %d: %s" % (r + 1, " | ".join(line)))
    med = {n: statistics.median(v) for n, v in times.items()}
    print("median s/step: " + ", ".join("%s %.3f" % (n, m) for n, m in med.items()))
    print("median s/step waiting on copies: " + ", ".join(
        "%s %.3f" % (n, statistics.median(v)) for n, v in stalls.items()))
    if "budget-1stream" in med:
        print("two streams / one stream (same budget): %.3fx (bar 1.02x)"
              % (med["budget-2streams"] / med["budget-1stream"]))
    if "unbudgeted" in med:
        print("two streams budgeted / unbudgeted: %.3fx" % (med["budget-2streams"] / med["unbudgeted"]))
    if "old-budget" in med:
        print("two streams / the older build's budgeted step: %.3fx (bar 1.02x)"
              % (med["budget-2streams"] / med["old-budget"]))


if __name__ == "__main__":
    main()
