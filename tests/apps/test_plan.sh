#!/usr/bin/env bash
# `frugal plan` through the binary:
#  1. calibrated on 1-rank runs (sparse at 1 and 2 threads, dense --parallel data), it prints a table
#     per link and core count with the best grid of each scheme, notes the fitted thread scaling, and
#     writes every D x M grid of every node count to --json, with each grid covering its nodes;
#  2. every epoch line of `frugal train` carries parameter_rows (shapes and touched rows per step);
#  3. --validate predicts a measured 2-rank run (ZeroMQ under `frugal launch`): its model-parallel
#     bytes per sample are predicted exactly, and the error is reported;
#  5. --prices prices an epoch per node type and count (dollars = nodes x price x time), a measured
#     speed as one node, and marks node types too small for the model;
#  4. bad input fails naming it: a multi-rank run as calibration, a file without parameter_rows, no
#     sparse calibration, a malformed --validate, a dense run to validate without a dense calibration.
# Usage: test_plan.sh FRUGAL
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"

run "$FRUGAL" data synth-xmc --features 3000 --labels 800 --train 1200 --test 200 --seed 2 --out "$TMP/d"
T=(train --train "$TMP/d/train.txt" --test "$TMP/d/test.txt" --hidden 32 --epochs 1 --max-steps 6 --quiet --seed 1)
run "$FRUGAL" "${T[@]}" --threads 1 --metrics "$TMP/t1.jsonl"
run "$FRUGAL" "${T[@]}" --threads 2 --metrics "$TMP/t2.jsonl"
run "$FRUGAL" "${T[@]}" --threads 1 --parallel data --metrics "$TMP/dense.jsonl"

# 2.
python3 - "$TMP/t1.jsonl" <<'PY'
import json, sys
epoch = [json.loads(l) for l in open(sys.argv[1]) if '"event":"epoch"' in l][-1]
rows = {p["name"]: p for p in epoch["parameter_rows"]}
w, s = rows["sparse_dense.weight"], rows["softmax.weight"]
assert (w["full_rows"], w["full_cols"], w["sliced_axis"]) == (3000, 32, 1), w
assert (s["full_rows"], s["full_cols"], s["sliced_axis"]) == (800, 32, 0), s
assert 0 < w["touched_rows_per_step"] <= 3000 and 0 < s["touched_rows_per_step"] <= 800, rows
PY

# 1.
run "$FRUGAL" plan --metrics "$TMP/t1.jsonl" --metrics "$TMP/t2.jsonl" --metrics "$TMP/dense.jsonl" \
  --nodes 2,4,6 --cores 2,16 --link 100mbit,1gbit --json "$TMP/plan.json"
grep -q "thread scaling fitted from 1 and 2 threads" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
grep -q "^1gbit links, 16 cores per node" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
grep -qE "^ +6 .*\((1x6|2x3|3x2|6x1)\)" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
python3 - "$TMP/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
preds = p["predictions"]
for q in preds:
    assert q["data"] * q["model"] * q["stages"] == q["nodes"], q
    assert q["scheme"] != "pipeline" or (q["stages"] >= 2 and sum(q["stage_split"]) == 2 and q["micro_batches"] >= 1), q
    assert q["samples_per_s"] > 0 and q["compute_seconds_per_step"] > 0, q
    assert q["scheme"] != "dp-dense" or q["model"] == 1, q
grids = {(q["link"], q["cores"], q["nodes"], q["scheme"], q["grid"]) for q in preds}
for g in ["1x6", "2x3", "3x2", "6x1"]:
    assert ("1gbit", 2, 6, "mp-sparse", g) in grids, g
assert ("1gbit", 2, 6, "dp-dense", "6x1") in grids
# The 2-layer network (input, output) pipelines over 2 stages, replicated (Dx1x2) and sliced (1xMx2).
assert ("1gbit", 2, 2, "pipeline", "1x1x2") in grids and ("1gbit", 2, 6, "pipeline", "3x1x2") in grids
assert ("1gbit", 2, 6, "pipeline", "1x3x2") in grids
assert len(p["best"]) == 2 * 2 * 3, len(p["best"])
for b in p["best"]:
    same = [q for q in preds if (q["link"], q["cores"], q["nodes"]) == (b["link"], b["cores"], b["nodes"])]
    assert b["samples_per_s"] == max(q["samples_per_s"] for q in same), b
    assert abs(sum(b["slice_weights"]) - 1) < 1e-9, b
# more cores never slow a grid down; a slower link never speeds one up
by = {(q["link"], q["cores"], q["nodes"], q["scheme"], q["grid"]): q["samples_per_s"] for q in preds}
for (link, cores, nodes, scheme, grid), v in by.items():
    if cores == 2:
        assert by[(link, 16, nodes, scheme, grid)] >= v
    if link == "1gbit":
        assert by[("100mbit", cores, nodes, scheme, grid)] <= v
assert p["probe"]["compress_seconds_per_entry"] > 0 and p["probe"]["collective_seconds_per_byte"] > 0, p["probe"]
PY

# Repeated calibrations: the faster of each kind is used, and the output names it.
cp "$TMP/t1.jsonl" "$TMP/t1-slow.jsonl"
python3 - "$TMP/t1-slow.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for j in lines:
    if j.get("event") == "epoch":
        j["train_seconds"] *= 3
        j["train_samples_per_s"] /= 3
open(sys.argv[1], "w").write("".join(json.dumps(j) + "\n" for j in lines))
PY
run "$FRUGAL" plan --metrics "$TMP/t1-slow.jsonl" --metrics "$TMP/t1.jsonl" --nodes 2 --cores 2 --link 1gbit
grep -q "^calibration: $TMP/t1.jsonl " "$TMP/last.log" && grep -q "repeated calibrations: the fastest" "$TMP/last.log" ||
  { cat "$TMP/last.log"; exit 1; }

# 5. --prices: samples/s, time and dollars per epoch of each node type at every node count; a measured
#    speed is one node at that speed; a node too small for the model is marked and never the cheapest.
cat > "$TMP/prices.txt" <<'EOF2'
# name cores memory_gib link usd_per_hour [samples_per_s]
small   2   8   1gbit   0.05
big    16  64  10gbit   0.80
gpu     8  60  10gbit   3.00  5000
tiny    2   0.0001 1gbit 0.001
EOF2
run "$FRUGAL" plan --metrics "$TMP/t1.jsonl" --nodes 2,4 --cores 2 --link 1gbit --prices "$TMP/prices.txt" \
  --json "$TMP/prices.json"
grep -q "^what an epoch of 1200 samples costs" "$TMP/last.log" || { cat "$TMP/last.log"; echo "no price table"; exit 1; }
python3 - "$TMP/prices.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["prices"]
by = {(r["node_type"], r["nodes"]): r for r in rows}
assert set(by) == {("small", 2), ("small", 4), ("big", 2), ("big", 4), ("gpu", 1), ("tiny", 2), ("tiny", 4)}, sorted(by)
g = by[("gpu", 1)]
assert g["measured"] and g["samples_per_s"] == 5000 and abs(g["epoch_seconds"] - 1200 / 5000) < 1e-9, g
for r in rows:  # dollars = nodes x price x time
    price = {"small": 0.05, "big": 0.80, "gpu": 3.00, "tiny": 0.001}[r["node_type"]]
    assert abs(r["usd_per_epoch"] - r["nodes"] * price * r["epoch_seconds"] / 3600) < 1e-12, r
    assert r["fits"] == (r["node_type"] != "tiny"), r
PY
grep -qE "^cheapest epoch: [0-9]+ x (small|big|gpu) " "$TMP/last.log" || { cat "$TMP/last.log"; echo "no cheapest line"; exit 1; }
printf 'bad 2 x 1gbit 0.01\n' > "$TMP/bad_prices.txt"
fails_with "bad_prices.txt:1: MEMORY_GIB 'x' is not a positive number" "$FRUGAL" plan --metrics "$TMP/t1.jsonl" \
  --nodes 2 --prices "$TMP/bad_prices.txt"

# 3.
PORT=$(free_port)
run "$FRUGAL" launch -n 2 --coordinator "127.0.0.1:$PORT" -- "$FRUGAL" "${T[@]}" --threads 1 --grid 1x2 \
  --metrics "$TMP/mp2.jsonl"
run "$FRUGAL" plan --metrics "$TMP/t1.jsonl" --nodes 2 --cores 2 --link 1gbit --validate "$TMP/mp2.jsonl@loopback" \
  --json "$TMP/v.json"
grep -q "one thread count calibrated" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
grep -qE "mp2.jsonl +mp-sparse +1x2 +loopback .*%" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
python3 - "$TMP/v.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))["validation"]
assert len(v) == 1, v
v = v[0]
assert v["ranks"] == 2 and v["grid"] == "1x2" and v["measured_samples_per_s"] > 0, v
assert abs(v["error"] - (v["predicted_samples_per_s"] / v["measured_samples_per_s"] - 1)) < 1e-9, v
# the model-parallel exchange's bytes are counted as comm/ sends them
assert abs(v["predicted_bytes_per_sample"] - v["measured_bytes_per_sample"]) <= 0.01 * v["measured_bytes_per_sample"], v
PY

# 4.
fails_with "mp2.jsonl: a calibration is a 1-rank run; this one had 2 ranks" "$FRUGAL" plan --metrics "$TMP/mp2.jsonl"
python3 - "$TMP/t1.jsonl" "$TMP/old.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as out:
    for l in open(sys.argv[1]):
        j = json.loads(l)
        j.pop("parameter_rows", None)
        out.write(json.dumps(j) + "\n")
PY
fails_with "old.jsonl: the epoch line has no parameter_rows" "$FRUGAL" plan --metrics "$TMP/old.jsonl"
fails_with "no 1-rank sparse run among --metrics" "$FRUGAL" plan --metrics "$TMP/dense.jsonl"
fails_with "expected FILE@LINK" "$FRUGAL" plan --metrics "$TMP/t1.jsonl" --validate "$TMP/mp2.jsonl"
fails_with "--validate $TMP/mp2.jsonl@fast: " "$FRUGAL" plan --metrics "$TMP/t1.jsonl" --validate "$TMP/mp2.jsonl@fast"
fails_with "--link fast: " "$FRUGAL" plan --metrics "$TMP/t1.jsonl" --link fast
fails_with "dense.jsonl: a --parallel data run needs a dense calibration" "$FRUGAL" plan --metrics "$TMP/t1.jsonl" \
  --validate "$TMP/dense.jsonl@1gbit"
{ head -1 "$TMP/t1.jsonl"; echo '{"event": "epoch", '; } > "$TMP/bad.jsonl"
fails_with "bad.jsonl:2: not a JSON line" "$FRUGAL" plan --metrics "$TMP/bad.jsonl"
echo "plan: ok"
