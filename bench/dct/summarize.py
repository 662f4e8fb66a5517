#!/usr/bin/env python3
"""Summarizes bench/dct/run.sh (issue 5, Dynamic Communication Thresholding).

  python3 bench/dct/summarize.py [OUT] [--plots DIR]   # markdown tables; gnuplot data in OUT/gnuplot,
                                                       # PNGs in DIR (default bench/dct/plots)
  python3 bench/dct/summarize.py OUT --best SET dp|mpM  # run.sh: the best eta / k measured so far

Per data set: P@1 (= accuracy on Fashion-MNIST) after the final epoch and its delta in points against
the same grid without compression, bytes on the wire per sample (model-parallel and data-parallel
separately; mean over ranks and epochs, per sample of the rank's group, as the trainer counts them),
the ratio against the baseline measured in the same run (DP: the dense all-reduce, --parallel data;
MP: --mp-keep 1 on the same grid), the exchanges' payload compression, and seconds per epoch on
loopback and at 100 Mbit / 1 Gbit (training points / measured train samples/s)."""
import glob
import json
import math
import os
import re
import subprocess
import sys

SETS = ("xmc", "fmnist", "gcide")
TITLE = {"xmc": "Synthetic XMC (20k features, 5k labels; LSH, hidden 128)",
         "fmnist": "Fashion-MNIST (MLP 784-1024-1024-10; accuracy = P@1)",
         "gcide": "GCIDE reverse dictionary, >= 5 definitions (4,646 labels; hidden 512, exact softmax)"}
TOL = 0.5  # points of P@1
DP_TARGET, DP_AIM, MP_TARGET, MP_AIM = 100, 200, 20, 40

args = sys.argv[1:]
out = args.pop(0) if args and not args[0].startswith("--") else ".bench/dct"
plots = "bench/dct/plots"
best_query = None
while args:
    a = args.pop(0)
    if a == "--plots":
        plots = args.pop(0)
    elif a == "--best":
        best_query = (args.pop(0), args.pop(0))
    else:
        sys.exit(f"unknown argument {a}")


def load(name):
    """{rank: [epoch records]} of one run ($out/name.jsonl and name.rank*.jsonl), or None."""
    files = glob.glob(os.path.join(out, name + ".jsonl")) + glob.glob(os.path.join(out, name + ".rank*.jsonl"))
    runs = {}
    for f in files:
        recs = []
        for line in open(f):
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
        ep = [r for r in recs if r.get("event") == "epoch"]
        if ep:
            runs[ep[-1].get("rank", 0)] = ep
    return runs if 0 in runs else None


points = {}
if os.path.exists(os.path.join(out, "points.txt")):
    for line in open(os.path.join(out, "points.txt")):
        k, v = line.split()
        points[k] = int(v)


def stats(name, set_):
    r = load(name)
    if not r:
        return None
    r0 = r[0]
    allrec = [x for v in r.values() for x in v]
    mean = lambda key: sum(x.get(key, 0.0) for x in allrec) / len(allrec)
    ratio = lambda u, s: (sum(x.get(u, 0) for x in allrec) / max(sum(x.get(s, 0) for x in allrec), 1))
    secs = sum(x["train_seconds"] for x in r0)
    samples = sum(x["train_seconds"] * x["train_samples_per_s"] for x in r0)
    p1s = [x["p@1"] for x in r0]
    return {
        "p1": p1s[-1], "loss": r0[-1]["loss"], "p1_last3": sum(p1s[-3:]) / len(p1s[-3:]), "epochs": len(r0), "steps": sum(x["steps"] for x in r0),
        "mp": mean("mp_bytes_sent_per_sample"), "dp": mean("dp_bytes_sent_per_sample"),
        "sent": mean("bytes_sent_per_sample"),
        "mpc": ratio("mp_payload_uncompressed", "mp_payload_sent") if any(x.get("mp_payload_sent") for x in allrec) else None,
        "dpc": ratio("dp_payload_uncompressed", "dp_payload_sent") if any(x.get("dp_payload_sent") for x in allrec) else None,
        "sec_epoch": points.get(set_, float("nan")) * secs / samples if samples > 0 else float("nan"),
    }


def warmup_of(set_):
    """--mp-warmup-steps of the set's warm-up runs, from their start record."""
    for f in sorted(glob.glob(os.path.join(out, f"{set_}-mp*-warm-k*.jsonl"))):
        if ".rank" in f:
            continue
        with open(f) as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("event") == "start":
                    return r.get("config", {}).get("mp_warmup_steps", "?")
    return "?"


def names(set_, pattern):
    """Run names of set_ matching pattern (a regex with one group: the keep value), sorted by keep desc."""
    found = []
    for f in glob.glob(os.path.join(out, f"{set_}-*.jsonl")):
        base = os.path.basename(f)[len(set_) + 1:-len(".jsonl")]
        if ".rank" in base:
            continue
        m = re.fullmatch(pattern, base)
        if m:
            found.append((float(m.group(1)), m.group(1), base))
    return [(v, b) for _, v, b in sorted(found, reverse=True)]


def pick(set_, scheme):
    """The smallest keep (eta or k, not 1) whose final P@1 is within TOL points of the reference,
    else the most accurate compressed one; None without data."""
    if scheme == "dp":
        ref, cands = f"{set_}-dp-keep1", names(set_, r"dp-eta([0-9.e-]+)")
    else:
        ref, cands = f"{set_}-{scheme}-k1", names(set_, scheme + r"-k([0-9.e-]+)")
    cands = [(v, b) for v, b in cands if float(v) != 1]
    ref = stats(ref, set_)
    runs = [(v, stats(f"{set_}-{b}", set_)) for v, b in cands]
    runs = [(v, s) for v, s in runs if s]
    if not ref or not runs:
        return None
    ok = [(v, s) for v, s in runs if (s["p1"] - ref["p1"]) * 100 >= -TOL]
    if ok:
        return min(ok, key=lambda t: float(t[0]))[0]
    return max(runs, key=lambda t: t[1]["p1"])[0]


if best_query:
    set_, scheme = best_query
    print(pick(set_, scheme) or ("0.01" if scheme == "dp" else "0.1"))
    sys.exit(0)


def fmt(x, spec=".0f"):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def timing(set_, name):
    t = {}
    for bw in ("100mbit", "1gbit"):
        s = stats(f"{set_}-t{bw}-{name}", set_)
        t[bw] = s["sec_epoch"] if s else None
    return t


uptime = open(os.path.join(out, "env.txt")).read().strip() if os.path.exists(os.path.join(out, "env.txt")) else ""
print("# DCT benchmark (bench/dct)\n")
if uptime:
    print("```\n" + uptime + "\n```\n")

verdicts = []
gp_sets = []
xmax = {}
for set_ in SETS:
    ref = stats(f"{set_}-dp-keep1", set_)
    dense = stats(f"{set_}-dense", set_)
    if not ref and not stats(f"{set_}-mp2-k1", set_):
        continue
    gp_sets.append(set_)
    print(f"## {TITLE[set_]}\n")
    # ---- DP ----
    rows = [("dense all-reduce (`--parallel data`)", "dense", dense)]
    rows.append(("`--grid 2x1`, no `--dp-keep` (reference)", "dp-keep1", ref))
    for v, b in names(set_, r"dp-eta([0-9.e-]+)"):
        rows.append((f"`--dp-keep {v}`", b, stats(f"{set_}-{b}", set_)))
    for v, b in names(set_, r"dp-exact-eta([0-9.e-]+)"):
        rows.append((f"`--dp-keep {v} --dp-tau exact --dp-reestimate-every 1`", b, stats(f"{set_}-{b}", set_)))
    for v, b in names(set_, r"dp-default-eta([0-9.e-]+)"):
        rows.append((f"`--dp-keep {v}`, default `--dp-reestimate-every 1000`", b, stats(f"{set_}-{b}", set_)))
    for v, b in names(set_, r"dp-bf16-eta([0-9.e-]+)"):
        rows.append((f"`--dp-keep {v} --wire-dtype bf16`", b, stats(f"{set_}-{b}", set_)))
    print("### DCT-DP (2 ranks; `--grid 2x1`; `--dp-reestimate-every` 50 unless noted)\n")
    print("| configuration | epochs | P@1 final | Δ pts | P@1 mean last 3 | Δ pts | train loss | DP bytes/sample | MP bytes/sample "
          "| dense / this (bytes) | DP compression | s/epoch loopback | s/epoch 100 Mbit | s/epoch 1 Gbit |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    dp_pts = []
    for label, b, s in rows:
        if not s:
            print(f"| {label} | failed or missing (see failed.txt) ||||||||||||| ")
            continue
        full = not (b == "dense" and ref and s["steps"] < ref["steps"])  # dense GCIDE: a few steps, bytes only
        d = (s["p1"] - ref["p1"]) * 100 if ref and full else None
        d3 = (s["p1_last3"] - ref["p1_last3"]) * 100 if ref and full else None
        r = dense["dp"] / s["dp"] if dense and s["dp"] > 0 else None
        t = timing(set_, b)
        p1 = fmt(s["p1"], ".4f") if full else f"- ({s['steps']} steps)"
        p13 = fmt(s["p1_last3"], ".4f") if full else "-"
        print(f"| {label} | {s['epochs']} | {p1} | {fmt(d, '+.2f')} | {p13} | {fmt(d3, '+.2f')} | {s['loss']:.3f} | {s['dp']:.0f} | {s['mp']:.0f} | "
              f"{fmt(r, '.1f')}x | {fmt(s['dpc'], '.1f')}x | {fmt(s['sec_epoch'], '.1f')} | {fmt(t['100mbit'], '.1f')} | "
              f"{fmt(t['1gbit'], '.1f')} |")
        if r and full:
            kind = "sweep" if b.startswith("dp-eta") else "none" if b == "dp-keep1" else b.split("-eta")[0] if "-eta" in b else b
            lab = b.replace("dp-", "").replace("keep1", "none").replace("eta", "")
            dp_pts.append((kind, r, s["p1"] * 100, lab))
        if b.startswith("dp-") and b != "dp-keep1" and not b.endswith("eta1") and d is not None and r:
            verdicts.append((set_, "DP", label, r, d, DP_TARGET, DP_AIM, d3))
    # ---- MP ----
    mp_pts = {}
    for m in (2, 3, 4):
        mref = stats(f"{set_}-mp{m}-k1", set_)
        ks = names(set_, rf"mp{m}-k([0-9.e-]+)")
        if not ks:
            continue
        print(f"\n### DCT-MP ({m} ranks; `--grid 1x{m}`)\n")
        print("| configuration | epochs | P@1 final | Δ pts | P@1 mean last 3 | Δ pts | train loss | MP bytes/sample | DP bytes/sample "
              "| keep 1 / this (bytes) | MP compression | s/epoch loopback | s/epoch 100 Mbit | s/epoch 1 Gbit |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        rows = [(f"`--mp-keep {v}`" + (" (reference)" if float(v) == 1 else ""), b) for v, b in ks]
        rows += [(f"`--mp-keep {v} --wire-dtype bf16`", b) for v, b in names(set_, rf"mp{m}-bf16-k([0-9.e-]+)")]
        rows += [(f"`--mp-keep {v} --mp-warmup-steps {warmup_of(set_)}`", b)
                 for v, b in names(set_, rf"mp{m}-warm-k([0-9.e-]+)")]
        for label, b in rows:
            s = stats(f"{set_}-{b}", set_)
            if not s:
                continue
            d = (s["p1"] - mref["p1"]) * 100 if mref else None
            d3 = (s["p1_last3"] - mref["p1_last3"]) * 100 if mref else None
            r = mref["mp"] / s["mp"] if mref and s["mp"] > 0 else None
            t = timing(set_, b) if m == 2 else {"100mbit": None, "1gbit": None}
            print(f"| {label} | {s['epochs']} | {s['p1']:.4f} | {fmt(d, '+.2f')} | {s['p1_last3']:.4f} | {fmt(d3, '+.2f')} | {s['loss']:.3f} | "
                  f"{s['mp']:.0f} | {s['dp']:.0f} | {fmt(r, '.1f')}x | {fmt(s['mpc'], '.1f')}x | {fmt(s['sec_epoch'], '.1f')} | "
                  f"{fmt(t['100mbit'], '.1f')} | {fmt(t['1gbit'], '.1f')} |")
            if r:
                kind = f"M={m} bf16" if "bf16" in b else f"M={m} warm-up" if "warm" in b else f"M={m}"
                mp_pts.setdefault(kind, []).append((r, s["p1"] * 100, b.split("-k")[-1]))
            if d is not None and r and "k1" != b.split("-")[-1]:
                verdicts.append((set_, f"MP M={m}", label, r, d, MP_TARGET, MP_AIM, d3))
    print()
    # ---- gnuplot data ----
    gd = os.path.join(out, "gnuplot")
    os.makedirs(gd, exist_ok=True)
    # One file per series (gnuplot's `index` miscounts empty blocks); an empty series is left out.
    for f in glob.glob(os.path.join(gd, f"{set_}-dp-*.dat")) + glob.glob(os.path.join(gd, f"{set_}-mp-*.dat")):
        os.remove(f)
    for k2, r, p, lab in dp_pts:
        with open(os.path.join(gd, f"{set_}-dp-{k2}.dat"), "a") as f:
            f.write(f"{r} {p} {lab}\n")
    for kind, pts in mp_pts.items():
        with open(os.path.join(gd, f"{set_}-mp-{kind.replace(' ', '_').replace('=', '')}.dat"), "w") as f:
            f.write("".join(f"{r} {p} {lab}\n" for r, p, lab in pts))
    xmax[set_] = (max([r for _, r, _, _ in dp_pts] + [1]), max([r for pts in mp_pts.values() for r, _, _ in pts] + [1]))
    eta, k = pick(set_, "dp") or "0.01", pick(set_, "mp2") or "0.1"
    with open(os.path.join(gd, f"{set_}-time.dat"), "w") as f:
        f.write("config 100mbit 1gbit\n")
        for label, b in (("dense", "dense"), ("DP-none", "dp-keep1"), (f"DP-eta={eta}", f"dp-eta{eta}"),
                         ("MP-k=1", "mp2-k1"), (f"MP-k={k}", f"mp2-k{k}")):
            t = timing(set_, b)
            if t["100mbit"] is None and t["1gbit"] is None:
                label += "(n/a)"
            f.write(label + "".join(" NaN" if t[bw] is None else f" {t[bw]:.3f}" for bw in ("100mbit", "1gbit")) + "\n")
    with open(os.path.join(gd, f"{set_}-ref.txt"), "w") as f:
        f.write(f"{ref['p1'] * 100 if ref else 'NaN'} {stats(f'{set_}-mp2-k1', set_)['p1'] * 100 if stats(f'{set_}-mp2-k1', set_) else 'NaN'}\n")

print("## Targets (DP: dense / DCT-DP bytes >= 100x, aim 200x; MP: keep 1 / DCT-MP bytes >= 20x, aim 40x; "
      f"each within {TOL} points of P@1 of the same grid uncompressed)\n")
groups = {}
for v in verdicts:
    groups.setdefault((v[0], v[1]), []).append(v)
print("| data set | scheme | best configuration within 0.5 points (final epoch) | bytes ratio | Δ P@1 pts | Δ mean last 3 | target | verdict | largest ratio measured (Δ P@1 pts) |")
print("|---|---|---|---:|---:|---:|---|---|---|")
failed = {}
if os.path.exists(os.path.join(out, "failed.txt")):
    for line in open(os.path.join(out, "failed.txt")):
        if ": " in line:
            failed[line.split(": ", 1)[0]] = line.split(": ", 1)[1].strip()
for set_ in gp_sets:
    for scheme, prefix in (("DP", "dp-"), ("MP M=2", "mp2-")):
        if (set_, scheme) not in groups:
            bad = [k for k in failed if k.startswith(f"{set_}-{prefix}")]
            if bad:
                err = re.sub(r"^\[\d+\] frugal: error: ", "", failed[bad[0]])[:110]
                print(f"| {set_} | {scheme} | not measured: {len(bad)} runs failed (failed.txt: {err}...) | - | - | - | "
                      f">= {DP_TARGET if scheme == 'DP' else MP_TARGET}x | NOT MEASURED | - |")
for (set_, scheme), vs in groups.items():
    ok = [v for v in vs if v[4] >= -TOL]
    tgt, aim = vs[0][5], vs[0][6]
    if ok:
        b = max(ok, key=lambda v: v[3])
        verdict = ("PASS" if b[3] >= tgt else "MISS") + (" (aim met)" if b[3] >= aim else "")
    else:
        b = max(vs, key=lambda v: v[4])
        verdict = "MISS (none within 0.5 points; most accurate shown)"
    top = max(vs, key=lambda v: v[3])
    print(f"| {set_} | {scheme} | {b[2]} | {b[3]:.1f}x | {b[4]:+.2f} | {fmt(b[7], '+.2f')} | >= {tgt}x (aim {aim}x) | {verdict} | "
          f"{top[2]}: {top[3]:.0f}x ({top[4]:+.2f}) |")

# ---- plots ----
gp_bin = "gnuplot"
try:
    subprocess.run([gp_bin, "--version"], check=True, capture_output=True)
except (OSError, subprocess.CalledProcessError):
    print("\n(gnuplot missing: apt-get install -y gnuplot-nox; no plots)", file=sys.stderr)
    sys.exit(0)
os.makedirs(plots, exist_ok=True)
gd = os.path.join(out, "gnuplot")
script = ["set terminal pngcairo noenhanced size 900,600 font 'sans,11'", "set grid", "set key outside right top"]
SHORT = {"xmc": "Synthetic XMC", "fmnist": "Fashion-MNIST", "gcide": "GCIDE (min 5 definitions)"}
DP_SERIES = (("sweep", "w lp pt 7 ps 1.3 lw 2", "eta sweep (--dp-keep ETA)"),
             ("none", "w p pt 4 ps 1.8 lw 2", "no --dp-keep (reference)"),
             ("dense", "w p pt 5 ps 1.6", "dense all-reduce (--parallel data)"),
             ("dp-exact", "w p pt 9 ps 1.8", "exact top-k every step"),
             ("dp-default", "w p pt 11 ps 1.8", "default re-estimation (1000 steps)"),
             ("dp-bf16", "w p pt 13 ps 1.8", "bf16 wire"))


def ratio_plot(png, title, xlabel, target, ref, xmax_, parts, note=""):
    lines = [f"set output '{png}'", f"set title '{title}'", "set logscale x",
             f"set xrange [0.5:{max(2 * target, 2 * xmax_)}]", f"set xlabel '{xlabel}'",
             "set ylabel 'P@1 after the final epoch (%)'", "unset arrow", "unset label 2",
             f"set arrow from {target}, graph 0 to {target}, graph 1 nohead dt 2 lc rgb 'gray40'",
             f"set label 1 'target {target}x' at {target}, graph 0.04 offset 0.5,0 tc rgb 'gray40'"]
    if note:
        lines.append(f"set label 2 '{note}' at graph 0.05, graph 0.5 tc rgb 'red'")
    if ref != "NaN":  # keep the reference - TOL line inside the plot
        lines += [f"set yrange [*<{float(ref) - 1.5 * TOL}:*]",
                  f"set arrow from graph 0, first {ref}-{TOL} to graph 1, first {ref}-{TOL} nohead dt 3 lc rgb 'red'"]
    return lines + ["plot " + ", ".join(parts + [f"NaN w l dt 3 lc rgb 'red' t 'reference - {TOL} pt'"]),
                    "unset label 1", "unset label 2"]


def failed_note(set_, prefix):
    bad = sorted(k[len(set_) + 1:] for k in failed if k.startswith(f"{set_}-{prefix}"))
    return f"{len(bad)} runs failed, see failed.txt: {bad[0]} ..." if bad else ""


for set_ in gp_sets:
    ref_dp, ref_mp = open(os.path.join(gd, f"{set_}-ref.txt")).read().split()
    parts = []
    for kind, style, title in DP_SERIES:
        dat = os.path.join(gd, f"{set_}-dp-{kind}.dat")
        if os.path.exists(dat):
            parts.append(f"'{dat}' u 1:2 {style} t '{title}'")
            if kind == "sweep":
                parts.append(f"'{dat}' u 1:2:3 w labels offset 0,1 notitle")
    if parts:
        script += ratio_plot(f"{plots}/{set_}-dp.png", f"{SHORT[set_]}: DCT-DP, 2 ranks (labels: eta)",
                             "dense all-reduce bytes / configuration bytes (log)", DP_TARGET, ref_dp, xmax[set_][0], parts,
                             failed_note(set_, "dp-"))
    parts = []
    # An explicit colour per series: gnuplot's cycle of 8 wraps (the label layers use slots too).
    colours = ["#9400d3", "#56b4e9", "#e69f00", "#0072b2", "#000000", "#009e73", "#d55e00", "#cc79a7", "#808000"]
    for i, dat in enumerate(sorted(glob.glob(os.path.join(gd, f"{set_}-mp-*.dat")))):
        kd = os.path.basename(dat)[len(set_) + 4:-4].replace("_", " ").replace("M", "M=")
        style = "w p pt 13 ps 1.8" if "bf16" in kd else "w lp pt 7 ps 1.3 lw 2"
        style += f" lc rgb '{colours[i % len(colours)]}'"
        if "warm" in kd:
            style += " dt 2"
        parts.append(f"'{dat}' u 1:2 {style} t '{kd}'")
        if "bf16" not in kd:
            parts.append(f"'{dat}' u 1:2:3 w labels offset 0,1 notitle")
    if parts:
        script += ratio_plot(f"{plots}/{set_}-mp.png", f"{SHORT[set_]}: DCT-MP, grid 1xM (labels: k; reference line: M=2)",
                             "--mp-keep 1 bytes / configuration bytes (log)", MP_TARGET, ref_mp, xmax[set_][1], parts,
                             failed_note(set_, "mp"))
script += [f"set output '{plots}/time.png'", "set terminal pngcairo noenhanced size 1500,520 font 'sans,10'",
           "unset arrow", "unset logscale x", "set logscale y", "set style data histograms",
           "set style histogram clustered gap 1", "set style fill solid 0.8 border -1", "set boxwidth 0.9",
           "set xtics rotate by -30", "set key inside top right", "set ylabel 'seconds per epoch (log)'", "unset xlabel",
           "set yrange [*:*]", f"set multiplot layout 1,{len(gp_sets)} title 'Time per epoch, 2 ranks, emulated links'"]
for set_ in gp_sets:
    dat = os.path.join(gd, f"{set_}-time.dat")
    script += [f"set title '{SHORT[set_]}'",
               f"plot '{dat}' u 2:xtic(1) t columnheader(2), '' u 3 t columnheader(3)"]
script += ["unset multiplot"]
with open(os.path.join(gd, "plots.gp"), "w") as f:
    f.write("\n".join(script) + "\n")
# One gnuplot per PNG, so that a plot without data does not stop the others.
header = [line for line in script[:3]]
chunks, cur = [], None
for line in script[3:]:
    if line.startswith("set output"):
        cur = [line]
        chunks.append(cur)
    elif cur is not None:
        cur.append(line)
for chunk in chunks:
    res = subprocess.run([gp_bin], input="\n".join(header + chunk) + "\n", capture_output=True, text=True)
    errors = [l for l in res.stderr.splitlines() if "warning: Skipping data file" not in l and l.strip()]
    if res.returncode != 0 or errors:
        print(f"gnuplot ({chunk[0]}): " + "\n".join(errors), file=sys.stderr)
print(f"\nPlots: {', '.join(sorted(os.listdir(plots)))} in {plots}", file=sys.stderr)
