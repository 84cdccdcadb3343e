#!/usr/bin/env -S /usr/bin/python3
"""hc-run across test-bed hosts (testbed.py; issue 54). Needs root.

usage: cluster_check.py CASE --bin DIR --work DIR

  across   2 hosts x 1 rank on a 10 Gbit/s link (tc tbf), DiT tiny, 4 AdamW
           steps with a checkpoint: mpirun starts the far rank through the
           test bed's agent, the gradients cross the link (h1's eth0
           counts at least the all-reduced bytes), and the checkpoint
           equals -np 2 on one host bit for bit. The test bed leaves no
           namespace, link or process behind.
  linkcut  the same job, long, with --comm-timeout 3: h1's link is cut
           (ip link set down) after its first steps; the rank on h0
           ends on the watchdog, exit 1, naming h1, and mpirun ends. The
           link back up, the job resumes from its last checkpoint to 8
           steps past it, bit for bit the unbroken run to that step.
  killhost the same, h1's processes (its daemon and rank) killed: mpirun
           ends every rank within 30 s, non-zero (Open MPI's message does
           not name the host); the resume is bit for bit.
  loss     the across job with 10% of each host's packets dropped
           (iptables): TCP recovers, the job completes and equals -np 2
           on one host bit for bit.
  slurm    a local Slurm (slurm.py) runs docs/multi-node.md's two sbatch
           scripts as written: srun --mpi=pmix, and the preemption one
           (mpirun in the allocation) whole and preempted (scancel --batch
           --signal=USR1, exit 75, requeue, resume): completed, and bit for
           bit each other and the unbroken job.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "run"))
import st  # noqa: E402
from slurm import Slurm  # noqa: E402
from testbed import TestBed, leftovers  # noqa: E402

PY = "/usr/bin/python3"
STEPS, SEED = 4, 5
PREEMPT_STEPS = 400
ENV = {"HC_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}  # one core per rank


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def done(p, what):
    check(p.returncode == 0, "%s: exit %d\n%s%s" % (what, p.returncode, p.stdout[-2000:],
                                                   p.stderr[-2000:]))
    return p


def setup(a):
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    w = lambda *p: os.path.join(a.work, *p)  # noqa: E731
    done(subprocess.run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny",
                         "--image-size", "8", "--num-classes", "10", "--dynamic-batch",
                         "-o", w("model.onnx"), "--quiet"], capture_output=True, text=True),
         "export")
    done(subprocess.run([os.path.join(a.bin, "hc-compile"), w("model.onnx"), "--batch", "2",
                         "--lr", "1e-3", "-o", w("b2.so")], capture_output=True, text=True),
         "hc-compile")
    r = np.random.default_rng(0)
    np.save(w("x.npy"), r.uniform(-1, 1, (16, 4, 8, 8)).astype(np.float32))
    np.save(w("y.npy"), r.integers(0, 10, 16).astype(np.int64))
    return w


def hc_run(a, w, ckdir):
    return [os.path.join(a.bin, "hc-run"), w("b2.so"), "--data", w("x.npy"), "--labels",
            w("y.npy"), "--steps", str(STEPS), "--seed", str(SEED), "--ckpt-dir", w(ckdir),
            "--ckpt-every", str(STEPS), "--log-every", "1", "--no-progress"]


def rx_bytes(tb, host):
    p = tb.run(host, ["cat", "/sys/class/net/eth0/statistics/rx_bytes"], capture_output=True,
               text=True)
    return int(p.stdout)


def same_checkpoints(x, y, only_y=()):
    """x and y's tensors are equal bit for bit; y may also hold tensors
    whose names start with one of `only_y` (the EMA of a run with --ema)."""
    tx, ty = st.load(x), st.load(y)
    ty = {k: v for k, v in ty.items() if not k.startswith(tuple(only_y)) or k in tx}
    check(sorted(tx) == sorted(ty), "checkpoint tensor names differ: %s" % sorted(
        set(tx) ^ set(ty))[:4])
    bad = [k for k in tx if tx[k].tobytes() != ty[k].tobytes()]
    check(not bad, "%d of %d tensors differ between %s and %s, e.g. %s" % (
        len(bad), len(tx), x, y, bad[:3]))
    return len(tx)


def case_across(a):
    w = setup(a)
    env = ENV
    grad_bytes = sum(int(np.prod(t.shape)) * 4 for t in st.load(w("b2.so.init.safetensors")).values())
    with TestBed(a.work, hosts=2, rate="10gbit") as tb:
        before = rx_bytes(tb, "h1")
        p = done(tb.mpirun(["h0", "h1"], hc_run(a, w, "across"), env=env, capture_output=True,
                           text=True, timeout=300), "np 2 across h0, h1")
        crossed = rx_bytes(tb, "h1") - before
        print(p.stdout.strip().split("\n")[-1])
        # Each step all-reduces every gradient; h1 receives at least half of
        # them per step in a ring or recursive-halving reduce.
        check(crossed >= STEPS * grad_bytes // 2,
              "h1 received %d bytes over its link, less than the all-reduces' %d"
              % (crossed, STEPS * grad_bytes // 2))
        print("ok: across h0 and h1: h1's link received %.2f MB (gradients %.2f MB x %d steps)"
              % (crossed / 1e6, grad_bytes / 1e6, STEPS))
        done(tb.mpirun(["h0"], hc_run(a, w, "onehost"), np_per_host=2, env=env,
                       capture_output=True, text=True, timeout=300), "np 2 on h0")
    ck = "ckpt-%08d.safetensors" % STEPS
    n = same_checkpoints(w("across", ck), w("onehost", ck))
    print("ok: the checkpoint of -np 2 across two hosts equals -np 2 on one host bit for bit "
          "(%d tensors)" % n)
    left = leftovers()
    check(not left, "the test bed left %s" % ", ".join(left))
    print("ok: nothing left behind (namespaces, links, holders)")


def dropped(tb, host):
    """Packets the loss rule has dropped on `host` (iptables' counter)."""
    p = tb.run(host, ["iptables", "-w", "-L", "OUTPUT", "-v", "-x", "-n"], capture_output=True,
               text=True)
    return sum(int(l.split()[0]) for l in p.stdout.split("\n")
               if "DROP" in l and "statistic" in l)


def case_loss(a):
    w = setup(a)
    with TestBed(a.work, hosts=2, rate="10gbit", loss="10%") as tb:
        t0 = time.monotonic()
        p = done(tb.mpirun(["h0", "h1"], hc_run(a, w, "lossy") + ["--comm-timeout", "60"],
                           env=ENV, capture_output=True, text=True, timeout=300),
                 "np 2 across h0, h1 with 10% loss")
        took = time.monotonic() - t0
        lost = dropped(tb, "h0") + dropped(tb, "h1")
        check(lost > 0, "the loss rule dropped no packet")
        print("ok: 10%% of each host's packets dropped (%d in all): TCP recovered, the job "
              "completed in %.1f s; %s" % (lost, took, p.stdout.strip().split("\n")[-1]))
        done(tb.mpirun(["h0"], hc_run(a, w, "onehost"), np_per_host=2, env=ENV,
                       capture_output=True, text=True, timeout=300), "np 2 on h0")
    ck = "ckpt-%08d.safetensors" % STEPS
    n = same_checkpoints(w("lossy", ck), w("onehost", ck))
    print("ok: the checkpoint equals -np 2 on one host bit for bit (%d tensors)" % n)
    left = leftovers()
    check(not left, "the test bed left %s" % ", ".join(left))
    print("ok: nothing left behind")


def interrupted(tb, a, w, ckdir, action):
    """A long job across h0, h1 (--comm-timeout 3) that `action` strikes
    after step 20: mpirun's exit status (None: still running 120 s on),
    its output and the seconds from the strike to its end."""
    cmd = hc_run(a, w, ckdir) + ["--comm-timeout", "3"]
    cmd[cmd.index("--steps") + 1] = "100000"
    with open(w(ckdir + ".log"), "w+") as log:
        p = subprocess.Popen(tb.enter("h0") + tb.mpirun_args(["h0", "h1"]) + cmd,
                             env=tb.env(ENV), stdout=log, stderr=subprocess.STDOUT)
        for _ in range(600):
            log.seek(0)
            if "(step=0000020)" in log.read() or p.poll() is not None:
                break
            time.sleep(0.1)
        check(p.poll() is None, "the job ended before the strike")
        struck = time.monotonic()
        action()
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
        took = time.monotonic() - struck
        log.seek(0)
        out = log.read()
    check(rc is not None, "mpirun did not end within 120 s:\n" + out[-1500:])
    # mpirun can end before h0's rank has exited (a lost daemon aborts the
    # job at once): a resume started then finds --ckpt-dir still locked.
    alive = tb.wait_ended("h0", "hc-run")
    check(not alive, "hc-run on h0 (pid %s) still running 30 s after mpirun ended" % alive)
    return rc, out, took


def resume_equals_unbroken(tb, a, w, ckdir):
    """Resumes `ckdir`'s job from its last checkpoint to 8 steps past it,
    and runs the same steps unbroken: their checkpoints, bit for bit."""
    saved = sorted(f for f in os.listdir(w(ckdir))
                   if f.startswith("ckpt-") and f.endswith(".safetensors") and len(f) == 25)
    check(saved, "no checkpoint before the failure")
    last = int(saved[-1][5:13])
    target = str(last + 8)
    resume = hc_run(a, w, ckdir) + ["--resume"]
    resume[resume.index("--steps") + 1] = target
    done(tb.mpirun(["h0", "h1"], resume, env=ENV, capture_output=True, text=True, timeout=300),
         "resume across h0, h1")
    unbroken = hc_run(a, w, ckdir + "-whole")
    unbroken[unbroken.index("--steps") + 1] = target
    unbroken[unbroken.index("--ckpt-every") + 1] = target
    done(tb.mpirun(["h0", "h1"], unbroken, env=ENV, capture_output=True, text=True, timeout=300),
         "unbroken across h0, h1")
    ck = "ckpt-%08d.safetensors" % int(target)
    n = same_checkpoints(w(ckdir, ck), w(ckdir + "-whole", ck))
    print("ok: resumed from step %d to %s across the test bed: bit for bit the unbroken run "
          "(%d tensors)" % (last, target, n))


def case_linkcut(a):
    w = setup(a)
    with TestBed(a.work, hosts=2, rate="10gbit") as tb:
        rc, out, took = interrupted(tb, a, w, "cut", lambda: tb.set_link("h1", False))
        line = [l for l in out.split("\n") if "--comm-timeout" in l]
        check(rc == 1 and line and "rank 0 (host h0)" in line[0] and "ranks on h1" in line[0],
              "expected exit 1 and rank 0 naming h1, got exit %s:\n%s" % (rc, out[-1500:]))
        print("ok: link of h1 cut: mpirun exit 1 after %.1f s; %s" % (took, line[0].strip()))
        tb.set_link("h1", True)
        resume_equals_unbroken(tb, a, w, "cut")
    left = leftovers()
    check(not left, "the test bed left %s" % ", ".join(left))
    print("ok: nothing left behind")


def case_killhost(a):
    w = setup(a)
    with TestBed(a.work, hosts=2, rate="10gbit") as tb:
        killed = []
        rc, out, took = interrupted(tb, a, w, "kill", lambda: killed.append(tb.kill_host("h1")))
        # Open MPI notices the lost daemon and ends every rank at once, with
        # its own message, which does not name the host: hc's ranks are
        # ended before their watchdog would speak.
        check(rc not in (0, None) and took < 30,
              "expected the job to end, non-zero, within 30 s, got exit %s after %.1f s:\n%s"
              % (rc, took, out[-1500:]))
        said = [l for l in out.split("\n") if "ORTE" in l or "--comm-timeout" in l]
        print("ok: %d processes on h1 killed: mpirun exit %d after %.1f s (%s)"
              % (killed[0], rc, took, said[-1].strip() if said else "no message"))
        resume_equals_unbroken(tb, a, w, "kill")
    left = leftovers()
    check(not left, "the test bed left %s" % ", ".join(left))
    print("ok: nothing left behind")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def doc_script(marker):
    """The fenced sh block of docs/multi-node.md that holds `marker`."""
    blocks = open(os.path.join(ROOT, "docs", "multi-node.md")).read().split("```")
    for b in blocks[1::2]:
        if b.startswith("sh\n") and marker in b:
            return b[3:]
    raise Failure("docs/multi-node.md has no sh block with %r" % marker)


def case_slurm(a):
    w = setup(a)
    with open(w("srun.sh"), "w") as f:
        f.write(doc_script("srun --mpi=pmix"))
    with open(w("recipe.sh"), "w") as f:
        f.write(doc_script("#SBATCH --signal"))
    # What a user's sbatch exports: hc-run on PATH, the scripts' variables;
    # Open MPI over the hosts' links (as the test bed's mpirun is told).
    env = dict(ENV, PATH=a.bin + ":" + os.environ["PATH"], STEP=w("b2.so"), DATA=w("x.npy"),
               LABELS=w("y.npy"), OMPI_MCA_btl="self,vader,tcp",
               OMPI_MCA_btl_tcp_if_include="eth0", OMPI_MCA_oob_tcp_if_include="eth0")
    del env["HC_NUM_THREADS"]  # the script sets it from the allocation
    # Both hosts, one core each (the scripts ask for more than a test-bed
    # host has: the command line's options win over #SBATCH lines).
    alloc = ["--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=1", "--chdir", a.work]
    with TestBed(a.work, hosts=2, rate="10gbit") as tb, Slurm(tb) as slurm:
        before = rx_bytes(tb, "h1")
        job = slurm.sbatch(alloc + ["--output", w("srun.out"), w("srun.sh")],
                           env=dict(env, STEPS=str(STEPS), CKPT=w("srun")))
        f = slurm.wait(job, timeout=300)
        out = open(w("srun.out")).read()
        check(f["JobState"] == "COMPLETED" and f["ExitCode"] == "0:0",
              "the srun job %s ended %s, exit %s:\n%s" % (job, f["JobState"], f["ExitCode"],
                                                         out[-1500:]))
        check(f["NodeList"] == "h[0-1]", "the srun job ran on %s, not h0 and h1" % f["NodeList"])
        crossed = rx_bytes(tb, "h1") - before
        print("ok: sbatch of docs/multi-node.md's srun --mpi=pmix script: job %s COMPLETED on "
              "%s, exit 0:0; h1's link received %.2f MB" % (job, f["NodeList"], crossed / 1e6))
        # The preemption recipe (mpirun inside the allocation), uninterrupted.
        job = slurm.sbatch(alloc + ["--output", w("whole.out"), w("recipe.sh")],
                           env=dict(env, STEPS=str(STEPS), CKPT=w("whole"), GRACE="0",
                                    KILL_AFTER="2"))
        f = slurm.wait(job, timeout=300)
        check(f["JobState"] == "COMPLETED" and f["ExitCode"] == "0:0",
              "the mpirun job %s ended %s, exit %s:\n%s" % (
                  job, f["JobState"], f["ExitCode"], open(w("whole.out")).read()[-1500:]))
        print("ok: sbatch of the preemption script (mpirun in the allocation): job %s "
              "COMPLETED, exit 0:0" % job)
        # Preempted: USR1 to the batch shell (as --signal=B:USR1@T sends it),
        # the ranks checkpoint and exit 75, the script requeues the job, and
        # Slurm starts it again, which resumes.
        t0 = time.monotonic()
        job = slurm.sbatch(alloc + ["--output", w("preempt.out"), w("recipe.sh")],
                           env=dict(env, STEPS=str(PREEMPT_STEPS), CKPT=w("preempt"),
                                    GRACE="0", KILL_AFTER="2"))
        for _ in range(1200):
            if "(step=0000100)" in read(w("preempt.out")):
                break
            time.sleep(0.1)
        check("(step=0000100)" in read(w("preempt.out")),
              "the job to preempt never reached step 100:\n" + read(w("preempt.out"))[-1500:])
        p = slurm.run(["scancel", "--batch", "--signal=USR1", job])
        check(p.returncode == 0, "scancel: " + p.stderr)
        f = slurm.wait(job, timeout=300)
        out = read(w("preempt.out"))
        check(f["JobState"] == "COMPLETED" and f["ExitCode"] == "0:0" and f["Restarts"] == "1"
              and "resuming from" in out,
              "the preempted job %s ended %s, exit %s, %s restarts:\n%s" % (
                  job, f["JobState"], f["ExitCode"], f["Restarts"], out[-2500:]))
        stop = [l for l in out.split("\n") if "stopped after step" in l]
        print("ok: scancel --batch --signal=USR1: %s; requeued, restarted once, resumed and "
              "COMPLETED at step %d, %.1f s after submission" % (
                  stop[0].strip() if stop else "?", PREEMPT_STEPS, time.monotonic() - t0))
        job = slurm.sbatch(alloc + ["--output", w("unbroken.out"), w("recipe.sh")],
                           env=dict(env, STEPS=str(PREEMPT_STEPS), CKPT=w("unbroken"),
                                    GRACE="0", KILL_AFTER="2"))
        f = slurm.wait(job, timeout=300)
        check(f["JobState"] == "COMPLETED", "the unbroken job %s ended %s" % (job, f["JobState"]))
    ck = "ckpt-%08d.safetensors" % PREEMPT_STEPS
    n = same_checkpoints(w("unbroken", ck), w("preempt", ck))
    print("ok: the preempted and requeued job equals the unbroken one at step %d bit for bit "
          "(%d tensors, EMA included)" % (PREEMPT_STEPS, n))
    ck = "ckpt-%08d.safetensors" % STEPS
    n = same_checkpoints(w("srun", ck), w("whole", ck), only_y=["ema:"])
    print("ok: srun's checkpoint equals mpirun's bit for bit (%d tensors; the EMA is the "
          "script's own)" % n)
    left = leftovers()
    check(not left, "the test bed left %s" % ", ".join(left))
    print("ok: nothing left behind (namespaces, links, holders, Slurm and munge daemons)")


CASES = {"across": case_across, "linkcut": case_linkcut, "killhost": case_killhost,
         "slurm": case_slurm, "loss": case_loss}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    a.bin, a.work = os.path.abspath(a.bin), os.path.abspath(a.work)
    if os.geteuid() != 0:
        print("FAIL: cluster_check.py needs root (network namespaces)")
        return 1
    try:
        CASES[a.case](a)
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    print("PASS: %s" % a.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
