#!/usr/bin/env -S /usr/bin/python3
"""hc-run training a graph with its own random draws: a tiny DiT exported the
way upstream DiT is in training mode, its label dropout (token_drop: rand < p
? null : y) inside the graph as RandomUniformLike + Less + Where. hc-run must
key the graph's draws as its own (hc/abi/random.h: the run's seed, the
0-based step, the global sample index; the graph's first op id 0x100) and
must not drop the labels a second time.

  batch     the step-1 loss of train mode equals, bit for bit, test mode's loss
            on the batch re-derived here (run_check's Philox spec, no label
            dropout by hc-run) with the keys hc.rng_seed = --seed,
            hc.rng_step = 0 and hc.sample_offset = 0 fed as inputs. Planted:
            hc-run dropping labels too, another step, another offset each
            give another loss.
  oracle    the graph's drops computed here from the spec (uniform01(seed,
            step, g, 0x100, 0) < p) and fed as labels to the same DiT exported
            without the draw give train mode's loss (1e-6): the draw's keys
            and op id are what the ABI says. Planted: the op id 0 of the
            numbering before 0x100, and no drops, give other losses.
  ranks     3 steps, mpirun -np 2 at batch 2 against -np 1 at batch 4, and
            --accumulate 2 at batch 2 against batch 4: the same global
            samples draw the same drops (losses 1e-6, parameters 1e-4).
  resume    2 steps + a resume to 4 give an unbroken run's parameters bit
            for bit; --class-dropout on such a graph is refused (exit 2).
  sampler   a --sampler library of the graph keeps y's branch of the draw's
            where: its DDIM images equal, bit for bit, those of the plain
            graph's sampler on the same weights.

usage: graph_draws_check.py --bin DIR --work DIR
"""
import json
import os
import subprocess
import sys

import numpy as np

from common import PY, ROOT, bin_and_work, loss_of, ranks_agree, read_safetensors, rel, run

sys.path.insert(0, os.path.join(ROOT, "test", "run"))
sys.path.insert(0, os.path.join(ROOT, "models"))
import run_check  # noqa: E402  (the Philox spec of train mode's draws)

C, S, CLASSES, N, P_DROP = 4, 8, 3, 24, 0.5
GRAPH_DRAW_FIRST = 0x100  # hc/abi/random.h kGraphDrawFirst

EXPORT = r"""
import sys
sys.path.insert(0, sys.argv[1])
import dit as ditlib, export_dit
d = ditlib.make_dit("tiny", image_size=%d, in_channels=%d, num_classes=%d,
                    class_dropout_prob=%r, init="random", seed=5)
export_dit.export_module(d, sys.argv[2], batch=2, dynamic_batch=True)
plain = d.forward
# Upstream DiT in training mode: LabelEmbedder.token_drop in the graph.
d.forward = lambda x, t, y=None, conds=None, **kw: plain(x, t, y, conds, label_dropout=True)
export_dit.export_module(d, sys.argv[3], batch=2, dynamic_batch=True)
""" % (S, C, CLASSES, P_DROP)


def spec_inputs(x, y, seed, step, gbatch, hc_drop=0.0, offset=0):
    """The global batch of `step` as train mode makes it, with the graph's
    draw keys; hc_drop > 0 plants hc-run dropping labels itself."""
    xt, t, yy, eps = run_check.sample_batch(seed, step, x, y, gbatch, hc_drop, CLASSES)
    return {"x_t": xt.reshape((gbatch, C, S, S)), "t": t, "y": yy,
            "noise": eps.reshape((gbatch, C, S, S)),
            "hc.rng_seed": np.array(seed, np.int64), "hc.rng_step": np.array(step, np.int64),
            "hc.sample_offset": np.array(offset, np.int64)}


def graph_drops(seed, step, gbatch, op_id=GRAPH_DRAW_FIRST):
    return [run_check.uniform01(seed, step, g, op_id, 0) < P_DROP for g in range(gbatch)]


def main():
    a, w = bin_and_work()
    hc_run, hc_compile = os.path.join(a.bin, "hc-run"), os.path.join(a.bin, "hc-compile")
    errors = []
    run([PY, "-c", EXPORT, os.path.join(ROOT, "models"), w("plain.onnx"), w("drop.onnx")])
    for b in (2, 4):
        run([hc_compile, w("drop.onnx"), "--batch", str(b), "--lr", "1e-3", "-o", w("d%d.so" % b)])
    run([hc_compile, w("plain.onnx"), "--batch", "4", "--lr", "1e-3", "-o", w("plain.so")])

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (N, C, S, S)).astype(np.float32)
    y = rng.integers(0, CLASSES, N).astype(np.int64)
    np.save(w("x.npy"), x)
    np.save(w("y.npy"), y)
    # seed 2: step 1's graph drops some of its 4 labels and keeps others,
    # and hc-run's own draw (kind 0x73) would drop one the graph keeps.
    seed = 2
    data = ["--data", w("x.npy"), "--labels", w("y.npy"), "--seed", str(seed), "--no-progress"]
    drops = graph_drops(seed, 0, 4)
    own = [run_check.uniform01(seed, 0, g, run_check.OP_DROP, 0) < P_DROP for g in range(4)]
    print("step 1: the graph drops %s; hc-run's own draw would drop %s" % (drops, own))
    if all(drops) or not any(drops) or not any(o and not d for o, d in zip(own, drops)):
        errors.append("seed %d does not exercise the checks (drops %s, own %s)"
                      % (seed, drops, own))

    # batch: train mode's step 1 against the re-derived batch and keys
    run([hc_run, w("d4.so")] + data + ["--steps", "1", "--metrics", w("m1.jsonl")])
    with open(w("m1.jsonl")) as f:
        train_loss = json.loads(f.readline())["loss"]
    want = loss_of(hc_run, w("d4.so"), w("spec"), spec_inputs(x, y, seed, 0, 4))
    print("batch: train mode %.9g, re-derived %.9g" % (train_loss, want))
    if train_loss != want:
        errors.append("train mode's step-1 loss %.17g is not the re-derived batch's %.17g"
                      % (train_loss, want))
    planted = {"hc-run dropping labels too": spec_inputs(x, y, seed, 0, 4, hc_drop=P_DROP),
               "step 1 instead of 0": dict(spec_inputs(x, y, seed, 0, 4),
                                           **{"hc.rng_step": np.array(1, np.int64)}),
               "sample offset 4": spec_inputs(x, y, seed, 0, 4, offset=4)}
    for what, inputs in planted.items():
        got = loss_of(hc_run, w("d4.so"), w("plant_" + what.replace(" ", "_")), inputs)
        print("  planted %-28s %.9g" % (what, got))
        if got == want:
            errors.append("planted '%s' leaves the loss unchanged: the check is blind" % what)

    # oracle: the drops from the spec, fed to the graph without the draw
    def plain_loss(tag, mask):
        inputs = spec_inputs(x, y, seed, 0, 4)
        for k in ("hc.rng_seed", "hc.rng_step", "hc.sample_offset"):
            del inputs[k]
        inputs["y"] = np.where(mask, CLASSES, inputs["y"]).astype(np.int64)
        return loss_of(hc_run, w("plain.so"), w(tag), inputs)
    oracle = plain_loss("oracle", drops)
    print("oracle: the spec's drops through the plain graph %.9g (train mode %.9g)"
          % (oracle, train_loss))
    if abs(oracle - train_loss) > 1e-6 * abs(oracle):
        errors.append("the spec's drops give %.9g, train mode %.9g" % (oracle, train_loss))
    for what, mask in (("op id 0", graph_drops(seed, 0, 4, op_id=0)), ("no drops", [False] * 4)):
        got = plain_loss("oracle_" + what.replace(" ", "_"), mask)
        print("  planted %-28s %.9g" % (what, got))
        if abs(got - train_loss) <= 1e-6 * abs(got):
            errors.append("planted oracle '%s' matches train mode: the check is blind" % what)

    # ranks and micro-batches: global samples keep their draws
    train = data + ["--steps", "3", "--log-every", "1"]
    l1, el, ep = ranks_agree(hc_run, w("d4.so"), w("d2.so"), train, w)
    print("-np 2 vs -np 1, 3 steps: losses %s rel %.2e, parameters rel %.2e"
          % (["%.6g" % v for v in l1], el, ep))
    if el > 1e-6 or ep > 1e-4:
        errors.append("-np 2 differs from -np 1 (loss %.3e, parameters %.3e)" % (el, ep))
    run([hc_run, w("d2.so")] + train + ["--accumulate", "2", "--save-params",
                                        w("acc.safetensors"), "--metrics", w("acc.jsonl")])
    la = [json.loads(l)["loss"] for l in open(w("acc.jsonl"))]
    pa, p1 = read_safetensors(w("acc.safetensors")), read_safetensors(w("t1.safetensors"))
    ea = max(abs(u - v) / abs(u) for u, v in zip(l1, la)) if len(la) == 3 else 1.0
    epa = max(rel(pa[k], p1[k]) if np.linalg.norm(p1[k]) else 0 for k in p1)
    print("--accumulate 2 at batch 2 vs batch 4: losses rel %.2e, parameters rel %.2e"
          % (ea, epa))
    if ea > 1e-6 or epa > 1e-4:
        errors.append("--accumulate 2 differs from batch 4 (loss %.3e, parameters %.3e)"
                      % (ea, epa))

    # resume: the draws continue where they stopped (4 steps = 2 + 2, bit for bit)
    run([hc_run, w("d4.so")] + data + ["--steps", "4", "--save-params", w("full.safetensors")])
    run([hc_run, w("d4.so")] + data + ["--steps", "2", "--ckpt-dir", w("ck"),
                                       "--ckpt-every", "2"])
    run([hc_run, w("d4.so")] + data + ["--steps", "4", "--ckpt-dir", w("ck"), "--resume",
                                       "--save-params", w("resumed.safetensors")])
    full, resumed = read_safetensors(w("full.safetensors")), read_safetensors(w("resumed.safetensors"))
    same = all(np.array_equal(full[k], resumed[k]) for k in full)
    print("resume at step 2 of 4: parameters %s" % ("bit for bit" if same else "DIFFER"))
    if not same:
        errors.append("a resumed run's parameters differ from an unbroken run's")

    # --class-dropout would have hc-run drop labels too: refused
    p = subprocess.run([hc_run, w("d4.so")] + data + ["--steps", "1", "--class-dropout", "0.2"],
                       capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    print("--class-dropout: exit %d: %s" % (p.returncode, lines[-1] if lines else ""))
    if p.returncode != 2 or len(lines) != 1 or "drops its labels itself" not in p.stderr:
        errors.append("--class-dropout on a graph that drops labels: exit %d, %r"
                      % (p.returncode, p.stderr))

    # sampler: the draw's where keeps y (labels never dropped), so the
    # images are those of the plain graph's sampler on the same weights
    run([hc_run, w("d4.so")] + data + ["--steps", "2", "--save-params", w("sp.safetensors")])
    images = {}
    for tag, onnx in (("drop", "drop.onnx"), ("plain", "plain.onnx")):
        run([hc_compile, w(onnx), "--batch", "4", "--sampler", "-o", w("s_%s.so" % tag)])
        run([hc_run, "sample", w("s_%s.so" % tag), "--ckpt", w("sp.safetensors"), "--per-class",
             "2", "--sampling-steps", "5", "--sampler", "ddim", "--seed", "3",
             "--save-npy", w("s_%s.npy" % tag), "--no-progress"])
        images[tag] = np.load(w("s_%s.npy" % tag))
    same = np.array_equal(images["drop"], images["plain"])
    print("sampler of the graph with draws: %s images %s the plain graph's"
          % (images["drop"].shape, "identical to" if same else "DIFFERENT from"))
    if not same:
        errors.append("the sampler of the graph with draws differs from the plain graph's "
                      "(max |diff| %.3g)" % np.abs(images["drop"] - images["plain"]).max())
    if errors:
        sys.exit("FAILED:\n  " + "\n  ".join(errors))
    print("PASS")


if __name__ == "__main__":
    main()
