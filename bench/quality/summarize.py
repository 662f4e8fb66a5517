#!/usr/bin/env python3
"""Tables of bench/quality/run.sh's output (markdown, as in bench/REPORT.md; history:
bench/history/quality.md).

Usage: python3 bench/quality/summarize.py OUT_DIR
"""
import glob
import json
import os
import re
import sys


def epochs(path):
    if not os.path.exists(path):
        return []
    return [r for r in map(json.loads, open(path)) if r.get("event") == "epoch"]


def refs(out, name):
    """{'most frequent': (p1, p5), 'label centroid': ..., 'kNN': ...} from `frugal data references`."""
    path = os.path.join(out, f"{name}_references.txt")
    found = {}
    if os.path.exists(path):
        for line in open(path):
            m = re.match(r"\s+(.*?)\s{2,}P@1 ([0-9.]+)\s+(?:P@3 [0-9.]+\s+)?P@5 ([0-9.]+)", line)
            if m:
                found[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return found


def network_alone(out, name):
    """(P@1, P@5) of a default run's checkpoint scored by the network alone (--infer exact), or None."""
    path = os.path.join(out, f"{name}_network.json")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    m = json.load(open(path))
    return m["p@1"], m["p@5"]


def verdict(got, r):
    """Whether (P@1, P@5) is above the best of the centroid and kNN references at both."""
    best = [max(v[i] for k, v in r.items() if k != "most frequent") for i in (0, 1)] if len(r) > 1 else None
    if best is None:
        return ""
    return "above both" if got[0] > best[0] and got[1] > best[1] else \
        f"below (best reference {best[0]:.4f} / {best[1]:.4f})"


def curve(rows, key="p@1"):
    return " / ".join(f"{r[key]:.4f}" for r in rows)


def speed(rows):
    # Epochs after the first: the first one includes the first LSH table builds.
    later = rows[1:] or rows
    return sum(r["train_samples_per_s"] for r in later) / len(later) if later else 0.0


def skew(out):
    seeds = sorted({int(m.group(1)) for p in glob.glob(os.path.join(out, "skew*_exact.jsonl"))
                    for m in [re.search(r"skew(\d+)_exact", p)] if m})
    if not seeds:
        return
    print("### Skewed synthetic labels\n")
    print("| seed | run | P@1 per epoch | P@5 last | max \\|P@1 - exact\\| | largest P@1 fall | samples/s |")
    print("|---|---|---|---:|---:|---:|---:|")
    summary = []
    for seed in seeds:
        exact = epochs(os.path.join(out, f"skew{seed}_exact.jsonl"))
        r = refs(out, f"skew{seed}")
        for name, (p1, p5) in r.items():
            print(f"| {seed} | {name} | {p1:.4f} | {p5:.4f} | | | |")
        for run in ("exact", "lsh", "lsh_noneg", "lsh_nologq"):
            rows = epochs(os.path.join(out, f"skew{seed}_{run}.jsonl"))
            if not rows:
                continue
            gap = max(abs(a["p@1"] - b["p@1"]) for a, b in zip(rows, exact)) if exact else float("nan")
            fall = max([0.0] + [a["p@1"] - b["p@1"] for a, b in zip(rows, rows[1:])])
            print(f"| {seed} | {run} | {curve(rows)} | {rows[-1]['p@5']:.4f} | {gap:.4f} | {fall:.4f} | "
                  f"{speed(rows):,.0f} |")
            summary.append((seed, run, gap, fall, speed(rows)))
    print()
    for run in ("lsh", "lsh_noneg", "lsh_nologq"):
        got = [s for s in summary if s[1] == run]
        if got:
            print(f"- {run}: max gap to exact over seeds {max(g[2] for g in got):.4f}, largest fall "
                  f"{max(g[3] for g in got):.4f}")
    for seed in seeds:
        new = [s[4] for s in summary if s[0] == seed and s[1] == "lsh"]
        old = [s[4] for s in summary if s[0] == seed and s[1] == "lsh_noneg"]
        if new and old and new[0] > 0:
            print(f"- seed {seed}: step time with negatives / without = {old[0] / new[0]:.2f}x")
    print()


def gcide(out):
    for variant in ("min5", "full"):
        runs = sorted(glob.glob(os.path.join(out, f"gcide_{variant}_*.jsonl")))
        r = refs(out, f"gcide_{variant}")
        if not runs and not r:
            continue
        print(f"### GCIDE {variant}\n")
        print("| predictor | P@1 | P@5 | P@1 per epoch | samples/s |")
        print("|---|---:|---:|---|---:|")
        for name, (p1, p5) in r.items():
            print(f"| {name} | {p1:.4f} | {p5:.4f} | | |")
        for path in runs:
            rows = epochs(path)
            if rows:
                name = os.path.basename(path)[len(f"gcide_{variant}_"):-len(".jsonl")]
                best = max(rows, key=lambda x: x["p@1"])
                print(f"| {name} (last epoch; best P@1 {best['p@1']:.4f} at epoch {best['epoch']}) | "
                      f"{rows[-1]['p@1']:.4f} | {rows[-1]['p@5']:.4f} | {curve(rows)} | {speed(rows):,.0f} |")
                alone = network_alone(out, f"gcide_{variant}_{name}")
                if alone:
                    print(f"| {name}: the network alone (--infer exact) | {alone[0]:.4f} | {alone[1]:.4f} | | |")
                if name == "lsh_default":
                    print(f"| **defaults vs references** | {verdict((rows[-1]['p@1'], rows[-1]['p@5']), r)} | | | |")
        print()


def fewshot(out):
    seeds = sorted({int(m.group(1)) for p in glob.glob(os.path.join(out, "fewshot*_default.jsonl"))
                    for m in [re.search(r"fewshot(\d+)_default", p)] if m})
    if not seeds:
        return
    print("### Synthetic few-shot labels\n")
    print("| seed | predictor | P@1 | P@5 | P@1 per epoch | samples/s |")
    print("|---|---|---:|---:|---|---:|")
    for seed in seeds:
        r = refs(out, f"fewshot{seed}")
        for name, (p1, p5) in r.items():
            print(f"| {seed} | {name} | {p1:.4f} | {p5:.4f} | | |")
        for run in ("default", "before"):
            rows = epochs(os.path.join(out, f"fewshot{seed}_{run}.jsonl"))
            if rows:
                print(f"| {seed} | {run} | {rows[-1]['p@1']:.4f} | {rows[-1]['p@5']:.4f} | {curve(rows)} | "
                      f"{speed(rows):,.0f} |")
                alone = network_alone(out, f"fewshot{seed}_{run}")
                if alone:
                    print(f"| {seed} | {run}: the network alone (--infer exact) | {alone[0]:.4f} | {alone[1]:.4f} | | |")
                if run == "default":
                    print(f"| {seed} | **defaults vs references** | {verdict((rows[-1]['p@1'], rows[-1]['p@5']), r)} | | | |")
    print()


def synth(out):
    sparse = epochs(os.path.join(out, "synth_mp_sparse.jsonl"))
    dense = epochs(os.path.join(out, "synth_dp_dense.jsonl"))
    if not sparse and not dense:
        return
    print("### Synthetic XMC: model-parallel sparse vs data-parallel dense (2 ranks)\n")
    print("| run | P@1 per epoch | samples/s | bytes sent per sample |")
    print("|---|---|---:|---:|")
    for name, rows in (("model-parallel sparse", sparse), ("data-parallel dense", dense)):
        if rows:
            print(f"| {name} | {curve(rows)} | {speed(rows):,.0f} | "
                  f"{rows[-1].get('bytes_sent_per_sample', 0):,.0f} |")
    print()


def fmnist(out):
    runs = sorted(glob.glob(os.path.join(out, "fmnist_*.jsonl")))
    if not runs:
        return
    print("### Fashion-MNIST\n")
    print("| run | accuracy per epoch | last |")
    print("|---|---|---:|")
    for path in runs:
        rows = epochs(path)
        if rows:
            print(f"| {os.path.basename(path)[7:-6]} | {curve(rows)} | {rows[-1]['p@1']:.4f} |")
    print()


def infer(out):
    rows = []
    for labels in (100000, 1000000):
        got = {}
        for mode in ("exact", "lsh"):
            j, log = (os.path.join(out, f"infer{labels}_{mode}.{ext}") for ext in ("json", "log"))
            if not (os.path.exists(j) and os.path.exists(log)):
                continue
            metrics = json.loads(open(j).read().strip().splitlines()[-1])
            m = re.search(r"in ([0-9.]+) s .*?([0-9]+) labels scored", open(log).read())
            if m:
                got[mode] = (metrics, float(m.group(1)), int(m.group(2)))
        if len(got) == 2:
            rows.append((labels, got))
    if not rows:
        return
    print("### LSH inference vs exact\n")
    print("| labels | exact P@1 | LSH P@1 | exact P@5 | LSH P@5 | exact s | LSH s | speed-up | labels scored / point |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for labels, got in rows:
        (em, es, _), (lm, ls, ln) = got["exact"], got["lsh"]
        print(f"| {labels:,} | {em['p@1']:.4f} | {lm['p@1']:.4f} | {em['p@5']:.4f} | {lm['p@5']:.4f} | {es:.2f} | "
              f"{ls:.2f} | {es / ls:.1f}x | {ln:,} |")
    print()


def precision(out):
    """--precision bf16 against f32: each pair of runs precision_NAME_{f32,bf16}."""
    names = sorted({m.group(1) for p in glob.glob(os.path.join(out, "precision_*_f32.jsonl"))
                    for m in [re.search(r"precision_(.*)_f32\.jsonl$", p)] if m})
    pairs = [(n, epochs(os.path.join(out, f"precision_{n}_f32.jsonl")),
              epochs(os.path.join(out, f"precision_{n}_bf16.jsonl"))) for n in names]
    pairs = [p for p in pairs if p[1] and p[2]]
    if not pairs:
        return
    print("### bf16 storage against f32 (`--precision`)\n")
    print("| run | epochs | P@1 f32 | P@1 bf16 | bf16 - f32 (points) | samples/s f32 | bf16 | ratio "
          "| state B/param f32 | bf16 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    gaps = []
    for name, f, b in pairs:
        n = min(len(f), len(b))
        pf, pb = f[n - 1]["p@1"], b[n - 1]["p@1"]
        gaps.append(100 * (pb - pf))
        sf, sb = speed(f[:n]), speed(b[:n])
        state = lambda rows: rows[n - 1].get("model_state_bytes", {}).get("per_parameter", 0.0)
        print(f"| {name} | {n} | {pf:.4f} | {pb:.4f} | {100 * (pb - pf):+.2f} | {sf:,.0f} | {sb:,.0f} "
              f"| {sb / sf:.2f}x | {state(f):.2f} | {state(b):.2f} |")
    mean = sum(gaps) / len(gaps)
    print(f"\nbf16 - f32 over {len(gaps)} pairs: mean {mean:+.2f} points, from {min(gaps):+.2f} to "
          f"{max(gaps):+.2f} (target: within 0.5 points).\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else ".bench/quality"
    if os.path.exists(os.path.join(out, "env.txt")):
        print("```\n" + open(os.path.join(out, "env.txt")).read().strip() + "\n```\n")
    for section in (skew, gcide, fewshot, synth, fmnist, infer, precision):
        section(out)
    failed = os.path.join(out, "failed.txt")
    if os.path.exists(failed):
        print("Failed runs:\n```\n" + open(failed).read() + "```")


if __name__ == "__main__":
    main()
