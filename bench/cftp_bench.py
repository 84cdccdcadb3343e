#!/usr/bin/env -S /usr/bin/python3
"""CFTP against data parallelism and the unsplit step on this machine's cores
(issue 33): one global batch, three ways to spend two cores.

usage: /usr/bin/python3 bench/cftp_bench.py --bin build/bin --work DIR
           [--models DiT-S/2,DiT-B/2] [--image 32] [--global-batch 32]
           [--rounds 5] [--steps 5] [-o FILE]

Configurations, interleaved round by round (each run under
`flock /work/bench.lock /work/prof/quiet.sh`; a run's step time is the mean
of its steps after the first two; medians over rounds):
  cftp      one process, global batch, hc-compile --clusters 2 (--cftp on,
            the default): one stream per cluster of one core
  off       the same library built with --cftp off: every call on both
            threads, split inside the kernels (the baseline)
  dp-async  mpirun -np 2 --bind-to core, half the batch per rank, one
            thread each, asynchronous bucket all-reduce (the default)
  dp-sync   the same with HC_SYNC_ALLREDUCE=1
Peak memory: each process's maximum RSS (/usr/bin/time), summed over ranks.
Latent inputs 4 x image x image (export_dit.py's default channels).

Then the cost model's prediction (no run) for a 16-core machine of one
cluster (test/topologies/flat16.xml) cut into 2, 4 and 8 clusters, beside
its prediction of the unsplit step there, from this machine's rates.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
LOCK = ["flock", "/work/bench.lock", "/work/prof/quiet.sh"]
MPI = ["mpirun", "--allow-run-as-root", "--bind-to", "core", "-np", "2", "-x", "HC_NUM_THREADS"]
CONFIGS = ["cftp", "off", "dp-async", "dp-sync"]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def setup(a, model):
    d = os.path.join(a.work, model.replace("/", ""))
    os.makedirs(d, exist_ok=True)
    onnx = os.path.join(d, "model.onnx")
    if not os.path.exists(onnx):
        sh([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", model, "--image-size", str(a.image),
            "--dynamic-batch", "-o", onnx, "--quiet"])
    hc = os.path.join(a.bin, "hc-compile")
    g = a.global_batch
    sh([hc, onnx, "--batch", str(g), "--clusters", "2", "-o", os.path.join(d, "cftp.so")])
    sh([hc, onnx, "--batch", str(g), "--clusters", "2", "--cftp", "off", "-o", os.path.join(d, "off.so")])
    sh([hc, onnx, "--batch", str(g // 2), "--ranks-per-node", "2", "-o", os.path.join(d, "dp.so")])
    sched = sh([hc, onnx, "--batch", str(g), "--clusters", "2", "--emit=schedule"]).stdout
    cftp = re.search(r"hcs.cftp = \{[^}]*\}", sched).group(0)
    import numpy as np
    r = np.random.default_rng(0)
    np.save(os.path.join(d, "x.npy"), r.uniform(-1, 1, (2 * g, 4, a.image, a.image)).astype(np.float32))
    np.save(os.path.join(d, "y.npy"), r.integers(0, 1000, 2 * g).astype(np.int64))
    desc = sh([PY, "-c", "import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); f=l.hc_step_get_api; "
                         "f.restype=ctypes.POINTER(ctypes.c_char_p*2); print(f().contents[1].decode())",
               os.path.join(d, "cftp.so")]).stdout
    arenas = json.loads(desc)["memory_plan"]["tiers"][0]["arena_bytes"]
    replica = sum(arenas.get(k, 0) for k in ("param", "grad", "m", "v"))
    return d, cftp, replica


def run_one(a, d, config):
    metrics = os.path.join(d, config + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    so = os.path.join(d, "dp.so" if config.startswith("dp") else config + ".so")
    hc_run = [os.path.join(a.bin, "hc-run"), so, "--data", "x.npy", "--labels", "y.npy", "--steps",
              str(a.steps), "--log-every", "1", "--no-progress", "--metrics", metrics]
    env = dict(os.environ)
    for k in ("HC_SYNC_ALLREDUCE", "HC_COMM_PROGRESS", "HC_NUM_THREADS"):
        env.pop(k, None)
    rss = os.path.join(d, config + ".rss")
    for f in os.listdir(d):
        if f.startswith(config + ".rss"):
            os.remove(os.path.join(d, f))
    if config.startswith("dp"):
        env["HC_NUM_THREADS"] = "1"
        extra = []
        if config == "dp-sync":
            env["HC_SYNC_ALLREDUCE"] = "1"
            extra = ["-x", "HC_SYNC_ALLREDUCE"]
        wrap = ["bash", "-c", 'exec /usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"', rss]
        cmd = MPI + extra + wrap + hc_run
    else:
        env["HC_NUM_THREADS"] = "2"
        cmd = ["/usr/bin/time", "-f", "%M", "-o", rss + ".0"] + hc_run
    sh(LOCK + cmd, cwd=d, env=env)
    rows = [json.loads(l) for l in open(metrics)]
    steps = [1.0 / r["steps_per_sec"] for r in rows if r["step"] > 2]
    losses = [r["loss"] for r in rows]
    mb = sum(int(open(os.path.join(d, f)).read().split()[-1]) for f in os.listdir(d)
             if f.startswith(config + ".rss")) / 1024.0
    return statistics.mean(steps), mb, losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="DiT-S/2,DiT-B/2")
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("-o", "--out", default="")
    a = ap.parse_args()
    a.bin, a.work = os.path.abspath(a.bin), os.path.abspath(a.work)
    out = []

    def say(line=""):
        print(line, flush=True)
        out.append(line)

    cpu = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    say("# bench/cftp_bench.py --rounds %d --steps %d --global-batch %d, %s UTC"
        % (a.rounds, a.steps, a.global_batch, time.strftime("%Y-%m-%d %H:%M", time.gmtime())))
    say("# %s, %d cores; latent inputs 4x%dx%d; load avg at start %.2f"
        % (cpu, os.cpu_count(), a.image, a.image, os.getloadavg()[0]))
    for model in a.models.split(","):
        d, cftp, replica = setup(a, model)
        say()
        say("== %s, global batch %d ==" % (model, a.global_batch))
        say("plan: " + cftp)
        t = {c: [] for c in CONFIGS}
        m = {c: [] for c in CONFIGS}
        first = {}
        for rnd in range(1, a.rounds + 1):
            cells = []
            for c in CONFIGS:
                s, mb, losses = run_one(a, d, c)
                t[c].append(s)
                m[c].append(mb)
                first.setdefault(c, losses)
                cells.append("%s %.3f s %.0f MB" % (c, s, mb))
            say("round %d: %s" % (rnd, ", ".join(cells)))
        med = {c: statistics.median(t[c]) for c in CONFIGS}
        mem = {c: statistics.median(m[c]) for c in CONFIGS}
        dp = min(("dp-async", "dp-sync"), key=lambda c: med[c])
        say("config      median_s    min_s   peak_rss_MB(sum)   vs_off   vs_best_dp")
        for c in CONFIGS:
            say("%-10s %9.3f %8.3f %18.0f %+8.2f%% %+11.2f%%"
                % (c, med[c], min(t[c]), mem[c], 100 * (med[c] / med["off"] - 1),
                   100 * (med[c] / med[dp] - 1)))
        expect = mem[dp] - replica / 2**20
        say("memory: DP %.0f MB less one replica of parameters, gradients and AdamW moments "
            "(%.0f MB) = %.0f MB; CFTP %.0f MB (%+.1f%%)"
            % (mem[dp], replica / 2**20, expect, mem["cftp"], 100 * (mem["cftp"] / expect - 1)))
        say("first-run losses: " + "; ".join("%s %s" % (c, [round(x, 5) for x in first[c]])
                                              for c in CONFIGS))
    say()
    say("== cost-model prediction (not measured): 16 cores, one cluster (flat16.xml), "
        "this machine's rates, DiT-S/2 global batch %d ==" % a.global_batch)
    onnx = os.path.join(a.work, "DiT-S2", "model.onnx")
    if os.path.exists(onnx):
        for k in (2, 4, 8):
            sched = sh([os.path.join(a.bin, "hc-compile"), onnx, "--batch", str(a.global_batch),
                        "--topology", os.path.join(ROOT, "test/topologies/flat16.xml"), "--clusters", str(k),
                        "--emit=schedule"]).stdout
            p = re.search(r"predicted_seconds = ([0-9.eE+-]+)", sched).group(1)
            u = re.search(r"unsplit_seconds = ([0-9.eE+-]+)", sched).group(1)
            say("clusters %d: CFTP predicted %.3f s/step, unsplit (16 threads per call) predicted %.3f s/step"
                % (k, float(p), float(u)))
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
