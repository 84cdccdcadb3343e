#!/usr/bin/env -S /usr/bin/python3
"""hc-run's trainer features against oracles, on the toy step library
(test/run/toy_step.cpp, SGD) and the anchors environment's real libraries:

  schedule     --lr-schedule constant/linear/cosine over 1000 steps: the rate
               of every step (metrics "lr") against diffusers' get_*_schedule_
               with_warmup driving torch's LambdaLR (transformers' closed
               forms), within 2e-7 relative; the floor --min-lr against the
               formula; and the rate the step applies: test mode's parameters
               against the float64 SGD oracle fed the scheduled rates.
  resume       a run stopped mid-warmup and resumed (--resume) ends
               bit-identical to the run that was not stopped; a changed
               schedule on resume is noted; refusals of bad flags.
  tensorboard  --tensorboard: every record read back by TensorBoard's own
               reader (CRC-32C checked), every scalar equal to the metrics
               line's value as float32, a resumed run adding a second file;
               a corrupted byte is caught by the reader.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import run_check as rc  # noqa: E402
import st  # noqa: E402
import lr_schedules  # noqa: E402
from common import anchors_python  # noqa: E402

check = rc.check
ORACLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "anchors_oracles.py")


def oracle(*args):
    out = subprocess.run([anchors_python(), ORACLES] + [str(a) for a in args],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def metrics(env, name):
    with open(env.path(name)) as f:
        return [json.loads(l) for l in f]


def train(env, tag, steps, extra, ok=True):
    args = ["toy_b4.so", "--data", "data.npy", "--labels", "labels.npy", "--steps", str(steps),
            "--seed", "5", "--log-every", "1", "--no-progress"] + list(extra)
    return env.ok(args) if ok else env.run(args)


def case_schedule(env):
    rc.make_data(env)
    # The toy's compiled rate is the float 0.05f; hc-run starts from it.
    lr, total, warmup = float(np.float32(0.05)), 1000, 100
    worst = {}
    for kind in ("constant", "linear", "cosine"):
        train(env, kind, total, ["--lr-schedule", kind, "--warmup-steps", str(warmup),
                                 "--metrics", "m.%s.jsonl" % kind])
        got = [m["lr"] for m in metrics(env, "m.%s.jsonl" % kind)]
        want = oracle("lr", kind, warmup, total, lr, total)
        check(len(got) == total, "%s: %d metrics lines" % (kind, len(got)))
        errs = [abs(g - w) / w if w else abs(g) for g, w in zip(got, want)]
        worst[kind] = max(errs)
        bad = int(np.argmax(errs))
        check(worst[kind] <= 2e-7, "%s: step %d lr %r, diffusers %r" % (kind, bad + 1, got[bad], want[bad]))
    # The floor: cosine from 0.05 to 0.01, held there past --decay-steps.
    train(env, "floor", 300, ["--lr-schedule", "cosine", "--warmup-steps", "20", "--decay-steps",
                              "250", "--min-lr", "0.01", "--metrics", "m.floor.jsonl"])
    got = [m["lr"] for m in metrics(env, "m.floor.jsonl")]
    f = lr_schedules.multiplier("cosine", 20, 250, lr, 0.01)
    want = [lr * f(s) for s in range(300)]
    worst["cosine --min-lr"] = max(abs(g - w) / w if w else abs(g) for g, w in zip(got, want))
    check(worst["cosine --min-lr"] <= 2e-7, "floor: %s vs %s" % (got[245:255], want[245:255]))
    check(got[-1] == 0.01 and min(got[20:]) == 0.01, "floor: last %r, min %r" % (got[-1], min(got[20:])))
    # Applied: the step's parameters follow the scheduled rates (test mode,
    # fixed inputs) against the float64 SGD oracle.
    inputs = rc.write_inputs(env.path("in"), 4)
    env.ok(["toy_b4.so", "--inputs", "in", "--steps", "6", "--save-params", "p.sched.safetensors",
            "--lr-schedule", "linear", "--warmup-steps", "2", "--lr", "0.2", "--decay-steps", "5"])
    f = lr_schedules.multiplier("linear", 2, 5, 0.2)
    p = {k: v.astype(np.float64) for k, v in env.init.items()}
    for s in range(6):
        _, g, _ = rc.toy_step(p, *inputs)
        for k in rc.TRAINABLE:
            p[k] = p[k] - 0.2 * f(s) * g[k]
    saved = st.load(env.path("p.sched.safetensors"))
    perr = max(rc.rel(saved[k], p[k]) for k in rc.PARAMS)
    check(perr <= 1e-5, "scheduled SGD differs from the oracle by %g" % perr)
    env.ok(["toy_b4.so", "--inputs", "in", "--steps", "6", "--save-params", "p.const.safetensors"])
    const = st.load(env.path("p.const.safetensors"))
    check(rc.rel(const["lin.weight"], p["lin.weight"]) > 1e-3, "the schedule changed nothing")
    print("schedule: 1000 steps, worst rel err against diffusers/LambdaLR: %s; applied rates: "
          "params within %.2e of the float64 oracle"
          % (", ".join("%s %.1e" % kv for kv in worst.items()), perr))


def case_resume(env):
    rc.make_data(env)
    sched = ["--lr-schedule", "cosine", "--warmup-steps", "6", "--decay-steps", "12"]
    train(env, "a", 12, sched + ["--ckpt-dir", "A", "--metrics", "m.a.jsonl"])
    train(env, "b", 4, sched + ["--ckpt-dir", "B", "--metrics", "m.b.jsonl"])
    p = train(env, "b", 12, sched + ["--ckpt-dir", "B", "--resume", "--metrics", "m.b.jsonl"])
    check("note: the learning-rate schedule" not in p.stdout, "unchanged schedule noted:\n" + p.stdout)
    a = st.load(env.path("A", "ckpt-00000012.safetensors"), with_metadata=True)
    b = st.load(env.path("B", "ckpt-00000012.safetensors"), with_metadata=True)
    check(sorted(a[0]) == sorted(b[0]), "tensors %s vs %s" % (sorted(a[0]), sorted(b[0])))
    for k in a[0]:
        check(np.array_equal(a[0][k], b[0][k]), "%s differs after the resume" % k)
    la = [m["lr"] for m in metrics(env, "m.a.jsonl")]
    lb = [m["lr"] for m in metrics(env, "m.b.jsonl")]
    check(la == lb, "rates %s vs %s" % (la, lb))
    check(a[1]["hc.lr_schedule"] == "cosine lr=0.05000000074505806 min_lr=0.0 warmup=6 decay=12",
          "recorded schedule %r" % a[1]["hc.lr_schedule"])
    # A longer decay on resume is allowed, and said.
    p = train(env, "c", 14, ["--lr-schedule", "cosine", "--warmup-steps", "6", "--ckpt-dir", "B",
                             "--resume"])
    check("note: the learning-rate schedule changes at step 12: was cosine lr=0.05000000074505806 "
          "min_lr=0.0 warmup=6 decay=12, now cosine lr=0.05000000074505806 min_lr=0.0 warmup=6 "
          "decay=14" in p.stdout, "no note:\n" + p.stdout)
    # Refusals: one line, exit 2.
    for flags, msg in (
            (["--min-lr", "0.1"], "--min-lr is for --lr-schedule linear or cosine"),
            (["--lr-schedule", "step"], "--lr-schedule needs constant, linear or cosine, got 'step'"),
            (["--lr-schedule", "linear", "--warmup-steps", "20"],
             "--warmup-steps 20 is past the end of the decay (--steps 12)"),
            (["--lr-schedule", "cosine", "--lr", "0.01", "--min-lr", "0.02"], "is above --lr"),
            (["--weight-decay", "0.1"], "has no 'weight_decay' hyperparameter"),
            (["--lr", "nan"], "--lr needs a number >= 0, got 'nan'")):
        p = train(env, "bad", 12, flags, ok=False)
        check(p.returncode == 2 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1,
              "%s: exit %d\n%s" % (flags, p.returncode, p.stderr))
    # Pixels in [0, 255] train, with a warning (issue 51); [-1, 1] without.
    np.save(env.path("pixels.npy"), (np.load(env.path("data.npy")) * 60 + 128).astype(np.float32))
    p = env.ok(["toy_b4.so", "--data", "pixels.npy", "--steps", "1", "--no-progress"])
    check("hc-run: warning: pixels.npy holds values up to" in p.stdout, "no [0, 255] warning:\n" +
          p.stdout)
    check("holds values up to" not in train(env, "plain", 1, []).stdout, "warning on [-1, 1] data")
    print("resume: stopped at step 4 of a 6-step warmup and resumed: all %d tensors bit-identical "
          "at step 12, rates equal; a changed schedule noted; 6 refusals" % len(a[0]))


def case_tensorboard(env):
    rc.make_data(env)
    train(env, "tb", 5, ["--tensorboard", "tb", "--metrics", "m.tb.jsonl", "--ckpt-dir", "C",
                         "--lr-schedule", "linear", "--warmup-steps", "2"])
    ms = metrics(env, "m.tb.jsonl")
    got = oracle("tensorboard", env.path("tb"))
    check(got["files"] == 1 and got["records"] == 6, "files/records %s" % got)
    keys = [k for k in ms[0] if k not in ("step", "wall_s")]
    tags = {"loss": "train/loss", "lr": "train/lr"}
    for k in keys:
        tag = tags.get(k, ("memory/" if "rss" in k else "perf/") + k)
        series = got["scalars"].get(tag)
        check(series is not None, "no scalar %s in %s" % (tag, sorted(got["scalars"])))
        check([s for s, _ in series] == [m["step"] for m in ms], "%s steps %s" % (tag, series))
        for (s, v), m in zip(series, ms):
            check(v == float(np.float32(m[k])), "%s at step %d: %r, metrics %r" % (tag, s, v, m[k]))
    # A resumed run writes a second file; the reader sees both.
    train(env, "tb2", 8, ["--tensorboard", "tb", "--ckpt-dir", "C", "--resume",
                          "--lr-schedule", "linear", "--warmup-steps", "2", "--decay-steps", "5"])
    got2 = oracle("tensorboard", env.path("tb"))
    check(got2["files"] == 2, "files after the resume: %d" % got2["files"])
    check([s for s, _ in got2["scalars"]["train/loss"]] == list(range(1, 9)),
          "steps after the resume %s" % got2["scalars"]["train/loss"])
    # A flipped byte in a record fails TensorBoard's CRC check.
    f = sorted(os.listdir(env.path("tb")))[0]
    data = bytearray(open(env.path("tb", f), "rb").read())
    data[len(data) // 2] ^= 0x40
    os.makedirs(env.path("tbbad"))
    open(env.path("tbbad", f), "wb").write(bytes(data))
    p = subprocess.run([anchors_python(), ORACLES, "tensorboard", env.path("tbbad")],
                       capture_output=True, text=True)
    check(p.returncode != 0 and "crc32" in p.stderr, "corruption not caught: %s" % p.stderr[-300:])
    # Refusals.
    os.symlink("elsewhere", env.path("tblink"))
    p = train(env, "bad", 2, ["--tensorboard", "tblink"], ok=False)
    check(p.returncode == 2 and "is a symbolic link" in p.stderr, p.stderr)
    open(env.path("tbfile"), "w").close()
    p = train(env, "bad", 2, ["--tensorboard", "tbfile"], ok=False)
    check(p.returncode == 2 and "is not a folder" in p.stderr, p.stderr)
    print("tensorboard: %d records through TensorBoard %s's reader (CRC-32C checked), %d tags x 5 "
          "steps equal to the metrics as float32; resume adds a file (steps 1-8); a flipped byte "
          "is caught" % (got["records"], "2.x", len(keys)))


def case_progress(env):
    """Under mpirun (no terminal): rank 0 prints a progress line with the ETA
    after each log line and whenever --progress-every seconds passed."""
    import re
    rc.make_data(env)
    line = re.compile(r"^hc-run: step (\d+)/8 \(\d+\.\d%\), [\d.e+-]+ steps/s, loss \d+\.\d{4}, "
                      r"elapsed (\S+), ETA (\S+)$", re.M)
    p = env.ok(["toy_b2.so", "--data", "data.npy", "--labels", "labels.npy", "--steps", "8",
                "--seed", "5", "--log-every", "6", "--progress-every", "1"], np_=2,
               env={"HC_TOY_SLOW_MS": "400"})
    got = line.findall(p.stdout)
    steps = [int(s) for s, _, _ in got]
    # A line after each log line (steps 6 and 8) and timed ones in between
    # (0.4 s steps, one line a second): before step 6 at least one.
    check(6 in steps and 8 in steps, "no progress line at the log lines: %s\n%s" % (steps, p.stdout))
    check(any(s < 6 for s in steps), "no timed progress line before the first log:\n" + p.stdout)
    check(all(re.match(r"^(\d+h\d\dm|\d+m\d\ds|\d+s)$", eta) for _, _, eta in got), "ETA %s" % got)
    check(p.stdout.count("hc-run: step ") == len(got), "only rank 0 prints:\n" + p.stdout)
    q = env.ok(["toy_b2.so", "--data", "data.npy", "--labels", "labels.npy", "--steps", "8",
                "--seed", "5", "--log-every", "6", "--no-progress"], np_=2)
    check("hc-run: step " not in q.stdout, "--no-progress printed progress:\n" + q.stdout)
    print("progress: under mpirun -np 2, lines at steps %s with ETAs %s; none with --no-progress"
          % (steps, [eta for _, _, eta in got]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=("schedule", "resume", "tensorboard", "progress"))
    ap.add_argument("--hc-run", required=True)
    ap.add_argument("--toys", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    env = rc.Env(a)
    try:
        globals()["case_" + a.case](env)
    except rc.Failure as e:
        sys.exit("FAIL %s: %s" % (a.case, e))


if __name__ == "__main__":
    main()
