#!/usr/bin/env python3
"""bench/pipeline/run.sh's summary: OUT/summary.json, a table on stdout, OUT/plans.png and
OUT/compression.png (gnuplot). Usage: summarize.py OUT "SEEDS"."""
import json
import os
import statistics
import subprocess
import sys

out = sys.argv[1]
seeds = sys.argv[2].split() if len(sys.argv) > 2 else ["1", "2", "3"]


def records(name, event="epoch"):
    path = os.path.join(out, name + ".jsonl")
    if not os.path.exists(path):
        return []
    return [r for r in map(json.loads, open(path)) if r.get("event") == event]


summary = {"env": open(os.path.join(out, "env.txt")).read().splitlines() if os.path.exists(os.path.join(out, "env.txt")) else []}
# (run name, scheme as the planner names it, grid)
RUNS = [("n4-dp-4x1", "mp-sparse", "4x1"), ("n4-dctdp-4x1", "dct-dp", "4x1"), ("n4-mp-1x4", "mp-sparse", "1x4"),
        ("n4-mp-2x2", "mp-sparse", "2x2"), ("n4-dctdp-2x2", "dct-dp", "2x2"), ("n4-pp-1x1x4", "pipeline", "1x1x4"),
        ("n4-pp-2x1x2", "pipeline", "2x1x2"), ("n4-pp-1x2x2", "pipeline", "1x2x2"), ("n2-dp-2x1", "mp-sparse", "2x1"), ("n2-mp-1x2", "mp-sparse", "1x2"),
        ("n2-pp-1x1x2", "pipeline", "1x1x2")]
plan_path = os.path.join(out, "plan.json")
if os.path.exists(plan_path):
    plan = json.load(open(plan_path))
    predicted = {os.path.basename(v["file"])[:-6]: v for v in plan["validation"]}
    rows = []
    for name, scheme, grid in RUNS:
        e = records(name)
        if not e or name not in predicted:
            continue
        v = predicted[name]
        rows.append({"run": name, "scheme": scheme, "grid": grid, "ranks": v["ranks"],
                     "measured_samples_per_s": e[-1]["train_samples_per_s"],
                     "predicted_samples_per_s": v["predicted_samples_per_s"], "error": v["error"],
                     "bytes_sent_per_sample": e[-1].get("bytes_sent_per_sample"),
                     "pipeline_bytes_sent_per_sample": e[-1].get("pipeline_bytes_sent_per_sample")})
    summary["plans"] = rows
    summary["largest_error"] = max(abs(r["error"]) for r in rows) if rows else None
    # The planner's pick for 4 ranks sharing this host (plan --one-host), before any multi-rank run.
    before = json.load(open(os.path.join(out, "plan-before.json")))
    four = [b for b in before["best"] if b["nodes"] == 4]
    pick = four[0] if four else None
    n4 = [r for r in rows if r["ranks"] == 4]
    if pick and n4:
        picked = [r for r in n4 if r["scheme"] == pick["scheme"] and r["grid"] == pick["grid"]]
        best = max(n4, key=lambda r: r["measured_samples_per_s"])
        worst = min(n4, key=lambda r: r["measured_samples_per_s"])
        summary["pick"] = {"plan": pick.get("plan", pick["scheme"] + " " + pick["grid"]),
                           "predicted_samples_per_s": pick["samples_per_s"],
                           "measured_samples_per_s": picked[0]["measured_samples_per_s"] if picked else None,
                           "best_measured": best["run"], "best_measured_samples_per_s": best["measured_samples_per_s"],
                           "worst_measured": worst["run"], "worst_measured_samples_per_s": worst["measured_samples_per_s"]}
        if picked:
            m = picked[0]["measured_samples_per_s"]
            summary["pick"]["of_best"] = m / best["measured_samples_per_s"]
            summary["pick"]["over_worst"] = m / worst["measured_samples_per_s"]
    print("plans (100 Mbit, --layers 1024,1024,1024):")
    print(f"{'run':<14} {'scheme':<10} {'grid':<6} {'measured':>9} {'predicted':>9} {'error':>7} {'B/sample':>9}")
    for r in rows:
        print(f"{r['run']:<14} {r['scheme']:<10} {r['grid']:<6} {r['measured_samples_per_s']:>9.1f} "
              f"{r['predicted_samples_per_s']:>9.1f} {100 * r['error']:>+6.1f}% {r['bytes_sent_per_sample'] or 0:>9.0f}")
    if "pick" in summary:
        p = summary["pick"]
        print(f"planner's pick for 4 nodes: {p['plan']}: measured {p['measured_samples_per_s']}, "
              f"{p.get('of_best', 0):.3f} of the best measured ({p['best_measured']}), "
              f"{p.get('over_worst', 0):.2f}x the worst ({p['worst_measured']})")
    with open(os.path.join(out, "plans.dat"), "w") as f:
        for i, r in enumerate(rows):
            f.write(f"{i} \"{r['scheme']} {r['grid']}\" {r['measured_samples_per_s']} {r['predicted_samples_per_s']}\n")
    subprocess.run(["gnuplot", "-e", f"""
set terminal pngcairo size 900,480; set output '{out}/plans.png';
set title 'Plans at 100 Mbit, --layers 1024,1024,1024: measured vs frugal plan'; set ylabel 'samples/s';
set style data histograms; set style fill solid 0.8; set boxwidth 0.9; set xtics rotate by -30;
plot '{out}/plans.dat' using 3:xtic(2) title 'measured', '' using 4 title 'predicted'"""], check=False)

CONFIGS = [("none", "uncompressed"), ("k0.1", "--mp-keep 0.1 (defaults: warm-up, error feedback)"),
           ("k0.05", "--mp-keep 0.05 (the same)"), ("k0.1noef", "--mp-keep 0.1 --mp-error-feedback off"),
           ("k0.1w1", "--mp-keep 0.1 --mp-warmup-steps 157 (one epoch)"),
           ("k0.1bare", "--mp-keep 0.1, neither")]
quality = []
for key, label in CONFIGS:
    p1, b = [], []
    for s in seeds:
        e = records(f"q-{key}-s{s}")
        if not e:
            continue
        p1.append(e[-1]["p@1"])
        b.append(statistics.mean(x["pipeline_bytes_sent_per_sample"] for x in e))
    if p1:
        quality.append({"config": label, "key": key, "seeds": len(p1), "p@1": statistics.mean(p1), "p@1_min": min(p1),
                        "p@1_max": max(p1), "boundary_bytes_per_sample": statistics.mean(b)})
if quality:
    base = quality[0]
    for q in quality:
        q["points_vs_uncompressed"] = 100 * (q["p@1"] - base["p@1"])
        q["fewer_bytes"] = base["boundary_bytes_per_sample"] / q["boundary_bytes_per_sample"]
    summary["quality"] = quality
    print("\n2-stage boundary compression (still-learning set, seeds " + " ".join(seeds) + "):")
    for q in quality:
        print(f"  {q['config']:<38} P@1 {q['p@1']:.4f} [{q['p@1_min']:.4f}, {q['p@1_max']:.4f}] "
              f"({q['points_vs_uncompressed']:+.2f} pts), {q['boundary_bytes_per_sample']:.0f} B/sample "
              f"({q['fewer_bytes']:.1f}x fewer)")
    with open(os.path.join(out, "compression.dat"), "w") as f:
        for q in quality:  # one block per configuration (gnuplot's index)
            f.write(f"{q['boundary_bytes_per_sample']} {q['p@1']} {q['p@1_min']} {q['p@1_max']}\n\n\n")
    series = ", ".join(f"'{out}/compression.dat' index {i} using 1:2:3:4 with yerrorbars pointsize 1.5 "
                       f"title '{q['config']}'" for i, q in enumerate(quality))
    subprocess.run(["gnuplot", "-e", f"""
set terminal pngcairo noenhanced size 900,520; set output '{out}/compression.png';
set title '2-stage pipeline: P@1 against boundary bytes (mean and range over {len(seeds)} seeds)'; set logscale x;
set xlabel 'boundary bytes per sample (mean over the epochs)'; set ylabel 'P@1 after the last epoch';
set key bottom right; set xrange [40:4000];
plot {series}"""], check=False)
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
