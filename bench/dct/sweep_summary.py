#!/usr/bin/env python3
"""Summarizes bench/dct/sweep.sh: DCT compression against quality over seeds (issue 15).

  python3 bench/dct/sweep_summary.py [OUT]     # OUT defaults to .bench/dct-sweep; markdown on stdout

Per data set and scheme, one row per configuration: final P@1 (accuracy on Fashion-MNIST) as the mean
over seeds with its spread (min..max), the mean difference in points against the reference (the
same grid uncompressed, same seeds), the spread of the per-seed differences, bytes on the wire per
sample (mean over ranks, epochs and seeds) and the bytes ratio. DP ratio: bytes of the dense
all-reduce (--parallel data) per sample / this configuration's; MP ratio: --mp-keep 1 / this.
Bytes per sample include every epoch (a warm-up's fuller messages too). The verdict line per set
and scheme names the largest ratio whose mean P@1 is within 0.5 points of the reference's.
"""
import glob
import json
import os
import re
import statistics
import sys

out = sys.argv[1] if len(sys.argv) > 1 else ".bench/dct-sweep"
DP_TARGET, MP_TARGET, WITHIN = 100.0, 20.0, 0.5


def epochs(path):
    recs = []
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("event") == "epoch":
            recs.append(r)
    return recs


def run(set_, name):
    """Rank 0's final P@1 and the bytes sent per sample (mean over ranks and epochs), or None."""
    base = os.path.join(out, f"{set_}-{name}")
    if not os.path.exists(base + ".done") or not os.path.exists(base + ".jsonl"):
        return None
    r0 = epochs(base + ".jsonl")
    if not r0:
        return None
    allrec = list(r0)
    for f in glob.glob(base + ".rank*.jsonl"):
        allrec += epochs(f)
    mean = lambda key: sum(x.get(key, 0.0) for x in allrec) / len(allrec)
    return {"p1": r0[-1]["p@1"], "dp": mean("dp_bytes_sent_per_sample"), "mp": mean("mp_bytes_sent_per_sample"),
            "sent": mean("bytes_sent_per_sample"), "epochs": len(r0)}


def configs(set_, prefix):
    """{config: {seed: run}} of the runs named SET-PREFIX<config>-s<seed>."""
    found = {}
    for f in glob.glob(os.path.join(out, f"{set_}-{prefix}*-s*.done")):
        m = re.fullmatch(re.escape(prefix) + r"(.+)-s(\d+)", os.path.basename(f)[len(set_) + 1:-len(".done")])
        if not m:
            continue
        r = run(set_, m.group(0))
        if r:
            found.setdefault(m.group(1), {})[int(m.group(2))] = r
    return found


def spread(values, fmt):
    return f"{fmt.format(min(values))}..{fmt.format(max(values))}" if len(values) > 1 else "-"


def table(set_, scheme, prefix, key, denominator, target):
    runs = configs(set_, prefix)
    ref = runs.pop("ref", None)
    if not ref:
        return
    seeds = sorted(ref)
    ref_p1 = statistics.mean(ref[s]["p1"] for s in seeds)
    denom = denominator if denominator else statistics.mean(ref[s][key] for s in seeds)
    print(f"\n### {set_}: {scheme}\n")
    print(f"| configuration | seeds | P@1 mean | P@1 spread | Δ pts mean | Δ pts spread | {key.upper()} bytes/sample "
          "| ratio mean | ratio spread |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [("reference", ref)] + sorted(runs.items(), key=lambda kv: -statistics.mean(r[key] for r in kv[1].values()))
    best = None
    for name, per_seed in rows:
        common = [s for s in seeds if s in per_seed]
        if not common:
            continue
        p1 = [per_seed[s]["p1"] for s in common]
        delta = [100 * (per_seed[s]["p1"] - ref[s]["p1"]) for s in common]
        nbytes = [per_seed[s][key] for s in common]
        ratio = [denom / b if b > 0 else float("inf") for b in nbytes]
        mean_delta = 100 * (statistics.mean(p1) - statistics.mean(ref[s]["p1"] for s in common))
        label = "reference (uncompressed)" if name == "reference" else f"`{name}`"
        print(f"| {label} | {len(common)} | {statistics.mean(p1):.4f} | {spread(p1, '{:.4f}')} | {mean_delta:+.2f} "
              f"| {spread(delta, '{:+.2f}')} | {statistics.mean(nbytes):.0f} | {statistics.mean(ratio):.1f}x "
              f"| {spread(ratio, '{:.1f}x')} |")
        if name != "reference" and len(common) == len(seeds) and mean_delta >= -WITHIN:
            if best is None or statistics.mean(ratio) > best[1]:
                best = (name, statistics.mean(ratio), mean_delta)
    if best:
        verdict = "MET" if best[1] >= target else "MISS"
        print(f"\nLargest ratio within {WITHIN} points (mean over {len(seeds)} seeds; reference P@1 {ref_p1:.4f}): "
              f"`{best[0]}` {best[1]:.1f}x ({best[2]:+.2f} points): target >= {target:.0f}x: {verdict}")
    else:
        print(f"\nNo configuration within {WITHIN} points over all {len(seeds)} seeds (reference P@1 {ref_p1:.4f}).")


print(f"# DCT sweep over seeds ({out})")
for set_ in ("xmc", "xmc512", "fmnist", "gcide"):
    dense = None
    for f in glob.glob(os.path.join(out, f"{set_}-dense-s*.done")):
        r = run(set_, os.path.basename(f)[len(set_) + 1:-len(".done")])
        if r:
            dense = r["dp"]
    if dense:
        table(set_, f"DCT-DP (--grid 2x1; ratio against the dense all-reduce, {dense:.0f} B/sample)", "dp-", "dp",
              dense, DP_TARGET)
    for m in sorted({re.match(rf"{set_}-mp(\d+)-", os.path.basename(f)).group(1)
                     for f in glob.glob(os.path.join(out, f"{set_}-mp*-s*.done"))}):
        table(set_, f"DCT-MP (--grid 1x{m}; ratio against --mp-keep 1)", f"mp{m}-", "mp", None, MP_TARGET)
