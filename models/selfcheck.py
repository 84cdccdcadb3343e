#!/usr/bin/env -S /usr/bin/python3
"""End-to-end check of models/: export -> onnx.checker -> PyTorch oracle ->
numpy interpretation of the exported graph.

usage: /usr/bin/python3 models/selfcheck.py [--workdir DIR] [--big] [--keep]

For each configuration it runs the three CLIs exactly as users do:
  export_dit.py (checker full_check runs inside), torch_reference.py,
  onnx_numpy_eval.py (graph in float64 vs torch float64, and graph in float32
  vs torch float32), and checks torch's float32 loss against its float64 loss.
--big adds a DiT-S/2 export at the default image size 32 (~132 MB, timed).
Exit 0 when everything passes, 1 otherwise.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"


def sh(args):
    t0 = time.time()
    r = subprocess.run([PY] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode, r.stdout, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="hc-models-")
    os.makedirs(work, exist_ok=True)

    configs = []
    for opset in (13, 17):
        for dyn in (False, True):
            for ls in (True, False):
                for c in (4, 3):
                    configs.append(("tiny", opset, dyn, ls, c, 16, "random"))
    configs.append(("tiny", 13, False, True, 4, 32, "default"))
    configs.append(("DiT-S/2", 13, False, True, 4, 16, "random"))
    configs.append(("DiT-S/2", 17, True, True, 4, 16, "random"))

    ok = True
    print("%-8s %-5s %-7s %-6s %-3s %-4s %-8s %7s %9s %10s %10s %10s" % (
        "model", "opset", "batch", "sigma", "C", "size", "init", "export", "f32/f64",
        "graph64", "graph32", "result"))
    for model, opset, dyn, ls, c, size, init in configs:
        tag = "%s_o%d_%s_%s_c%d_s%d_%s" % (model.replace("/", ""), opset, "dyn" if dyn else "st",
                                            "ls" if ls else "nols", c, size, init)
        path = os.path.join(work, tag + ".onnx")
        args = [os.path.join(HERE, "export_dit.py"), "--model", model, "--opset", str(opset),
                "--in-channels", str(c), "--image-size", str(size), "--init", init,
                "--num-classes", "10", "--with-output", "--batch", "2", "--quiet", "-o", path,
                "--learn-sigma" if ls else "--no-learn-sigma"] + (["--dynamic-batch"] if dyn else [])
        rc, out, secs = sh(args)
        if rc != 0:
            print("%s: export failed:\n%s" % (tag, out))
            ok = False
            continue
        batches = (2, 3) if dyn else (2,)
        for b in batches:
            ref = os.path.join(work, tag + "_b%d" % b)
            rc, out, _ = sh([os.path.join(HERE, "torch_reference.py"), path, "--batch", str(b),
                             "--seed", "7", "--out", ref])
            if rc != 0:
                print("%s: torch_reference failed:\n%s" % (tag, out))
                ok = False
                continue
            l32 = float(np.load(os.path.join(ref, "loss.npy")))
            l64 = float(np.load(os.path.join(ref, "loss_f64.npy")))
            rel = abs(l32 - l64) / abs(l64)
            rc64, out64, _ = sh([os.path.join(HERE, "onnx_numpy_eval.py"), path, "--ref", ref])
            rc32, out32, _ = sh([os.path.join(HERE, "onnx_numpy_eval.py"), path, "--ref", ref,
                                 "--float32", "--rtol", "1e-5"])

            def worst(text):
                vals = [float(line.split("(")[1].split()[0]) for line in text.splitlines()
                        if "relative)" in line]
                return max(vals) if vals else float("nan")
            good = rc64 == 0 and rc32 == 0 and rel < 1e-5
            ok &= good
            print("%-8s %-5d %-7s %-6s %-3d %-4d %-8s %6.1fs %9.1e %10.1e %10.1e %10s" % (
                model, opset, ("dyn:%d" % b) if dyn else str(b), "on" if ls else "off", c, size,
                init, secs, rel, worst(out64), worst(out32), "ok" if good else "FAIL"))
            if not good:
                print(out64 + out32)
    if a.big:
        path = os.path.join(work, "DiT-S2_32.onnx")
        rc, out, secs = sh([os.path.join(HERE, "export_dit.py"), "--model", "DiT-S/2",
                            "-o", path])
        ok &= rc == 0
        print("DiT-S/2 image 32 default init: rc %d, %.1f s, %.1f MB" % (
            rc, secs, os.path.getsize(path) / 1e6 if rc == 0 else 0))
    if not a.keep and not a.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print("ALL OK" if ok else "FAILURES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
