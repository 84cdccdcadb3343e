#!/usr/bin/env -S /usr/bin/python3
"""The largest global batch that trains (3 steps, finite loss) within a
memory budget, for CFTP (one process, hc-compile --clusters 2) and for data
parallelism (mpirun -np 2, one replica per rank) -- issue 33's DiT-L/2 check.

usage: /usr/bin/python3 bench/cftp_capacity.py --bin build/bin --work DIR
           [--model DiT-L/2] [--image 32] [--budget-gib 20] [-o FILE]

The budget is an address-space limit (prlimit --as): the whole budget for
the CFTP process, half of it for each DP rank. The search starts from the
batch the memory plan predicts (hcs.arena_bytes of --emit=schedule, linear
in the batch, plus a fixed allowance per process for code, libraries and
threads) and steps by 2 (both layouts need an even global batch) until the
largest batch that runs is found: that batch trains and the next one up
does not. Run it under the bench lock (it needs most of the machine's
memory): flock /work/bench.lock bench/cftp_capacity.py ...
"""
import argparse
import json
import math
import os
import re
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
GIB = 1 << 30
# Per process beyond the arenas: code, libraries, threads, MPI, and the init
# file hc-run maps while it loads the parameters (added below).
ALLOWANCE = 1.0 * GIB


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def arenas(a, onnx, batch, extra):
    """(bytes of all arenas, bytes of the param arena) of the plan."""
    s = sh([os.path.join(a.bin, "hc-compile"), onnx, "--batch", str(batch), "--emit=schedule"] + extra).stdout
    m = re.search(r"hcs.arena_bytes = \{([^}]*)\}", s).group(1)
    return (sum(int(x) for x in re.findall(r"= (\d+) : i64", m)),
            int(re.search(r"param = (\d+) : i64", m).group(1)))


def trains(a, onnx, config, batch, log):
    d = os.path.join(a.work, "%s-b%d" % (config, batch))
    os.makedirs(d, exist_ok=True)
    so = os.path.join(d, "step.so")
    per = batch if config == "cftp" else batch // 2
    extra = ["--clusters", "2"] if config == "cftp" else ["--ranks-per-node", "2"]
    sh([os.path.join(a.bin, "hc-compile"), onnx, "--batch", str(per), "-o", so] + extra)
    metrics = os.path.join(d, "m.jsonl")
    run = [os.path.join(a.bin, "hc-run"), so, "--data", os.path.join(a.work, "x.npy"), "--labels",
           os.path.join(a.work, "y.npy"), "--steps", "3", "--log-every", "1", "--no-progress",
           "--metrics", metrics]
    env = dict(os.environ)
    env.pop("HC_SYNC_ALLREDUCE", None)
    if config == "cftp":
        env["HC_NUM_THREADS"] = "2"
        cmd = ["prlimit", "--as=%d" % int(a.budget_gib * GIB)] + run
    else:
        env["HC_NUM_THREADS"] = "1"
        cmd = ["mpirun", "--allow-run-as-root", "--bind-to", "core", "-np", "2", "-x", "HC_NUM_THREADS",
               "prlimit", "--as=%d" % int(a.budget_gib * GIB / 2)] + run
    t0 = time.time()
    p = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True)
    losses = []
    if os.path.exists(metrics):
        losses = [json.loads(l)["loss"] for l in open(metrics)]
    ok = p.returncode == 0 and len(losses) == 3 and all(math.isfinite(x) for x in losses)
    said = [l for l in (p.stdout + p.stderr).splitlines() if l.startswith("hc-run")]
    why = "" if ok else (said or p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:160]
    log("%-5s global batch %3d: %s (%.0f s)%s" % (config, batch, "trains, losses %s" % [round(x, 4) for x in losses]
                                                 if ok else "fails", time.time() - t0,
                                                 "" if ok else ": " + why))
    for f in os.listdir(d):
        if f.endswith(".safetensors") or f.endswith(".so"):
            os.remove(os.path.join(d, f))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", default="DiT-L/2")
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--budget-gib", type=float, default=20.0)
    ap.add_argument("-o", "--out", default="")
    a = ap.parse_args()
    a.bin, a.work = os.path.abspath(a.bin), os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    out = []

    def log(line):
        print(line, flush=True)
        out.append(line)

    onnx = os.path.join(a.work, "model.onnx")
    if not os.path.exists(onnx):
        sh([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", a.model, "--image-size", str(a.image),
            "--dynamic-batch", "--external-data", "-o", onnx, "--quiet"])
    import numpy as np
    r = np.random.default_rng(0)
    np.save(os.path.join(a.work, "x.npy"), r.uniform(-1, 1, (256, 4, a.image, a.image)).astype(np.float32))
    np.save(os.path.join(a.work, "y.npy"), r.integers(0, 1000, 256).astype(np.int64))
    log("# bench/cftp_capacity.py, %s, latent 4x%dx%d, budget %.1f GiB of address space (prlimit --as): "
        "all of it for CFTP's one process, half for each DP rank; %s UTC"
        % (a.model, a.image, a.image, a.budget_gib, time.strftime("%Y-%m-%d %H:%M", time.gmtime())))
    best = {}
    for config in ("cftp", "dp"):
        extra = ["--clusters", "2"] if config == "cftp" else ["--ranks-per-node", "2"]
        procs = 1 if config == "cftp" else 2
        per_proc = a.budget_gib * GIB / procs
        (a2, params), (a4, _) = arenas(a, onnx, 2, extra), arenas(a, onnx, 4, extra)
        fixed, per_sample = a2 - (a4 - a2) + params, (a4 - a2) / 2.0
        # per-process batch the plan allows, then global
        b = int((per_proc - ALLOWANCE - fixed) // per_sample) * procs
        b = max(2, b - b % 2)
        log("%s: plan %.2f GiB fixed + %.3f GiB per sample per process -> predicted largest global batch %d"
            % (config, fixed / GIB, per_sample / GIB, b))
        if trains(a, onnx, config, b, log):
            while trains(a, onnx, config, b + 2, log):
                b += 2
        else:
            b -= 2
            while b >= 2 and not trains(a, onnx, config, b, log):
                b -= 2
        best[config] = b
        log("%s: largest global batch that trains: %d" % (config, b))
    log("CFTP %d vs DP %d" % (best["cftp"], best["dp"]))
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
