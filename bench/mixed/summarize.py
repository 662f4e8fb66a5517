#!/usr/bin/env python3
"""Summarizes bench/mixed/run.sh: per quota, epoch 2 of alone / equal / auto (rank 0's metrics).

alone and auto ran REPEATS times each, alternating: their samples/s are given as the mean and the
range, and auto / alone pairs each auto run with the alone run just before it."""
import json
import os
import statistics
import sys


def records(path, kind):
    with open(path) as f:
        return [r for r in map(json.loads, f) if r.get("event") == kind]


def last_epoch(out, name):
    return records(os.path.join(out, name + ".jsonl"), "epoch")[-1]


def main():
    out, repeats, quotas = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    env = open(os.path.join(out, "env.txt")).read().split("\n")
    print(f"bench/mixed: {env[0]}, commit {env[1]}; load average at the start: "
          f"{env[2].split('load average:')[-1].strip()}, at the end: {env[4].split('load average:')[-1].strip()}")
    print()
    print("| slow ranks' CPU | run | samples/s (epoch 2) | auto / alone (paired) | rank step ms max / min | "
          "max / min | active labels/point | P@1 | shares (calibrated) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for q in quotas:
        alone = [last_epoch(out, f"q{q}-alone-{i}") for i in range(1, repeats + 1)]
        auto = [last_epoch(out, f"q{q}-auto-{i}") for i in range(1, repeats + 1)]
        equal = last_epoch(out, f"q{q}-equal")
        ratios = [b["train_samples_per_s"] / a["train_samples_per_s"] for a, b in zip(alone, auto)]

        def speeds(runs):
            v = [r["train_samples_per_s"] for r in runs]
            return f"{statistics.mean(v):,.0f} ({min(v):,.0f} - {max(v):,.0f})" if len(v) > 1 else f"{v[0]:,.0f}"

        def steps(runs):
            return ", ".join(f"{r['rank_step_seconds_max'] * 1e3:.1f} / {r['rank_step_seconds_min'] * 1e3:.1f}"
                             for r in runs)

        def spread(runs):
            return ", ".join(f"{r['rank_step_seconds_max'] / r['rank_step_seconds_min']:.2f}" for r in runs)

        def active(runs):
            return ", ".join(f"{r['active_per_sample']:.0f}" for r in runs)

        def p1(runs):
            return ", ".join(f"{r['p@1']:.4f}" for r in runs)

        shares = []
        for i in range(1, repeats + 1):
            cal = records(os.path.join(out, f"q{q}-auto-{i}.jsonl"), "calibration")
            shares.append("/".join(f"{w:.2f}" for w in cal[0]["slice_weights"]))
        mean_alone = statistics.mean(r["train_samples_per_s"] for r in alone)
        print(f"| {q}% | alone | {speeds(alone)} | | {steps(alone)} | | {active(alone)} | {p1(alone)} | 1 |")
        print(f"| {q}% | equal | {speeds([equal])} | {equal['train_samples_per_s'] / mean_alone:.2f}x (mean alone) | "
              f"{steps([equal])} | {spread([equal])} | {active([equal])} | {p1([equal])} | equal |")
        print(f"| {q}% | auto | {speeds(auto)} | {statistics.mean(ratios):.2f}x ({min(ratios):.2f} - {max(ratios):.2f}) | "
              f"{steps(auto)} | {spread(auto)} | {active(auto)} | {p1(auto)} | {'; '.join(shares)} |")


if __name__ == "__main__":
    main()
