"""Helpers shared by the end-to-end tests: run a command or fail with its
output, relative error, and the export + PyTorch oracle steps."""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
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
