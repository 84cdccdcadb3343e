#!/usr/bin/env -S /usr/bin/python3
"""hc-run --profile on the tiny DiT of e2e.run.safety.setup: the JSON's
invariants (its kinds cover the step's kernels, their times add up to no
more than the step, FLOP counts agree with each other and with the model's
arithmetic, MFU is model FLOPs over peak x time), at np 1 in train mode and
np 2 in test mode (the all-reduce appears as calls of its own).

usage: profile_check.py CASE --bin DIR --toys DIR --work DIR
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_check import MPI, check  # noqa: E402
from safety_check import D, cases_of, script_main  # noqa: E402
from bad_input_check import write_inputs  # noqa: E402

# The tiny DiT: 8x8 images, patch 2 (16 tokens), hidden 64, depth 2, mlp 4x.
TOKENS, HIDDEN, DEPTH, PATCH_IN, OUT = 16, 64, 2, 1 * 2 * 2, 2 * 2 * 2


def forward_linear_flops(batch):
    m = batch * TOKENS
    per_block = 2 * m * HIDDEN * (3 * HIDDEN + HIDDEN + 4 * HIDDEN + 4 * HIDDEN)  # qkv, proj, fc1, fc2
    ada = 2 * batch * HIDDEN * 6 * HIDDEN * DEPTH + 2 * batch * HIDDEN * 2 * HIDDEN  # blocks, final layer
    t_mlp = 2 * batch * (256 * HIDDEN + HIDDEN * HIDDEN)  # timestep embedder
    return DEPTH * per_block + ada + t_mlp + 2 * m * PATCH_IN * HIDDEN + 2 * m * HIDDEN * OUT


def check_profile(c, path, batch, np_):
    j = json.load(open(c.path(path)))
    kinds = {k["kernel"]: k for k in j["kinds"]}
    m = j["machine"]
    check(m["fma_peak_gflops"] > 0 and m["triad_gbs"] > 0 and m["threads"] >= 1, "machine %s" % m)
    # An fp32 library's products are bounded by the FMA peak.
    check(m["product_peak_gflops"] == m["fma_peak_gflops"], "machine %s" % m)
    for k in j["kinds"]:
        bound = min(m["product_peak_gflops"], k["flop_per_byte"] * m["triad_gbs"])
        check(k["flops_per_step"] == 0 or abs(k["roofline_bound_gflops"] - bound) <= 1e-9 * bound,
              "%s: roofline bound %g, expected %g" % (k["kernel"], k["roofline_bound_gflops"], bound))
    # (every weight gradient here has its bias gradient beside it: one
    # linear_grad_weight_bias call, hc-fuse-bias-grads)
    for k in ("linear", "linear_grad_input", "linear_grad_weight_bias", "attention", "attention_grad",
              "adamw", "modulated_layer_norm", "modulated_layer_norm_grad"):
        check(k in kinds and kinds[k]["calls_per_step"] >= 1, "kind %s missing: %s" % (k, sorted(kinds)))
    total = sum(k["seconds_per_step"] for k in j["kinds"])
    check(abs(total - j["profiled_s"]) <= 1e-9 + 1e-6 * total and total <= j["step_s"] * 1.02 + 1e-4,
          "kinds add to %g s, profiled %g, step %g" % (total, j["profiled_s"], j["step_s"]))
    lin = kinds["linear"]["flops_per_step"]
    check(lin == forward_linear_flops(batch), "linear flops %g, the model's arithmetic %g"
          % (lin, forward_linear_flops(batch)))
    # Backward: every weight gets its gradient (2 M out in each), the input
    # gradient skips the patch embedding (its input x_t needs none).
    check(kinds["linear_grad_weight_bias"]["flops_per_step"] == lin, "dW flops %g vs forward %g"
          % (kinds["linear_grad_weight_bias"]["flops_per_step"], lin))
    check(kinds["linear_grad_input"]["flops_per_step"] <= lin, "dX flops %g exceed forward %g"
          % (kinds["linear_grad_input"]["flops_per_step"], lin))
    model = 3 * (lin + kinds["attention"]["flops_per_step"])
    check(abs(j["model_flops_per_step"] - model) <= 1e-9 * model, "model flops %g, expected %g"
          % (j["model_flops_per_step"], model))
    mfu = j["model_flops_per_step"] / (m["fma_peak_gflops"] * 1e9 * j["step_s"])
    check(abs(j["mfu"] - mfu) <= 1e-9 * mfu, "mfu %g, expected %g" % (j["mfu"], mfu))
    if np_ > 1:
        check(kinds.get("allreduce_start", {}).get("bytes_per_step", 0) > 0, "no all-reduce in the profile")
    check(len(j["slowest_calls"]) > 0 and all(s["where"] for s in j["slowest_calls"]), "slowest calls %s"
          % j["slowest_calls"][:3])
    return j


def case_profile(c):
    c.fresh()
    p = c.ok("hc-run", ["s.so"] + D + ["--steps", "3", "--no-progress", "--profile", "p1.json",
                                       "--metrics", "m.jsonl", "--log-every", "1"])
    check("hc-run --profile: 2 step(s)" in p.stdout and "MFU" in p.stdout, p.stdout)
    j = check_profile(c, "p1.json", 4, 1)
    # The metrics lines carry the same split per logged window: kernel time
    # in GEMM/attention, copies and the rest (together within the step) and
    # the window's MFU against the same peak.
    lines = [json.loads(l) for l in open(c.path("m.jsonl"))]
    check(len(lines) == 3, "metrics lines %d" % len(lines))
    for l in lines:
        parts = [l.get(k) for k in ("gemm_attention_s", "copy_s", "other_kernels_s", "mfu")]
        check(all(isinstance(v, float) and v >= 0 for v in parts), "metrics line %s" % l)
        step = l["profiled_step_s"]
        check(0 < step <= 1.0 / l["steps_per_sec"] * 1.02 + 1e-4, "profiled step %g, %s" % (step, l))
        check(0 < sum(parts[:3]) <= step * 1.02 + 1e-4 and parts[0] > 0, "kernel times %s, step %g" % (parts, step))
        mfu = j["model_flops_per_step"] / (j["machine"]["fma_peak_gflops"] * 1e9 * step)
        check(abs(l["mfu"] - mfu) <= 1e-9 * mfu, "metrics mfu %g, expected %g" % (l["mfu"], mfu))
    write_inputs(c, "in", [1, 2, 3, 4, 5, 6, 7, 8], [0, 1, 2, 3, 4, 5, 6, 7])
    # np 2 in test mode: each rank feeds 4 of the 8 rows.
    os.remove(c.path("in", "x_t.npy"))
    import numpy as np
    r = np.random.default_rng(0)
    np.save(c.path("in", "x_t.npy"), r.standard_normal((8, 1, 8, 8)).astype(np.float32))
    np.save(c.path("in", "noise.npy"), r.standard_normal((8, 1, 8, 8)).astype(np.float32))
    e = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    q = subprocess.run(MPI + ["-np", "2", os.path.join(c.bin, "hc-run"), "s.so", "--inputs", "in", "--steps", "3",
                              "--profile", "p2.json"], cwd=c.work, env=e, capture_output=True, text=True, timeout=120)
    check(q.returncode == 0, "np2: exit %d\n%s" % (q.returncode, q.stderr))
    check_profile(c, "p2.json", 4, 2)
    c.refused("hc-run", ["s.so"] + D + ["--steps", "1", "--profile", "x.npy"], ["--profile x.npy is --data"])
    print("profile invariants hold at np 1 (MFU %.1f%%, outside GEMM/attention %.0f%%) and np 2"
          % (100 * j["mfu"], 100 * j["outside_gemm_attention_share"]))


if __name__ == "__main__":
    script_main(cases_of(globals()))
