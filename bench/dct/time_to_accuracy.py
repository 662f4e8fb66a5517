#!/usr/bin/env python3
"""Summarizes bench/dct/time_to_accuracy.sh: wall time until each run first reaches the uncompressed
run's final P@1 (accuracy on Fashion-MNIST).

  python3 bench/dct/time_to_accuracy.py [OUT]     # OUT defaults to .bench/dct-tta; markdown on stdout

Wall time is rank 0's training plus evaluation seconds, summed over epochs (the dp rows: training
seconds only, evaluation being a loopback run's there). For the timed-steps
cases (SET-dp-*-time), seconds per epoch are the timed steps' training seconds per step times the
steps of a whole epoch (the loopback run's), and P@1 per epoch comes from that loopback run of the
same configuration; the table says which.
"""
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else ".bench/dct-tta"


def epochs(name):
    path = os.path.join(out, name + ".jsonl")
    if not os.path.exists(os.path.join(out, name + ".done")) or not os.path.exists(path):
        return None
    recs = [json.loads(line) for line in open(path) if line.startswith("{")]
    start = next((r for r in recs if r.get("event") == "start"), {})
    return start, [r for r in recs if r.get("event") == "epoch"]


def reach(curve, target):
    """(epoch, seconds) at which the curve of (p1, seconds per epoch) first reaches target, or None."""
    elapsed = 0.0
    for epoch, (p1, seconds) in enumerate(curve, 1):
        elapsed += seconds
        if p1 >= target - 1e-12:
            return epoch, elapsed
    return None


def row(set_, scheme, ref_curve, dct_curve, how):
    target = ref_curve[-1][0]
    r, d = reach(ref_curve, target), reach(dct_curve, target)
    ref_s = f"{r[1]:.0f} s (epoch {r[0]})"
    dct_s = f"{d[1]:.0f} s (epoch {d[0]})" if d else f"not within {len(dct_curve)} epochs (best {max(p for p, _ in dct_curve):.4f})"
    verdict = "-" if not d else ("faster" if d[1] < r[1] else "slower")
    speedup = f"{r[1] / d[1]:.1f}x" if d else "-"
    print(f"| {set_} | {scheme} | {target:.4f} | {ref_s} | {dct_s} | {speedup} | {verdict} | {how} |")


def curve(recs):
    return [(r["p@1"], r.get("train_seconds", 0.0) + r.get("eval_seconds", 0.0)) for r in recs]


print(f"# Time to the uncompressed run's final P@1 ({out})\n")
print("| set | scheme | target P@1 | uncompressed reaches it | compressed reaches it | speed-up | verdict | how |")
print("|---|---|---:|---|---|---:|---|---|")
for set_ in ("fmnist", "xmc512", "xmc", "gcide"):
    ref, dct = epochs(f"{set_}-mp-ref"), epochs(f"{set_}-mp-dct")
    if ref and dct:
        row(set_, "DCT-MP `--mp-keep 0.1`, 1x2", curve(ref[1]), curve(dct[1]), "whole runs through the link")
    ref, dct = epochs(f"{set_}-dp-ref"), epochs(f"{set_}-dp-dct")
    ref_t, dct_t = epochs(f"{set_}-dp-ref-time"), epochs(f"{set_}-dp-dct-time")
    if ref and dct and ref_t and dct_t:
        def per_epoch(timed, loop):  # the timed steps' seconds per step x the loopback run's steps per epoch
            rec = timed[1][-1]
            return rec["train_seconds"] / rec["steps"] * loop[1][0]["steps"]
        ref_s, dct_s = per_epoch(ref_t, ref), per_epoch(dct_t, dct)
        row(set_, "DCT-DP `--dp-keep 0.02`, 2x1", [(r["p@1"], ref_s) for r in ref[1]],
            [(r["p@1"], dct_s) for r in dct[1]],
            f"P@1 from loopback; {ref_s:.0f} / {dct_s:.0f} s per epoch from timed steps")
