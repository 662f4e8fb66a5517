#!/usr/bin/env bash
# Multi-process checks over ZeroMQ with `frugal launch`, against a single-process run:
#  1. model parallel on 3 ranks with uneven slices: the same per-epoch losses (relative 1e-5) and P@k;
#  2. a 2x2 grid: the same loss within tolerance;
#  3. resume a 3-rank checkpoint on 2 ranks and on 1 rank: P@1 right after resuming equals P@1 at
#     the checkpoint (weights and optimizer state resliced);
#  4. DCT over ZeroMQ: --dp-keep 1 on a 2x1 grid equals the uncompressed 2x1 run; --dp-keep 0.01
#     and --mp-keep 0.1 --wire-dtype bf16 cut the bytes on the wire and log their compression;
#     ranks started with different --mp-keep refuse to run, naming the setting; --dp-compress auto
#     thresholds gradients on sparse rows and the replicas' updates (sign values) on dense ones.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 3000 --labels 600 --train 3000 --test 300 --nnz 20 --labels-per-point 3 \
  --seed 2 --out "$TMP/data" > /dev/null
COMMON=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 2 --threads 1 --quiet
        --sampler exact --hidden 32 --batch 64 --seed 3)
run "$FRUGAL" "${COMMON[@]}" --metrics "$TMP/one.jsonl"
run "$FRUGAL" launch -n 3 -- "$FRUGAL" "${COMMON[@]}" --slice-weights 1,2,3 --metrics "$TMP/three.jsonl" --checkpoint "$TMP/ckpt"
run "$FRUGAL" launch -n 4 -- "$FRUGAL" "${COMMON[@]}" --grid 2x2 --metrics "$TMP/grid.jsonl"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --resume "$TMP/ckpt" --metrics "$TMP/resume2.jsonl"
run "$FRUGAL" "${COMMON[@]}" --resume "$TMP/ckpt" --metrics "$TMP/resume1.jsonl"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --grid 2x1 --metrics "$TMP/dp.jsonl"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --grid 2x1 --dp-keep 1 --metrics "$TMP/dp-keep1.jsonl"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --grid 2x1 --dp-keep 0.01 --dp-reestimate-every 10 \
  --metrics "$TMP/dp-dct.jsonl"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --mp-keep 0.1 --wire-dtype bf16 --metrics "$TMP/mp-dct.jsonl"
# --dp-compress auto: sparse rows (this set: a batch touches ~35% of the features) threshold
# gradients; dense ones (every feature in every point) exchange optimizer updates as sign values,
# and the replicas still agree bit for bit. (The choice is printed: these runs are not --quiet.)
NOISY=()
for x in "${COMMON[@]}"; do [ "$x" = --quiet ] || NOISY+=("$x"); done
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${NOISY[@]}" --grid 2x1 --dp-keep 0.05 --max-steps 3
cp "$TMP/last.log" "$TMP/auto-sparse.log"  # run() keeps the command's output there
grep -q "DCT-DP thresholds gradients (--dp-compress auto" "$TMP/auto-sparse.log" || { cat "$TMP/auto-sparse.log"; exit 1; }
"$FRUGAL" data synth-xmc --features 60 --labels 20 --train 600 --test 100 --nnz 60 --labels-per-point 1 \
  --seed 2 --out "$TMP/dense" > /dev/null
run "$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$TMP/dense/train.txt" --test "$TMP/dense/test.txt" \
  --epochs 2 --threads 1 --sampler exact --hidden 32 --batch 64 --seed 3 --grid 2x1 --dp-keep 0.05 --metrics "$TMP/auto-dense.jsonl"
cp "$TMP/last.log" "$TMP/auto-dense.log"
grep -q "DCT-DP thresholds the replicas' optimizer updates (--dp-compress auto" "$TMP/auto-dense.log" \
  || { cat "$TMP/auto-dense.log"; exit 1; }
# A rank with another --mp-keep: the run-config check names the setting (launch fails).
if "$FRUGAL" launch -n 2 -- bash -c \
    'k=1; [ "$FRUGAL_RANK" = 1 ] && k=0.5; exec "$0" "$@" --mp-keep $k' "$FRUGAL" "${COMMON[@]}" \
    > "$TMP/mismatch.log" 2>&1; then
  echo "ranks with different --mp-keep trained anyway"; exit 1
fi
grep -q "mp_keep" "$TMP/mismatch.log" || { cat "$TMP/mismatch.log"; echo "the error does not name mp_keep"; exit 1; }
python3 - "$TMP" <<'PY'
import json, sys, os
d = sys.argv[1]
def events(name, kind):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == kind]
one, three, grid = events("one.jsonl", "epoch"), events("three.jsonl", "epoch"), events("grid.jsonl", "epoch")
assert len(one) == len(three) == len(grid) == 2, (len(one), len(three), len(grid))
for a, b in zip(one, three):
    assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]), ("3 ranks", a["loss"], b["loss"])
    assert a["p@1"] == b["p@1"] and a["p@5"] == b["p@5"], ("3 ranks", a, b)
    assert b["bytes_sent_per_sample"] > 0
for a, b in zip(one, grid):
    assert abs(a["loss"] - b["loss"]) <= 1e-4 * abs(a["loss"]), ("2x2 grid", a["loss"], b["loss"])
for rank in (1, 2):
    r = events("three.rank%d.jsonl" % rank, "epoch")
    assert [x["loss"] for x in r] == [x["loss"] for x in three], "ranks disagree on the loss"
at_checkpoint = three[-1]["p@1"]
for name in ("resume2.jsonl", "resume1.jsonl"):
    res = events(name, "resume")
    assert len(res) == 1 and res[0]["saved_model_slices"] == 3, res
    assert res[0]["p@1"] == at_checkpoint, (name, res[0]["p@1"], at_checkpoint)
plain, keep1 = events("dp.jsonl", "epoch"), events("dp-keep1.jsonl", "epoch")
assert [x["loss"] for x in plain] == [x["loss"] for x in keep1], ("--dp-keep 1", plain, keep1)
assert [x["p@1"] for x in plain] == [x["p@1"] for x in keep1]
dct, mp, three_full = events("dp-dct.jsonl", "epoch"), events("mp-dct.jsonl", "epoch"), events("three.jsonl", "epoch")
assert dct[-1]["dp_compression"] > 20 and dct[-1]["dp_bytes_sent_per_sample"] * 5 < plain[-1]["dp_bytes_sent_per_sample"], dct[-1]
assert mp[-1]["mp_compression"] > 5 and mp[-1]["mp_bytes_sent_per_sample"] > 0, mp[-1]
assert abs(mp[-1]["mp_sent_fraction"] * mp[-1]["mp_compression"] - 1) < 1e-9, mp[-1]
assert abs(dct[-1]["dp_sent_fraction"] * dct[-1]["dp_compression"] - 1) < 1e-9, dct[-1]
dense0, dense1 = events("auto-dense.jsonl", "epoch"), events("auto-dense.rank1.jsonl", "epoch")
start = events("auto-dense.jsonl", "start")[0]["config"]
assert start["dp_compress"] == '"updates"' or start["dp_compress"] == "updates", start
assert start["dp_wire_dtype"] in ('"sign"', "sign"), start
assert [x["loss"] for x in dense0] == [x["loss"] for x in dense1] and dense0[-1]["dp_compression"] > 5, dense0[-1]
print("OK: --dp-keep 1 == uncompressed 2x1; DCT-DP %.0fx, DCT-MP %.1fx payload compression" %
      (dct[-1]["dp_compression"], mp[-1]["mp_compression"]))
print("OK: 3 ranks == 1 rank, 2x2 grid ~ 1 rank, 3-rank checkpoint resumes on 2 and 1 ranks with the same P@1")
PY
