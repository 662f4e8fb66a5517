#!/usr/bin/env python3
"""The table of bench/recsys/validation.sh: per schedule, over seeds, the test AUC of the epoch the
defaults return (the best valid AUC among the epochs an early-stopped run of PATIENCE would train),
against the run's best test epoch and against the previous defaults' last epoch; the epochs run and
the scoring time against the training time.

Usage: python3 bench/recsys/validation.py OUT_DIR
"""
import glob
import json
import os
import re
import statistics
import sys


def epochs(path):
    return [r for r in map(json.loads, open(path)) if r.get("event") == "epoch"]


def returned(es, patience):
    """The epochs an early-stopped run trains and the index of the one it returns."""
    best, best_i, since = None, 0, 0
    for i, r in enumerate(es):
        if best is None or r["valid_auc"] > best:
            best, best_i, since = r["valid_auc"], i, 0
        else:
            since += 1
        if patience and since >= patience:
            return i + 1, best_i
    return len(es), best_i


def main():
    out = sys.argv[1]
    print("| schedule | patience | epochs run | returned AUC (mean, range) | returned - best test epoch | "
          "returned - previous defaults | scoring / training time |")
    print("|---|---|---|---|---|---|---|")
    for schedule in ("cosine", "constant"):
        runs = sorted(glob.glob(os.path.join(out, f"{schedule}_s*.jsonl")))
        if not runs:
            continue
        for patience in (1, 2, 3, 0):
            ran, got, to_best, to_before, cost = [], [], [], [], []
            for path in runs:
                seed = re.search(r"_s(\d+)\.jsonl$", path).group(1)
                es = epochs(path)
                before = epochs(os.path.join(out, f"before_s{seed}.jsonl"))
                n, i = returned(es, patience)
                ran.append(n)
                got.append(es[i]["auc"])
                to_best.append(es[i]["auc"] - max(e["auc"] for e in es[:n]))
                to_before.append(es[i]["auc"] - before[-1]["auc"])
                cost.append(sum(e["valid_seconds"] for e in es[:n]) / sum(e["train_seconds"] for e in es[:n]))
            mean = statistics.mean
            print(f"| {schedule} | {patience or 'off'} | {mean(ran):.1f} | {mean(got):.4f} ({min(got):.4f}-{max(got):.4f}) | "
                  f"{mean(to_best):+.4f} (worst {min(to_best):+.4f}) | {mean(to_before):+.4f} "
                  f"({min(to_before):+.4f}..{max(to_before):+.4f}) | {100 * mean(cost):.1f}% |")


if __name__ == "__main__":
    main()
