#!/usr/bin/env -S /usr/bin/python3
"""Runs every command of a tutorial in docs/, in order, as a reader would.

Each fenced block tagged `sh` is shell (the reader's shell: bash), each
`python` block runs with /usr/bin/python3, all in one bash session so `cd`
and variables carry over; a block in any other language (or none) fails
the check, so no command can hide from it. HC and HC_BIN point at the
repository and its binaries, and the tutorial's size knobs (TILES, STEPS)
are set small. After the run, the files the tutorial promises must exist.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")
PROMISED = ["data/images.npy", "data/labels.npy", "dit_ms.onnx", "my_dit.onnx",
            "my_dit.schedule.mlir", "dit_ms.so", "dit_ms.so.init.safetensors", "dit_ms_b16.so",
            "train.jsonl", "loss.png", "dit_ms_sample.so", "samples.png", "samples.npy",
            "samples.labels.npy", "quality.json", "dit_ms.pt", "heldout/low.npy",
            "data/detail.npy", "dit_sr.so", "sr.npy", "sr_quality.json", "sr.png"]


def blocks(path, section=None):
    """[(language, text, first line number)] of the fenced blocks (of the
    `## section` heading's part only, when given)."""
    out, lang, start, body = [], None, 0, []
    inside = section is None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if section is not None and lang is None and line.startswith("## "):
                inside = line.strip() == "## " + section
            if not inside:
                continue
            m = FENCE.match(line.rstrip("\n"))
            if lang is None and m:
                lang, start, body = m.group(1), n, []
            elif lang is not None and line.rstrip("\n") == "```":
                out.append((lang, "".join(body), start))
                lang = None
            elif lang is not None:
                body.append(line)
    if lang is not None:
        sys.exit("FAILED: %s:%d: a code block is never closed" % (path, start))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--section", default=None,
                    help="only the blocks under this '## ' heading (e.g. the README's "
                         "'Quick start: a training run')")
    ap.add_argument("--promise", action="append", default=None,
                    help="a file the commands must make (default: the tutorial's)")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    found = blocks(a.doc, a.section)
    if not found:
        sys.exit("FAILED: %s has no code blocks%s" % (a.doc, " under '## %s'" % a.section
                                                     if a.section else ""))
    promised = a.promise or PROMISED
    script = ["set -euo pipefail"]
    for k, (lang, text, line) in enumerate(found):
        if lang not in ("sh", "python"):
            sys.exit("FAILED: %s:%d: a block in '%s' (only sh and python blocks are run, so "
                     "every command must be in one)" % (a.doc, line, lang or "no language"))
        script.append("echo '@@ block %d (line %d)'" % (k, line))
        if lang == "sh":
            script.append(text)
        else:
            py = os.path.join(a.work, "block%d.py" % k)
            with open(py, "w") as f:
                f.write(text)
            script.append("/usr/bin/python3 %s" % py)
    script.append("echo '@@ done'; pwd > %s" % os.path.join(a.work, "final_cwd"))
    env = dict(os.environ, HC=os.path.abspath(a.repo), HC_BIN=os.path.abspath(a.bin),
               TILES="256", STEPS="40")
    p = subprocess.run(["bash", "-c", "\n".join(script)], cwd=a.work, env=env,
                       capture_output=True, text=True)
    print(p.stdout[-6000:])
    if p.returncode != 0 or "@@ done" not in p.stdout:
        ran = re.findall(r"@@ block (\d+) \(line (\d+)\)", p.stdout)
        where = "block at line %s" % ran[-1][1] if ran else "before the first block"
        sys.exit("FAILED: the tutorial's %s exited %d:\n%s" % (where, p.returncode, p.stderr[-4000:]))
    ran = re.findall(r"@@ block (\d+)", p.stdout)
    if len(ran) != len(found):
        sys.exit("FAILED: %d of %d blocks ran" % (len(ran), len(found)))
    with open(os.path.join(a.work, "final_cwd")) as f:
        cwd = f.read().strip()
    missing = [f for f in promised if not os.path.exists(os.path.join(cwd, f))]
    if missing:
        sys.exit("FAILED: the tutorial did not make %s (in %s)" % (", ".join(missing), cwd))
    print("tutorial: %d blocks (%d sh, %d python) ran in order; all %d promised files exist"
          % (len(found), sum(b[0] == "sh" for b in found), sum(b[0] == "python" for b in found),
             len(promised)))


if __name__ == "__main__":
    main()
