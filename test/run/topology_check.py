#!/usr/bin/env -S /usr/bin/python3
"""hc-run's check of the machine against a library's plan (the description's
"topology" and "core_budget", as hc-compile --topology writes them).

usage: topology_check.py CASE --hc-run BIN --toys DIR --work DIR

The toy step (toy_step.cpp) adds the keys of TOY_PLAN_FILE to its
description, so each case states the plan it runs against:
  remap    planned for the 16-core flat machine (test/topologies/flat16.xml),
           run here: one note line naming what differs, exit 0, same losses
  refuse   a plan whose comm cores take all of this rank's cores here, so
           nothing is left to compute: exit 2, one line
  strict   --strict-topology refuses any difference: exit 2, one line
  bound    bound by taskset to one core (a launcher's --bind-to core): the
           note says so, unless that core is the plan's for this rank
  compiled the tiny DiT exported and compiled by hc-compile --topology
           test/topologies/flat16.xml: hc-run trains with one note; compiled
           with --comm-cores 2 as well, a 2-core machine (or a rank bound to
           2 cores) is refused, exit 2 and one line; compiled natively: no
           note
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np


def plan(cores, clusters=1, comm=0, kinds=("DRAM",)):
    per = cores // clusters
    cl = [{"cores": list(range(k * per, (k + 1) * per)), "numa": 0, "near": [0]}
          for k in range(clusters)]
    numa = [{"os": i, "kind": k, "bytes": 0} for i, k in enumerate(kinds)]
    return {"topology": {"source": "test", "summary": "%d cores in %d cluster(s) of %d"
                         % (cores, clusters, per), "split": 0, "clusters": cl, "numa": numa},
            "core_budget": {"ranks_per_node": 1, "division": "contiguous",
                            "ranks": [{"clusters": list(range(clusters)),
                                       "compute": list(range(cores - comm)),
                                       "comm": list(range(cores - comm, cores))}]}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--hc-run", required=True)
    ap.add_argument("--toys", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    shutil.copy(os.path.join(a.toys, "toy_b4.so"), a.work)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import st
    import run_check
    st.save(os.path.join(a.work, "toy.init.safetensors"), run_check.init_params())
    run_check.write_inputs(os.path.join(a.work, "in"), 4)

    def run(p, extra=(), pre=()):
        path = os.path.join(a.work, "plan.json")
        with open(path, "w") as f:
            f.write(json.dumps(p)[1:-1])  # the keys, without the braces
        env = dict(os.environ, TOY_PLAN_FILE=path)
        env.pop("HC_TOPOLOGY", None)
        cmd = list(pre) + [a.hc_run, "toy_b4.so", "--inputs", "in", "--steps", "2"] + list(extra)
        r = subprocess.run(cmd, cwd=a.work, env=env, capture_output=True, text=True, timeout=60)
        return r, r.stdout + r.stderr

    def fail(msg):
        print("FAIL:", msg)
        sys.exit(1)

    ncores = len(os.sched_getaffinity(0))
    if a.case == "remap":
        r, out = run(plan(16, clusters=4, kinds=("HBM", "DRAM")))
        notes = [l for l in out.splitlines() if "note:" in l]
        if r.returncode != 0 or len(notes) != 1:
            fail("want exit 0 and one note:\n" + out)
        n = notes[0]
        for want in ("planned for 16 cores in 4 cluster(s) of 4",
                     "%d cores for this rank, the plan 16" % ncores,
                     "another cluster layout", "no HBM memory here", "re-mapped:"):
            if want not in n:
                fail("note lacks %r:\n%s" % (want, n))
        if len(re.findall(r"^loss ", r.stdout, re.M)) != 2:
            fail("the step did not run twice:\n" + out)
    elif a.case == "refuse":
        r, out = run(plan(16, comm=ncores))
        lines = [l for l in out.splitlines() if l.strip()]
        if r.returncode != 2 or len(lines) != 1:
            fail("want exit 2 and one line:\n" + out)
        if "reserves %d comm cores per rank, which leaves no core to compute" % ncores not in lines[0]:
            fail("refusal does not say why:\n" + out)
    elif a.case == "strict":
        r, out = run(plan(16), extra=["--strict-topology"])
        lines = [l for l in out.splitlines() if l.strip()]
        if r.returncode != 2 or len(lines) != 1 or "--strict-topology refuses" not in lines[0]:
            fail("want exit 2 and one line naming --strict-topology:\n" + out)
    elif a.case == "bound":
        core = sorted(os.sched_getaffinity(0))[0]
        r, out = run(plan(16, comm=0), pre=["taskset", "-c", str(core)])
        notes = [l for l in out.splitlines() if "note:" in l]
        if r.returncode != 0 or len(notes) != 1:
            fail("want exit 0 and one note:\n" + out)
        if "1 cores for this rank" not in notes[0] or "bound by the launcher" not in notes[0]:
            fail("note does not name the binding:\n" + notes[0])
        # Bound to exactly the plan's cores for this rank: not a difference.
        same = plan(16)
        same["core_budget"]["ranks"][0]["compute"] = [core]
        r, out = run(same, pre=["taskset", "-c", str(core)])
        if r.returncode != 0 or "bound by the launcher" in out:
            fail("a binding equal to the plan's cores is named a difference:\n" + out)
    elif a.case == "compiled":
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        topo = os.path.join(root, "test", "topologies", "flat16.xml")
        hc_compile = os.path.join(os.path.dirname(a.hc_run), "hc-compile")
        subprocess.run(["/usr/bin/python3", os.path.join(root, "models", "export_dit.py"), "--model",
                        "tiny", "--image-size", "8", "--in-channels", "4", "--num-classes", "10",
                        "--dynamic-batch", "--quiet", "-o", "tiny.onnx"], cwd=a.work, check=True)
        for name, extra in (("flat16", ["--topology", topo]),
                            ("flat16c2", ["--topology", topo, "--comm-cores", "2"]),
                            ("native", [])):
            subprocess.run([hc_compile, "tiny.onnx", "--batch", "4", "-o", name + ".so"] + extra,
                           cwd=a.work, check=True)
        r = np.random.default_rng(0)
        np.save(os.path.join(a.work, "x.npy"), r.uniform(-1, 1, (8, 4, 8, 8)).astype(np.float32))
        np.save(os.path.join(a.work, "y.npy"), r.integers(0, 10, 8).astype(np.int64))
        env = dict(os.environ)
        env.pop("HC_TOPOLOGY", None)
        core2 = ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:2])

        def train(so):
            cmd = ["taskset", "-c", core2, a.hc_run, so, "--data", "x.npy", "--labels", "y.npy",
                   "--steps", "1"]
            p = subprocess.run(cmd, cwd=a.work, env=env, capture_output=True, text=True, timeout=120)
            return p, p.stdout + p.stderr
        p, out = train("flat16.so")
        notes = [l for l in out.splitlines() if "note:" in l]
        if p.returncode != 0 or len(notes) != 1 or \
                "planned for 16 cores in 1 cluster of 16, NUMA 1xDRAM" not in notes[0]:
            fail("flat16.so: want exit 0 and one note naming the plan:\n" + out)
        p, out = train("flat16c2.so")
        lines = [l for l in out.splitlines() if l.strip()]
        if p.returncode != 2 or len(lines) != 1 or \
                "reserves 2 comm cores per rank, which leaves no core to compute" not in lines[0]:
            fail("flat16c2.so: want exit 2 and one line:\n" + out)
        if ncores <= 2:  # this machine is what `native` planned for
            p, out = train("native.so")
            if p.returncode != 0 or "note:" in out:
                fail("native.so: want no note:\n" + out)
    else:
        fail("unknown case " + a.case)
    print("ok:", a.case)


if __name__ == "__main__":
    main()
