#!/usr/bin/env python3
"""Issue 47 on a lent many-core machine (the project's `device`): the
budgeted DiT-S/2 step with hc-automem's tier copies on two CFTP streams,
where the copy engine has a core of its own (hc-compile --comm-cores 1),
which the 2-core developer machines lack. One call, indicative.

Carried from the developer's machine (build/, ignored by git):
  build/bin/hc-run, build/lib/libhcrt.so, build/devrun/debs/*.deb (Debian
  12's Open MPI and what hc-run links), build/devrun/s2.init.header.json,
  and build/devrun/c47/*.so, each compiled there with
  `hc-compile s2.onnx --batch 32 --topology "pack:1 numa:1 l3:1 core:16
  pu:1" --clusters 2 --comm-cores 1` plus:
    unbudgeted.so  nothing more
    uncut.so       --mem-budget 2304319648 (0.6 x the unbudgeted plan)
                   --rates stream_gbps_per_thread=0.001 --offload-dir D:
                   copies whole, on stream 0 (main)
    cut.so         the same, each copy cut by clusters (branch cut-copies)
    onestream.so   the same budget with --cftp off

usage: python3 bench/device_cftp_automem.py --out DIR [--rounds 3] [--steps 6]
Each library trains from the same random weights (N(0, 0.02), drawn here
under the carried header) on random latents, 16 threads; a run's time is
the median of its steps after the first two; the table gives medians over
interleaved rounds. Then one --profile run of each budgeted library.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from device_anchors import RUN, median_step, random_weights, unpack_debs  # noqa: E402

LIBS = ["unbudgeted", "uncut", "cut", "onestream"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=16)
    a = ap.parse_args()
    work = "/tmp/hc-c47"
    os.makedirs(os.path.join(work, "offload"), exist_ok=True)
    env = dict(os.environ, **unpack_debs(os.path.join(work, "deb")), HC_NUM_THREADS=str(a.threads))
    init = random_weights(os.path.join(work, "init.safetensors"))
    rng = np.random.default_rng(0)
    np.save(os.path.join(work, "x.npy"), rng.standard_normal((256, 4, 32, 32), dtype=np.float32))
    np.save(os.path.join(work, "y.npy"), rng.integers(0, 1000, 256).astype(np.int64))
    hc_run = os.path.join(ROOT, "build", "bin", "hc-run")
    log = open(os.path.join(a.out, "device_cftp_automem.txt"), "w")

    def say(line):
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    def run(lib, tag, extra):
        metrics = os.path.join(work, tag + ".jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        cmd = [hc_run, os.path.join(RUN, "c47", lib + ".so"), "--init", init, "--data",
               os.path.join(work, "x.npy"), "--labels", os.path.join(work, "y.npy"),
               "--steps", str(a.steps), "--log-every", "1", "--no-progress", "--metrics",
               metrics, "--offload-dir", os.path.join(work, "offload")] + extra
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            say("%s: exit %d: %s" % (tag, p.returncode, (p.stderr or p.stdout)[-600:]))
            return None
        rows = [json.loads(l) for l in open(metrics)]
        return median_step(metrics, 2) + (rows[-1].get("copy_stall_s", 0),
                                          rows[-1].get("copy_mb_disk", 0))

    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    say("device_cftp_automem: %s; %d threads; %s" % (
        [l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")][:1],
        a.threads, "amx" if "amx_tile" in open("/proc/cpuinfo").read() else "no amx"))
    times = {k: [] for k in LIBS}
    for r in range(a.rounds):
        line = []
        for lib in LIBS:
            x = run(lib, "%s-%d" % (lib, r), [])
            if x:
                times[lib].append(x[0])
                line.append("%s %.3f s (loss %.6f, stall %.3f s, %.0f MB disk)"
                            % (lib, x[0], x[2], x[3], x[4]))
        say("round %d: %s" % (r + 1, " | ".join(line)))
    med = {k: statistics.median(v) for k, v in times.items() if v}
    say("median s/step: " + ", ".join("%s %.3f" % kv for kv in med.items()))
    if "onestream" in med:
        for k in ("uncut", "cut"):
            if k in med:
                say("%s / onestream: %.3fx (bar 1.02x)" % (k, med[k] / med["onestream"]))
    for lib in ("uncut", "cut", "onestream"):
        prof = os.path.join(a.out, "profile-%s.json" % lib)
        run(lib, "profile-" + lib, ["--profile", prof])
        try:
            kinds = {k["kernel"]: k["seconds_per_step"] for k in json.load(open(prof))["kinds"]}
            say("profile %s: step %.3f s; cluster_wait %.3f, copy_wait %.3f, linear* %.3f" % (
                lib, json.load(open(prof))["step_s"], kinds.get("cluster_wait", 0),
                kinds.get("copy_wait", 0), sum(v for k, v in kinds.items() if k.startswith("linear"))))
        except (OSError, ValueError, KeyError) as e:
            say("profile %s: %s" % (lib, e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
