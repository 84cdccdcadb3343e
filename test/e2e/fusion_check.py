#!/usr/bin/env -S /usr/bin/python3
"""Fusion on a real export: every LayerNorm, GELU, attention (self and, with
a token conditioning, cross) and linear of the DiT becomes exactly one fused
op, none of the decomposed chains survive,
and the reference evaluator gives the same loss and output tensor before and
after fusion (<= 1e-6 relative) on random inputs."""
import argparse
import collections
import json
import os
import re
import shutil
import sys

import numpy as np
import onnx

from common import export, rel, run, torch_reference


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("export_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    model = os.path.join(a.work, "model.onnx")
    export(model, [x for x in a.export_args if x != "--"])
    meta = {p.key: p.value for p in onnx.load(model, load_external_data=False).metadata_props}
    config = json.loads(meta["hc.dit_config"])
    depth = config["depth"]

    ir = run([os.path.join(a.bin, "hc-compile"), model, "--batch", "2", "--emit=hc"])
    ops = collections.Counter(re.findall(r"= (hc\.[a-z_]+)", ir))
    # Per block: 2 modulated norms (each norm with its modulate,
    # hc-fuse-modulated-layer-norm), 1 attention, 1 GELU, 5 linears (qkv,
    # proj, fc1, fc2, adaLN). Outside: patch embed + 2 timestep linears,
    # final modulated norm + 2 linears, t-embedder SiLU + shared adaLN SiLU.
    # No norm or modulate is left apart.
    want = {"hc.modulated_layer_norm": 2 * depth + 1, "hc.layer_norm": 0,
            "hc.modulate": 0, "hc.gelu": depth,
            "hc.attention": depth, "hc.linear": 5 * depth + 5,
            "hc.silu": 2, "hc.mse_loss": 1}
    # Conditionings (models/conditioning.py): tokens add a cross-attention
    # and its q, kv and proj linears per block and their embedder's
    # Linear-GELU-Linear; a vector its Linear-SiLU-Linear; a field nothing.
    for spec in config.get("conds", ()):
        kind = spec.split(":")[0]
        if kind == "tokens":
            want["hc.attention"] += depth
            want["hc.linear"] += 3 * depth + 2
            want["hc.gelu"] += 1
        elif kind == "vector":
            want["hc.linear"] += 2
            want["hc.silu"] += 1
    errors = ["%s: %d, want %d" % (op, ops[op], n) for op, n in want.items() if ops[op] != n]
    for leftover in ("hc.tanh", "hc.pow", "hc.sqrt", "hc.sigmoid", "hc.softmax",
                     "hc.matmul", "hc.div", "hc.reduce_mean"):
        if ops[leftover]:
            errors.append("%d unfused %s left" % (ops[leftover], leftover))
    # Transposes left are layout only (patchify, unpatchify), never weights.
    params = set(re.findall(r"(%arg\d+): tensor<[^>]*> \{hc.param", ir))
    weight_transposes = [t for t in re.findall(r"hc.transpose (%arg\d+)", ir) if t in params]
    if weight_transposes or ops["hc.transpose"] > 4:
        errors.append("transposes left: %d (%d of weights)"
                      % (ops["hc.transpose"], len(weight_transposes)))
    print("fused ops:", dict(sorted(ops.items())))

    ref = os.path.join(a.work, "ref")
    torch_reference(model, ref)
    outs = {}
    for mode, flags in (("fused", []), ("unfused", ["--no-fuse"])):
        outs[mode] = os.path.join(a.work, mode)
        run([os.path.join(a.bin, "hc-eval"), model, "--batch", "2", "--inputs", ref,
             "--out", outs[mode]] + flags)
    for name in ("loss", "prediction"):
        f = np.load(os.path.join(outs["fused"], name + ".npy"))
        u = np.load(os.path.join(outs["unfused"], name + ".npy"))
        e = rel(f, u)
        print("%-10s fused vs unfused rel err %.3e" % (name, e))
        if not np.all(np.isfinite(f)) or e > 1e-6:
            errors.append("%s differs after fusion: %.3e" % (name, e))
    shutil.rmtree(a.work, ignore_errors=True)
    if errors:
        sys.exit("FAILED: " + "; ".join(errors))


if __name__ == "__main__":
    main()
