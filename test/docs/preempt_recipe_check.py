#!/usr/bin/env -S /usr/bin/python3
"""Runs the Slurm preemption script of docs/multi-node.md as written, without
Slurm: `mpirun -np 2` on the toy step library (test/run/toy_step.cpp) for
dit_step.so, a stand-in `scontrol` that records what it is asked, and
SIGUSR1 sent to the batch shell as `sbatch --signal=B:USR1@T` sends it.

The script must: stop the ranks with a checkpoint, exit 75, ask for
`scontrol requeue $SLURM_JOB_ID`; run again (the requeued job), resume and
reach the last step with parameters, optimizer state and EMA bit-identical
to an uninterrupted run of the same script.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "run"))
import st  # noqa: E402
from run_check import init_params, make_data  # noqa: E402

STEPS = 12


def script_of(doc):
    """The fenced sh block holding the sbatch script (#SBATCH --signal)."""
    text = open(doc).read()
    blocks = text.split("```")
    for i in range(1, len(blocks), 2):
        if blocks[i].startswith("sh\n") and "#SBATCH --signal" in blocks[i]:
            return blocks[i][3:]
    sys.exit("FAILED: no sh block with '#SBATCH --signal' in " + doc)


def fail(msg):
    print("FAILED: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--toys", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(os.path.join(a.work, "fakebin"))
    w = a.work

    class E:
        path = staticmethod(lambda *p: os.path.join(w, *p))
    make_data(E())
    st.save(E.path("toy.init.safetensors"), init_params())
    shutil.copy(os.path.join(a.toys, "toy_b2.so"), E.path("toy_b2.so"))
    open(E.path("job.sh"), "w").write(script_of(a.doc))
    log = E.path("scontrol.log")
    with open(E.path("fakebin", "scontrol"), "w") as f:
        f.write("#!/bin/sh\necho \"$@\" >> '%s'\n" % log)
    os.chmod(E.path("fakebin", "scontrol"), 0o755)
    os.symlink(os.path.join(a.bin, "hc-run"), E.path("fakebin", "hc-run"))

    def env(ckpt, slow):
        e = dict(os.environ, STEP="toy_b2.so", DATA="data.npy", LABELS="labels.npy",
                 STEPS=str(STEPS), CKPT=ckpt, GRACE="0", KILL_AFTER="2", SLURM_JOB_ID="4242",
                 PATH=E.path("fakebin") + ":" + os.environ["PATH"],
                 MPIRUN_ARGS="--allow-run-as-root --oversubscribe --bind-to none -np 2 -x HC_TOY_SLOW_MS")
        e["HC_TOY_SLOW_MS"] = str(slow)
        return e

    def job(ckpt, slow=0):
        return subprocess.Popen(["bash", "job.sh"], cwd=w, env=env(ckpt, slow), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    u = job("U")
    out, err = u.communicate(timeout=120)
    if u.returncode != 0:
        fail("uninterrupted job: exit %d\n%s%s" % (u.returncode, out, err))

    p = job("S", slow=250)
    t0 = time.monotonic()
    while not os.path.exists(E.path("S", ".hc-run.lock")):
        if p.poll() is not None or time.monotonic() - t0 > 60:
            fail("the job never started: %s" % (p.communicate(),))
        time.sleep(0.05)
    time.sleep(1.5)
    p.send_signal(signal.SIGUSR1)  # sbatch --signal=B:USR1@T: the batch shell only
    out, err = p.communicate(timeout=120)
    saved = sorted(f for f in os.listdir(E.path("S")) if f.startswith("ckpt-"))
    asked = open(log).read().split("\n") if os.path.exists(log) else []
    if p.returncode != 75 or asked[:1] != ["requeue 4242"] or len(saved) != 1 or \
            saved[0] == "ckpt-%08d.safetensors" % STEPS:
        fail("signalled job: exit %d, scontrol %s, checkpoints %s\n%s%s"
             % (p.returncode, asked, saved, out[-1500:], err[-1500:]))
    stop = [l for l in err.splitlines() if "stopped after step" in l]
    r = job("S")
    out2, err2 = r.communicate(timeout=120)
    if r.returncode != 0 or "resuming from S/" + saved[0] not in out2:
        fail("requeued job: exit %d\n%s%s" % (r.returncode, out2, err2))
    ta = st.load(E.path("U", "ckpt-%08d.safetensors" % STEPS))
    tb = st.load(E.path("S", "ckpt-%08d.safetensors" % STEPS))
    if sorted(ta) != sorted(tb) or not any(k.startswith("ema:") for k in ta):
        fail("tensors: %s vs %s" % (sorted(ta), sorted(tb)))
    for k in ta:
        if ta[k].tobytes() != tb[k].tobytes():
            fail("%s differs between the uninterrupted and the requeued job" % k)
    print("USR1 to the batch shell: exit 75, %s, scontrol %s; the requeued job resumed from %s and "
          "reached step %d bit-identical" % (stop[0] if stop else "?", asked[0], saved[0], STEPS))
    print("PASSED")


if __name__ == "__main__":
    main()
