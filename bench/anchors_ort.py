#!/usr/bin/env python3
"""ONNX Runtime training as a speed anchor: DiT's `mse` export (the file hc
compiles) trained with onnxruntime.training's artifacts API and AdamW, the way
its documentation sets up on-device/CPU training.

usage: ORT-TRAINING-PYTHON bench/anchors_ort.py --onnx MODEL.onnx --data x.npy
           --labels y.npy --work DIR [--batch 32] [--steps 3] [--threads T]
           [--metrics FILE.jsonl] [--seed 0]

The artifacts (training, eval and optimizer graphs, checkpoint) are made from
MODEL.onnx in DIR: every float initializer trains except those the export's
hc.frozen metadata names (pos_embed). ONNX Runtime training has no gradient
for Einsum, which DiT's unpatchify exports as (one input, a pure
permutation "nhwpqc->nchpwq"); such an Einsum is replaced by the Transpose it
equals, and any other Einsum is refused. Each step draws a batch as hc-run and
models/train_torch.py do (t uniform, eps ~ N(0, I), x_t = q_sample, labels
dropped with p = 0.1; models/diffusion.py), runs forward and backward
(Module), AdamW (Optimizer, lr 1e-4) and resets the gradients. Each step's
line in --metrics has loss, steps_per_sec and peak_rss_mb, as train_torch.py's.
Run it in tools/install-anchors.sh's ort-training environment.
"""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np
import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "models"))
import diffusion  # noqa: E402


def einsum_to_transpose(model):
    """One-input permutation Einsums -> the equal Transpose; counts them."""
    n = 0
    for node in model.graph.node:
        if node.op_type != "Einsum":
            continue
        eq = onnx.helper.get_attribute_value(node.attribute[0]).decode()
        src, _, dst = eq.replace(" ", "").partition("->")
        if len(node.input) != 1 or sorted(src) != sorted(dst) or len(set(src)) != len(src):
            sys.exit("ort-training: Einsum %r (%s) is not a permutation; ONNX Runtime "
                     "training cannot differentiate it" % (node.name, eq))
        perm = [src.index(c) for c in dst]
        del node.attribute[:]
        node.op_type = "Transpose"
        node.attribute.append(onnx.helper.make_attribute("perm", perm))
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--metrics", default=None)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from onnxruntime import SessionOptions
    from onnxruntime.training import artifacts
    from onnxruntime.training.api import CheckpointState, Module, Optimizer

    model = onnx.load(a.onnx)
    rewritten = einsum_to_transpose(model)
    meta = {p.key: p.value for p in model.metadata_props}
    frozen = [n for n in meta.get("hc.frozen", "").split(",") if n]
    params = [t.name for t in model.graph.initializer
              if t.data_type == onnx.TensorProto.FLOAT]
    trainable = [n for n in params if n not in frozen]
    os.makedirs(a.work, exist_ok=True)
    t0 = time.perf_counter()
    artifacts.generate_artifacts(model, requires_grad=trainable, frozen_params=frozen,
                                 loss=None, optimizer=artifacts.OptimType.AdamW,
                                 artifact_directory=a.work)
    made = time.perf_counter() - t0
    state = CheckpointState.load_checkpoint(os.path.join(a.work, "checkpoint"))
    so = SessionOptions()
    so.intra_op_num_threads = a.threads
    module = Module(os.path.join(a.work, "training_model.onnx"), state,
                    os.path.join(a.work, "eval_model.onnx"), session_options=so)
    opt = Optimizer(os.path.join(a.work, "optimizer_model.onnx"), module)
    opt.set_learning_rate(1e-4)
    module.train()

    images = torch.from_numpy(np.load(a.data))
    labels = torch.from_numpy(np.load(a.labels).astype(np.int64))
    gen = torch.Generator().manual_seed(a.seed)
    out = open(a.metrics, "w") if a.metrics else None
    print("ort-training %s: %d trainable, %d frozen, %d Einsum as Transpose, artifacts "
          "in %.1f s, %d threads" % (__import__("onnxruntime").__version__, len(trainable),
                                     len(frozen), rewritten, made, a.threads), flush=True)
    for step in range(1, a.steps + 1):
        t_step = time.perf_counter()
        idx = torch.randint(0, images.shape[0], (a.batch,), generator=gen)
        x_t, t, y, eps = diffusion.training_batch(images[idx], labels[idx], a.num_classes, gen)
        loss = module(x_t.numpy(), t.numpy(), y.numpy(), eps.numpy())
        opt.step()
        module.lazy_reset_grad()
        dt = time.perf_counter() - t_step
        lv = float(np.asarray(loss))
        if not np.isfinite(lv):
            sys.exit("ort-training: non-finite loss at step %d" % step)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print("step %d loss %.6f %.3f s" % (step, lv, dt), flush=True)
        if out:
            out.write(json.dumps({"step": step, "loss": lv, "steps_per_sec": 1.0 / dt,
                                  "peak_rss_mb": rss}) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
