#!/usr/bin/env -S /usr/bin/python3
"""The schedule-level step (hc-lower-to-schedule + hc-plan-buffers: arenas,
strided views, kernel order, in-place optimizer) evaluated in float64 against
the graph-level step it was lowered from: loss of every step, every gradient
of the first step and every parameter's change over K steps, relative
error <= 1e-6. Both sides use the reference evaluator's float64 op semantics,
so any difference comes from the schedule itself (a wrong view, an
overlapping buffer plan, an op out of order, a gradient slot left unwritten:
the schedule evaluator poisons activations and gradients with NaN)."""
import argparse
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

from common import export, load_npy_dir, rel, run, torch_reference

TOL = 1e-6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bucket-mb", default="1")
    ap.add_argument("--schedule-arg", action="append", default=[],
                    help="an extra flag for the schedule-level run only (the "
                         "graph-level run stays the unfused reference)")
    ap.add_argument("--both-arg", action="append", default=[],
                    help="an extra flag for both runs (e.g. --precision=bf16)")
    ap.add_argument("export_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model.onnx")
    inputs = os.path.join(a.work, "inputs")
    export(model, [x for x in a.export_args if x != "--"])
    torch_reference(model, inputs)  # only for its input files
    base = [os.path.join(a.bin, "hc-eval"), model, "--batch", "2", "--inputs", inputs,
            "--train", "--steps", str(a.steps), "--optimizer", a.optimizer,
            "--lr", "1e-3", "--weight-decay", "0.01", "--bucket-mb", a.bucket_mb] + a.both_arg
    graph, sched = os.path.join(a.work, "graph"), os.path.join(a.work, "schedule")
    run(base + ["--out", graph])
    run(base + ["--schedule", "--out", sched] + a.schedule_arg)

    errors = []
    loss_err = rel(np.load(os.path.join(sched, "train_loss.npy")),
                   np.load(os.path.join(graph, "train_loss.npy")))
    if loss_err > TOL:
        errors.append("loss %.3e" % loss_err)
    worst = {"grad": 0.0, "delta": 0.0}
    want_g, got_g = (load_npy_dir(os.path.join(d, "grads")) for d in (graph, sched))
    if not want_g or sorted(want_g) != sorted(got_g):
        errors.append("gradient sets differ: %s" % sorted(set(want_g) ^ set(got_g)))
    for name, want in want_g.items():
        if name in got_g:
            e = rel(got_g[name], want)
            worst["grad"] = max(worst["grad"], e)
            if e > TOL:
                errors.append("grad %s %.3e" % (name, e))
    before = {t.name: numpy_helper.to_array(t).astype(np.float64)
              for t in onnx.load(model).graph.initializer}
    want_p, got_p = (load_npy_dir(os.path.join(d, "params")) for d in (graph, sched))
    if sorted(want_p) != sorted(got_p):
        errors.append("parameter sets differ")
    moved = 0
    for name, want in want_p.items():
        d_want, d_got = want - before[name], got_p.get(name, want) - before[name]
        if np.linalg.norm(d_want) == 0:  # frozen: must not move in either
            if np.any(d_got != 0):
                errors.append("frozen %s moved" % name)
            continue
        moved += 1
        e = rel(d_got, d_want)
        worst["delta"] = max(worst["delta"], e)
        if e > TOL:
            errors.append("delta %s %.3e" % (name, e))
    print("loss rel err %.3e; %d gradients worst %.3e; %d moving parameters, "
          "change after %d steps worst %.3e" % (loss_err, len(want_g), worst["grad"],
                                                moved, a.steps, worst["delta"]))
    if moved == 0:
        errors.append("no parameter moved (test would be vacuous)")
    if errors:
        sys.exit("FAILED: " + "; ".join(errors[:10]))
    shutil.rmtree(a.work, ignore_errors=True)


if __name__ == "__main__":
    main()
