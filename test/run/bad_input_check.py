#!/usr/bin/env -S /usr/bin/python3
"""Every bad input a clear error (issue 29's probe): crashes that became
errors, values that went through silently, messages that misled. Uses the
tiny DiT of e2e.run.safety.setup.

usage: bad_input_check.py CASE --bin DIR --toys DIR --work DIR

  library      a truncated or non-ELF step library: exit 2 naming it, no SIGBUS.
  data-change  --data rewritten in place or truncated under the run (the
               deterministic HC_DATA_FAULT hook): exit 1 naming the file and
               what changed, also at -np 2.
  settings     HC_NUM_THREADS=0/-1/abc/100000, HC_PIN=banana, HC_ISA=sse:
               exit 2 naming the variable.
  test-inputs  --inputs with class ids or timesteps outside the model's.
  check-finite --check-finite names the first non-finite tensor: planted in
               a forward and a backward kernel (HC_CHECK_FINITE_PLANT) and
               in a CFTP partial weight gradient (--clusters 2), from
               a NaN input in test mode, from --lr 1e40 in the optimizer, at
               -np 2 with the rank; a NaN in --init is refused up front.
  messages     --target foo, a file size limit while linking, --freeze of
               every parameter, --batch too large, --steps -1, --ema nan and
               -o naming a folder: each says what is wrong, none "an hc bug".
"""
import os
import stat
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_check import MPI, check  # noqa: E402
from safety_check import D, cases_of, digest, script_main  # noqa: E402


def no_bug(p):
    check("hc bug" not in p.stderr and "internal error" not in p.stderr,
          "%s: reported as an internal error:\n%s" % (p.cmd, p.stderr))


def case_library(c):
    c.fresh()
    whole = open(c.path("s.so"), "rb").read()
    for n in (50000, 5000, 100):
        open(c.path("t.so"), "wb").write(whole[:n])
        p = c.refused("hc-run", ["t.so"] + D + ["--steps", "1"], ["t.so: not a usable step library", "truncated"])
        no_bug(p)
    open(c.path("t.so"), "w").write("not a library\n")
    c.refused("hc-run", ["t.so"] + D + ["--steps", "1"], ["t.so: not a usable step library: not an ELF file"])
    print("truncated at 50000/5000/100 bytes and a text file: exit 2, one line, no SIGBUS")


def case_data_change(c):
    c.fresh()
    run = ["s.so", "--data", "d.npy", "--labels", "y.npy", "--steps", "6", "--no-progress", "--log-every", "1"]
    for kind, want in (("rewrite", "d.npy was modified during the run"),
                       ("truncate", "d.npy: truncated during the run")):
        for np_ in (None, 2):
            with open(c.path("x.npy"), "rb") as src, open(c.path("d.npy"), "wb") as dst:
                dst.write(src.read())
            env = {"HC_DATA_FAULT": kind, "HC_DATA_FAULT_AT_STEP": "3"}
            if np_ is None:
                p = c.refused("hc-run", run, [want], code=1, env=env)
                check("(step=0000002)" in p.stdout and "(step=0000003)" not in p.stdout,
                      "%s: trained past the change:\n%s" % (kind, p.stdout))
            else:
                e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", **env)
                p = subprocess.run(MPI + ["-np", "2", os.path.join(c.bin, "hc-run")] + run, cwd=c.work, env=e,
                                   capture_output=True, text=True, timeout=120)
                check(p.returncode != 0 and want in p.stderr and "SIGBUS" not in p.stderr,
                      "np2 %s: exit %d\n%s" % (kind, p.returncode, p.stderr))
    print("data rewritten in place / truncated before step 3: exit 1 naming the file, at -np 1 and 2")


def case_settings(c):
    c.fresh()
    run = ["s.so"] + D + ["--steps", "1", "--no-progress"]
    for var, value, want in (("HC_NUM_THREADS", "0", "HC_NUM_THREADS=0: needs a thread count"),
                             ("HC_NUM_THREADS", "-1", "HC_NUM_THREADS=-1: needs a thread count"),
                             ("HC_NUM_THREADS", "abc", "HC_NUM_THREADS=abc: needs a thread count"),
                             ("HC_NUM_THREADS", "100000", "from 1 to 4096"),
                             ("HC_PIN", "banana", "HC_PIN=banana: needs 0"),
                             ("HC_ISA", "sse", "HC_ISA=sse: needs generic, avx2 or avx512"),
                             ("HC_SYNC_ALLREDUCE", "yes", "HC_SYNC_ALLREDUCE=yes")):
        c.refused("hc-run", run, [want], env={var: value})
    c.ok("hc-run", run, env={"HC_NUM_THREADS": "3", "HC_PIN": "0"})
    print("bad HC_NUM_THREADS (0, -1, abc, 100000), HC_PIN, HC_ISA, HC_SYNC_ALLREDUCE: exit 2 naming them")


def write_inputs(c, d, t, y):
    os.makedirs(c.path(d), exist_ok=True)
    r = np.random.default_rng(0)
    np.save(c.path(d, "x_t.npy"), r.standard_normal((4, 1, 8, 8)).astype(np.float32))
    np.save(c.path(d, "noise.npy"), r.standard_normal((4, 1, 8, 8)).astype(np.float32))
    np.save(c.path(d, "t.npy"), np.array(t, np.int64))
    np.save(c.path(d, "y.npy"), np.array(y, np.int64))


def case_test_inputs(c):
    c.fresh()
    # 10 classes with class dropout: the label table has 11 rows, 10 is null.
    write_inputs(c, "ok", [0, 999, 500, 1], [0, 9, 10, 3])
    c.ok("hc-run", ["s.so", "--inputs", "ok", "--steps", "1"])
    for d, t, y, want in (("y11", [0, 1, 2, 3], [0, 11, 2, 3], "y.npy: 11 at index 1 is not a valid class id"),
                          ("yneg", [0, 1, 2, 3], [0, 1, -1, 3], "y.npy: -1 at index 2 is not a valid class id"),
                          ("t1000", [0, 1000, 2, 3], [0, 1, 2, 3], "t.npy: 1000 at index 1 is not a valid timestep"),
                          ("tneg", [-5, 1, 2, 3], [0, 1, 2, 3], "t.npy: -5 at index 0 is not a valid timestep")):
        write_inputs(c, d, t, y)
        c.refused("hc-run", ["s.so", "--inputs", d, "--steps", "1"], [want])
    print("test mode: class ids outside 0..10 (10 = null) and timesteps outside 0..999 refused")


def case_check_finite(c):
    c.fresh()
    run = ["s.so"] + D + ["--steps", "3", "--check-finite", "--no-progress"]
    for kernel, want in (("linear", "kernel linear (forward) of ONNX node '/dit/x_embedder/proj/Conv' wrote nan "
                                    "into an activation"),
                         ("gelu_grad", "kernel gelu_grad (backward) of ONNX node '/dit/blocks.1/mlp/act/"),
                         ("linear_grad_weight_bias", "(backward) of ONNX node '/dit/final_layer/linear/Add' wrote nan "
                                                "into grad:final_layer.linear.weight")):
        p = c.refused("hc-run", run, ["--check-finite: step 1, rank 0: ", want], code=1,
                      env={"HC_CHECK_FINITE_PLANT": kernel})
        check("Train Loss" not in p.stdout, "trained on past the planted NaN")
    # On a two-cluster CFTP plan, cluster 1's first weight gradient is its
    # partial sum: named as one, not as an activation.
    c.ok("hc-compile", ["model.onnx", "--batch", "4", "--clusters", "2", "-o", "c2.so"])
    c.refused("hc-run", ["c2.so"] + run[1:],
              ["--check-finite: step 1, rank 0: ", "kernel linear_grad_weight_bias (backward) of ONNX node",
               "wrote nan into a partial weight gradient (a CFTP cluster's share, folded into the gradient)"],
              code=1, env={"HC_CHECK_FINITE_PLANT": "linear_grad_weight_bias@1"})
    # The hook only plants where a check runs: without the flag, training is normal.
    c.ok("hc-run", ["s.so"] + D + ["--steps", "1", "--no-progress"], env={"HC_CHECK_FINITE_PLANT": "linear"})
    # Not planted: a NaN in test mode's x_t, and an optimizer that overflows.
    write_inputs(c, "nan", [1, 2, 3, 4], [0, 1, 2, 3])
    x = np.load(c.path("nan", "x_t.npy"))
    x[2, 0, 3, 5] = np.nan
    np.save(c.path("nan", "x_t.npy"), x)
    c.refused("hc-run", ["s.so", "--inputs", "nan", "--steps", "1", "--check-finite"],
              ["step 1, rank 0: kernel copy (forward) of ONNX node '/dit/x_embedder/proj/Conv' wrote nan"], code=1)
    c.refused("hc-run", ["lr40.so"] + D + ["--steps", "2", "--check-finite", "--no-progress"],
              ["step 1, rank 0: kernel adamw (optimizer) wrote", "into final_layer.linear.weight"], code=1)
    e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HC_CHECK_FINITE_PLANT="gelu_grad")
    p = subprocess.run(MPI + ["-np", "2", os.path.join(c.bin, "hc-run")] + run, cwd=c.work, env=e,
                       capture_output=True, text=True, timeout=120)
    check(p.returncode != 0 and "--check-finite: step 1, rank " in p.stderr and "gelu_grad (backward)" in p.stderr,
          "np2: exit %d\n%s" % (p.returncode, p.stderr))
    # A NaN in the initial parameters: refused before step 1.
    import st
    t = st.load(c.path("s.so.init.safetensors"))
    t["blocks.0.mlp.fc1.weight"][1, 2] = np.inf
    st.save(c.path("bad-init.safetensors"), t)
    c.refused("hc-run", ["s.so"] + D + ["--steps", "1", "--init", "bad-init.safetensors"],
              ["bad-init.safetensors: tensor 'blocks.0.mlp.fc1.weight' holds NaN or infinity"])
    print("--check-finite named the planted forward and backward NaNs, a partial weight gradient, a NaN input (test mode), the optimizer's "
          "overflow, and the rank at -np 2; a NaN init refused")


def case_messages(c):
    c.fresh()
    compile_ = ["model.onnx", "--batch", "4"]
    p = c.refused("hc-compile", compile_ + ["--target", "foo", "-o", "t.so"],
                  ["--target foo: the C++ compiler", "does not accept -march=foo"])
    no_bug(p)
    # A file size limit while the linker writes the library (the model's
    # init file, written first, is larger than the library: so the limit is
    # the linker's own, through a wrapper that is the "compiler").
    wrap = c.path("cxx-limited")
    with open(wrap, "w") as f:
        f.write("#!/bin/bash\nulimit -f 40\nexec c++ \"$@\"\n")
    os.chmod(wrap, os.stat(wrap).st_mode | stat.S_IXUSR)
    before = {f: digest(c.path(f)) for f in ("s.so", "s.so.init.safetensors")}
    listing = sorted(os.listdir(c.work))
    p = c.refused("hc-compile", compile_ + ["-o", "s.so"], ["s.so", "cannot write the step library", "File too large"],
                  code=1, env={"HC_CXX": wrap})
    no_bug(p)
    check({f: digest(c.path(f)) for f in before} == before, "the old pair changed")
    check(sorted(os.listdir(c.work)) == listing, "files left behind: %s" % sorted(set(os.listdir(c.work)) - set(listing)))
    import onnx  # the model's own parameter names
    names = [i.name for i in onnx.load(c.path("model.onnx")).graph.initializer]
    p = c.refused("hc-compile", compile_ + ["--freeze", ",".join(names), "-o", "f.so"],
                  ["--freeze leaves no parameter to train"])
    no_bug(p)
    c.refused("hc-compile", ["model.onnx", "--batch", "99999999", "-o", "b.so"], ["--batch needs an integer from 1 to 1048576, got '99999999'"])
    os.makedirs(c.path("folder"))
    c.refused("hc-compile", compile_ + ["-o", "folder"], ["-o folder is a folder"])
    c.refused("hc-compile", compile_ + ["--emit=hc", "-o", "folder"], ["-o folder is a folder"])
    check(os.listdir(c.path("folder")) == [], "files left in the folder")
    c.refused("hc-run", ["s.so"] + D + ["--steps", "-1"], ["--steps needs a step count", "'-1'"])
    c.refused("hc-run", ["s.so"] + D + ["--steps", "2", "--ckpt-dir", "k", "--ema", "nan"],
              ["--ema needs a decay in [0, 1), got 'nan'"])
    c.refused("hc-run", ["s.so"] + D + ["--steps", "2", "--ckpt-dir", "k", "--ema", "inf"], ["got 'inf'"])
    c.ok("hc-run", ["--ema", "0.5", "s.so"] + D + ["--steps", "1", "--ckpt-dir", "k", "--no-progress"])
    print("--target foo, a file size limit while linking, --freeze of all %d parameters, --batch 99999999, "
          "--steps -1, --ema nan/inf, -o folder: each a one-line reason, none 'an hc bug'" % len(names))


if __name__ == "__main__":
    script_main(cases_of(globals()))
