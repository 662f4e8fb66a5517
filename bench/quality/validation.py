#!/usr/bin/env python3
"""Issue 65's tables from bench/quality/run.sh's `valid` section: per set (over its seeds) the
previous defaults' last epoch (no validation split, 3 epochs), and the defaults' run replayed under
every epoch cap and patience: the last epoch, the best epoch (by test P@1, what the run had), and the
model the defaults return (the best epoch on validation among the epochs run before early stopping
would have stopped). The defaults' runs train VALID_EPOCHS epochs with early stopping off, so one run
answers every (cap, patience): early stopping only cuts a run short.

Usage: python3 bench/quality/validation.py OUT_DIR [--select p1|p1p5]
"""
import glob
import os
import re
import statistics
import sys

# The run records and the references' files, read as the other quality tables read them.
from summarize import epochs as epochs_of, refs as references


def replay(epochs, cap, patience, select):
    """The epochs an early-stopped run of at most `cap` epochs trains, the one it returns, and whether
    the records answer it (a run that itself stopped early has no records past its stop)."""
    best, best_i, since = None, 0, 0
    run = 0
    for i, r in enumerate(epochs[:cap]):
        run = i + 1
        score = r["valid_p@1"] + (r.get("valid_p@5", 0.0) if select == "p1p5" else 0.0)
        if best is None or score > best:
            best, best_i, since = score, i, 0
        else:
            since += 1
        if patience and since >= patience:
            return run, best_i, True
    return run, best_i, run == cap


def spread(values):
    if not values:
        return "n/a"
    mean = statistics.mean(values)
    return f"{mean:.4f} ({min(values):.4f}-{max(values):.4f})" if len(values) > 1 else f"{mean:.4f}"


def main():
    out = sys.argv[1]
    select = sys.argv[sys.argv.index("--select") + 1] if "--select" in sys.argv else "p1"
    sets = {}
    for path in sorted(glob.glob(os.path.join(out, "valid_*_default.jsonl"))):
        name = os.path.basename(path)[len("valid_"):-len("_default.jsonl")]
        base, seed = re.match(r"(.*)_s(\d+)$", name).groups()
        before = path.replace("_default.jsonl", "_before.jsonl")
        sets.setdefault(base, []).append((int(seed), epochs_of(path), epochs_of(before) if os.path.exists(before) else []))
    caps = [3, 5, 10]
    patiences = [1, 2, 3, 0]
    print(f"# Validation split and best epoch (selection: valid {'P@1' if select == 'p1' else 'P@1 + P@5'})\n")
    print("P@1 / P@5 over seeds: mean (min-max). `before`: the previous defaults (no split, 3 epochs, last epoch). "
          "`returned - best`: what the defaults return against the best test epoch of the same run; "
          "`returned - before`: against the previous defaults' last epoch. Points x 100.\n")
    summary = {}
    for base, runs in sorted(sets.items()):
        runs.sort()
        print(f"## {base} ({len(runs)} seed(s), {len(runs[0][1])} epochs recorded)\n")
        refs = references(out, base.replace("_s", "")) or references(out, base) or references(out, base + "1")
        if refs:
            print("references: " + ", ".join(f"{k} P@1 {v[0]:.4f} P@5 {v[1]:.4f}" for k, v in refs.items()) + "\n")
        before1 = [b[-1]["p@1"] for _, _, b in runs if b]
        before5 = [b[-1]["p@5"] for _, _, b in runs if b]
        print(f"before (3 epochs, no split): P@1 {spread(before1)}, P@5 {spread(before5)}\n")
        runs = [r for r in runs if r[1]]
        if not runs:
            continue
        valid_share = [sum(r.get("valid_seconds", 0.0) for r in d) / max(sum(r["train_seconds"] for r in d), 1e-9)
                       for _, d, _ in runs]
        print(f"validation scoring time / training time (all epochs of a run): {spread(valid_share)}\n")
        print("| cap | patience | epochs run | last P@1 | best P@1 | returned P@1 | returned P@5 | returned - best P@1 | "
              "returned - best P@5 | returned - before P@1 | returned - before P@5 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for cap in caps:
            for patience in patiences:
                if cap <= 3 and patience:
                    continue
                rows = []
                for _, d, b in runs:
                    n, ret, answered = replay(d, cap, patience, select)
                    if not answered:
                        break
                    ran = d[:n]
                    nan = float("nan")
                    rows.append({"n": n, "last1": ran[-1]["p@1"], "best1": max(r["p@1"] for r in ran),
                                 "best5": max(r["p@5"] for r in ran), "ret1": ran[ret]["p@1"], "ret5": ran[ret]["p@5"],
                                 "before1": b[-1]["p@1"] if b else nan, "before5": b[-1]["p@5"] if b else nan})
                if len(rows) < len(runs):
                    continue
                col = lambda k: [r[k] for r in rows]
                diff = lambda a, c: [100 * (r[a] - r[c]) for r in rows]
                fmt = lambda v: f"{statistics.mean(v):+.2f} ({min(v):+.2f}..{max(v):+.2f})"
                print(f"| {cap} | {patience or 'off'} | {statistics.mean(col('n')):.1f} | {spread(col('last1'))} | "
                      f"{spread(col('best1'))} | {spread(col('ret1'))} | {spread(col('ret5'))} | "
                      f"{fmt(diff('ret1', 'best1'))} | {fmt(diff('ret5', 'best5'))} | {fmt(diff('ret1', 'before1'))} | "
                      f"{fmt(diff('ret5', 'before5'))} |")
                summary.setdefault((cap, patience), []).append(
                    (base, min(diff('ret1', 'best1')), min(diff('ret5', 'best5')), min(diff('ret1', 'before1')),
                     min(diff('ret5', 'before5')), statistics.mean(col('n'))))
        print()
    print("## Every set at once: the worst seed of each set\n")
    print("| cap | patience | worst returned - best P@1 | worst returned - best P@5 | worst returned - before P@1 | "
          "worst returned - before P@5 | mean epochs run |")
    print("|---|---|---|---|---|---|---|")
    for (cap, patience), rows in sorted(summary.items()):
        if len(rows) < len(sets):
            continue
        print(f"| {cap} | {patience or 'off'} | {min(r[1] for r in rows):+.2f} | {min(r[2] for r in rows):+.2f} | "
              f"{min(r[3] for r in rows):+.2f} | {min(r[4] for r in rows):+.2f} | "
              f"{statistics.mean(r[5] for r in rows):.1f} |")


if __name__ == "__main__":
    main()
