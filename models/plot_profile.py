#!/usr/bin/env -S /usr/bin/python3
"""Plots an hc-run --profile JSON: seconds per step by kernel kind (bars),
each bar labelled with its share of the step and its place on the roofline.

usage: /usr/bin/python3 models/plot_profile.py profile.json --out profile.png [--top N]
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--out", required=True)
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    try:
        j = json.load(open(a.profile))
        kinds = sorted(j["kinds"], key=lambda k: k["seconds_per_step"], reverse=True)[:a.top]
    except (OSError, ValueError, KeyError) as e:
        print("plot_profile: %s: not an hc-run --profile file (%s)" % (a.profile, e), file=sys.stderr)
        return 2
    m = j["machine"]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(kinds) + 1.6))
    names = [k["kernel"] for k in kinds][::-1]
    secs = [1e3 * k["seconds_per_step"] for k in kinds][::-1]
    bars = ax.barh(names, secs, color="#4477aa")
    for b, k in zip(bars, kinds[::-1]):
        ax.text(b.get_width(), b.get_y() + b.get_height() / 2,
                "  %.1f%%, %.0f%% of roofline" % (100 * k["share"], 100 * k["of_roofline"]),
                va="center", fontsize=8)
    ax.set_xlabel("ms per step")
    ax.set_title("%d thread(s), %s, peak %.0f GFLOP/s, triad %.0f GB/s: step %.3f s, MFU %.1f%%, "
                 "outside GEMM/attention %.0f%%" % (m["threads"], m["isa"], m["fma_peak_gflops"], m["triad_gbs"],
                                                   j["step_s"], 100 * j["mfu"],
                                                   100 * j["outside_gemm_attention_share"]), fontsize=9)
    ax.set_xlim(0, max(secs) * 1.45)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
