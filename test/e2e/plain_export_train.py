#!/usr/bin/env -S /usr/bin/python3
"""hc-run's train mode on a plain export (no hc metadata: what a user's own
torch.onnx.export gives), issue 26. The classes come from the label table
(`*embedding_table.weight`, [rows, hidden]); without metadata hc-run drops
no labels, so every row is a class.

  * the same DiT exported by export_dit.py (class dropout 0, so no null row)
    with and without its metadata trains bit-identically for 3 steps;
  * without --labels, the plain export is refused (exit 2, one line naming
    --labels: whether the last row is a null class cannot be told), and so
    is the export with metadata (class dropout 0: it has no null row);
  * a label outside the table's rows is refused (exit 2);
  * metadata that contradicts the table (num_classes 9 for 10 rows) is
    refused (exit 2);
  * with class dropout (a null row, 11 rows): the plain export told
    --num-classes 10 --class-dropout 0.1 trains bit-identically to the
    export with metadata, and its sampler guides (--cfg-scale 4) when told
    --num-classes 10, and refuses guidance without it (the 11 rows read as
    11 classes, no null class); flags that contradict the metadata are
    refused."""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx

from common import PY, ROOT, bin_and_work, read_safetensors, run


def main():
    a, w = bin_and_work()
    hc_compile, hc_run = os.path.join(a.bin, "hc-compile"), os.path.join(a.bin, "hc-run")
    errors = []

    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size", "8",
         "--num-classes", "10", "--class-dropout-prob", "0", "--init", "random",
         "--quiet", "-o", w("meta.onnx")])
    m = onnx.load(w("meta.onnx"))
    table = [i for i in m.graph.initializer if i.name.endswith("embedding_table.weight")]
    if len(table) != 1 or table[0].dims[0] != 10:
        sys.exit("FAILED: the export's label table is not [10, hidden]")
    del m.metadata_props[:]
    onnx.save(m, w("plain.onnx"))
    m.metadata_props.add(key="hc.dit_config", value='{"num_classes": 9, "class_dropout_prob": 0}')
    onnx.save(m, w("wrong.onnx"))
    for name in ("meta", "plain", "wrong"):
        # The plain file says nothing of pos_embed: freeze it as the metadata does.
        run([hc_compile, w(name + ".onnx"), "--batch", "2", "--freeze", "pos_embed",
             "-o", w(name + ".so")])

    rng = np.random.default_rng(0)
    np.save(w("x.npy"), rng.standard_normal((12, 4, 8, 8)).astype(np.float32))
    np.save(w("y.npy"), rng.integers(0, 10, 12).astype(np.int64))
    np.save(w("y_bad.npy"), np.full(12, 10, np.int64))
    train = ["--data", w("x.npy"), "--steps", "3", "--seed", "3", "--no-progress",
             "--log-every", "1"]
    for name in ("meta", "plain"):
        out = run([hc_run, w(name + ".so")] + train +
                  ["--labels", w("y.npy"), "--save-params", w(name + ".safetensors")])
        losses = [l for l in out.splitlines() if "loss" in l and "step" in l]
        print("%s: %s" % (name, losses[-1] if losses else out.strip()[-200:]))
    meta, plain = read_safetensors(w("meta.safetensors")), read_safetensors(w("plain.safetensors"))
    start = read_safetensors(w("meta.so.init.safetensors"))
    if sorted(meta) != sorted(plain) or any(not np.array_equal(meta[k], plain[k]) for k in meta):
        errors.append("the plain export trained differently from the one with metadata")
    elif all(np.array_equal(meta[k], start[k]) for k in meta):
        errors.append("3 steps changed no parameter")
    else:
        print("plain export: parameters after 3 steps bit-identical to the export with metadata")

    def refused(name, extra, want):
        p = subprocess.run([hc_run, w(name + ".so")] + train + extra,
                           capture_output=True, text=True)
        lines = p.stderr.strip().splitlines()
        print("%s %s: exit %d: %s" % (name, " ".join(extra), p.returncode, p.stderr.strip()))
        if p.returncode != 2 or len(lines) != 1 or want not in lines[0]:
            errors.append("%s %s: want exit 2 and one line with %r" % (name, extra, want))

    refused("plain", [], "pass --labels")
    refused("meta", [], "the model has no null class (dit_config.class_dropout_prob 0, "
            "so no null row in its label table) for unlabelled samples; pass --labels")
    refused("plain", ["--labels", w("y_bad.npy")], "label 10 at row 0 is outside 0..9")
    refused("wrong", ["--labels", w("y.npy")],
            "9 classes without a null class (class dropout 0) need a label table of 9 rows, "
            "but y_embedder.embedding_table.weight has 10 rows (dit_config)")

    # Class dropout: the flags stand in for the metadata.
    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size", "8",
         "--num-classes", "10", "--class-dropout-prob", "0.1", "--init", "random",
         "--quiet", "-o", w("cmeta.onnx")])
    m = onnx.load(w("cmeta.onnx"))
    del m.metadata_props[:]
    onnx.save(m, w("cplain.onnx"))
    for name in ("cmeta", "cplain"):
        run([hc_compile, w(name + ".onnx"), "--batch", "2", "--freeze", "pos_embed",
             "-o", w(name + ".so")])
    run([hc_run, w("cmeta.so")] + train + ["--labels", w("y.npy"), "--save-params",
                                          w("cmeta.safetensors")])
    out = run([hc_run, w("cplain.so")] + train +
              ["--labels", w("y.npy"), "--num-classes", "10", "--class-dropout", "0.1",
               "--save-params", w("cplain.safetensors"), "--ckpt-dir", w("ck")])
    a_, b_ = read_safetensors(w("cmeta.safetensors")), read_safetensors(w("cplain.safetensors"))
    if "label dropout 0.1" not in out:
        errors.append("the plain export did not train with label dropout 0.1:\n" + out)
    if any(not np.array_equal(a_[k], b_[k]) for k in a_):
        errors.append("--num-classes/--class-dropout trained differently from the metadata")
    else:
        print("plain export with --num-classes 10 --class-dropout 0.1: bit-identical to the "
              "export with metadata (label dropout 0.1)")
    refused("cmeta", ["--labels", w("y.npy"), "--num-classes", "11"],
            "--num-classes 11 contradicts")
    refused("cmeta", ["--labels", w("y.npy"), "--class-dropout", "0.2"],
            "--class-dropout 0.2 contradicts")
    run([hc_compile, w("cplain.onnx"), "--sampler", "--batch", "2", "-o", w("s.so")])
    sample = [hc_run, "sample", w("s.so"), "--ckpt", w("ck"), "--sampling-steps", "4",
              "--classes", "0,1", "--per-class", "2", "--out", w("g.png")]
    out = run(sample + ["--num-classes", "10", "--cfg-scale", "4"])
    print(out.strip().splitlines()[-1])
    p = subprocess.run(sample + ["--cfg-scale", "4"], capture_output=True, text=True)
    if p.returncode != 2 or "needs the null class" not in p.stderr:
        errors.append("guidance without --num-classes: exit %d %s" % (p.returncode, p.stderr))
    shutil.rmtree(a.work, ignore_errors=True)
    if errors:
        sys.exit("FAILED: " + "; ".join(errors))


if __name__ == "__main__":
    main()
