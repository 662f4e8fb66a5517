#!/usr/bin/env python3
"""Summary of bench/single_node/sweep.sh: samples/s of frugal LSH, frugal exact and PyTorch CPU at
each label count (the measured second epoch of each run), their ratios, peak RSS, model state bytes
per parameter, the LSH step's fraction of its roofline, the issue's targets, and a log-log plot.

    python3 bench/single_node/sweep_summary.py [OUT]     # OUT: .bench/sweep; writes OUT/sweep.json, OUT/sweep.png

A system's missing label count (a run sweep.sh skipped because it would take too long) is
extrapolated from its two largest measured label counts, as a power law in the labels, and marked.
"""
import glob
import json
import math
import os
import shutil
import subprocess
import sys

SYSTEMS = [("lsh", "frugal LSH"), ("lsh_bf16", "frugal LSH bf16"), ("lsh_rowwise", "frugal LSH row-wise Adagrad"),
           ("lsh_rowwise_bf16", "frugal LSH row-wise Adagrad bf16"), ("lsh_rowwise_adam", "frugal LSH row-wise Adam"),
           ("lsh_rowwise_adam_bf16", "frugal LSH row-wise Adam bf16"), ("lsh_default", "frugal defaults"),
           ("lsh_default_uncapped", "frugal defaults, --max-active 0"),
           ("lsh_default_bf16", "frugal defaults bf16"), ("lsh_default_f32", "frugal defaults f32"),
           ("lsh_default_t100_f32", "frugal defaults, 100 tables, f32"), ("exact", "frugal exact"),
           ("torch_cpu", "PyTorch CPU (dense)")]


def epoch_line(path, epoch=2):
    for line in open(path):
        try:
            j = json.loads(line)
        except json.JSONDecodeError:
            continue
        if j.get("event") == "epoch" and j.get("epoch") == epoch:
            return j
    return None


def load(out):
    runs = {}  # (system, labels) -> record
    for path in glob.glob(os.path.join(out, "*-l*.jsonl")):
        base = os.path.basename(path)[: -len(".jsonl")]
        system, labels = base.rsplit("-l", 1)
        line = epoch_line(path)
        if line is None or not labels.isdigit():
            continue
        rec = {"samples_per_s": line["train_samples_per_s"], "peak_rss_bytes": line.get("peak_rss_bytes"),
               "extrapolated": False}
        if "model_state_bytes" in line:
            rec["state_per_parameter"] = line["model_state_bytes"]["per_parameter"]
            rec["state_bytes"] = line["model_state_bytes"]["total"]
            # The LSH tables' bytes a parameter (issue 64's target: <= 1).
            parameters = line["model_state_bytes"]["total"] / max(line["model_state_bytes"]["per_parameter"], 1e-12)
            rec["tables_per_parameter"] = line["model_state_bytes"].get("lsh_tables", 0) / max(parameters, 1.0)
        if "active_per_sample" in line:
            rec["active_per_sample"] = line["active_per_sample"]
        roof = os.path.join(out, base + ".roofline.json")
        if os.path.exists(roof):
            r = json.load(open(roof))
            rec["fraction_of_roof"] = r.get("fraction_of_roof")
            rec["phases"] = {p["phase"]: p["seconds_per_sample"] for p in r.get("phases", [])}
        runs[(system, int(labels))] = rec
    return runs


def extrapolate(runs, labels):
    for system, _ in SYSTEMS:
        have = sorted(l for (s, l) in runs if s == system)
        for l in labels:
            if (system, l) in runs or len(have) < 2 or l < have[-1]:
                continue
            (l1, l2) = have[-2], have[-1]
            s1, s2 = runs[(system, l1)]["samples_per_s"], runs[(system, l2)]["samples_per_s"]
            slope = math.log(s2 / s1) / math.log(l2 / l1)
            runs[(system, l)] = {"samples_per_s": s2 * (l / l2) ** slope, "extrapolated": True,
                                 "from": [l1, l2], "slope": slope}


def fmt_labels(l):
    return f"{l // 1000000}M" if l % 1000000 == 0 else f"{l // 1000}k"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else ".bench/sweep"
    runs = load(out)
    labels = sorted({l for (_, l) in runs})
    if not labels:
        print(f"no runs in {out}")
        return 1
    extrapolate(runs, labels)
    env = open(os.path.join(out, "env.txt")).read().strip() if os.path.exists(os.path.join(out, "env.txt")) else ""
    print("```\n" + env + "\n```\n")
    if os.path.exists(os.path.join(out, "machine.txt")):
        print("Machine probe: " + open(os.path.join(out, "machine.txt")).read().strip() + "\n")
    print("| labels | " + " | ".join(f"{n} samples/s" for _, n in SYSTEMS) +
          " | LSH / exact | LSH / PyTorch | LSH active/point | LSH % of roof | LSH state B/param | LSH peak RSS |")
    print("|---:|" + "---:|" * (len(SYSTEMS) + 6))
    def cell(system, l):
        r = runs.get((system, l))
        if r is None:
            return "-"
        return f"{r['samples_per_s']:,.1f}" + (" (extrapolated)" if r["extrapolated"] else "")
    def ratio(a, b, l):
        ra, rb = runs.get((a, l)), runs.get((b, l))
        if ra is None or rb is None:
            return "-"
        x = ra["samples_per_s"] / rb["samples_per_s"]
        return f"{x:,.1f}x" + (" (extrapolated)" if ra["extrapolated"] or rb["extrapolated"] else "")
    for l in labels:
        lsh = runs.get(("lsh", l), {})
        roof = f"{100 * lsh['fraction_of_roof']:.0f}%" if lsh.get("fraction_of_roof") else "-"
        state = f"{lsh['state_per_parameter']:.2f}" if lsh.get("state_per_parameter") else "-"
        rss = f"{lsh['peak_rss_bytes'] / 2**30:.2f} GiB" if lsh.get("peak_rss_bytes") else "-"
        active = f"{lsh['active_per_sample']:,.0f}" if lsh.get("active_per_sample") else "-"
        print(f"| {fmt_labels(l)} | " + " | ".join(cell(s, l) for s, _ in SYSTEMS) +
              f" | {ratio('lsh', 'exact', l)} | {ratio('lsh', 'torch_cpu', l)} | {active} | {roof} | {state} | {rss} |")
    print()
    print("Peak RSS of every run (GiB): " + "; ".join(
        f"{n} {fmt_labels(l)} {runs[(s, l)]['peak_rss_bytes'] / 2**30:.2f}"
        for s, n in SYSTEMS for l in labels if (s, l) in runs and runs[(s, l)].get("peak_rss_bytes")))
    print("PyTorch keeps 16 bytes per parameter of model state (weight, dense gradient, two Adam moments).")
    extrap = [(s, l, r) for (s, l), r in sorted(runs.items()) if r["extrapolated"]]
    for s, l, r in extrap:
        print(f"- {s} at {fmt_labels(l)}: not run (over sweep.sh's time limit); extrapolated from "
              f"{fmt_labels(r['from'][0])} and {fmt_labels(r['from'][1])} as labels^{r['slope']:.2f}.")
    bf16 = [l for l in labels if ("lsh", l) in runs and ("lsh_bf16", l) in runs]
    if bf16:
        print("LSH bf16 (`--precision bf16`) against LSH f32: " + "; ".join(
            f"{fmt_labels(l)} {ratio('lsh_bf16', 'lsh', l)} samples/s, "
            f"{runs[('lsh_bf16', l)].get('state_per_parameter', 0):.2f} B/param" for l in bf16) + ".")
    rowwise = [l for l in labels if ("lsh_rowwise", l) in runs or ("lsh_rowwise_bf16", l) in runs]
    if rowwise:
        def state(s, l):
            r = runs.get((s, l), {})
            return f"{r['state_per_parameter']:.2f} B/param" if r.get("state_per_parameter") else "-"
        print("Row-wise Adagrad (`--optimizer rowwise-adagrad`): " + "; ".join(
            f"{fmt_labels(l)} f32 {ratio('lsh_rowwise', 'torch_cpu', l)} PyTorch, {ratio('lsh_rowwise', 'lsh', l)} LSH "
            f"(Adam), {state('lsh_rowwise', l)}; bf16 {ratio('lsh_rowwise_bf16', 'torch_cpu', l)} PyTorch, "
            f"{state('lsh_rowwise_bf16', l)}" for l in rowwise) + ".")
    print()
    # Targets.
    rows = []
    lo, hi = labels[0], labels[-1]
    # Issue 44's, for the row-wise runs.
    for system, name in (("lsh_rowwise", "LSH row-wise"), ("lsh_rowwise_bf16", "LSH row-wise bf16"),
                         ("lsh_rowwise_adam", "LSH row-wise Adam"), ("lsh_rowwise_adam_bf16", "LSH row-wise Adam bf16"),
                         ("lsh_default", "frugal defaults"), ("lsh_default_bf16", "frugal defaults bf16")):
        for l, want in ((100000, 10), (1000000, 30)):
            if (system, l) in runs and ("torch_cpu", l) in runs:
                x = runs[(system, l)]["samples_per_s"] / runs[("torch_cpu", l)]["samples_per_s"]
                rows.append((f"{fmt_labels(l)} labels: {name} >= {want}x PyTorch CPU", "MET" if x >= want else "MISS",
                             f"{x:.1f}x"))
        if (system, 1000000) in runs and runs[(system, 1000000)].get("state_per_parameter"):
            b = runs[(system, 1000000)]["state_per_parameter"]
            rows.append((f"1M labels: {name} state <= 4 B/param", "MET" if b <= 4 else "MISS", f"{b:.2f} B"))
        if (system, lo) in runs and (system, hi) in runs and hi > lo:
            fall = runs[(system, lo)]["samples_per_s"] / runs[(system, hi)]["samples_per_s"]
            rows.append((f"{name} samples/s falls by at most 3x from {fmt_labels(lo)} to {fmt_labels(hi)}",
                         "MET" if fall <= 3 else "MISS", f"{fall:.2f}x"))
    # Issue 64's: a step whose cost does not grow with the labels.
    for system, name in (("lsh_default", "frugal defaults"), ("lsh_default_uncapped", "frugal defaults, --max-active 0"),
                         ("lsh_default_bf16", "frugal defaults bf16"), ("lsh_default_f32", "frugal defaults f32"),
                         ("lsh_default_t100_f32", "frugal defaults, 100 tables, f32")):
        at_1m = runs.get((system, 1000000), {})
        if at_1m.get("state_per_parameter"):
            b, t = at_1m["state_per_parameter"], at_1m.get("tables_per_parameter", 0.0)
            rows.append((f"1M labels: {name} state <= 6 B/param (issue 64)", "MET" if b <= 6 else "MISS", f"{b:.2f} B"))
            rows.append((f"1M labels: {name} LSH tables <= 1 B/param (issue 64)", "MET" if t <= 1 else "MISS",
                         f"{t:.2f} B"))
        if (system, lo) in runs and (system, hi) in runs and hi > lo and not runs[(system, hi)].get("extrapolated"):
            fall = runs[(system, lo)]["samples_per_s"] / runs[(system, hi)]["samples_per_s"]
            rows.append((f"{name} samples/s falls by at most 2x from {fmt_labels(lo)} to {fmt_labels(hi)} (issue 64)",
                         "MET" if fall <= 2 else "MISS", f"{fall:.2f}x"))
            a_lo, a_hi = runs[(system, lo)].get("active_per_sample"), runs[(system, hi)].get("active_per_sample")
            if a_lo and a_hi:
                rows.append((f"{name} active labels a point at {fmt_labels(hi)} <= at {fmt_labels(lo)} (issue 64)",
                             "MET" if a_hi <= a_lo else "MISS", f"{a_hi:.0f} against {a_lo:.0f}"))
    for system, name in (("lsh", "LSH"), ("lsh_bf16", "LSH bf16")):
        if (system, lo) in runs and (system, hi) in runs and hi > lo:
            fall = runs[(system, lo)]["samples_per_s"] / runs[(system, hi)]["samples_per_s"]
            rows.append((f"{name} samples/s falls by at most 2x from {fmt_labels(lo)} to {fmt_labels(hi)}",
                         "MET" if fall <= 2 else "MISS", f"{fall:.2f}x"))
        if (system, 1000000) in runs and ("torch_cpu", 1000000) in runs:
            x = runs[(system, 1000000)]["samples_per_s"] / runs[("torch_cpu", 1000000)]["samples_per_s"]
            rows.append((f"at 1M labels {name} >= 100x PyTorch CPU", "MET" if x >= 100 else "MISS", f"{x:.1f}x"))
    if ("lsh", 100000) in runs:
        for other, want, name in (("torch_cpu", 20, "PyTorch CPU"), ("exact", 10, "exact")):
            if (other, 100000) in runs:
                x = runs[("lsh", 100000)]["samples_per_s"] / runs[(other, 100000)]["samples_per_s"]
                rows.append((f"100k labels: LSH >= {want}x {name} (steady-state steps)", "MET" if x >= want else "MISS",
                             f"{x:.1f}x"))
    worst_state = max((r.get("state_per_parameter", 0) for (s, _), r in runs.items() if s == "lsh"), default=0)
    if worst_state:
        rows.append(("model state <= 14 bytes per parameter (f32)", "MET" if worst_state <= 14 else "MISS",
                     f"{worst_state:.2f} at most"))
    worst_bf16 = max((r.get("state_per_parameter", 0) for (s, _), r in runs.items() if s == "lsh_bf16"), default=0)
    if worst_bf16:
        rows.append(("model state <= 8 bytes per parameter (bf16)", "MET" if worst_bf16 <= 8 else "MISS",
                     f"{worst_bf16:.2f} at most"))
    if rows:
        print("| target | result | measured |\n|---|---|---|")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} |")
    summary = {f"{s}@{l}": r for (s, l), r in runs.items()}
    json.dump(summary, open(os.path.join(out, "sweep.json"), "w"), indent=1, sort_keys=True)
    plot(out, runs, labels)
    return 0


def plot(out, runs, labels):
    gp = shutil.which("gnuplot")
    if gp is None:
        print("\n(gnuplot not found: no plot)")
        return
    series, system_of = [], {}
    for system, name in SYSTEMS:
        pts = [(l, runs[(system, l)]) for l in labels if (system, l) in runs]
        if not pts:
            continue
        path = os.path.join(out, f"plot-{system}.dat")
        with open(path, "w") as f:
            for l, r in pts:
                f.write(f"{l} {r['samples_per_s']} {1 if r['extrapolated'] else 0}\n")
        series.append((path, name))
        system_of[path] = system
    png = os.path.join(out, "sweep.png")
    cmds = [f"set terminal pngcairo size 900,560 noenhanced", f"set output '{png}'", "set logscale xy",
            "set xlabel 'labels'", "set ylabel 'train samples/s (2 threads)'", "set grid",
            "set key top right", "set title 'XMC step throughput vs label count (hidden 128, batch 128)'"]
    plots = []
    for i, (path, name) in enumerate(series):
        plots.append(f"'{path}' using 1:($3==0?$2:1/0) with linespoints lw 2 pt 7 lc {i + 1} title '{name}'")
        if any(r["extrapolated"] for (s, _), r in runs.items() if s == system_of[path]):
            plots.append(f"'{path}' using 1:($3==1?$2:1/0) with points pt 6 ps 2 lc {i + 1} title '{name} (extrapolated)'")
    cmds.append("plot " + ", ".join(plots))
    try:
        subprocess.run([gp], input="\n".join(cmds) + "\n", text=True, check=True, capture_output=True)
        print(f"\nplot: {png}")
    except subprocess.CalledProcessError as e:
        print(f"\n(gnuplot failed: {e.stderr.strip()})")


if __name__ == "__main__":
    sys.exit(main())
