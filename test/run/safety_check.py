#!/usr/bin/env -S /usr/bin/python3
"""Nothing lost, nothing run: hc-compile and hc-run on hostile names, outputs
that name inputs, a shared checkpoint folder, non-finite state, edited
checkpoints and a failed recompile (issue 28's probe, as a user runs it).

usage: safety_check.py CASE --bin DIR --toys DIR --work DIR

  setup        export the tiny DiT (1 channel, 8x8, 10 classes, dynamic
               batch), compile it --batch 4 into s.so and with --lr 1e40 into
               lr40.so; 64 samples x.npy / y.npy.
  injection    output names with quotes and shell syntax are file names: no
               command runs, the library lands under that exact name.
  overwrite    no output may be an input (any spelling, links included) or
               another output; a folder as output is refused before step 1.
  lock         a second run on a checkpoint folder is refused naming the
               holder's host and pid; a killed run's lock is released.
  nonfinite    non-finite parameters are never saved; a diverging run keeps
               its last finite checkpoint (--ckpt-keep 1).
  tamper       an edited checkpoint header, and a checkpoint whose name
               disagrees with its stored step, are refused on --resume.
  recompile    a failed recompile leaves the old pair intact; a library and
               an init file that do not belong together are refused.
"""
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import st  # noqa: E402
from run_check import Failure, check, init_params  # noqa: E402

PY = "/usr/bin/python3"
D = ["--data", "x.npy", "--labels", "y.npy"]


class Ctx:
    def __init__(self, a):
        self.bin, self.toys, self.work = a.bin, a.toys, a.work
        self.setup = os.path.join(os.path.dirname(a.work), "work.safety.setup")

    def path(self, *p):
        return os.path.join(self.work, *p)

    def fresh(self):
        """The case's own folder, with links to the fixture's files."""
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        for f in ("model.onnx", "s.so", "s.so.init.safetensors", "lr40.so", "lr40.so.init.safetensors",
                  "x.npy", "y.npy"):
            shutil.copy(os.path.join(self.setup, f), self.path(f))

    def run(self, tool, args, env=None, timeout=240):
        e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        e.update(env or {})
        p = subprocess.run([os.path.join(self.bin, tool)] + args, cwd=self.work, env=e,
                           capture_output=True, text=True, timeout=timeout)
        p.cmd = " ".join([tool] + args)
        return p

    def ok(self, tool, args, env=None):
        p = self.run(tool, args, env)
        check(p.returncode == 0, "%s: exit %d\n%s%s" % (p.cmd, p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
        return p

    def refused(self, tool, args, want, code=2, env=None):
        """Exit `code`, one stderr line containing every string in `want`."""
        p = self.run(tool, args, env)
        check(p.returncode == code, "%s: exit %d, expected %d\n%s%s"
              % (p.cmd, p.returncode, code, p.stdout[-2000:], p.stderr[-2000:]))
        lines = p.stderr.strip().splitlines()
        check(len(lines) == 1, "%s: expected one stderr line:\n%s" % (p.cmd, p.stderr))
        for w in want:
            check(w in lines[0], "%s: stderr lacks %r: %s" % (p.cmd, w, lines[0]))
        return p


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def case_setup(c):
    shutil.rmtree(c.setup, ignore_errors=True)
    os.makedirs(c.setup)
    c.work = c.setup
    subprocess.run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size", "8",
                    "--in-channels", "1", "--num-classes", "10", "--dynamic-batch", "-o", "model.onnx",
                    "--quiet"], cwd=c.setup, check=True, timeout=240)
    c.ok("hc-compile", ["model.onnx", "--batch", "4", "-o", "s.so"])
    c.ok("hc-compile", ["model.onnx", "--batch", "4", "--lr", "1e40", "-o", "lr40.so"])
    r = np.random.default_rng(3)
    np.save(c.path("x.npy"), r.uniform(-1, 1, (64, 1, 8, 8)).astype(np.float32))
    np.save(c.path("y.npy"), r.integers(0, 10, 64).astype(np.int64))
    print("tiny DiT compiled into s.so and lr40.so; 64 samples")


def case_injection(c):
    c.fresh()
    os.makedirs(c.path("inj"))
    name = "inj/x';touch MARK;echo '.so"
    c.ok("hc-compile", ["model.onnx", "--batch", "4", "-o", name])
    marks = [os.path.join(d, f) for d, _, fs in os.walk(c.work) for f in fs if f == "MARK"]
    check(not marks, "a command in the output name ran: %s" % marks)
    check(os.path.isfile(c.path(name)) and os.path.isfile(c.path(name + ".init.safetensors")),
          "the library is not under its exact name: %s" % os.listdir(c.path("inj")))
    check(sorted(os.listdir(c.path("inj"))) == sorted([os.path.basename(name),
                                                       os.path.basename(name) + ".init.safetensors"]),
          "stray files beside the library: %s" % os.listdir(c.path("inj")))
    # A plain quote, a leading dash: names, not syntax or flags.
    for n in ("q'uote.so", "-dash.so"):
        c.ok("hc-compile", ["model.onnx", "--batch", "4", "-o", n])
        check(os.path.isfile(c.path(n)), "%s not written" % n)
    # The library works: one train step from its exact name.
    c.ok("hc-run", [name] + D + ["--steps", "1", "--no-progress"])
    c.refused("hc-compile", ["model.onnx", "--batch", "4", "--target", "x86-64;touch MARK2", "-o", "t.so"],
              ["--target needs an -march name"])
    check(not os.path.exists(c.path("MARK2")), "--target ran a command")
    print("output names with ' ; and a leading - are file names; no command ran")


def case_overwrite(c):
    c.fresh()
    model = digest(c.path("model.onnx"))
    os.symlink("model.onnx", c.path("alias.onnx"))
    os.link(c.path("model.onnx"), c.path("hard.onnx"))
    for out in ("model.onnx", "./model.onnx", "alias.onnx", "hard.onnx"):
        c.refused("hc-compile", ["model.onnx", "--batch", "4", "-o", out], ["-o " + out, "input model"])
        c.refused("hc-compile", ["model.onnx", "--batch", "4", "--emit=hc", "-o", out], ["input model"])
    check(digest(c.path("model.onnx")) == model, "the model changed")
    os.makedirs(c.path("folder"))
    c.refused("hc-compile", ["model.onnx", "--batch", "4", "-o", "folder"], ["is a folder"])

    data = {f: digest(c.path(f)) for f in ("x.npy", "y.npy", "s.so", "s.so.init.safetensors")}
    run = ["s.so"] + D + ["--steps", "2", "--no-progress"]
    for flag, out, what in (("--save-params", "x.npy", "--data"), ("--metrics", "x.npy", "--data"),
                            ("--save-params", "./y.npy", "--labels"), ("--save-grads", "s.so", "step library"),
                            ("--save-state", "s.so.init.safetensors", "initial parameters")):
        p = c.refused("hc-run", run + [flag, out], [flag + " " + out, what, "overwritten"])
        check("Train Loss" not in p.stdout, "%s %s: trained before refusing" % (flag, out))
    os.symlink("x.npy", c.path("data-link.npy"))
    c.refused("hc-run", run + ["--metrics", "data-link.npy"], ["--data"])
    c.refused("hc-run", run + ["--save-params", "p.st", "--save-state", "./p.st"],
              ["--save-state and --save-params both name"])
    p = c.refused("hc-run", run + ["--save-params", "folder"], ["--save-params folder is a folder"])
    check("Train Loss" not in p.stdout and "step=" not in p.stdout, "trained before refusing a folder")
    check({f: digest(c.path(f)) for f in data} == data, "an input changed")
    # Test mode: an input NPY as output.
    os.makedirs(c.path("in"))
    r = np.random.default_rng(0)
    np.save(c.path("in", "x_t.npy"), r.standard_normal((4, 1, 8, 8)).astype(np.float32))
    np.save(c.path("in", "noise.npy"), r.standard_normal((4, 1, 8, 8)).astype(np.float32))
    np.save(c.path("in", "t.npy"), np.array([1, 10, 100, 999], np.int64))
    np.save(c.path("in", "y.npy"), np.array([0, 1, 2, 3], np.int64))
    c.refused("hc-run", ["s.so", "--inputs", "in", "--steps", "1", "--save-grads", "in/noise.npy"], ["--inputs"])
    c.ok("hc-run", ["s.so", "--inputs", "in", "--steps", "1", "--save-grads", "g.safetensors"])
    print("outputs naming inputs (4 spellings for hc-compile, 6 for hc-run), each other or a folder: exit 2, "
          "inputs unchanged")


def lock_holder(c, d):
    with open(c.path(d, ".hc-run.lock")) as f:
        return f.read()


def case_lock(c):
    c.fresh()
    # Deterministic: the test holds the lock as a run would.
    os.makedirs(c.path("held"))
    with open(c.path("held", ".hc-run.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.write("host testhost, pid 4242\n")
        f.flush()
        c.refused("hc-run", ["s.so"] + D + ["--steps", "2", "--ckpt-dir", "held"],
                  ["--ckpt-dir held is in use", "host testhost, pid 4242"])
    # Released with the holder: the same run now goes through.
    c.ok("hc-run", ["s.so"] + D + ["--steps", "2", "--ckpt-dir", "held", "--no-progress"])

    # Two real runs: the second (a --resume too) is refused naming the first.
    e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    a = subprocess.Popen([os.path.join(c.bin, "hc-run"), "s.so"] + D +
                         ["--steps", "1000000", "--ckpt-dir", "live", "--ckpt-every", "5", "--no-progress"],
                         cwd=c.work, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (os.path.exists(c.path("live", "ckpt-00000005.safetensors"))):
            check(a.poll() is None, "the first run ended early: exit %s" % a.returncode)
            check(time.monotonic() < deadline, "the first run wrote no checkpoint in 120 s")
            time.sleep(0.1)
        holder = "host %s, pid %d" % (socket.gethostname(), a.pid)
        check(lock_holder(c, "live").strip() == holder, "lock file says %r, expected %r"
              % (lock_holder(c, "live"), holder))
        for extra in ([], ["--resume"]):
            c.refused("hc-run", ["s.so"] + D + ["--steps", "2", "--ckpt-dir", "live"] + extra,
                      ["--ckpt-dir live is in use", holder])
    finally:
        a.send_signal(signal.SIGKILL)
        a.wait()
    # The killed run's lock went with it: a resume takes the folder over.
    step = max(int(f[5:13]) for f in os.listdir(c.path("live")) if f.startswith("ckpt-"))
    p = c.ok("hc-run", ["s.so"] + D + ["--steps", str(step + 1), "--ckpt-dir", "live", "--resume",
                                       "--no-progress"])
    check("resuming from live/ckpt-%08d" % step in p.stdout, p.stdout)
    print("a held folder is refused naming 'host, pid'; after SIGKILL of the holder a resume from step %d works"
          % step)


def case_nonfinite(c):
    c.fresh()
    # The reproduction: --lr 1e40 makes every parameter non-finite in
    # step 1, whose loss is still finite.
    p = c.refused("hc-run", ["lr40.so"] + D + ["--steps", "1", "--ckpt-dir", "c", "--save-params",
                                               "p.safetensors", "--no-progress"],
                  ["non-finite", "after step 1"], code=1)
    check(not [f for f in os.listdir(c.path("c")) if f.startswith("ckpt-")] and
          not os.path.exists(c.path("p.safetensors")), "non-finite state was written: %s" % os.listdir(c.work))
    c.refused("hc-run", ["lr40.so"] + D + ["--steps", "1", "--save-params", "p.safetensors",
                                           "--no-progress"], ["non-finite", "after step 1"], code=1)
    check(not os.path.exists(c.path("p.safetensors")), "--save-params wrote non-finite parameters")
    # A run that diverges at step 5 with --ckpt-keep 1: checkpoint 4 stays.
    shutil.copy(os.path.join(c.toys, "toy_b4.so"), c.path("toy_b4.so"))
    st.save(c.path("toy.init.safetensors"), init_params())
    toys = "toy_b4.so"
    r = np.random.default_rng(1)
    np.save(c.path("tx.npy"), r.standard_normal((10, 1, 4, 4)).astype(np.float32))
    np.save(c.path("ty.npy"), r.integers(0, 3, 10).astype(np.int64))
    p = c.refused("hc-run", [toys, "--data", "tx.npy", "--labels", "ty.npy", "--steps", "8", "--ckpt-dir", "k",
                             "--ckpt-every", "1", "--ckpt-keep", "1", "--no-progress"],
                  ["non-finite", "after step 5", "lin.weight"], code=1, env={"HC_TOY_INF_PARAM_STEP": "5"})
    left = sorted(f for f in os.listdir(c.path("k")) if f.startswith("ckpt-"))
    check(left == ["ckpt-00000004.safetensors"], "checkpoints left: %s" % left)
    t = st.load(c.path("k", left[0]))
    check(all(np.isfinite(v).all() for v in t.values()), "checkpoint 4 is not finite")
    print("lr 1e40: exit 1 at step 1, nothing written; divergence at step 5 with --ckpt-keep 1 keeps ckpt-4: %s"
          % p.stderr.strip())


def edit_metadata(path, key, value):
    """Rewrites one metadata value in place, same length (as a hex editor would)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = raw[8:8 + n].decode()
    old = json.loads(head)["__metadata__"][key]
    check(len(old) == len(value), "edit_metadata: %s %r -> %r changes length" % (key, old, value))
    a = '"%s":"%s"' % (key, old)
    check(head.count(a) == 1, "edit_metadata: %s not found once" % a)
    head = head.replace(a, '"%s":"%s"' % (key, value))
    with open(path, "wb") as f:
        f.write(raw[:8] + head.encode() + raw[8 + n:])


def case_tamper(c):
    c.fresh()
    base = ["s.so"] + D + ["--no-progress", "--ckpt-every", "2"]
    c.ok("hc-run", base + ["--steps", "10", "--ckpt-dir", "c"])
    for key, value in (("hc.seed", "7"), ("hc.step", "5")):
        shutil.rmtree(c.path("e"), ignore_errors=True)
        os.makedirs(c.path("e"))
        shutil.copy(c.path("c", "ckpt-00000004.safetensors"), c.path("e"))
        edit_metadata(c.path("e", "ckpt-00000004.safetensors"), key, value)
        c.refused("hc-run", base + ["--steps", "6", "--ckpt-dir", "e", "--resume"],
                  ["e/ckpt-00000004.safetensors"])
    # The seed edit is caught by the checksum itself.
    shutil.copy(c.path("c", "ckpt-00000004.safetensors"), c.path("e"))
    edit_metadata(c.path("e", "ckpt-00000004.safetensors"), "hc.seed", "7")
    c.refused("hc-run", base + ["--steps", "6", "--ckpt-dir", "e", "--resume"], ["corrupt or edited"])
    # ckpt-4 copied to ckpt-99 beside ckpt-10: the name is refused, not trusted.
    shutil.copy(c.path("c", "ckpt-00000004.safetensors"), c.path("c", "ckpt-00000099.safetensors"))
    c.refused("hc-run", base + ["--steps", "12", "--ckpt-dir", "c", "--resume"],
              ["c/ckpt-00000099.safetensors", "name says step 99", "holds step 4"])
    os.remove(c.path("c", "ckpt-00000099.safetensors"))
    p = c.ok("hc-run", base + ["--steps", "12", "--ckpt-dir", "c", "--resume"])
    check("resuming from c/ckpt-00000010.safetensors (step 10)" in p.stdout, p.stdout)
    print("edited hc.seed / hc.step and a copy named ckpt-99 refused; the newest by stored step resumes")


def case_recompile(c):
    c.fresh()
    subprocess.run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size", "8",
                    "--in-channels", "1", "--num-classes", "10", "--dynamic-batch", "--seed", "9",
                    "-o", "other.onnx", "--quiet"], cwd=c.work, check=True, timeout=240)
    before = {f: digest(c.path(f)) for f in ("s.so", "s.so.init.safetensors")}
    listing = sorted(os.listdir(c.work))
    p = c.run("hc-compile", ["other.onnx", "--batch", "4", "-o", "s.so"], env={"HC_CXX": "false"})
    check(p.returncode == 1, "a failing C++ compiler: exit %d\n%s" % (p.returncode, p.stderr))
    check({f: digest(c.path(f)) for f in before} == before, "the old pair changed after a failed recompile")
    # The source and log stay in hc-compile's private temporary folder
    # (mkdtemp beside the output), named in the message; nothing else stays.
    left = sorted(f for f in os.listdir(c.work) if f not in listing)
    check(len(left) == 1 and left[0].startswith(".hc-compile.tmp."),
          "want one kept temporary folder, got %s\n%s" % (left, p.stderr))
    kept = sorted(os.listdir(c.path(left[0])))
    check(kept == ["s.so.cpp", "s.so.cpp.log"] and "source kept at ./%s/s.so.cpp" % left[0] in p.stderr,
          "the failed build's source and log should be kept and named: %s\n%s" % (kept, p.stderr))
    c.ok("hc-run", ["s.so"] + D + ["--steps", "1", "--no-progress"])
    # A pair that does not belong together: refused, naming both.
    c.ok("hc-compile", ["other.onnx", "--batch", "4", "-o", "o.so"])
    shutil.copy(c.path("o.so.init.safetensors"), c.path("s.so.init.safetensors"))
    c.refused("hc-run", ["s.so"] + D + ["--steps", "1"], ["s.so.init.safetensors does not belong to s.so"])
    # --init on purpose is the user's choice.
    c.ok("hc-run", ["s.so"] + D + ["--steps", "1", "--init", "o.so.init.safetensors", "--no-progress"])
    print("failed recompile: old pair intact, no temporaries; a mismatched pair refused: %s" % p.stderr.strip())


def script_main(cases):
    """CASE --bin DIR --toys DIR --work DIR: runs one case with a Ctx;
    PASS/FAIL line, exit 0/1. Shared by the scripts on the safety fixture."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(cases))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--toys", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    try:
        cases[a.case](Ctx(a))
    except Failure as e:
        print("FAIL %s: %s" % (a.case, e))
        sys.exit(1)
    print("PASS %s" % a.case)


def cases_of(namespace):
    """The case_NAME functions of a module's globals, as {"NAME": fn} (_ -> -)."""
    return {n[5:].replace("_", "-"): f for n, f in namespace.items() if n.startswith("case_")}


if __name__ == "__main__":
    script_main(cases_of(globals()))
