#!/usr/bin/env -S /usr/bin/python3
"""Seeds the ONNX importer's fuzzer and runs it (ctest: fuzz.import).

usage: run_fuzz.py --fuzzer BIN --onnx-from-text BIN --work DIR
                   (--seconds S | --runs N) [--jobs J]

Seeds, made fresh each time (never committed): a tiny DiT from
models/export_dit.py (opsets 13 and 17, static and dynamic batch; not with
--small, for long runs at a higher rate), the
malformed corpus of test/onnx/make_malformed.py, and every
test/import/*.onnxtxt through onnx-from-text. Limits, per the project's
definition of a crash: any sanitizer report or signal, a leak, more than
10 s on one input (-timeout=10), more than 2 GB of RSS (-rss_limit_mb=2048).
Prints the run's executions, coverage and corpus size; exits non-zero when
the fuzzer found a crash (its reproducer is left in DIR as crash-*).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"


def make_seeds(a, seeds):
    os.makedirs(seeds)
    for opset, dyn in (() if a.small else ((13, False), (17, True))):
        name = "dit_tiny_op%d%s.onnx" % (opset, "_dyn" if dyn else "")
        subprocess.run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size", "8",
                        "--in-channels", "1", "--num-classes", "4", "--opset", str(opset), "-o",
                        os.path.join(seeds, name), "--quiet"] + (["--dynamic-batch"] if dyn else []),
                       check=True, timeout=300)
    mal = os.path.join(a.work, "malformed")
    subprocess.run([PY, os.path.join(ROOT, "test/onnx/make_malformed.py"), mal], check=True, timeout=300,
                   stdout=subprocess.DEVNULL)
    for f in glob.glob(os.path.join(mal, "*.onnx")):
        shutil.copy(f, seeds)
    for f in sorted(glob.glob(os.path.join(ROOT, "test/import/*.onnxtxt"))):
        out = os.path.join(seeds, os.path.basename(f)[:-len(".onnxtxt")] + ".onnx")
        subprocess.run([a.onnx_from_text, f, "-o", out], check=True, timeout=60)
    return len(os.listdir(seeds))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fuzzer", required=True)
    ap.add_argument("--onnx-from-text", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seconds", type=int)
    ap.add_argument("--runs", type=int)
    ap.add_argument("--keep-corpus", action="store_true", help="reuse DIR/corpus from an earlier run")
    ap.add_argument("--fork", type=int, default=0, help="libFuzzer -fork=N worker processes (long runs)")
    ap.add_argument("--seed", type=int, default=1,
                    help="libFuzzer -seed (default 1: ctest's 60 s are the same mutation sequence on every "
                         "machine, a prefix of what a faster one runs; 0 = random, for long runs)")
    ap.add_argument("--small", action="store_true",
                    help="no DiT seeds, inputs up to 32 KiB: ~10x the executions per second (a DiT seed is 0.7 MB)")
    a = ap.parse_args()
    corpus = os.path.join(a.work, "corpus")
    if not a.keep_corpus:
        shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(corpus, exist_ok=True)
    seeds = os.path.join(a.work, "seeds")
    if not os.path.isdir(seeds):
        print("seeds: %d files" % make_seeds(a, seeds))
    limit = ["-max_total_time=%d" % a.seconds] if a.seconds else ["-runs=%d" % a.runs]
    cmd = [a.fuzzer, corpus, seeds, "-timeout=10", "-rss_limit_mb=2048", "-detect_leaks=1",
           "-print_final_stats=1", "-seed=%d" % a.seed, "-artifact_prefix=" + a.work + "/"] + limit + (
               ["-max_len=32768"] if a.small else []) + (
               ["-fork=%d" % a.fork] if a.fork else [])
    env = dict(os.environ,
               ASAN_OPTIONS="detect_leaks=1:allow_user_poisoning=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    log = p.stderr
    with open(os.path.join(a.work, "fuzz.log"), "w") as f:
        f.write(log)
    stats = {k: v for k, v in re.findall(r"^stat::(\w+):\s+(\d+)", log, re.M)}
    last = [l for l in log.splitlines() if re.match(r"#\d+\s", l)]
    print("fuzzer exit %d; %s" % (p.returncode, last[-1] if last else "no progress line"))
    print("executions %s, new units %s, peak RSS %s MB"
          % (stats.get("number_of_executed_units"), stats.get("new_units_added"), stats.get("peak_rss_mb")))
    if p.returncode != 0:
        crash = [l for l in log.splitlines() if "ERROR" in l or "SUMMARY" in l or "crash-" in l or "timeout" in l]
        print("FAIL: the fuzzer found a problem:\n" + "\n".join(crash[:20]) + "\n(full log: %s/fuzz.log)" % a.work)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
