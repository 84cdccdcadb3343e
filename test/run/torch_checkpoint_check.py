#!/usr/bin/env -S /usr/bin/python3
"""models/train_torch.py --checkpoint-blocks (the PyTorch baseline of issue
36's capacity table) must train the same model, only with each block's
forward run again in backward:
  1. in process: a tiny DiT's gradients with and without checkpointing are
     equal, and the blocks run twice per step only when checkpointing;
  2. the command line: 2 steps with and without the flag save equal weights.

usage: torch_checkpoint_check.py --work DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")
sys.path.insert(0, MODELS)

import torch  # noqa: E402

import dit as ditlib  # noqa: E402
import safetensors_np  # noqa: E402


def grads_and_block_calls(checkpoint):
    torch.manual_seed(0)
    model = ditlib.make_dit("tiny", image_size=8, in_channels=4, num_classes=10,
                            init="random", seed=3)
    model.checkpoint_blocks = checkpoint
    calls = [0]
    for blk in model.blocks:
        blk.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    g = torch.Generator().manual_seed(1)
    x_t = torch.randn(3, 4, 8, 8, generator=g)
    eps = torch.randn(3, 4, 8, 8, generator=g)
    t = torch.tensor([5, 500, 999])
    y = torch.tensor([1, 2, 10])
    loss = ditlib.DiTLoss(model)(x_t, t, y, eps)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, \
        calls[0], len(model.blocks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    failures = []

    plain, plain_calls, depth = grads_and_block_calls(False)
    ckpt, ckpt_calls, _ = grads_and_block_calls(True)
    if plain_calls != depth or ckpt_calls != 2 * depth:
        failures.append("block forwards per step: %d plain, %d checkpointed; expected %d and %d"
                        % (plain_calls, ckpt_calls, depth, 2 * depth))
    if sorted(plain) != sorted(ckpt):
        failures.append("gradient sets differ")
    for n in plain:
        if n in ckpt and not torch.allclose(plain[n], ckpt[n], rtol=1e-6, atol=1e-7):
            failures.append("gradient %s differs by %g" % (n, (plain[n] - ckpt[n]).abs().max()))

    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    r = np.random.default_rng(0)
    np.save(os.path.join(a.work, "images.npy"), r.standard_normal((8, 4, 8, 8), dtype=np.float32))
    np.save(os.path.join(a.work, "labels.npy"), r.integers(0, 10, 8).astype(np.int64))
    saved = {}
    for flag in ([], ["--checkpoint-blocks"]):
        out = os.path.join(a.work, "w%d.safetensors" % len(flag))
        cmd = [sys.executable, os.path.join(MODELS, "train_torch.py"), "--data", a.work,
               "--model", "tiny", "--image-size", "8", "--in-channels", "4",
               "--num-classes", "10", "--batch", "4", "--steps", "2", "--threads", "1",
               "--quiet", "--save-weights", out] + flag
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            failures.append("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
            continue
        saved[len(flag)] = safetensors_np.load(out)
    if len(saved) == 2:
        for n, w in saved[0].items():
            if not np.allclose(w, saved[1][n], rtol=1e-6, atol=1e-7):
                failures.append("after 2 steps %s differs by %g"
                                % (n, np.abs(w - saved[1][n]).max()))
    for f in failures:
        print("FAIL:", f)
    print("torch_checkpoint_check: %d gradients, %d block forwards checkpointed vs %d plain; %s"
          % (len(plain), ckpt_calls, plain_calls, "FAIL" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
