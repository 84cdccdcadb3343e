#!/usr/bin/env -S /usr/bin/python3
"""Issue 46 on the toy step library (toy_step.cpp): preemption, ranks that
agree before step 1, resume on other data, outputs never through a link,
and the messages for bad data and memory.

usage: preempt_check.py CASE --hc-run BIN --toys DIR --work DIR

  links       --ckpt-dir D with D/.hc-run.lock a link to a file outside D,
              and --metrics / --save-params / --profile naming a link: exit 2,
              one line, the target untouched.
  term-np1    SIGTERM at -np 1: checkpoint, exit 75, the resumed run's
              parameters, optimizer state and EMA after N steps bit-identical
              to an uninterrupted run's.
  term-np2    SIGTERM to mpirun and every rank at once (as Slurm sends it):
              the same, at mpirun -np 2 and -np 1.
  usr1-np2    SIGUSR1 to mpirun alone (it forwards USR1): the same, at -np 2
              and -np 1; mpirun exits 75. Also SIGTERM to rank 1 only.
  grace       a grace shorter than a step: the step in flight is abandoned
              before its update and the previous step is saved; a grace
              longer than a step lets it finish; a second signal from the
              same sender ends the run at once, nothing half-written.
  disagree    rank 1 with another seed, library, steps, data or log cadence:
              every rank exits 2 before step 1, naming the field and the rank.
              The steps case ends (the timeout only guards).
  resume-data a resume on other data, other labels or no labels is refused
              (exit 2) unless --allow-data-change, which is recorded.
  messages    NaN pixels name the file and the sample; an NPY header over
              64 KiB is refused; more than 100 steps that save nothing warn.
"""
import os
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from run_check import MPI, Failure, case_main, check, expect_exit2, make_data  # noqa: E402

TOTAL = 12  # steps of the uninterrupted run


def ckpt(d, step):
    return os.path.join(d, "ckpt-%08d.safetensors" % step)


def train(so, ckdir, steps, *extra):
    return [so, "--data", "data.npy", "--labels", "labels.npy", "--steps", str(steps), "--seed", "5",
            "--ckpt-dir", ckdir, "--log-every", "1", "--ema", "0.9"] + list(extra)


def start(env, args, np_=None, extra_env=None, mpi=()):
    cmd = ([] if np_ is None else MPI + list(mpi) + ["-np", str(np_)]) + [env.hc_run] + args
    e = dict(os.environ)
    e.update(extra_env or {})
    return subprocess.Popen(cmd, cwd=env.work, env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for_step(env, folder_or_metrics, step, p, limit=60):
    """Until the run has logged `step` (its stdout is read at the end)."""
    t0 = time.monotonic()
    path = env.path(folder_or_metrics)
    while time.monotonic() - t0 < limit:
        if os.path.exists(path):
            lines = open(path).read().splitlines()
            if len(lines) >= step:
                return
        if p.poll() is not None:
            raise Failure("the run ended before step %d: %s" % (step, p.communicate()))
        time.sleep(0.05)
    raise Failure("no step %d within %d s" % (step, limit))


def ranks_of(p):
    """hc-run processes in this mpirun's session (it leads one), from /proc."""
    ranks = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open("/proc/%s/stat" % pid).read()
            cmd = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")[0]
        except OSError:
            continue
        session = int(stat.rsplit(")", 1)[1].split()[3])
        if session == p.pid and int(pid) != p.pid and cmd.endswith(b"hc-run"):
            ranks.append(int(pid))
    return ranks


def finish(p, timeout=60):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def same_state(env, a, b, what):
    ta, tb = st.load(env.path(a)), st.load(env.path(b))
    check(sorted(ta) == sorted(tb), "%s: tensors %s vs %s" % (what, sorted(ta), sorted(tb)))
    check(any(k.startswith("ema:") for k in ta) and "sgd.step" in ta, "%s: no EMA or optimizer state" % what)
    for k in ta:
        check(ta[k].tobytes() == tb[k].tobytes(), "%s: %s differs between %s and %s" % (what, k, a, b))


def stored_step(env, folder):
    steps = sorted(int(f[5:13]) for f in os.listdir(env.path(folder)) if f.startswith("ckpt-"))
    check(steps, "no checkpoint in %s" % folder)
    return steps[-1]


def preempt_and_resume(env, so, np_, tag, send, expect_rc, mpi=()):
    """Runs to TOTAL uninterrupted (folder U), then a run stopped by `send`
    (folder S), then its resume to TOTAL: the final checkpoints equal."""
    slow = {"HC_TOY_SLOW_MS": "150"}
    env.ok(train(so, "U" + tag, TOTAL), np_=np_)
    p = start(env, train(so, "S" + tag, TOTAL, "--metrics", "m%s.jsonl" % tag), np_, slow, mpi)
    wait_for_step(env, "m%s.jsonl" % tag, 3, p)
    t0 = time.monotonic()
    send(p)
    rc, out, err = finish(p)
    elapsed = time.monotonic() - t0
    check(rc == expect_rc, "%s: exit %d, expected %d\n%s%s" % (tag, rc, expect_rc, out, err))
    line = [l for l in err.splitlines() if "stopped after step" in l]
    check(len(line) == 1 and "exit 75" in line[0] and "checkpoint" in line[0],
          "%s: no stop line:\n%s" % (tag, err))
    k = stored_step(env, "S" + tag)
    check(3 <= k < TOTAL, "%s: stopped at step %d" % (tag, k))
    check(not [f for f in os.listdir(env.path("S" + tag)) if ".tmp." in f], "%s: temporaries left" % tag)
    p2 = env.ok(train(so, "S" + tag, TOTAL, "--resume"), np_=np_)
    check("resuming from S%s/ckpt-%08d" % (tag, k) in p2.stdout, p2.stdout)
    same_state(env, ckpt("U" + tag, TOTAL), ckpt("S" + tag, TOTAL), tag)
    print("%s: stopped after step %d in %.1f s, exit %d: %s; resumed to %d bit-identical"
          % (tag, k, elapsed, rc, line[0], TOTAL))


def case_term_np1(env):
    make_data(env)
    preempt_and_resume(env, "toy_b4.so", None, "t1", lambda p: p.send_signal(signal.SIGTERM), 75)
    # SIGINT (Ctrl-C) too.
    preempt_and_resume(env, "toy_b4.so", None, "i1", lambda p: p.send_signal(signal.SIGINT), 75)


# Open MPI sends SIGTERM on to the ranks odls_base_sigkill_timeout seconds
# after it got one, SIGKILL as long again later (docs/multi-node.md).
SIGKILL_WINDOW = ("--mca", "odls_base_sigkill_timeout", "4")


def case_term_np2(env):
    make_data(env)

    def slurm(p):  # mpirun and every rank at once
        ranks = ranks_of(p)
        check(len(ranks) == 2, "ranks: %s" % ranks)
        for pid in [p.pid] + ranks:
            os.kill(pid, signal.SIGTERM)
    # mpirun answers its own SIGTERM with exit 1 whatever the ranks return;
    # the ranks' 75 and the checkpoint are what the recipe relies on.
    preempt_and_resume(env, "toy_b2.so", 2, "t2", slurm, 1, SIGKILL_WINDOW)

    def slurm1(p):  # one rank under mpirun
        ranks = ranks_of(p)
        check(len(ranks) == 1, "ranks: %s" % ranks)
        for pid in [p.pid] + ranks:
            os.kill(pid, signal.SIGTERM)
    preempt_and_resume(env, "toy_b4.so", 1, "t1m", slurm1, 1, SIGKILL_WINDOW)


def case_usr1_np2(env):
    make_data(env)
    preempt_and_resume(env, "toy_b2.so", 2, "u2", lambda p: p.send_signal(signal.SIGUSR1), 75)
    preempt_and_resume(env, "toy_b4.so", 1, "u1m", lambda p: p.send_signal(signal.SIGUSR1), 75)

    def rank1_only(p):
        ranks = sorted(ranks_of(p))
        os.kill(ranks[-1], signal.SIGTERM)
    preempt_and_resume(env, "toy_b2.so", 2, "r2", rank1_only, 75)


def case_grace(env):
    make_data(env)
    # A step of ~2 s, a grace of 0.3 s: step 3 is abandoned, step 2 saved.
    slow = {"HC_TOY_SLOW_MS": "2000"}
    p = start(env, train("toy_b4.so", "G", TOTAL, "--metrics", "g.jsonl", "--checkpoint-grace", "0.3"),
              extra_env=slow)
    wait_for_step(env, "g.jsonl", 2, p)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    rc, out, err = finish(p)
    check(rc == 75, "grace: exit %d\n%s" % (rc, err))
    check("step 3 abandoned before its update" in err, "grace: not abandoned:\n" + err)
    check(stored_step(env, "G") == 2, "grace: saved step %d, expected 2" % stored_step(env, "G"))
    # The saved state is step 2's exactly: an uninterrupted 2-step run.
    env.ok(train("toy_b4.so", "G2", 2))
    same_state(env, ckpt("G", 2), ckpt("G2", 2), "grace")
    print("grace 0.3 s < a 2 s step: " + [l for l in err.splitlines() if "stopped" in l][0])

    # A grace longer than the step: it finishes, and is saved.
    p = start(env, train("toy_b4.so", "L", TOTAL, "--metrics", "l.jsonl", "--checkpoint-grace", "30"),
              extra_env={"HC_TOY_SLOW_MS": "1000"})
    wait_for_step(env, "l.jsonl", 2, p)
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    rc, out, err = finish(p)
    check(rc == 75 and "abandoned" not in err and stored_step(env, "L") == 3,
          "grace 30: exit %d, saved %d\n%s" % (rc, stored_step(env, "L"), err))

    # A second signal from the same sender: at once, 128 + 15, nothing
    # half-written (a grace long enough that the first one is still waiting).
    p = start(env, train("toy_b4.so", "T", TOTAL, "--metrics", "t.jsonl", "--checkpoint-grace", "60"),
              extra_env={"HC_TOY_SLOW_MS": "3000"})
    wait_for_step(env, "t.jsonl", 1, p)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    rc, out, err = finish(p)
    check(rc == 128 + signal.SIGTERM and time.monotonic() - t0 < 2.5,
          "second signal: exit %d after %.1f s\n%s" % (rc, time.monotonic() - t0, err))
    check("second signal" in err, err)
    check(sorted(os.listdir(env.path("T"))) == [".hc-run.lock", os.path.basename(ckpt("", 1))] or
          sorted(os.listdir(env.path("T"))) == [".hc-run.lock"],
          "second signal left %s" % os.listdir(env.path("T")))
    print("second SIGTERM: exit %d, folder %s" % (rc, sorted(os.listdir(env.path("T")))))


def mpmd(env, a, b, timeout=60):
    """rank 0 runs hc-run `a`, rank 1 hc-run `b` (an MPMD launch)."""
    cmd = MPI + ["-np", "1", env.hc_run] + a + [":", "-np", "1", env.hc_run] + b
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=env.work, capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - t0


def case_disagree(env):
    make_data(env)
    np.save(env.path("other.npy"), np.load(env.path("data.npy"))[::-1].copy())
    os.link(env.path("data.npy"), env.path("same.npy"))  # another name, same content
    base = ["toy_b2.so", "--data", "data.npy", "--labels", "labels.npy", "--steps", "4", "--seed", "5",
            "--log-every", "1"]

    def variant(flag, value):
        b = list(base)
        if flag in b:
            b[b.index(flag) + 1] = value
        else:
            b += [flag, value]
        return b
    # Another library: the same toy at another batch is another step.
    lib1 = list(base)
    lib1[0] = "toy_b4.so"
    cases = [("--seed", variant("--seed", "6"), "--seed"),
             ("--steps", variant("--steps", "9"), "--steps"),
             ("--log-every", variant("--log-every", "2"), "--log-every"),
             ("--data", variant("--data", "other.npy"), "--data (content)"),
             ("library", lib1, "the library's batch per rank")]
    for name, b, field in cases:
        p, secs = mpmd(env, base, b)
        lines = [l for l in p.stderr.splitlines() if l.startswith("hc-run:")]
        check(p.returncode == 2, "%s: exit %d\n%s" % (name, p.returncode, p.stderr))
        check(len(lines) == 1 and "rank 1" in lines[0] and field in lines[0] and "before step 1" in lines[0],
              "%s: message:\n%s" % (name, p.stderr))
        check("Train Loss" not in p.stdout, "%s: it trained:\n%s" % (name, p.stdout))
        print("%-12s exit %d in %.1f s: %s" % (name, p.returncode, secs, lines[0]))
    # Equal content under another path passes.
    p, _ = mpmd(env, base, variant("--data", "same.npy"))
    check(p.returncode == 0, "same content, other path: exit %d\n%s" % (p.returncode, p.stderr))


def case_resume_data(env):
    make_data(env)
    env.ok(train("toy_b4.so", "R", 3))
    images = np.load(env.path("data.npy"))
    images[4, 0, 0, 0] += 1.0
    np.save(env.path("edited.npy"), images)
    labels = np.load(env.path("labels.npy"))
    np.save(env.path("labels2.npy"), (labels + 1) % labels.max())

    def resume(*changes):
        a = train("toy_b4.so", "R", 6, "--resume")
        for old, new in changes:
            i = a.index(old)
            if new is None:
                del a[i:i + 2]
            else:
                a[i + 1] = new
        return a
    l1 = expect_exit2(env, resume(("--data", "edited.npy")), "other data", contains="not the data it was trained on")
    l2 = expect_exit2(env, resume(("--labels", "labels2.npy")), "other labels",
                      contains="not the labels it was trained on")
    l3 = expect_exit2(env, resume(("--labels", None)), "no labels", contains="class-conditional")
    for l in (l1, l2, l3):
        check("--allow-data-change" in l, l)
        print(l)
    p = env.ok(resume(("--data", "edited.npy")) + ["--allow-data-change"])
    check("--allow-data-change" in p.stdout, p.stdout)
    _, md = st.load(ckpt(env.path("R"), 6), with_metadata=True)
    check(md.get("hc.data_changed_at") == "3", "hc.data_changed_at = %r" % md.get("hc.data_changed_at"))
    # The same data resumes as before.
    env.ok(train("toy_b4.so", "R2", 3))
    env.ok(train("toy_b4.so", "R2", 6, "--resume"))


def case_messages(env):
    images, _ = make_data(env)
    bad = images.copy()
    bad[7, 0, 1, 1] = np.nan
    np.save(env.path("nan.npy"), bad)
    # Every sample is read in the first epoch (10 samples, batch 4: 2 steps).
    p = env.run(["toy_b4.so", "--data", "nan.npy", "--labels", "labels.npy", "--steps", "3"])
    check(p.returncode == 2 and "nan.npy: sample 7 holds NaN" in p.stderr, "NaN pixel: %d\n%s"
          % (p.returncode, p.stderr))
    print(p.stderr.strip().splitlines()[-1])
    # An NPY header of 300 KB.
    with open(env.path("big.npy"), "wb") as f:
        d = ("{'descr': '<f4', 'fortran_order': False, 'shape': (10, 1, 4, 4), }" + " " * 300000 + "\n")
        f.write(b"\x93NUMPY\x02\x00" + len(d).to_bytes(4, "little") + d.encode())
        f.write(images.tobytes())
    line = expect_exit2(env, ["toy_b4.so", "--data", "big.npy", "--labels", "labels.npy", "--steps", "1"],
                        "big header", contains="over the 65536")
    print(line)
    # A run of more than 100 steps that keeps nothing is warned about (#51).
    base = ["toy_b4.so", "--data", "data.npy", "--labels", "labels.npy", "--steps", "101", "--log-every", "101"]
    p = env.ok(base)
    check("warning: 101 steps and nothing will be saved" in p.stdout, p.stdout)
    for keep in (["--save-params", "p.safetensors"], ["--ckpt-dir", "K"]):
        check("nothing will be saved" not in env.ok(base + keep).stdout, "warned with %s" % keep)
    check("nothing will be saved" not in env.ok(base[:-4] + ["--steps", "100"]).stdout, "warned at 100 steps")


def case_links(env):
    make_data(env)
    victim = env.path("victim.txt")
    open(victim, "w").write("precious\n")
    os.makedirs(env.path("D"))
    os.symlink(victim, env.path("D", ".hc-run.lock"))
    line = expect_exit2(env, train("toy_b4.so", "D", 2), "lock link", contains="symbolic link")
    check(open(victim).read() == "precious\n", "the lock link's target was written")
    print("lock link: " + line)
    for flag in ("--metrics", "--save-params", "--profile"):
        link = env.path("out" + flag.strip("-"))
        os.symlink(victim, link)
        line = expect_exit2(env, ["toy_b4.so", "--data", "data.npy", "--labels", "labels.npy",
                                  "--steps", "1", flag, link], flag + " link", contains="symbolic link")
        check(open(victim).read() == "precious\n", flag + ": the link's target was written")
        print("%s link: %s" % (flag, line))


CASES = {"links": case_links, "term-np1": case_term_np1, "term-np2": case_term_np2,
         "usr1-np2": case_usr1_np2, "grace": case_grace, "disagree": case_disagree,
         "resume-data": case_resume_data, "messages": case_messages}

if __name__ == "__main__":
    sys.exit(case_main(CASES))
