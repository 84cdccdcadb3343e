#!/usr/bin/env -S /usr/bin/python3
"""Issue 46 on the compiled tiny DiT (the safety fixture's s.so): the update
gate of a real step library, and hc-run's memory messages.

usage: dit_preempt_check.py CASE --bin DIR --toys DIR --work DIR

  gate    the emitted gate_call is the first optimizer call; a signal raised
          inside step 3 (HC_PREEMPT_RAISE) abandons it at the gate, step 2 is
          saved, exit 75, and the resume reaches step 6 bit-identical to an
          uninterrupted run: one stream (-np 1 and -np 2, rank 1 signalled
          alone) and a two-cluster CFTP plan (--clusters 2).
  memory  under `prlimit --as` below the plan, --strict-memory refuses
          (exit 2) naming the plan's bytes and the limit; without it the
          failure names the bytes and what the machine offers, not
          "uncaught exception".
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from run_check import MPI, check  # noqa: E402
from safety_check import D, Ctx, script_main  # noqa: E402

TOTAL = 6


def train(so, ck, steps, *extra):
    return [so] + D + ["--steps", str(steps), "--seed", "3", "--ckpt-dir", ck, "--ema", "0.99",
                       "--log-every", "1", "--no-progress"] + list(extra)


def run_np(ctx, np_, args, env=None):
    cmd = ([] if np_ is None else MPI + ["-np", str(np_)]) + [os.path.join(ctx.bin, "hc-run")] + args
    e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    e.update(env or {})
    p = subprocess.run(cmd, cwd=ctx.work, env=e, capture_output=True, text=True, timeout=240)
    p.cmd = " ".join(cmd)
    return p


def same(ctx, a, b, what):
    ta, tb = st.load(ctx.path(a)), st.load(ctx.path(b))
    check(sorted(ta) == sorted(tb) and any(k.startswith("ema:") for k in ta), what + ": tensors differ")
    for k in ta:
        check(ta[k].tobytes() == tb[k].tobytes(), "%s: %s differs" % (what, k))


def ckpt(d, s):
    return os.path.join(d, "ckpt-%08d.safetensors" % s)


def gate_round(ctx, so, np_, tag, raise_spec):
    u = run_np(ctx, np_, train(so, "U" + tag, TOTAL))
    check(u.returncode == 0, "%s: %s: exit %d\n%s" % (tag, u.cmd, u.returncode, u.stderr))
    p = run_np(ctx, np_, train(so, "S" + tag, TOTAL), {"HC_PREEMPT_RAISE": raise_spec})
    check(p.returncode == 75, "%s: exit %d, expected 75\n%s" % (tag, p.returncode, p.stderr))
    check("step 3 abandoned before its update" in p.stderr, "%s: not abandoned:\n%s" % (tag, p.stderr))
    saved = sorted(f for f in os.listdir(ctx.path("S" + tag)) if f.startswith("ckpt-"))
    check(saved == [os.path.basename(ckpt("", 2))], "%s: saved %s" % (tag, saved))
    # The saved state is step 2's, bit for bit (an uninterrupted 2-step run).
    two = run_np(ctx, np_, train(so, "T" + tag, 2))
    check(two.returncode == 0, two.stderr)
    same(ctx, ckpt("S" + tag, 2), ckpt("T" + tag, 2), tag + " at step 2")
    r = run_np(ctx, np_, train(so, "S" + tag, TOTAL, "--resume"))
    check(r.returncode == 0, "%s resume: exit %d\n%s" % (tag, r.returncode, r.stderr))
    same(ctx, ckpt("U" + tag, TOTAL), ckpt("S" + tag, TOTAL), tag)
    line = [l for l in p.stderr.splitlines() if "stopped after" in l][0]
    print("%s: exit 75: %s; resumed to %d bit-identical" % (tag, line, TOTAL))


def case_gate(ctx):
    ctx.fresh()
    # The gate stands before the first call writing parameters or moments:
    # the first optimizer kernel of the emitted call table.
    cpp = ctx.ok("hc-compile", ["model.onnx", "--batch", "4", "--emit=cpp"]).stdout
    gate = int(re.search(r"/\*gate_call\*/ (\d+),", cpp).group(1))
    where = re.search(r"const char \*const kCallWhere\[\] = \{\n(.*?)\n\};", cpp, re.S).group(1)
    labels = [l.strip() for l in where.splitlines()]
    first_opt = next(i for i, l in enumerate(labels) if "(optimizer)" in l)
    check(gate == first_opt, "gate_call %d, the first optimizer call is %d" % (gate, first_opt))
    print("gate_call %d of %d calls: %s" % (gate, len(labels), labels[gate]))
    gate_round(ctx, "s.so", None, "np1", "3:15")
    gate_round(ctx, "s.so", 2, "np2", "3:15:1")
    ctx.ok("hc-compile", ["model.onnx", "--batch", "4", "--clusters", "2", "-o", "c2.so"])
    sched = ctx.ok("hc-compile", ["model.onnx", "--batch", "4", "--clusters", "2",
                                  "--emit=schedule"]).stdout
    check("cluster = 1" in sched, "--clusters 2 made a one-stream plan")
    gate_round(ctx, "c2.so", None, "clusters2", "3:10")


def case_memory(ctx):
    ctx.fresh()
    hc_run = os.path.join(ctx.bin, "hc-run")

    def under(mb, *extra):
        cmd = ["prlimit", "--as=%d" % (mb << 20), "--", hc_run] + train("s.so", "M%d" % mb, 2, *extra)
        subprocess.run(["rm", "-rf", ctx.path("M%d" % mb)])
        p = subprocess.run(cmd, cwd=ctx.work, capture_output=True, text=True, timeout=120)
        lines = [l for l in p.stderr.splitlines() if l.startswith("hc-run:")]
        return p.returncode, lines[-1] if lines else p.stderr.strip()
    # From an address space that fits down to one that cannot even load the
    # libraries (about 15 MB here), 1 MB at a time.
    refused_where_it_fails = []
    failures, first_failing = 0, None
    for mb in range(40, 17, -1):
        rc, line = under(mb)
        src, sline = under(mb, "--strict-memory")
        for r, l in ((rc, line), (src, sline)):
            check("uncaught exception" not in l, "%d MB: %s" % (mb, l))
        if rc != 0:
            failures += 1
            first_failing = first_failing or (mb, line)
            check(rc == 1 and re.search(r"(out of memory|cannot allocate).*\d+ bytes", line) and
                  "address-space limit" in line, "%d MB: exit %d: %s" % (mb, rc, line))
        if src == 2:
            check("the plan needs" in sline and "address-space limit" in sline and "--strict-memory" in sline,
                  "%d MB strict: %s" % (mb, sline))
            if rc != 0:
                refused_where_it_fails.append(mb)
        else:
            check(src in (0, 1), "%d MB strict: exit %d: %s" % (mb, src, sline))
    check(failures > 0 and refused_where_it_fails,
          "want failures named and --strict-memory refusing where the run fails: %d failures, refused at %s"
          % (failures, refused_where_it_fails))
    print("ulimit -v %d MiB: exit 1: %s" % first_failing)
    print("--strict-memory refuses at %s MB: %s" % (refused_where_it_fails,
                                                   under(refused_where_it_fails[0], "--strict-memory")[1]))


if __name__ == "__main__":
    script_main({"gate": case_gate, "memory": case_memory})
