#!/usr/bin/env -S /usr/bin/python3
"""Runs hc-compile or hc-eval (argv[1]) on every broken training_info file
(make_broken.py): each must exit with its manifest code (2 bad input, 3 not supported), print
exactly one stderr line holding the manifest's strings and nothing on
stdout, and write no output file."""
import json
import os
import shutil
import subprocess
import sys

compiler, work = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
shutil.rmtree(work, ignore_errors=True)
subprocess.run(["/usr/bin/python3", os.path.join(here, "make_broken.py"), work],
               check=True, capture_output=True)
cases = json.load(open(os.path.join(work, "manifest.json")))
failures = 0
for case in cases:
    path = os.path.join(work, case["file"])
    out = path + ".mlir"
    if os.path.basename(compiler) == "hc-eval":
        cmd = [compiler, path, "--inputs", work, "--train", "--out", out]
    else:
        cmd = [compiler, path, "--emit=train", "-o", out]
    p = subprocess.run(cmd + case["flags"], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    ok = (p.returncode == case["code"] and len(lines) == 1 and not p.stdout
          and not os.path.exists(out) and all(s in lines[0] for s in case["must_contain"]))
    failures += not ok
    print("%s %-28s rc=%d %s" % ("ok  " if ok else "FAIL", case["file"], p.returncode,
                                 p.stderr.strip()[:400]))
bad = sum(c["code"] == 2 for c in cases)
print("%d/%d broken training_info files rejected cleanly (%d bad input, %d not supported)"
      % (len(cases) - failures, len(cases), bad, len(cases) - bad))
if not failures:
    shutil.rmtree(work, ignore_errors=True)
sys.exit(1 if failures or len(cases) < 30 else 0)
