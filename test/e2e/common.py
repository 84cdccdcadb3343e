"""Helpers shared by the end-to-end tests: run a command or fail with its
output, relative error, and the export + PyTorch oracle steps."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"


def bin_and_work():
    """The e2e scripts' command line, --bin DIR --work DIR: (args, w) with
    the work folder emptied and w(*parts) a path inside it."""
    import argparse
    import shutil
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    return a, lambda *p: os.path.join(a.work, *p)


def ranks_agree(hc_run, one_rank, two_ranks, train, w):
    """Train mode 3 steps, `one_rank` (batch 2B) against `two_ranks` (batch
    B) under mpirun -np 2 on the same global batches: (the -np 1 losses,
    the losses' and the parameters' worst relative differences)."""
    import json
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
    run([hc_run, one_rank] + train + ["--save-params", w("t1.safetensors"),
                                      "--metrics", w("r1.jsonl")])
    run(mpirun + ["-np", "2", hc_run, two_ranks] + train +
        ["--save-params", w("t2.safetensors"), "--metrics", w("r2.jsonl")])
    l1 = [json.loads(l)["loss"] for l in open(w("r1.jsonl"))]
    l2 = [json.loads(l)["loss"] for l in open(w("r2.jsonl"))]
    p1, p2 = read_safetensors(w("t1.safetensors")), read_safetensors(w("t2.safetensors"))
    el = max(abs(u - v) / abs(u) for u, v in zip(l1, l2)) if len(l1) == len(l2) == 3 else 1.0
    ep = max(rel(p2[k], p1[k]) if np.linalg.norm(p1[k]) else 0 for k in p1)
    return l1, el, ep


def loss_of(hc_run, so, folder, inputs):
    """hc-run's test-mode loss of one step on `inputs` (name -> array), saved
    as NPYs into `folder` (whatever else it holds is fed too)."""
    os.makedirs(folder, exist_ok=True)
    for k, v in inputs.items():
        np.save(os.path.join(folder, k + ".npy"), v)
    out = run([hc_run, so, "--inputs", folder, "--steps", "1"])
    return float([l for l in out.splitlines() if l.startswith("loss ")][0].split()[1])


def run(cmd, env=None):
    """cmd's stdout; env: variables set on top of this process's."""
    p = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, **env) if env else None)
    if p.returncode != 0:
        sys.exit("FAILED: %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p.stdout


def rel(a, b):
    a = np.asarray(a, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def export(model, export_args, batch=2):
    """Exports with random weights and the prediction output."""
    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--batch", str(batch),
         "--init", "random", "--with-output", "-o", model] + list(export_args))


def torch_reference(model, out_dir, batch=2):
    os.makedirs(out_dir, exist_ok=True)
    run([PY, os.path.join(ROOT, "models/torch_reference.py"), model,
         "--batch", str(batch), "--out", out_dir])


def read_safetensors(path):
    """name -> float64 array, without the safetensors package (not in Debian)."""
    import json
    import struct
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": np.float32, "F64": np.float64, "I64": np.int64}[info["dtype"]]
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + a:8 + n + b], dtype=dtype).reshape(
            info["shape"]).astype(np.float64)
    return out


def load_npy_dir(folder):
    """name -> array for every NAME.npy in a folder."""
    return {f[:-4]: np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder))
            if f.endswith(".npy")}


def compare_step(ref, grads, params, tol, mask_roundoff=False, float32=False):
    """Compares hc's first-step gradients and final parameters with the PyTorch
    oracle's folder (torch_reference.py --train-steps). Returns the list of
    errors and prints the worst relative errors.

    mask_roundoff leaves out entries whose reference gradient is below 1e-6 of
    the tensor's largest (zero or round-off: AdamW's m/sqrt(v) turns those into
    full-size steps of random sign, so float32 runs cannot agree on them).

    A gradient whose norm is below 1e-6 of the model's largest (e.g. the
    query projection of a cross-attention whose scores are still uniform at
    a random init: ~1e-9 where others are ~1e-3) holds float32 round-off of
    the others' size, so its relative error measures the round-off; it is
    judged against the largest gradient's norm instead, and listed. float32:
    hc's step and PyTorch's both in float32 (float64 comparisons stay
    relative everywhere)."""
    errors = []
    want_grads = load_npy_dir(os.path.join(ref, "grads"))
    if sorted(want_grads) != sorted(grads):
        errors.append("gradient sets differ: %s" % sorted(set(want_grads) ^ set(grads)))
    worst_g = 0.0
    largest = max([np.linalg.norm(v) for v in want_grads.values()] + [0.0])
    tiny = []
    for name, want in want_grads.items():
        if np.linalg.norm(want) == 0:
            errors.append("torch gradient of %s is zero (test would be vacuous)" % name)
        elif name in grads:
            if float32 and np.linalg.norm(want) < 1e-6 * largest:
                e = float(np.linalg.norm(grads[name] - want) / largest)
                tiny.append("%s %.1e" % (name, e))
            else:
                e = rel(grads[name], want)
            worst_g = max(worst_g, e)
            if e > tol:
                errors.append("grad %s %.3e" % (name, e))
    if tiny:
        print("gradients below 1e-6 of the largest, errors relative to it: " + ", ".join(tiny))
    before = load_npy_dir(os.path.join(ref, "params_before"))
    after = load_npy_dir(os.path.join(ref, "params_after"))
    worst_p, masked = 0.0, 0
    for name, b in before.items():
        want, got = after[name] - b, params[name] - b
        g = np.abs(want_grads[name]) if name in want_grads else None
        if mask_roundoff and float32 and g is not None and \
                np.linalg.norm(g) < 1e-6 * largest:
            # All of it round-off (above): AdamW's steps of it are noise.
            masked += g.size
            continue
        if mask_roundoff and g is not None and g.max() > 0:
            keep = g > 1e-6 * g.max()
            masked += int((~keep).sum())
            want, got = want[keep], got[keep]
        if np.linalg.norm(want) == 0:  # frozen: must not move at all
            if np.any(got != 0):
                errors.append("frozen %s moved" % name)
            continue
        e = rel(got, want)
        worst_p = max(worst_p, e)
        if e > tol:
            errors.append("delta %s %.3e" % (name, e))
    print("%d gradients: worst rel err %.3e; parameter change: worst rel err %.3e "
          "(%d zero or round-off gradient entries left out)"
          % (len(want_grads), worst_g, worst_p, masked))
    return errors


def anchors_python(which="torch"):
    """The python of an anchors environment (tools/install-anchors.sh; CI's
    tools/check.sh installs them first): `torch` (PyTorch 2.x, onnx,
    onnxscript, onnxruntime, ...) or `ort-training`. A missing one is a
    failure naming the script, never a skip."""
    lines = run([os.path.join(ROOT, "tools", "install-anchors.sh"), "--where"]).splitlines()
    path = lines[-1] if which == "torch" else lines[0].split(": ", 1)[1]
    if not os.access(path, os.X_OK):
        sys.exit("FAILED: the %s anchors environment is not installed (%s): run "
                 "tools/install-anchors.sh" % (which, path))
    return path
