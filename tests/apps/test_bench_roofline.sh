#!/usr/bin/env bash
# `frugal bench roofline` through the binary:
#  1. alone, it prints the machine's measured FMA rate, streaming and gather bandwidth;
#  2. on a training run's metrics file (its epoch lines carry a "profile"), it prints and writes per
#     phase the time, work, bound and fraction of the roof, for the last epoch or a chosen one; the
#     phases' times add up to the step time it reports;
#  3. a metrics file without a profile, a missing epoch or a malformed line fails naming it.
# Usage: test_bench_roofline.sh FRUGAL
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
SMALL=(--threads 1 --array-mib 8 --table-mib 16 --repeats 1)

# 1.
run "$FRUGAL" bench roofline "${SMALL[@]}" --json "$TMP/machine.json"
grep -qE "^machine, 1 thread \((avx512f|avx2\+fma|scalar)\): [0-9.]+ GFLOP/s" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
python3 - "$TMP/machine.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["flops_per_s"] > 1e8 and m["stream_bytes_per_s"] > 1e8 and m["gather_bytes_per_s"] > 1e7, m
assert "phases" not in m, m
PY

# 2.
run "$FRUGAL" data synth-xmc --features 3000 --labels 800 --train 1200 --test 200 --seed 2 --out "$TMP/d"
run "$FRUGAL" train --train "$TMP/d/train.txt" --test "$TMP/d/test.txt" --hidden 32 --epochs 2 --threads 1 \
  --metrics "$TMP/m.jsonl" --quiet
run "$FRUGAL" bench roofline "${SMALL[@]}" --metrics "$TMP/m.jsonl" --json "$TMP/r.json"
grep -q "m.jsonl epoch 2: 1200 samples" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
grep -qE "^output_forward +[0-9.]+ " "$TMP/last.log" && grep -q "% of the roof" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
run "$FRUGAL" bench roofline "${SMALL[@]}" --metrics "$TMP/m.jsonl" --epoch 1 --json "$TMP/r1.json"
python3 - "$TMP/r.json" "$TMP/r1.json" "$TMP/m.jsonl" <<'PY'
import json, sys
r, r1 = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
lines = [json.loads(l) for l in open(sys.argv[3]) if '"epoch"' in l]
epochs = [l for l in lines if l.get("event") == "epoch"]
assert r["epoch"] == 2 and r1["epoch"] == 1, (r["epoch"], r1["epoch"])
names = [p["phase"] for p in r["phases"]]
for want in ["input_forward", "hash", "sample", "output_forward", "output_backward", "input_backward", "optimizer"]:
    assert want in names, (want, names)
total = sum(p["seconds_per_sample"] for p in r["phases"])
assert abs(total - r["step_seconds_per_sample"]) <= 1e-9 * max(1.0, total), (total, r["step_seconds_per_sample"])
prof = epochs[-1]["profile"]
assert prof["samples"] == 1200, prof["samples"]
assert abs(prof["phases"]["input_forward"]["flops"] / 1200 -
           [p for p in r["phases"] if p["phase"] == "input_forward"][0]["flops_per_sample"]) < 1e-6
for p in r["phases"]:
    if p["bound"]:
        assert p["roof_seconds_per_sample"] > 0 and p["fraction_of_roof"] > 0, p
        assert p["bound"] in ("compute", "memory (gather)", "memory (stream)"), p
assert 0 < r["fraction_of_roof"], r
PY

# 3.
grep -v '"event":"epoch"' "$TMP/m.jsonl" > "$TMP/none.jsonl" || true
fails_with "none.jsonl: no epoch line with a profile" "$FRUGAL" bench roofline "${SMALL[@]}" --metrics "$TMP/none.jsonl"
fails_with "m.jsonl: no epoch 7 line with a profile" "$FRUGAL" bench roofline "${SMALL[@]}" --metrics "$TMP/m.jsonl" --epoch 7
{ head -1 "$TMP/m.jsonl"; echo '{"event": "epoch", '; } > "$TMP/bad.jsonl"
fails_with "bad.jsonl:2: not a JSON line" "$FRUGAL" bench roofline "${SMALL[@]}" --metrics "$TMP/bad.jsonl"
fails_with "--threads" "$FRUGAL" bench roofline --threads 0
echo "bench roofline: ok"
