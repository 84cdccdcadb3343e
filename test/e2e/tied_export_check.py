#!/usr/bin/env -S /usr/bin/python3
"""Merged parameters of an eval-mode export (issue 51, item 2).

torch.onnx.export's defaults (eval mode, constant folding) store one
initializer for parameters that hold equal values: DiT's zero-initialised
adaLN layers of every block become block 0's. hc-compile must refuse that
file in one line naming the tensors and the export flags that avoid it
(--allow-shared-params compiles it anyway), and the TRAINING-mode export
of the same module (training=TRAINING, do_constant_folding=False) must
train and match PyTorch on the same inputs: loss within 1e-5, every
gradient within 1e-4."""
import os
import shutil
import subprocess
import sys

import numpy as np

from common import ROOT, bin_and_work, read_safetensors, rel, run

sys.path.insert(0, os.path.join(ROOT, "models"))


def main():
    import torch
    import dit as ditlib
    a, w = bin_and_work()
    hc_compile, hc_run = os.path.join(a.bin, "hc-compile"), os.path.join(a.bin, "hc-run")
    torch.manual_seed(0)
    dit = ditlib.make_dit("tiny", image_size=16, in_channels=4, num_classes=10)  # DiT's init
    loss = ditlib.DiTLoss(dit)
    g = torch.Generator().manual_seed(1)
    args = (torch.randn(2, 4, 16, 16, generator=g), torch.randint(0, 1000, (2,), generator=g),
            torch.randint(0, 10, (2,), generator=g), torch.randn(2, 4, 16, 16, generator=g))
    names = ["x_t", "t", "y", "noise"]
    torch.onnx.export(loss, args, w("eval.onnx"), input_names=names, output_names=["loss"],
                      opset_version=13)
    torch.onnx.export(loss, args, w("train.onnx"), input_names=names, output_names=["loss"],
                      opset_version=13, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    errors = []
    p = subprocess.run([hc_compile, w("eval.onnx"), "-o", w("eval.so")], capture_output=True,
                       text=True)
    lines = p.stderr.strip().splitlines()
    print("eval-mode export: exit %d: %s" % (p.returncode, p.stderr.strip()))
    if p.returncode != 2 or len(lines) != 1 or "the exporter merged parameters" not in lines[0] \
            or "do_constant_folding=False" not in lines[0] or "--allow-shared-params" not in lines[0]:
        errors.append("the eval-mode export was not refused in one line")
    if os.path.exists(w("eval.so")):
        errors.append("a library was written for the refused export")
    p = subprocess.run([hc_compile, w("eval.onnx"), "--allow-shared-params", "-o",
                        w("shared.so")], capture_output=True, text=True)
    if p.returncode != 0:
        errors.append("--allow-shared-params: exit %d %s" % (p.returncode, p.stderr))
    # The other form of a merge: a node of block 1 reads block 0's tensor
    # directly and block 1's own is gone (made here from the TRAINING-mode
    # file; node names carry the module scopes).
    import onnx
    m = onnx.load(w("train.onnx"))
    own, kept = "dit.blocks.1.adaLN_modulation.1.weight", "dit.blocks.0.adaLN_modulation.1.weight"
    for n in m.graph.node:
        for k, name in enumerate(n.input):
            if name == own:
                n.input[k] = kept
    keep = [t for t in m.graph.initializer if t.name != own]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    onnx.save(m, w("scoped.onnx"))
    p = subprocess.run([hc_compile, w("scoped.onnx"), "-o", w("scoped.so")], capture_output=True,
                       text=True)
    print("scoped merge: exit %d: %s" % (p.returncode, p.stderr.strip()[:200]))
    if p.returncode != 2 or "whose module's own '%s' is not in the file" % own not in p.stderr:
        errors.append("the scoped merge was not refused")
    # The TRAINING-mode export: every parameter its own; hc's first step
    # against PyTorch's on the same inputs.
    run([hc_compile, w("train.onnx"), "--freeze", "dit.pos_embed", "-o", w("train.so")])
    os.makedirs(w("in"))
    for n, v in zip(names, args):
        np.save(w("in", n + ".npy"), v.numpy())
    out = run([hc_run, w("train.so"), "--inputs", w("in"), "--steps", "1",
               "--init", w("train.so.init.safetensors"), "--save-grads", w("g.safetensors")])
    hc_loss = float([l for l in out.splitlines() if l.startswith("loss ")][0].split()[1])
    loss.train()
    torch_loss = loss(*args)
    torch_loss.backward()
    le = abs(hc_loss - float(torch_loss)) / abs(float(torch_loss))
    grads = read_safetensors(w("g.safetensors"))
    worst, name = 0.0, ""
    for n, prm in loss.named_parameters():
        if not prm.requires_grad or n == "dit.pos_embed":
            continue
        if n not in grads:
            errors.append("no gradient for %s" % n)
            continue
        want = prm.grad.numpy() if prm.grad is not None else np.zeros(prm.shape)
        e = rel(grads[n], want) if np.abs(want).max() > 0 else float(np.abs(grads[n]).max())
        if e > worst:
            worst, name = e, n
    print("TRAINING-mode export: %d parameters, loss rel err %.2e, worst gradient rel err %.2e (%s)"
          % (len(grads), le, worst, name))
    if le > 1e-5 or worst > 1e-4:
        errors.append("loss %.2e, gradient %s %.2e" % (le, name, worst))
    shutil.rmtree(a.work, ignore_errors=True)
    if errors:
        sys.exit("FAILED: " + "; ".join(errors))


if __name__ == "__main__":
    main()
