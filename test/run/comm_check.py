#!/usr/bin/env -S /usr/bin/python3
"""The gradient all-reduce's progress modes and transports on the tiny DiT of
e2e.run.safety.setup (2 ranks).

usage: comm_check.py CASE --bin DIR --toys DIR --work DIR

  modes  the step driving the all-reduce itself (default), the old comm
         thread (HC_COMM_PROGRESS=thread), --comm-cores 1 and the blocking
         all-reduce (HC_SYNC_ALLREDUCE=1) train to bit-identical parameters
         (two ranks: every sum is a + b); the metrics carry compute_s,
         comm_s, comm_exposed_s and comm_hidden_s.
  tcp    the same run with the ranks talking TCP over loopback (ob1 + tcp,
         no shared memory, no UCX) equals it bit for bit; a rank that fails
         under TCP ends the job with its message.
"""
import json
import shutil
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import st  # noqa: E402
from run_check import MPI, check, init_params  # noqa: E402
from safety_check import D, cases_of, script_main  # noqa: E402

TCP = ["--mca", "pml", "ob1", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
       "--mca", "osc", "^ucx"]


def mpirun(c, args, env=None, mca=(), np_=2, timeout=180):
    e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    e.update(env or {})
    cmd = MPI + list(mca) + ["-np", str(np_)]
    for k in (env or {}):
        cmd += ["-x", k]
    p = subprocess.run(cmd + [os.path.join(c.bin, "hc-run")] + args, cwd=c.work, env=e,
                       capture_output=True, text=True, timeout=timeout)
    p.cmd = " ".join(cmd[len(MPI):] + ["hc-run"] + args)
    return p


def train(c, tag, env=None, mca=(), extra=()):
    p = mpirun(c, ["s.so"] + D + ["--steps", "4", "--log-every", "2", "--no-progress", "--seed", "3",
                                  "--save-params", tag + ".safetensors", "--metrics", tag + ".jsonl"] + list(extra),
               env, mca)
    check(p.returncode == 0, "%s: exit %d\n%s%s" % (p.cmd, p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return st.load(c.path(tag + ".safetensors")), p


def same(a, b, what):
    check(list(a) == list(b), "%s: tensor names differ" % what)
    bad = [k for k in a if a[k].tobytes() != b[k].tobytes()]
    check(not bad, "%s: %d of %d parameters differ, e.g. %s" % (what, len(bad), len(a), bad[:3]))


def case_modes(c):
    c.fresh()
    ref, _ = train(c, "inline")
    init = st.load(c.path("s.so.init.safetensors"))
    check(any(ref[k].tobytes() != init[k].tobytes() for k in ref), "training changed nothing")
    for tag, env, extra in (("thread", {"HC_COMM_PROGRESS": "thread"}, []),
                            ("sync", {"HC_SYNC_ALLREDUCE": "1"}, []),
                            ("commcores", {}, ["--comm-cores", "1"])):
        got, p = train(c, tag, env, extra=extra)
        same(ref, got, tag + " vs inline")
        if tag == "commcores":
            check("cannot spare 1" in p.stdout, "--comm-cores 1 with one core per rank: no note\n" + p.stdout)
    rows = [json.loads(l) for l in open(c.path("inline.jsonl"))]
    for key in ("step_s", "compute_s", "comm_s", "comm_exposed_s", "comm_hidden_s", "comm_mb"):
        check(all(key in r for r in rows), "metrics lack %s: %s" % (key, rows[0]))
    r = rows[-1]
    check(r["comm_mb"] > 0 and r["comm_exposed_s"] <= r["step_s"] and abs(
        r["compute_s"] + r["comm_exposed_s"] - r["step_s"]) < 1e-6, "inconsistent metrics %s" % r)
    print("inline, thread, sync and --comm-cores train bit-identically at np 2; metrics: %s"
          % {k: round(v, 4) for k, v in r.items() if k.startswith(("comm", "compute", "step_"))})


def case_tcp(c):
    c.fresh()
    shm, _ = train(c, "shm")
    tcp, p = train(c, "tcp", mca=TCP)
    same(shm, tcp, "tcp vs shared memory")
    # A rank failing under TCP ends the job with its message (toy step).
    shutil.copy(os.path.join(c.toys, "toy_b2.so"), c.path("toy_b2.so"))
    st.save(c.path("toy.init.safetensors"), init_params())
    import numpy as np
    r = np.random.default_rng(0)
    np.save(c.path("tx.npy"), r.standard_normal((8, 1, 4, 4)).astype(np.float32))
    p = mpirun(c, ["toy_b2.so", "--data", "tx.npy", "--steps", "20"], {"HC_TOY_FAIL_RANK": "1",
                                                                        "HC_TOY_FAIL_STEP": "2"}, TCP, timeout=60)
    check(p.returncode != 0 and "rank 1: step 2 failed" in p.stderr,
          "a failing rank under TCP: exit %d\n%s" % (p.returncode, p.stderr[-2000:]))
    print("TCP over loopback (pml ob1, btl self,tcp) trains bit-identically to shared memory; a failing rank "
          "ends the job: %s" % [l for l in p.stderr.splitlines() if "rank 1" in l][0])


if __name__ == "__main__":
    script_main(cases_of(globals()))
