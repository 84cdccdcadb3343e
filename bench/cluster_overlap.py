#!/usr/bin/env -S /usr/bin/python3
"""Overlapping the gradient all-reduce with backward where the link is
slower than memory (issue 54): DiT-S/2 on two test-bed hosts
(test/cluster/testbed.py: network namespaces, links shaped with tc tbf),
one rank per host, one core each, on links of 1, 10 and 25 Gbit/s.
Needs root.

usage: /usr/bin/python3 bench/cluster_overlap.py --bin build/bin --work DIR
           [--rounds 3] [--steps 4] [--rates 1gbit,10gbit,25gbit]
           [--buckets 0.25,1,8,64] [--batch 16] [--delay 50us]

Per link, measured in the same run and interleaved round by round:
  link      hc-bench-allreduce across the two hosts: alpha and beta, least
            squares over its message sizes from 64 KiB to 64 MiB
  modes     the library hc-compile --link A,B,2 builds for that link (its
            bucket size chosen from the measured alpha and beta), run with
            the step driving the all-reduce (inline, the default), the old
            comm thread (HC_COMM_PROGRESS=thread) and the blocking
            all-reduce (HC_SYNC_ALLREDUCE=1); --comm-cores 1 needs a core
            a host does not compute on, which a 2-core machine split into
            two 1-core hosts lacks (the row says so)
  buckets   the inline step with fixed bucket sizes (--bucket-mb), beside
            the --link library's (buckets end on gradient tensors' bounds,
            so a size is a target: the table gives count and average)
Each run: step_s, comm_s, comm_exposed_s, comm_hidden_s from hc-run's
--metrics (rank 0), the mean of the steps after the first two; the table
shows medians over rounds. Beside each mode, the alpha-beta model:
  sync      t_c + sum_k (alpha + b_k beta) + alpha
  async     the buckets, ready in gradient order over backward (2/3 of
            t_c), sent one after another on the link: the step ends when
            both compute and the last bucket are done, plus the loss's sum
with t_c the blocking run's own compute_s (the step less its all-reduce
waits). The wire is modelled; TCP's CPU cost on the computing core is not.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "cluster"))
sys.path.insert(0, HERE)
from comm_scaling import fit_link  # noqa: E402
from testbed import TestBed, leftovers, rate_bytes  # noqa: E402

PY = "/usr/bin/python3"
ENV = {"HC_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
MODES = {"inline": {}, "thread": {"HC_COMM_PROGRESS": "thread"}, "sync": {"HC_SYNC_ALLREDUCE": "1"}}


def sh(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(cmd[:6]), p.returncode,
                                                  p.stdout[-2000:], p.stderr[-2000:]))
    return p


def compile_step(a, onnx, so, extra):
    if not os.path.exists(so):
        sh([os.path.join(a.bin, "hc-compile"), onnx, "--batch", str(a.batch), "-o", so] + extra)
    out = sh([PY, "-c", "import ctypes,json,sys; l=ctypes.CDLL(sys.argv[1]); f=l.hc_step_get_api; "
                        "f.restype=ctypes.POINTER(ctypes.c_char_p*2); print(f().contents[1].decode())",
              so]).stdout
    return json.loads(out)


def setup(a):
    os.makedirs(a.work, exist_ok=True)
    w = lambda *p: os.path.join(a.work, *p)  # noqa: E731
    if not os.path.exists(w("s2.onnx")):
        sh([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "DiT-S/2", "--image-size",
            "32", "--dynamic-batch", "-o", w("s2.onnx"), "--quiet"])
    import numpy as np
    r = np.random.default_rng(0)
    np.save(w("x.npy"), r.uniform(-1, 1, (4 * a.batch, 4, 32, 32)).astype(np.float32))
    np.save(w("y.npy"), r.integers(0, 1000, 4 * a.batch).astype(np.int64))
    return w


def bucket_text(buckets):
    """How a library's gradients are cut (buckets end on tensor boundaries,
    so their sizes vary around the asked size)."""
    sizes = [b["bytes"] / 2**20 for b in buckets]
    return "%d buckets, %.2f MiB on average (%.2f-%.2f)" % (
        len(sizes), sum(sizes) / len(sizes), min(sizes), max(sizes))


def model(t_c, buckets, alpha, beta):
    sizes = [b["bytes"] for b in buckets]
    total = sum(sizes)
    sync = t_c + sum(alpha + s * beta for s in sizes) + alpha
    fwd, bwd = t_c / 3, 2 * t_c / 3
    done, cum = 0.0, 0
    for s in sizes:
        cum += s
        done = max(done, fwd + bwd * cum / total) + alpha + s * beta
    return sync, max(t_c, done) + alpha


def run(tb, a, w, so, tag, extra_env):
    metrics = w(tag + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [os.path.join(a.bin, "hc-run"), so, "--data", w("x.npy"), "--labels", w("y.npy"),
           "--steps", str(a.steps), "--log-every", "1", "--no-progress", "--metrics", metrics]
    env = dict(ENV, **extra_env)
    args = tb.mpirun_args(["h0", "h1"])
    for k in env:
        args += ["-x", k]
    p = tb.run("h0", args + cmd, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s%s" % (tag, p.returncode, p.stdout[-1500:],
                                                  p.stderr[-1500:]))
    rows = [json.loads(l) for l in open(metrics)]
    rows = [r for r in rows if r["step"] > 2]
    keys = ("step_s", "compute_s", "comm_s", "comm_exposed_s", "comm_hidden_s", "comm_mb")
    return {k: statistics.mean(r[k] for r in rows) for k in keys}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16, help="per rank")
    ap.add_argument("--rates", default="1gbit,10gbit,25gbit")
    ap.add_argument("--buckets", default="0.25,1,8,64", help="fixed sizes, MiB")
    ap.add_argument("--delay", default=None, help="per link (tc netem), e.g. 50us")
    a = ap.parse_args()
    a.bin, a.work = os.path.abspath(a.bin), os.path.abspath(a.work)
    if os.geteuid() != 0:
        sys.exit("cluster_overlap.py: needs root (network namespaces)")
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
    w = setup(a)
    rates = a.rates.split(",")
    fixed = [float(b) for b in a.buckets.split(",")]
    libs = {("fixed", b): (w("s2-b%g.so" % b), ["--bucket-mb", "%g" % b]) for b in fixed}
    descs = {k: compile_step(a, w("s2.onnx"), so, extra) for k, (so, extra) in libs.items()}
    link, rows = {}, {}
    with TestBed(a.work, hosts=2, rate=rates[0], delay=a.delay) as tb:
        for rate in rates:
            tb.set_link_shape(rate, a.delay)
            out = tb.run("h0", tb.mpirun_args(["h0", "h1"]) + [
                os.path.join(a.bin, "hc-bench-allreduce"), "--model-mb", "132"],
                env=tb.env(), capture_output=True, text=True, timeout=900)
            if out.returncode != 0:
                raise RuntimeError("hc-bench-allreduce on %s: %s" % (rate, out.stderr[-1500:]))
            alpha, beta = fit_link(out.stdout, 64, 1 << 20)
            alpha = max(alpha, 1e-6)
            pick = re.search(r"smallest bucket within 10% of the best whole-model time: (\d+) KiB",
                             out.stdout)
            arg = "%.1f,%.4f,2" % (alpha * 1e6, 1 / beta / 1e9)
            so = w("s2-link-%s.so" % arg.replace(",", "_"))  # a cached library is this link's
            descs[("link", rate)] = compile_step(a, w("s2.onnx"), so, ["--link", arg])
            libs[("link", rate)] = (so, ["--link", arg])
            link[rate] = (alpha, beta, arg, pick.group(1) if pick else "?",
                          descs[("link", rate)]["buckets"])
            print("link %s: alpha %.1f us, beta %.3f ms/MB (%.2f GB/s, tc rate %.2f GB/s); "
                  "hc-compile --link %s: %s; the bench's own pick %s KiB"
                  % (rate, alpha * 1e6, beta * 1e9, 1 / beta / 1e9, rate_bytes(rate) / 1e9, arg,
                     bucket_text(link[rate][4]), link[rate][3]), flush=True)
        for r in range(a.rounds):
            for rate in rates:
                tb.set_link_shape(rate, a.delay)
                so = libs[("link", rate)][0]
                for mode, env in MODES.items():
                    rows.setdefault((rate, mode), []).append(
                        run(tb, a, w, so, "%s-%s" % (rate, mode), env))
                for b in fixed:
                    rows.setdefault((rate, "b%g" % b), []).append(
                        run(tb, a, w, libs[("fixed", b)][0], "%s-b%g" % (rate, b), {}))
                print("round %d %s: %s" % (r + 1, rate, " ".join(
                    "%s %.3f" % (k[1], v[-1]["step_s"]) for k, v in rows.items() if k[0] == rate)),
                    flush=True)
    left = leftovers()
    print()
    print("cluster_overlap: %s, 2 test-bed hosts x 1 rank x 1 core, DiT-S/2 batch %d per rank "
          "(global %d), %d rounds of %d steps (the first 2 not timed); %s; load avg %.2f at the "
          "end; test bed left: %s" % (cpu, a.batch, 2 * a.batch, a.rounds, a.steps,
                                       time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                       os.getloadavg()[0], ", ".join(left) or "nothing"))
    print("delay: %s" % (a.delay or "none (tc tbf only; this kernel has no sch_netem)"))
    med = lambda k, f: statistics.median(x[f] for x in rows[k])  # noqa: E731
    for rate in rates:
        alpha, beta, arg, pick, buckets = link[rate]
        t_c = med((rate, "sync"), "compute_s")
        sync, asyn = model(t_c, buckets, alpha, beta)
        print()
        print("== %s: alpha %.1f us, %.2f GB/s; --link %s -> %s; t_c %.3f s =="
              % (rate, alpha * 1e6, 1 / beta / 1e9, arg, bucket_text(buckets), t_c))
        print("%-22s %8s %8s %8s %8s %8s %8s" % ("run", "step_s", "model_s", "comm_s", "exposed",
                                               "hidden", "vs sync"))
        sync_s = med((rate, "sync"), "step_s")
        for mode in MODES:
            k = (rate, mode)
            print("%-22s %8.3f %8.3f %8.3f %8.3f %8.3f %7.3fx" % (
                mode + " (--link buckets)", med(k, "step_s"), sync if mode == "sync" else asyn,
                med(k, "comm_s"), med(k, "comm_exposed_s"), med(k, "comm_hidden_s"),
                sync_s / med(k, "step_s")))
        print("%-22s %s" % ("--comm-cores 1", "not run: each host has 1 core, none to spare"))
        for b in fixed:
            k = (rate, "b%g" % b)
            bs = descs[("fixed", b)]["buckets"]
            print("%-22s %8.3f %8.3f %8.3f %8.3f %8.3f %7.3fx" % (
                "inline, --bucket-mb %g" % b, med(k, "step_s"),
                model(t_c, bs, alpha, beta)[1], med(k, "comm_s"), med(k, "comm_exposed_s"),
                med(k, "comm_hidden_s"), sync_s / med(k, "step_s")))
    print("\n(vs sync: the blocking all-reduce's step time over the row's; above 1, overlap wins)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
