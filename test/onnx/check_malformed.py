#!/usr/bin/env -S /usr/bin/python3
"""Runs hc-compile on every file of the hostile corpus (make_malformed.py):
each must fail with exit code 2 and exactly one stderr line containing the
manifest's strings, and must not crash (the ctest runs an ASan/UBSan build)."""
import json
import os
import shutil
import subprocess
import sys

compiler, work = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
shutil.rmtree(work, ignore_errors=True)
subprocess.run(["/usr/bin/python3", os.path.join(here, "make_malformed.py"), work],
               check=True, capture_output=True)
cases = json.load(open(os.path.join(work, "manifest.json")))
failures = 0
for control in ("base_valid.onnx", "base_valid_ir10.onnx"):
    p = subprocess.run([compiler, os.path.join(work, control), "--batch", "2", "--emit=hc"],
                       capture_output=True, text=True)
    ok = p.returncode == 0 and "func.func @forward" in p.stdout
    failures += not ok
    print("%s %-28s rc=%d (control: must import) %s" % ("ok  " if ok else "FAIL", control,
                                                       p.returncode, p.stderr.strip()[:400]))
for case in cases:
    path = os.path.join(work, case["file"])
    p = subprocess.run([compiler, path, "--batch", "2", "--emit=hc"],
                       capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    ok = (p.returncode == 2 and len(lines) == 1 and not p.stdout
          and all(s in lines[0] for s in case["must_contain"]))
    failures += not ok
    print("%s %-28s rc=%d %s" % ("ok  " if ok else "FAIL", case["file"],
                                 p.returncode, p.stderr.strip()[:400]))
print("%d/%d malformed inputs rejected cleanly" % (len(cases) - failures, len(cases)))
shutil.rmtree(work, ignore_errors=True)
sys.exit(1 if failures or len(cases) < 15 else 0)
