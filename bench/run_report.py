#!/usr/bin/env python3
"""Renders what bench/run measured: OUT/results.json, PNG plots (gnuplot) and the section of a report
file between the markers "<!-- bench/run: begin -->" and "<!-- bench/run: end -->".

  python3 bench/run_report.py OUT [--report FILE] [--plots DIR] [--no-report]

OUT is a bench/run output directory: runs.jsonl (one line per configuration: name, part, status,
config, metrics file), runs/*.jsonl (each run's `frugal train --metrics`, NAME.rankR.jsonl for ranks
above 0), comm.csv (bench/comm's CSV), plan-SET.json (`frugal plan --json`) and env.jsonl (date,
commit, cores and load at the start and end). Missing pieces are reported as not measured.
--report defaults to bench/REPORT.md (the markers are appended if missing; nothing outside them is
touched); --plots to bench/run_plots; the rendered section is also written to OUT/report.md, and the
target table is printed. --no-report leaves the report file alone."""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
import time
from statistics import median

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- bench/run: begin -->", "<!-- bench/run: end -->"
LINKS = ("100mbit", "1gbit", "10gbit", "loopback")
LINK_NAME = {"100mbit": "100 Mbit", "1gbit": "1 Gbit", "10gbit": "10 Gbit", "loopback": "loopback"}
LINK_RATE = {"100mbit": 12.5e6, "1gbit": 125e6, "10gbit": 1.25e9}  # bytes/s
SCHEME = {"mp-sparse": "model-parallel sparse", "dp-dense": "data-parallel dense", "dct-dp": "DCT-DP",
          "dp-sparse": "data-parallel sparse, uncompressed", "dct-mp": "DCT-MP"}
COLOUR = {"mp-sparse": "#009e73", "dp-dense": "#9400d3", "dct-dp": "#e69f00", "dp-sparse": "#56b4e9", "dct-mp": "#d55e00"}
SYSTEM = {"lsh": "LSH", "lsh-bf16": "LSH, bf16", "exact": "exact softmax", "torch-cpu": "PyTorch (CPU)",
          "torch-sampled": "PyTorch sampled softmax (CPU)"}
# Issue 14's targets.
SPEEDUP_1G, SPEEDUP_100M, P1_GAP, OVERLAP, ZMQ_RATIO, ZMQ_MIN_BYTES, PLAN_ERROR = 50, 300, 1.0, 1.3, 1.5, 64 << 10, 0.25


def mode_key(c):
    """A run's scheme, with its grid where that is not the scheme's own (1xN model-parallel, Nx1 otherwise)."""
    sch, n, grid = c.get("scheme", "?"), c.get("ranks", 1), c.get("grid")
    own = f"1x{n}" if sch in ("mp-sparse", "dct-mp") else f"{n}x1"
    return sch if grid in (None, own) else f"{sch}:{grid}"


def mode_name(key):
    sch, _, grid = key.partition(":")
    return SCHEME.get(sch, sch) + (f" (grid {grid})" if grid else "")


def cores_name(c):
    return f"{c:g}" if isinstance(c, (int, float)) else str(c)


def fmt(x, digits=1):
    """A number for a table: thousands separated, '-' when missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def verdict(ok):
    return "PASS" if ok else "MISS"


def read_jsonl(path, problems):
    recs = []
    try:
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if line.strip():
                    try:
                        recs.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        problems.append(f"{path}:{i}: not JSON ({e})")
    except OSError as e:
        problems.append(f"{path}: {e.strerror}")
    return recs


def overlap_of(run):
    """A model-parallel run's step time over max(compute, wire) on rank 0 at 100 Mbit: (ratio, step, compute,
    wire) in seconds per step, compute being the step less its waits; None without a step profile."""
    e = run["summary"]["epochs"][-1] if run["summary"]["epochs"] else None
    if not (e and e.get("profile_seconds") and e.get("wait_seconds") is not None and e.get("profile_samples")
            and e.get("steps")):
        return None
    steps = e["steps"]
    step = e["profile_seconds"] / steps
    compute = (e["profile_seconds"] - e["wait_seconds"]) / steps
    sent = max(e.get("bytes_sent_per_sample") or 0, e.get("bytes_received_per_sample") or 0)
    wire = sent * e["profile_samples"] / LINK_RATE["100mbit"] / steps
    return step / max(compute, wire, 1e-12), step, compute, wire


def size_name(b):
    return f"{b >> 20} MB" if b >= 1 << 20 else f"{b >> 10} KB"


class Results:
    def __init__(self, out):
        self.out = out
        self.problems = []
        self.env = read_jsonl(os.path.join(out, "env.jsonl"), []) if os.path.exists(os.path.join(out, "env.jsonl")) else []
        self.runs = {}
        path = os.path.join(out, "runs.jsonl")
        if not os.path.exists(path):
            sys.exit(f"run_report.py: {path} is missing (not a bench/run output directory?)")
        for r in read_jsonl(path, self.problems):
            self.runs[r["name"]] = r  # a rerun of a configuration replaces it
        for r in self.runs.values():
            r.setdefault("config", {})
            r["summary"] = self.summarize(r) if r.get("status") == "ok" and r.get("metrics") else None
            if r.get("status") == "ok" and r.get("metrics") and r["summary"] is None and r["part"] != "plan":
                r["status"], r["error"] = "failed", "no epoch record in its metrics"
        self.comm = self.read_comm()
        self.plans = self.read_plans()

    # ---- one run ----
    def summarize(self, r):
        path = os.path.join(self.out, r["metrics"])
        if not path.endswith(".jsonl"):
            return None
        base = path[: -len(".jsonl")]
        per_rank = {}
        for f in [path] + sorted(glob.glob(base + ".rank*.jsonl")):
            epochs = [e for e in read_jsonl(f, self.problems) if e.get("event") == "epoch"]
            if epochs:
                per_rank[epochs[-1].get("rank", 0)] = epochs
        if 0 not in per_rank:
            return None
        e0 = per_rank[0]
        wall, prev_steps, epochs = 0.0, 0, []
        for e in e0:
            wall += e.get("train_seconds", 0.0)
            prof = e.get("profile") or {}
            wait = ((prof.get("phases") or {}).get("wait") or {}).get("seconds")
            steps = e.get("steps")
            epochs.append({
                "epoch": e.get("epoch"), "p@1": e.get("p@1"), "p@5": e.get("p@5"), "loss": e.get("loss"),
                "train_samples_per_s": e.get("train_samples_per_s"), "train_seconds": e.get("train_seconds"),
                "wall_train_seconds": wall,
                "steps": (steps - prev_steps) if isinstance(steps, int) and "profile" in e else e.get("steps"),
                "bytes_sent_per_sample": e.get("bytes_sent_per_sample"),
                "bytes_received_per_sample": e.get("bytes_received_per_sample"),
                "mp_bytes_sent_per_sample": e.get("mp_bytes_sent_per_sample"),
                "dp_bytes_sent_per_sample": e.get("dp_bytes_sent_per_sample"),
                "mp_compression": e.get("mp_compression"), "dp_compression": e.get("dp_compression"),
                "profile_seconds": prof.get("seconds"), "profile_samples": prof.get("samples"), "wait_seconds": wait,
                "peak_rss_bytes": e.get("peak_rss_bytes")})
            prev_steps = steps if isinstance(steps, int) else prev_steps

        def mean_over_ranks(key):  # mean over ranks and epochs, as bench/dct counts bytes
            vals = [e.get(key) for eps in per_rank.values() for e in eps if e.get(key) is not None]
            return sum(vals) / len(vals) if vals else None

        last = epochs[-1]
        return {"epochs": epochs, "ranks_reporting": len(per_rank), "samples_per_s": last["train_samples_per_s"],
                "p1": last["p@1"], "p5": last["p@5"], "epochs_done": len(epochs),
                "bytes_sent_per_sample": mean_over_ranks("bytes_sent_per_sample"),
                "bytes_received_per_sample": mean_over_ranks("bytes_received_per_sample"),
                "mp_bytes_sent_per_sample": mean_over_ranks("mp_bytes_sent_per_sample"),
                "dp_bytes_sent_per_sample": mean_over_ranks("dp_bytes_sent_per_sample"),
                "peak_rss_bytes": max((e.get("peak_rss_bytes") or 0) for eps in per_rank.values() for e in eps)}

    def read_comm(self):
        path = os.path.join(self.out, "comm.csv")
        cells = []
        if os.path.exists(path):
            with open(path) as f:
                header = f.readline().strip().split(",")
                for line in f:
                    parts = line.strip().split(",")
                    if len(parts) != len(header):
                        continue
                    row = dict(zip(header, parts))
                    try:
                        cells.append({"backend": row["backend"], "ranks": int(row["ranks"]), "op": row["op"],
                                      "bytes": int(row["bytes"]), "seconds": float(row["seconds"]),
                                      "GBps": float(row["GBps"])})
                    except (KeyError, ValueError):
                        self.problems.append(f"{path}: bad line {line.strip()!r}")
        return cells

    def read_plans(self):
        plans = {}
        for path in sorted(glob.glob(os.path.join(self.out, "plan-*.json"))):
            set_ = os.path.basename(path)[len("plan-"):-len(".json")]
            try:
                with open(path) as f:
                    p = json.load(f)
                if not isinstance(p, dict):
                    raise ValueError("not an object")
                plans[set_] = {"predictions": list(p.get("predictions", [])), "best": list(p.get("best", [])),
                               "validation": list(p.get("validation", [])), "notes": list(p.get("notes", []))}
            except (OSError, ValueError) as e:
                self.problems.append(f"{path}: {e}")
        return plans

    # ---- selections ----
    def ok(self, **want):
        """Successful runs whose config has every given key = value (role: 'throughput' when unset)."""
        res = []
        for r in self.runs.values():
            if r.get("status") != "ok" or r["summary"] is None:
                continue
            c = dict(r["config"], part=r["part"])
            c.setdefault("role", "throughput" if r["part"] == "cluster" else r["part"])
            if all(c.get(k) == v for k, v in want.items()):
                res.append(r)
        return res

    def one(self, **want):
        rs = self.ok(**want)
        return rs[-1] if rs else None

    def failed(self):
        return [r for r in self.runs.values() if r.get("status") == "failed"]

    def skipped(self):
        return [r for r in self.runs.values() if r.get("status") == "skipped"]


# ---------------------------------------------------------------- tables
def link_order(link):
    return LINKS.index(link) if link in LINKS else len(LINKS)


class Report:
    def __init__(self, res, plots_dir, report_dir):
        self.res, self.plots_dir, self.report_dir = res, plots_dir, report_dir
        self.lines = []
        self.targets = []
        self.series = {}  # gnuplot data: name -> list of rows
        self.titles = {}  # a series' title in its plot, where it is not made from its name

    def p(self, s=""):
        self.lines.append(s)

    def table(self, header, rows):
        self.p("| " + " | ".join(header) + " |")
        self.p("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        for row in rows:
            self.p("| " + " | ".join(str(c) for c in row) + " |")
        self.p()

    def para(self, text):
        self.p(text)
        self.p()

    def section(self, title, header, rows, missing, intro):
        """A heading, then the table under its intro, or why there is none. Says whether there is a table."""
        self.para(f"### {title}")
        if not rows:
            self.para(f"Not measured ({missing}).")
            return False
        self.para(intro)
        self.table(header, rows)
        return True

    def target(self, name, measured, ok):
        self.targets.append({"target": name, "measured": measured, "verdict": "-" if ok is None else verdict(ok)})

    # ---- header ----
    def header(self):
        env = self.res.env
        start = next((e for e in env if e.get("when") == "start"), None)
        end = next((e for e in reversed(env) if e.get("when") == "end"), None)
        if start:
            mode = start.get("mode", "?")
            self.p(f"Rendered from `bench/run --{mode}` (parts: {' '.join(start.get('parts', []))}), started "
                   f"{start.get('date')}{', ended ' + end['date'] if end else ''}; commit {start.get('commit')} "
                   f"({start.get('changed_files', 0)} changed files in the tree); {start.get('cpu', '?')}, "
                   f"{start.get('nproc')} cores; load average {' / '.join(str(x) for x in start.get('load', []))} at the start"
                   + (f", {' / '.join(str(x) for x in end.get('load', []))} at the end" if end else "") + "; "
                   + ("root: emulated links (`frugal launch --bandwidth`)." if start.get("root") else
                      "not root: the cluster part ran on loopback only."))
            if mode == "smoke":
                self.p()
                self.p("**A --smoke run: tiny sets and a few steps, to check the script. Its numbers mean nothing.**")
        else:
            self.p("(no env.jsonl: date, commit and load unknown)")
        self.p()
        sets = next((e["sets"] for e in reversed(env) if e.get("when") == "sets"), {})
        used = sorted({r["config"].get("set") for r in self.res.runs.values()} & set(sets))
        if used:
            self.p("Sets (data and model flags of `frugal train`): " + "; ".join(f"{k}: `{sets[k]}`" for k in used) + ".")
            self.p()
        self.p(f"Metrics, logs and `results.json` in `{self.res.out}`; "
               f"re-render with `python3 bench/run_report.py {self.res.out}`.")
        self.p()

    # ---- samples/s and bytes by mode ----
    def modes(self):
        res = self.res
        rows, bars = [], []
        for r in res.ok(part="single"):
            c, s = r["config"], r["summary"]
            label = f"1 rank, {SYSTEM.get(c.get('system'), c.get('system'))}"
            rows.append([label, 1, "-", fmt(s["samples_per_s"]), fmt(s["p1"], 4), "-"])
            bars.append((label, s["samples_per_s"], None))
        for n in (2, 4):
            runs = res.ok(part="cluster", set="cluster", ranks=n, role="throughput")
            links = sorted({r["config"]["link"] for r in runs}, key=link_order)
            link = "1gbit" if "1gbit" in links else (links[0] if links else None)
            for r in sorted((r for r in runs if r["config"]["link"] == link), key=lambda r: mode_key(r["config"])):
                c, s = r["config"], r["summary"]
                label = f"{n} ranks, {mode_name(mode_key(c))}, {LINK_NAME.get(link, link)}"
                rows.append([label, n, LINK_NAME.get(link, link), fmt(s["samples_per_s"]), fmt(s["p1"], 4),
                             fmt(s["bytes_sent_per_sample"], 0)])
                bars.append((label, s["samples_per_s"], s["bytes_sent_per_sample"]))
        if not self.section("Samples/s by mode", ["mode", "ranks", "link", "samples/s", "P@1", "bytes sent/sample/rank"],
                            rows, "no single or cluster runs",
                            "Train samples/s of the last epoch (rank 0; cluster runs: the first steps of an epoch, the "
                            "cluster set, `--threads 1` per rank; single node: 2 threads). P@1 after the run's steps."):
            return
        self.series["samples_per_s"] = [(lab, v) for lab, v, _ in bars if v]
        self.plot_link("samples_per_s.png", "samples/s by mode")

    def bytes_by_mode(self):
        res = self.res
        groups = {}
        for r in res.ok():
            c = r["config"]
            if c.get("ranks", 1) < 2 or c.get("role") in ("calibration", "repeat"):
                continue
            key = (c.get("set"), c.get("scheme"), c.get("ranks"), c.get("grid"), c.get("keep"))
            # bytes per sample do not depend on the link: the 1 Gbit run, else any
            if key not in groups or c.get("link") == "1gbit":
                groups[key] = r
        rows, bars = [], []
        for key in sorted(groups, key=lambda k: (str(k[0]), k[2], str(k[1]), str(k[4]))):
            set_, scheme, n, grid, keep = key
            s = groups[key]["summary"]
            dense = next((groups[k]["summary"] for k in groups if k[0] == set_ and k[1] == "dp-dense" and k[2] == n), None)
            ratio = (dense["bytes_sent_per_sample"] / s["bytes_sent_per_sample"]
                     if dense and s["bytes_sent_per_sample"] else None)
            label = (f"{mode_name(mode_key(groups[key]['config']))}{'' if keep in (None, 1) else f' keep {keep}'}, "
                     f"{set_}, {n} ranks")
            rows.append([SCHEME.get(scheme, scheme), set_, n, grid or "-", "-" if keep is None else keep,
                         fmt(s["mp_bytes_sent_per_sample"], 0), fmt(s["dp_bytes_sent_per_sample"], 0),
                         fmt(s["bytes_sent_per_sample"], 0), f"{ratio:,.0f}x" if ratio else "-"])
            if s["bytes_sent_per_sample"]:
                bars.append((label, s["bytes_sent_per_sample"]))
        if not self.section("Bytes per sample by mode", ["scheme", "set", "ranks", "grid", "keep", "MP B/sample",
                                                          "DP B/sample", "sent B/sample", "dense / this"],
                            rows, "no multi-rank runs",
                            "Bytes sent per sample per rank (mean over ranks and epochs; training steps only), "
                            "model-parallel and data-parallel exchanges and in all; the last column is the data-parallel "
                            "dense run of the same set and ranks over this one."):
            return
        self.series["bytes_per_sample"] = bars
        self.plot_link("bytes_per_sample.png", "bytes per sample by mode (log scale)")

    # ---- bandwidth sweep ----
    def bandwidth(self):
        res = self.res
        runs = res.ok(part="cluster", set="cluster", role="throughput")
        runs = [r for r in runs if r["config"].get("ranks", 1) > 1]
        links = sorted({r["config"]["link"] for r in runs}, key=link_order)
        by = {}
        for r in runs:
            c = r["config"]
            by[(c["ranks"], mode_key(c), c["link"])] = r["summary"]
        rows = []
        keys = sorted({(n, sch) for n, sch, _ in by}, key=lambda k: (k[0], k[1]))
        for n, sch in keys:
            rows.append([n, mode_name(sch)] + [fmt(by[(n, sch, l)]["samples_per_s"]) if (n, sch, l) in by else "-"
                                                     for l in links])
            self.series[f"bw-n{n}-{sch}"] = [(link_order(l), by[(n, sch, l)]["samples_per_s"], LINK_NAME[l])
                                             for l in links if (n, sch, l) in by]
        for n in sorted({k[0] for k in keys}):
            cells = []
            for l in links:
                mp, dp = by.get((n, "mp-sparse", l)), by.get((n, "dp-dense", l))
                cells.append(f"{mp['samples_per_s'] / dp['samples_per_s']:.1f}x" if mp and dp and dp["samples_per_s"] else "-")
            rows.append([n, "**sparse / dense**"] + cells)
        if not self.section("Bandwidth sweep", ["ranks", "scheme"] + [LINK_NAME.get(l, l) for l in links], rows,
                            "no cluster runs", "Train samples/s (rank 0) of the cluster set on emulated links (`frugal "
                            "launch --bandwidth`: a network namespace per rank, tc tbf on every link; every rank shares "
                            "this machine's cores)."):
            return
        self.bw_links = links
        self.plot_link("bandwidth.png", "the bandwidth sweep")

    # ---- P@1 ----
    def quality(self):
        res = self.res
        self.p("### P@1")
        self.p()
        single = res.ok(part="single")
        if single:
            self.p("Single node (P@1 on the test set after each epoch; seconds: training time so far):")
            self.p()
            n = max(len(r["summary"]["epochs"]) for r in single)
            rows = []
            for r in single:
                eps = r["summary"]["epochs"]
                rows.append([SYSTEM.get(r["config"].get("system"), r["config"].get("system"))]
                            + [f"{e['p@1']:.4f} ({e['wall_train_seconds']:.0f} s)" if e.get("p@1") is not None else "-"
                               for e in eps] + ["-"] * (n - len(eps)))
                self.series[f"p1-single-{r['config'].get('system')}"] = [
                    (e["wall_train_seconds"], e["p@1"] * 100) for e in eps if e.get("p@1") is not None]
            steps = single[0]["config"].get("max_steps", 0)
            self.table(["system"] + [f"epoch {i + 1}" + (f" ({steps} steps)" if steps else "") for i in range(n)], rows)
        mp = res.one(part="cluster", role="quality", scheme="mp-sparse")
        dp = res.one(part="cluster", role="quality", scheme="dp-dense")
        name = "P@1 after the same epochs: model-parallel sparse within 1 point of data-parallel dense (4 ranks)"
        if mp and dp:
            e = min(mp["summary"]["epochs_done"], dp["summary"]["epochs_done"])
            a, b = mp["summary"]["epochs"][e - 1]["p@1"], dp["summary"]["epochs"][e - 1]["p@1"]
            gap = abs(a - b) * 100
            set_ = mp["config"].get("set")
            self.p(f"Model-parallel sparse against data-parallel dense, {mp['config'].get('ranks')} ranks, loopback, "
                   f"the {set_} set:")
            self.p()
            rows = []
            for r, lab in ((mp, "model-parallel sparse"), (dp, "data-parallel dense")):
                rows.append([lab] + [f"{x['p@1']:.4f} ({x['wall_train_seconds']:.0f} s)" for x in r["summary"]["epochs"]])
                key = f"p1-quality-{r['config']['scheme']}"
                self.series[key] = [(x["wall_train_seconds"], x["p@1"] * 100) for x in r["summary"]["epochs"]]
                self.titles[key] = f"{r['config'].get('ranks')} ranks, {lab} ({set_} set)"
            width = max(len(x) for x in rows)
            self.table(["scheme"] + [f"epoch {i + 1}" for i in range(width - 1)], [x + ["-"] * (width - len(x)) for x in rows])
            self.target(name, f"{a:.4f} vs {b:.4f} after {e} epochs: {gap:.2f} points", gap <= P1_GAP)
        else:
            self.target(name, "not measured", None)
        data = res.ok(part="data")
        if data:
            self.p("Data sets (bench/data's commands):")
            self.p()
            rows = []
            for r in data:
                s, c = r["summary"], r["config"]
                what = "Fashion-MNIST MLP 784-256-128-10 (accuracy)" if c.get("set") == "fmnist" else \
                    f"GCIDE {c.get('set', '')[len('gcide-'):]}, {c.get('sampler')}"
                rows.append([what, s["epochs_done"], fmt(s["p1"], 4), fmt(s["p5"], 4), fmt(s["samples_per_s"])])
            self.table(["set", "epochs", "P@1", "P@5", "samples/s"], rows)
        if any(k.startswith("p1-") for k in self.series):
            self.plot_link("p1_time.png", "P@1 against wall time")

    # ---- compression against quality ----
    def compression(self):
        res = self.res
        rows, dp_pts, mp_pts = [], [], []
        for set_ in sorted({r["config"].get("set") for r in res.ok(part="dct")}):
            ref_dp = res.one(part="dct", set=set_, scheme="dp-sparse")
            dense = res.one(part="dct", set=set_, scheme="dp-dense")
            ref_mp = res.one(part="dct", set=set_, scheme="mp-sparse")
            for r in res.ok(part="dct", set=set_):
                c, s = r["config"], r["summary"]
                if c["scheme"] in ("dct-dp", "dp-sparse"):
                    base, ref, kind = dense, ref_dp, "DP"
                    mine = s["bytes_sent_per_sample"]
                    theirs = base["summary"]["bytes_sent_per_sample"] if base else None
                elif c["scheme"] in ("dct-mp", "mp-sparse"):
                    base, ref, kind = ref_mp, ref_mp, "MP"
                    mine = s["mp_bytes_sent_per_sample"] or s["bytes_sent_per_sample"]
                    theirs = (base["summary"]["mp_bytes_sent_per_sample"] or base["summary"]["bytes_sent_per_sample"]) if base else None
                else:
                    continue
                ratio = theirs / mine if theirs and mine else None
                delta = (s["p1"] - ref["summary"]["p1"]) * 100 if ref and s["p1"] is not None else None
                rows.append([set_, f"{SCHEME.get(c['scheme'], c['scheme'])}", c.get("grid", "-"), c.get("keep", "-"),
                             s["epochs_done"], fmt(mine, 0), f"{ratio:,.1f}x" if ratio else "-", fmt(s["p1"], 4),
                             f"{delta:+.2f}" if delta is not None else "-"])
                if ratio and delta is not None:
                    (dp_pts if kind == "DP" else mp_pts).append((ratio, delta, f"{c.get('keep', '')}"))
            if dense:
                rows.append([set_, SCHEME["dp-dense"], dense["config"].get("grid", "-"), "-",
                             f"{dense['config'].get('max_steps', '')} steps", fmt(dense["summary"]["bytes_sent_per_sample"], 0),
                             "1x (DP reference)", "-", "-"])
        if not self.section("Compression against quality", ["set", "scheme", "grid", "keep", "epochs", "B/sample",
                                                             "compression", "P@1", "Δ P@1"], rows, "no dct runs",
                            "2 ranks, loopback, whole epochs. DP: bytes sent per sample against the dense all-reduce of "
                            "the same model (`--parallel data`, a few steps: its bytes per step are constant); MP: "
                            "model-parallel bytes against `--mp-keep 1`. Δ P@1 in points against the uncompressed run "
                            "of the same grid."):
            return
        self.series["cq-dp"], self.series["cq-mp"] = dp_pts, mp_pts
        self.plot_link("compression_quality.png", "compression against quality")

    # ---- cluster targets ----
    def cluster_targets(self):
        res = self.res
        for link, need in (("1gbit", SPEEDUP_1G), ("100mbit", SPEEDUP_100M)):
            name = f"4 ranks, {LINK_NAME[link]}: model-parallel sparse >= {need}x the samples/s of data-parallel dense"
            pairs = []  # (seed, sparse samples/s, dense samples/s), the runs of one seed paired
            mp, dp = self.target_seeds(link, "mp-sparse"), self.target_seeds(link, "dp-dense")
            for seed in sorted(set(mp) & set(dp)):
                sparse, dense = mp[seed]["summary"]["samples_per_s"], dp[seed]["summary"]["samples_per_s"]
                if sparse and dense:
                    pairs.append((seed, sparse, dense))
            if pairs:
                ratios = [sp / de for _, sp, de in pairs]
                mid = median(ratios)
                if len(pairs) == 1:
                    text = f"{mid:.1f}x ({fmt(pairs[0][1])} vs {fmt(pairs[0][2])} samples/s)"
                else:
                    text = (f"median {mid:.1f}x over seeds {', '.join(str(p[0]) for p in pairs)} (each: "
                            + ", ".join(f"{r:.1f}x" for r in ratios)
                            + f"; sparse {fmt(median([p[1] for p in pairs]))}, dense {fmt(median([p[2] for p in pairs]))}"
                            + " samples/s, medians)")
                self.target(name, text, mid >= need)
            else:
                self.target(name, "not measured", None)
        name = f"Overlap: 4 ranks, 100 Mbit, model-parallel step time <= {OVERLAP}x max(compute, wire)"
        measured = []  # (seed, ratio, step, compute, wire)
        for seed, mp in sorted(self.target_seeds("100mbit", "mp-sparse").items()):
            o = overlap_of(mp)
            if o:
                measured.append((seed, *o))
        if measured:
            mid = median([m[1] for m in measured])
            seed, ratio, step, compute, wire = measured[0]
            text = (f"{ratio:.2f}x (rank 0: step {step * 1e3:.1f} ms, compute {compute * 1e3:.1f} ms, "
                    f"wire {wire * 1e3:.1f} ms)")
            if len(measured) > 1:
                text = (f"median {mid:.2f}x over seeds {', '.join(str(m[0]) for m in measured)} (each: "
                        + ", ".join(f"{m[1]:.2f}x" for m in measured) + f"; seed {seed}: step {step * 1e3:.1f} ms, "
                        f"compute {compute * 1e3:.1f} ms, wire {wire * 1e3:.1f} ms on rank 0)")
            self.target(name, text, mid <= OVERLAP)
        else:
            self.target(name, "not measured", None)
        # The same measure where each rank has a core of its own: on 2 cores, four ranks wait for
        # peers that are not running, which no overlap of the exchanges can hide. Information only.
        two = [r for r in self.res.ok(part="cluster", set="cluster", role="throughput", ranks=2, link="100mbit",
                                      scheme="mp-sparse") if r["config"].get("grid", "1x2") == "1x2"]
        o = overlap_of(two[0]) if two else None
        if o:
            ratio, step, compute, wire = o
            self.targets.append({"target": "(information) the overlap measure at 2 ranks, a core each, 100 Mbit",
                                 "measured": f"{ratio:.2f}x (rank 0: step {step * 1e3:.1f} ms, compute "
                                             f"{compute * 1e3:.1f} ms, wire {wire * 1e3:.1f} ms)",
                                 "verdict": "info"})

    def target_seeds(self, link, scheme):
        """The 4-rank runs of the cluster set the speed targets compare, by seed: the bandwidth sweep's
        (seed 1) and its repeats (bench/run's TARGET_SEEDS)."""
        grid = "1x4" if scheme == "mp-sparse" else "4x1"
        runs = {}
        for role in ("throughput", "repeat"):
            for r in self.res.ok(part="cluster", set="cluster", role=role, ranks=4, link=link, scheme=scheme):
                if r["config"].get("grid", grid) == grid:
                    runs[r["config"].get("seed", 1)] = r
        return runs

    # ---- comm ----
    def comm(self):
        cells = self.res.comm
        by = {}
        for c in cells:
            by[(c["op"], c["ranks"], c["bytes"], c["backend"])] = c
        keys = sorted({(c["op"], c["ranks"], c["bytes"]) for c in cells})
        rows, worst = [], {}
        for op, n, b in keys:
            z, m = by.get((op, n, b, "zmq")), by.get((op, n, b, "mpi-tcp"))
            ratio = z["seconds"] / m["seconds"] if z and m and m["seconds"] > 0 else None
            ok = "-" if ratio is None or b < ZMQ_MIN_BYTES else verdict(ratio <= ZMQ_RATIO)
            rows.append([op, n, size_name(b), f"{z['seconds'] * 1e3:.3f}" if z else "-", f"{m['seconds'] * 1e3:.3f}" if m else "-",
                         f"{ratio:.2f}" if ratio else "-", ok])
            if ratio is not None and b >= ZMQ_MIN_BYTES:
                w = worst.setdefault((op, n), [None, 0, 0])
                if w[0] is None or ratio > w[0][0]:
                    w[0] = (ratio, b)
                w[1] += ratio <= ZMQ_RATIO
                w[2] += 1
        for op in ("all_reduce", "all_gather"):
            for n in (2, 4):
                name = f"ZeroMQ within {ZMQ_RATIO}x of Open MPI (TCP) in every bench/comm cell >= 64 KB: {op}, {n} ranks"
                w = worst.get((op, n))
                if w:
                    self.target(name, f"worst {w[0][0]:.2f}x at {size_name(w[0][1])}; {w[1]} of {w[2]} cells within",
                                w[1] == w[2])
                else:
                    self.target(name, "not measured", None)
        self.section("Communication (bench/comm)", ["op", "ranks", "size", "ZeroMQ ms", "Open MPI TCP ms", "ZeroMQ / MPI",
                                                    "verdict"], rows, "no comm.csv",
                     "Milliseconds per operation on loopback (message size per rank): ZeroMQ under `frugal launch`, "
                     f"Open MPI with `--mca btl tcp,self` (the same medium); verdict: ZeroMQ / Open MPI <= {ZMQ_RATIO} "
                     "from 64 KB up.")

    # ---- the cost model ----
    def plan(self):
        res = self.res
        self.p("### Cost model (`frugal plan`)")
        self.p()
        name = f"Cost model: every measured point predicted within {PLAN_ERROR:.0%}"
        skipped = [r for r in res.skipped() if r["part"] == "plan"]
        if not res.plans:
            why = skipped[0]["error"] if skipped else "no plan-*.json"
            self.p(f"Not measured: {why}.")
            self.p()
            self.target(name, f"not measured ({why})", None)
            return
        rows, errors = [], []
        for set_, p in sorted(res.plans.items()):
            for v in p["validation"]:
                err = v.get("error")
                if err is None and v.get("measured_samples_per_s"):
                    err = (v["predicted_samples_per_s"] - v["measured_samples_per_s"]) / v["measured_samples_per_s"]
                ok = None if err is None else abs(err) <= PLAN_ERROR
                # The target is about the 100 Mbit and 1 Gbit points; the others are listed too.
                if err is not None and v.get("link") in ("100mbit", "1gbit"):
                    errors.append((abs(err), os.path.basename(str(v.get("file", "?"))), ok))
                rows.append([set_, os.path.basename(str(v.get("file", "?"))).replace(".jsonl", ""), v.get("scheme", "-"),
                             v.get("ranks", "-"), v.get("grid", "-"), LINK_NAME.get(v.get("link"), v.get("link", "-")),
                             fmt(v.get("measured_samples_per_s")), fmt(v.get("predicted_samples_per_s")),
                             "-" if err is None else f"{err * 100:+.1f}%", "-" if ok is None else verdict(ok)])
        self.p("Calibrated on 1-rank runs of each model over the same steps (sparse at 1 and 2 threads, dense), "
               "then asked for the measured multi-rank configurations on this machine's cores (`--host-cores`); "
               "the target counts the 100 Mbit and 1 Gbit points.")
        self.p()
        if rows:
            self.table(["set", "run", "scheme", "ranks", "grid", "link", "measured samples/s", "predicted", "error",
                        f"within {PLAN_ERROR:.0%}"], rows)
        else:
            self.p("No validation points (no multi-rank runs to compare against).")
            self.p()
        if errors:
            worst = max(errors)
            good = sum(1 for e in errors if e[2])
            self.target(name, f"worst {worst[0] * 100:.1f}% ({worst[1]}); {good} of {len(errors)} points at 100 Mbit "
                              "and 1 Gbit within",
                        good == len(errors))
        else:
            self.target(name, "not measured (no validation points)", None)
        notes = [f"{set_}: {n}" for set_, p in sorted(res.plans.items()) for n in p["notes"]]
        if notes:
            self.para("The model's notes: " + "; ".join(notes) + ".")
        cl = res.plans.get("cluster")
        if cl:
            best = [b for b in cl["best"] if b.get("link") == "1gbit"]
            if best:
                def weights(b):
                    w = [f"{x:.3g}" for x in b.get("slice_weights") or []]
                    return ",".join(w[:4]) + (f",... ({len(w)})" if len(w) > 4 else "") if w else "-"
                self.para("Best grid per node count and cores at 1 Gbit (cluster set):")
                self.table(["nodes", "cores", "scheme", "grid", "slice weights", "samples/s"],
                           [[b.get("nodes"), cores_name(b.get("cores")), b.get("scheme"), b.get("grid"), weights(b),
                             fmt(b.get("samples_per_s"))]
                            for b in sorted(best, key=lambda b: (b.get("cores", 0), b.get("nodes", 0)))])
            curves = {}
            for q in cl["predictions"]:
                if q.get("link") != "1gbit" or q.get("samples_per_s") is None:
                    continue
                key = (q.get("scheme"), cores_name(q.get("cores")))
                n = q.get("nodes")
                curves.setdefault(key, {})
                curves[key][n] = max(curves[key].get(n, 0), q["samples_per_s"])
            for (sch, cores), pts in curves.items():
                self.series[f"plan-{sch}-c{cores}"] = sorted(pts.items())
            for sch in sorted({v.get("scheme") for v in cl["validation"]}):
                pts = [(v["ranks"], v["measured_samples_per_s"], v["predicted_samples_per_s"]) for v in cl["validation"]
                       if v.get("scheme") == sch and v.get("link") == "1gbit" and v.get("measured_samples_per_s")]
                if pts:
                    self.series[f"measured-{sch}"] = pts
            if curves:
                self.plot_link("plan.png", "the cost model's projection at 1 Gbit, with the measured points")

    # ---- targets, failures, plots ----
    def target_table(self):
        self.p("### Targets (issue 14)")
        self.p()
        self.table(["target", "measured", "verdict"], [[t["target"], t["measured"], t["verdict"]] for t in self.targets])

    def failures(self):
        bad = self.res.failed()
        skipped = self.res.skipped()
        if bad or skipped or self.res.problems:
            self.p("### Failed or skipped")
            self.p()
            for r in bad:
                self.p(f"- {r['name']}: failed: {r.get('error') or 'no epoch record'} (log: `runs/{r['name']}.log`)")
            for r in skipped:
                self.p(f"- {r['name']}: skipped: {r.get('error')}")
            for pr in self.res.problems:
                self.p(f"- {pr}")
            self.p()

    def plot_link(self, png, what):
        self.pending = getattr(self, "pending", []) + [(png, what)]
        rel = os.path.relpath(os.path.join(self.plots_dir, png), self.report_dir)
        self.p(f"![{what}]({rel})")
        self.p()

    def render(self):
        self.para("## Every benchmark in one command (bench/run; issue 14)")
        self.header()
        body = Report(self.res, self.plots_dir, self.report_dir)
        body.series, body.targets, body.titles = self.series, self.targets, self.titles
        body.cluster_targets()
        for part in (body.modes, body.bytes_by_mode, body.bandwidth, body.quality, body.compression, body.comm, body.plan):
            part()
        self.target_table()
        self.lines += body.lines
        self.failures()
        self.pending = getattr(body, "pending", [])
        self.bw_links = getattr(body, "bw_links", [])
        return "\n".join(self.lines).rstrip() + "\n"


# ---------------------------------------------------------------- plots
def gnuplot_available():
    try:
        subprocess.run(["gnuplot", "--version"], check=True, capture_output=True)
        return True
    except (OSError, subprocess.CalledProcessError):
        return False


def quote(s):
    return '"' + str(s).replace('"', "'") + '"'


def make_plots(rep, out, plots_dir):
    """One gnuplot per PNG (a plot without data does not stop the others). Returns the PNGs written."""
    if not gnuplot_available():
        print("run_report.py: gnuplot missing (apt-get install -y gnuplot-nox): no plots", file=sys.stderr)
        return []
    gd = os.path.join(out, "gnuplot")
    os.makedirs(gd, exist_ok=True)
    os.makedirs(plots_dir, exist_ok=True)
    s = rep.series

    def dat(name, rows):
        path = os.path.join(gd, name + ".dat")
        with open(path, "w") as f:
            for row in rows:
                f.write(" ".join(quote(x) if isinstance(x, str) else repr(float(x)) for x in row) + "\n")
        return path

    head = ["set terminal pngcairo noenhanced size 1000,600 font 'sans,10'", "set grid", "set key outside right top"]
    scripts = {}
    def bars(name, title, ylabel, colour, bottom):  # a bar per mode, log scale
        scripts[name + ".png"] = [
            f"set title '{title}'", "set logscale y", "set style data histograms", "set style fill solid 0.8 border -1",
            "set boxwidth 0.8", "set xtics rotate by -35 scale 0", f"set ylabel '{ylabel} (log)'", "unset key",
            f"set bmargin {bottom}", f"plot '{dat(name, s[name])}' using 2:xtic(1) lc rgb '{colour}'"]

    if s.get("samples_per_s"):
        bars("samples_per_s", "Train samples/s by mode", "train samples/s", "#0072b2", 12)
    if s.get("bytes_per_sample"):
        bars("bytes_per_sample", "Bytes sent per sample per rank by mode", "bytes sent per sample per rank", "#d55e00", 14)
    bw = sorted(k for k in s if k.startswith("bw-"))
    if bw:
        links = rep.bw_links
        tics = ", ".join(f"'{LINK_NAME[l]}' {link_order(l)}" for l in links)
        parts = []
        for k in bw:
            n, sch = k[len("bw-n"):].split("-", 1)
            style = ("pt 7 dt 1" if n == "4" else "pt 5 dt 2") if ":" not in sch else "pt 9 dt 4"
            parts.append(f"'{dat(k.replace(':', '-'), [r[:2] for r in s[k]])}' using 1:2 with linespoints lw 2 {style} "
                         f"ps 1.3 lc rgb '{COLOUR.get(sch.split(':')[0], '#000000')}' title '{mode_name(sch)}, {n} ranks'")
        scripts["bandwidth.png"] = [
            "set title 'Bandwidth sweep: train samples/s, cluster set (ranks share this machine)'", "set logscale y",
            f"set xtics ({tics})", f"set xrange [-0.3:{max(link_order(l) for l in links) + 0.3}]",
            "set xlabel 'link'", "set ylabel 'train samples/s (log)'", "plot " + ", ".join(parts)]
    p1 = sorted(k for k in s if k.startswith("p1-") and s[k])
    if p1:
        parts = []
        for k in p1:
            kind, name = k[3:].split("-", 1)
            title = rep.titles.get(k, f"1 rank, {SYSTEM.get(name, name)} (cluster set)")
            parts.append(f"'{dat(k, s[k])}' using 1:2 with linespoints lw 2 pt 7 title '{title}'")
        scripts["p1_time.png"] = [
            "set title 'P@1 against training time'", "set xlabel 'training seconds so far'",
            "set ylabel 'P@1 (%)'", "set logscale x", "plot " + ", ".join(parts)]
    if s.get("cq-dp") or s.get("cq-mp"):
        parts = []
        for k, title, pt in (("cq-dp", "DCT-DP (against the dense all-reduce)", 7), ("cq-mp", "DCT-MP (against --mp-keep 1)", 5)):
            if s.get(k):
                f = dat(k, s[k])
                parts += [f"'{f}' using 1:2 with points pt {pt} ps 1.8 title '{title}'",
                          f"'{f}' using 1:2:3 with labels offset 0,1 notitle"]
        scripts["compression_quality.png"] = [
            "set title 'Compression against quality (2 ranks; labels: keep fraction)'", "set logscale x",
            "set xlabel 'bytes ratio: reference / configuration (log)'", "set offsets graph 0.05, graph 0.05, graph 0.1, graph 0.1", "set ylabel 'Δ P@1 against uncompressed (points)'",
            "set arrow from graph 0, first -0.5 to graph 1, first -0.5 nohead dt 3 lc rgb 'red'",
            "plot " + ", ".join(parts) + ", NaN with lines dt 3 lc rgb 'red' title '-0.5 points'"]
    curves = sorted((k for k in s if k.startswith("plan-")), key=lambda k: (k.rsplit("-c", 1)[0], float(k.rsplit("-c", 1)[1])))
    if curves:
        parts = []
        for k in curves:
            sch, cores = k[len("plan-"):].rsplit("-c", 1)
            dash = {"2": 1, "4": 2, "16": 3}.get(cores, 4)
            parts.append(f"'{dat(k, s[k])}' using 1:2 with lines lw 2 dt {dash} lc rgb '{COLOUR.get(sch, '#000000')}' "
                         f"title '{sch}, {cores} cores (predicted)'")
        for k in sorted(x for x in s if x.startswith("measured-")):
            f = dat(k, s[k])
            sch = k[len("measured-"):]
            c = COLOUR.get(sch, "#000000")
            parts += [f"'{f}' using 1:2 with points pt 7 ps 2 lc rgb '{c}' title '{sch} measured here'",
                      f"'{f}' using 1:3 with points pt 6 ps 2 lc rgb '{c}' title '{sch} predicted for here'"]
        scripts["plan.png"] = [
            "set title 'Cost model: best grid per scheme at 1 Gbit, and the measured points (ranks sharing this machine)'",
            "set logscale xy", "set xtics (2, 4, 8, 16, 32, 64)", "set xlabel 'nodes'",
            "set ylabel 'samples/s (log)'", "plot " + ", ".join(parts)]
    written = []
    for png, body in scripts.items():
        target = os.path.join(plots_dir, png)
        if os.path.exists(target):
            os.remove(target)
        script = head + [f"set output '{target}'"] + body
        with open(os.path.join(gd, png.replace(".png", ".gp")), "w") as f:
            f.write("\n".join(script) + "\n")
        r = subprocess.run(["gnuplot"], input="\n".join(script) + "\n", capture_output=True, text=True)
        errors = [l for l in r.stderr.splitlines() if l.strip() and "warning" not in l.lower()]
        if r.returncode != 0 or errors or not os.path.exists(target):
            print(f"run_report.py: gnuplot ({png}): " + "\n".join(errors), file=sys.stderr)
        else:
            written.append(target)
    return written


# ---------------------------------------------------------------- the report file
def replace_section(path, section):
    text = open(path).read() if os.path.exists(path) else ""
    block = f"{BEGIN}\n{section.rstrip()}\n{END}"
    if BEGIN in text and END in text and text.index(BEGIN) < text.index(END):
        i, j = text.index(BEGIN), text.index(END) + len(END)
        text = text[:i] + block + text[j:]
    else:
        if BEGIN in text or END in text:
            sys.exit(f"run_report.py: {path} has only one of the markers {BEGIN} / {END}: fix it by hand")
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--report", default=os.path.join(ROOT, "bench", "REPORT.md"))
    ap.add_argument("--plots", default=os.path.join(ROOT, "bench", "run_plots"))
    ap.add_argument("--no-report", action="store_true")
    a = ap.parse_args()
    res = Results(a.out)
    rep = Report(res, a.plots, os.path.dirname(os.path.abspath(a.report)))
    section = rep.render()
    written = make_plots(rep, a.out, a.plots)
    missing = [png for png, _ in rep.pending if os.path.join(a.plots, png) not in written]
    if missing:  # say so instead of linking to a picture that is not there
        section = re.sub(r"!\[([^\]]*)\]\(([^)]*(" + "|".join(re.escape(m) for m in missing) + r"))\)",
                         r"(plot \1 not rendered: gnuplot missing or failed)", section)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(section)
    summary = {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "out": a.out, "env": res.env,
               "runs": list(res.runs.values()), "comm": res.comm, "plans": res.plans, "targets": rep.targets,
               "failed": [r["name"] for r in res.failed()], "problems": res.problems,
               "plots": written}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if not a.no_report:
        replace_section(a.report, section)
    print("| target | measured | verdict |")
    for t in rep.targets:
        print(f"| {t['target']} | {t['measured']} | {t['verdict']} |")
    print(f"\nresults: {os.path.join(a.out, 'results.json')}; section: {os.path.join(a.out, 'report.md')}"
          + ("" if a.no_report else f" and {a.report}") + f"; plots: {len(written)} in {a.plots}")


if __name__ == "__main__":
    main()
