#!/usr/bin/env python3
"""The throwaway op through every stage of hc-compile, carried by its own
files only (test/extension/: ODS + gradient rule, ONNX domain + handler, one
registry entry, the kernel body in a library of its own), registered into
hc-compile's driver by hc-compile-throwaway.

A tiny DiT gets three `hc.throwaway::Axpb` nodes (y = alpha x + beta):
on the patch embedding's transposed tokens (a strided view), on the
conditioning vector c, and one with mode "off" (the identity). Checked:
  - import: plain hc-compile refuses the domain in one line (exit 2); the
    extension's tool imports 3 `hct.throwaway_axpb` ops, and refuses a node
    its domain's check rejects (no beta, a bad mode, another version);
  - autodiff: the training step has the 3 plus 2 adjoints (the op's own
    gradient rule; mode "off" passes its adjoint through);
  - CFTP: on 2 clusters the 3 calls on token tensors are cut in two, the 2
    on the conditioning vector placed whole, as builtin ops there are;
  - AutoMem: under a budget that moves data (disk tier), still 2 streams
    with tier copies, and the throwaway calls still cut;
  - emission: the generated C++ declares the kernel; the step library
    links the extension's kernel library;
  - a run: 3 AdamW steps through hc-run, against the same DiT with the
    nodes written as ONNX Mul/Add (and nothing for mode "off"), compiled by
    plain hc-compile: losses and parameters within --tol; the budgeted
    two-stream step bit-equal to the unbudgeted CFTP step. A reference
    with alpha 0.1% off must miss (the comparison can fail)."""
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test/e2e"))
from common import export, read_safetensors, rel, run, torch_reference  # noqa: E402

DOMAIN = "hc.throwaway"
# (tensor the node rewrites, alpha, beta, mode)
NODES = [("/dit/x_embedder/Transpose_output_0", 1.5, 0.25, "on"),
         ("/dit/Add_1_output_0", -0.75, 0.1, "on"),
         ("/dit/Add_output_0", 3.0, 7.0, "off")]


def rewrite(base, out, as_extension, alpha_scale=1.0):
    """Inserts each NODES entry after its producer: an Axpb node of the
    extension's domain, or the same arithmetic in ONNX Mul/Add."""
    m = onnx.load(base)
    g = m.graph
    nodes = list(g.node)
    for k, (name, alpha, beta, mode) in enumerate(NODES):
        alpha *= alpha_scale
        at = next(i for i, n in enumerate(nodes) if name in n.output)
        pre = name + "_pre"
        producer = nodes[at]
        producer.output[list(producer.output).index(name)] = pre  # consumers read the rewrite
        if as_extension:
            new = [helper.make_node("Axpb", [pre], [name], domain=DOMAIN, name="axpb%d" % k,
                                    alpha=alpha, beta=beta, **({"mode": mode} if mode != "on" else {}))]
        elif mode == "off":
            new = [helper.make_node("Identity", [pre], [name], name="axpb%d" % k)]
        else:
            a, b = "axpb%d_alpha" % k, "axpb%d_beta" % k  # Constant nodes: not trained
            new = [helper.make_node("Constant", [], [a], value=numpy_helper.from_array(
                       np.array(alpha, np.float32), a)),
                   helper.make_node("Constant", [], [b], value=numpy_helper.from_array(
                       np.array(beta, np.float32), b)),
                   helper.make_node("Mul", [pre, a], [name + "_scaled"], name="axpb%d_mul" % k),
                   helper.make_node("Add", [name + "_scaled", b], [name], name="axpb%d_add" % k)]
        nodes[at + 1:at + 1] = new
    del g.node[:]
    g.node.extend(nodes)
    if as_extension:
        m.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    onnx.save(m, out)


def calls(schedule, kernel):
    return [l for l in schedule.splitlines() if 'hcs.call "%s"' % kernel in l]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--tool", required=True, help="hc-compile-throwaway")
    ap.add_argument("--work", required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("export_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    w = lambda *p: os.path.join(a.work, *p)
    errors = []

    def expect(ok, what):
        print(("ok:   " if ok else "FAIL: ") + what)
        if not ok:
            errors.append(what)

    export(w("base.onnx"), [x for x in a.export_args if x != "--"], batch=a.batch)
    torch_reference(w("base.onnx"), w("in"), batch=a.batch)
    rewrite(w("base.onnx"), w("axpb.onnx"), True)
    rewrite(w("base.onnx"), w("ref.onnx"), False)
    rewrite(w("base.onnx"), w("planted.onnx"), False, alpha_scale=1.001)
    hc_compile = os.path.join(a.bin, "hc-compile")
    topo = ["--batch", str(a.batch), "--topology", os.path.join(ROOT, "test/topologies/flat2.xml"),
            "--clusters", "2", "--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0.01"]

    # Import: only the extension's tool knows the domain.
    p = subprocess.run([hc_compile, w("axpb.onnx")] + topo + ["--emit=hc"], capture_output=True, text=True)
    expect(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
           and "unknown op domain 'hc.throwaway'" in p.stderr,
           "plain hc-compile refuses the domain in one line, exit 2 (%d: %s)" % (p.returncode, p.stderr.strip()))
    tool = [a.tool, w("axpb.onnx")] + topo
    hc = run(tool + ["--emit=hc"])
    expect(hc.count("hct.throwaway_axpb") == 3, "import: 3 hct.throwaway_axpb ops (%d)" % hc.count("hct.throwaway_axpb"))
    # The domain's own check: one line, exit 2, naming the node.
    for tag, edit, message in (
            ("nobeta", lambda n: [n.attribute.remove(x) for x in list(n.attribute) if x.name == "beta"],
             "Axpb needs the float attributes alpha and beta"),
            ("mode", lambda n: n.attribute.append(helper.make_attribute("mode", "sideways")),
             'Axpb\'s mode is "on" or "off", got "sideways"'),
            ("version", None, "domain 'hc.throwaway' version 2 is not known (hc defines version 1)")):
        bad = onnx.load(w("axpb.onnx"))
        if edit:
            edit(next(n for n in bad.graph.node if n.op_type == "Axpb"))
        else:
            next(o for o in bad.opset_import if o.domain == DOMAIN).version = 2
        onnx.save(bad, w(tag + ".onnx"))
        p = subprocess.run([a.tool, w(tag + ".onnx"), "--batch", str(a.batch), "--emit=hc"],
                           capture_output=True, text=True)
        expect(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and message in p.stderr,
               "refused (%s): %s" % (tag, p.stderr.strip()))
    train = run(tool + ["--emit=train"])
    n = train.count("hct.throwaway_axpb")
    expect(n == 5, "autodiff: 3 forward ops + 2 adjoints from the op's gradient rule (%d)" % n)

    # CFTP: the calls on token tensors (rank 3: both forward ones and the
    # transposed one's adjoint) cut in two; those on the small conditioning
    # vector placed whole on one cluster, as its builtin neighbours are.
    def placement(schedule):
        tw = calls(schedule, "throwaway_axpb")
        cut = [l for l in tw if 'split = "rows"' in l and "cluster = 1 : i64" in l]
        whole = [l for l in tw if "split =" not in l and "cluster = " in l]
        return len(tw), len(cut), len(whole)

    sched = run(tool + ["--emit=schedule"])
    total, cut, whole = placement(sched)
    expect((total, cut, whole) == (8, 3, 2),
           "CFTP: 5 throwaway calls, 3 cut in two and 2 placed whole (%d calls, %d cut, %d whole)"
           % (total, cut, whole))

    # AutoMem: a budget of 60% of the activations with a disk tier (the
    # same arithmetic as e2e.cftp.*.budget), recomputation priced out.
    arenas = {k: int(v) for k, v in re.findall(
        r"(\w+) = (\d+) : i64", re.search(r"hcs.arena_bytes = \{([^}]*)\}", sched).group(1))}
    probe = run(tool + ["--mem-budget", str(1 << 50), "--emit=schedule"])
    reserve = int(re.search(r"reserve = (\d+)[,>]", probe).group(1))
    budget = sum(v for k, v in arenas.items() if k not in ("act", "accum")) + reserve + int(0.6 * arenas["act"])
    os.makedirs(w("offload"))
    # The rates price recomputation out, for both cost models alike (one
    # --rates): the cut is compared with the unbudgeted plan at the same rates.
    rates = ["--rates", "stream_gbps_per_thread=0.001"]
    tier = ["--mem-budget", str(budget), "--offload-dir", w("offload")] + rates
    budgeted = run(tool + tier + ["--emit=schedule"])
    m = re.search(r"hcs.cftp = \{clusters = 2 : i64, copies = (\d+) : i64", budgeted)
    bcut = placement(budgeted)[1]
    ucut = placement(run(tool + rates + ["--emit=schedule"]))[1]
    expect(bool(m) and int(m.group(1)) > 0 and "hcs.offload" in budgeted and bcut == ucut and bcut >= 3,
           "AutoMem: budget %d bytes keeps 2 streams with %s tier copies, the throwaway calls "
           "cut as without the budget at the same rates (%d, %d, at least 3)"
           % (budget, m.group(1) if m else "no", bcut, ucut))

    # Emission.
    cpp = run(tool + ["--emit=cpp"])
    expect('extern "C" void hcrt_op_throwaway_axpb(' in cpp and "hcrt_op_throwaway_axpb, " in cpp,
           "emission: the generated C++ declares and tables hcrt_op_throwaway_axpb")
    run(tool + ["-o", w("on.so")])
    # Bit-equality with and without the budget holds where both sum each
    # weight gradient the same way: a budget may leave no room for CFTP's
    # partial weight gradients, which sum in another order than the feature
    # cut. So both sides of that comparison cut features.
    exact = ["--cftp-partial-grads", "off"]
    run(tool + exact + ["-o", w("exact.so")])
    run(tool + tier + exact + ["-o", w("budget.so")])
    run([hc_compile, w("ref.onnx")] + topo + ["-o", w("ref.so")])
    run([hc_compile, w("planted.onnx")] + topo + ["-o", w("planted.so")])
    needed = run(["readelf", "-d", w("on.so")])
    expect("libhc-throwaway-kernels.so" in needed, "the step library needs libhc-throwaway-kernels.so")

    def train_run(so, tag):
        env = dict(os.environ, HC_NUM_THREADS="2")
        out = subprocess.run([os.path.join(a.bin, "hc-run"), so, "--inputs", w("in"), "--steps", "3",
                              "--save-params", w(tag + ".safetensors")], env=env, check=True,
                             capture_output=True, text=True).stdout
        losses = [float(l.split()[1]) for l in out.splitlines() if l.startswith("loss ")]
        return losses, read_safetensors(w(tag + ".safetensors"))

    on, p_on = train_run(w("on.so"), "on")
    bud, p_bud = train_run(w("budget.so"), "budget")
    ex, p_ex = train_run(w("exact.so"), "exact")
    ref, p_ref = train_run(w("ref.so"), "ref")
    planted, p_planted = train_run(w("planted.so"), "planted")
    print("losses: throwaway", on, " Mul/Add reference", ref)
    keys = sorted(p_ref)

    def errs(losses, params):
        whole = rel(np.concatenate([p_on[k].ravel() for k in keys]),
                    np.concatenate([params[k].ravel() for k in keys]))
        return rel(on, losses), whole

    le, pe = errs(ref, p_ref)
    expect(len(on) == 3 and np.all(np.isfinite(on)) and le <= a.tol and pe <= a.tol,
           "a run: 3 AdamW steps against the Mul/Add reference: loss %.2e, parameters %.2e (tol %.0e)"
           % (le, pe, a.tol))
    ple, ppe = errs(planted, p_planted)
    expect(max(ple, ppe) > a.tol,
           "planted: alpha 0.1%% off in the reference misses: loss %.2e, parameters %.2e" % (ple, ppe))
    same = bud == ex and sorted(p_bud) == sorted(p_ex) and all(np.array_equal(p_bud[k], p_ex[k]) for k in p_ex)
    expect(same, "the budgeted two-stream step equals the unbudgeted CFTP step bit for bit over 3 steps "
           "(partial weight gradients off on both)")
    for e in errors:
        print("FAIL:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
