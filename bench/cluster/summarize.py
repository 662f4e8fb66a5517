#!/usr/bin/env python3
"""Summarizes bench/cluster/run.sh: samples/s, bytes on the wire per sample per rank, P@1, peak RSS
per rank, and the issue's targets, as markdown."""
import glob
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else ".bench/cluster"


def ranks(prefix):
    """Epoch records of every rank of one run: {rank: [records]}."""
    files = sorted(glob.glob(os.path.join(out, prefix + ".jsonl")) + glob.glob(os.path.join(out, prefix + ".rank*.jsonl")))
    result = {}
    for f in files:
        recs = [json.loads(l) for l in open(f) if l.strip()]
        epochs = [r for r in recs if r.get("event") == "epoch"]
        if epochs:
            result[epochs[-1].get("rank", 0)] = epochs
    return result


def row(prefix, epoch=None):
    """The last epoch of every rank (or the given epoch)."""
    r = ranks(prefix)
    if not r:
        return None
    pick = (lambda v: v[-1]) if epoch is None else (lambda v: next(x for x in v if x["epoch"] == epoch))
    last = {k: pick(v) for k, v in r.items()}
    return {
        "samples_per_s": last[0]["train_samples_per_s"] if 0 in last else float("nan"),
        "sent": sum(x["bytes_sent_per_sample"] for x in last.values()) / len(last),
        "received": sum(x["bytes_received_per_sample"] for x in last.values()) / len(last),
        "rss": max(x["peak_rss_bytes"] for x in last.values()),
        "p1": last[0]["p@1"] if 0 in last else float("nan"),
        "epochs": len(r.get(0, [])),
        "ranks": len(last),
    }


print("## Throughput and bytes on the wire\n")
print("| ranks | link | scheme | train samples/s | bytes sent/sample/rank | bytes received/sample/rank | peak RSS/rank |")
print("|---|---|---|---|---|---|---|")
ratios = []
for n in (2, 4):
    for bw in ("100mbit", "1gbit"):
        mp, dp = row(f"mp-n{n}-{bw}"), row(f"dp-n{n}-{bw}")
        for name, r in (("model-parallel sparse", mp), ("data-parallel dense", dp)):
            if r:
                print(f"| {n} | {bw} | {name} | {r['samples_per_s']:.1f} | {r['sent']:.0f} | {r['received']:.0f} | {r['rss']/2**20:.0f} MiB |")
            else:
                print(f"| {n} | {bw} | {name} | missing | | | |")
        if mp and dp:
            ratios.append((n, bw, dp["sent"] / max(mp["sent"], 1e-9), mp["samples_per_s"] / max(dp["samples_per_s"], 1e-9)))
print("\n| ranks | link | bytes/sample: dense / sparse | samples/s: sparse / dense | targets (bytes >= 1000x; speed >= 100x at 100 Mbit, >= 20x at 1 Gbit) |")
print("|---|---|---|---|---|")
for n, bw, b, s in ratios:
    need = 100 if bw == "100mbit" else 20
    verdict = ("PASS" if b >= 1000 else "MISS") + " / " + ("PASS" if s >= need else "MISS")
    print(f"| {n} | {bw} | {b:.0f}x | {s:.1f}x | {verdict} |")

q_mp, q_dp = row("quality-mp"), row("quality-dp")
if q_mp and q_dp:  # compare after the same number of epochs (the dense run may have been cut short)
    same = min(q_mp["epochs"], q_dp["epochs"])
    q_mp, q_dp = row("quality-mp", same), row("quality-dp", same)
    q_mp["epochs"] = q_dp["epochs"] = same
print("\n## Quality (2 ranks, same epochs)\n")
if q_mp and q_dp:
    gap = abs(q_mp["p1"] - q_dp["p1"]) * 100
    print(f"model-parallel sparse P@1 {q_mp['p1']:.4f} after {q_mp['epochs']} epochs; data-parallel dense P@1 "
          f"{q_dp['p1']:.4f} after {q_dp['epochs']} epochs: gap {gap:.2f} points ({'PASS' if gap <= 1 else 'MISS'}: target <= 1)")
else:
    print("missing (quality-mp.jsonl / quality-dp.jsonl)")

mem = row("memory-n4")
print("\n## Largest model on 4 ranks\n")
if mem:
    start = [json.loads(l) for l in open(os.path.join(out, "memory-n4.jsonl")) if '"start"' in l]
    params = start[-1].get("model_parameters_total", 0) if start else 0
    print(f"hidden 1024, 1M labels: {params/1e9:.3f} billion parameters over 4 ranks (Adam state: 2 more floats each), peak RSS per rank "
          f"{mem['rss']/2**30:.2f} GiB, {mem['samples_per_s']:.1f} train samples/s, "
          f"{mem['sent']:.0f} bytes sent per sample per rank")
else:
    print("missing (memory-n4.jsonl)")
