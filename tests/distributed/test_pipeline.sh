#!/usr/bin/env bash
# `frugal train --pipeline S` from the command line (train/pipeline_trainer.h, train/run/pipeline_run.h):
# 2 stages with one micro-batch train the bits of 1 rank; 2 stages of 4 micro-batches the bits of
# --pipeline 1 with the same micro-batches (gradient accumulation); the epoch record gives the
# boundary bytes, and DCT-MP on the boundary cuts them; a checkpoint of 2 stages resumes on 2 stages
# (the uninterrupted run's bits), on 1 rank without a pipeline and on 3 stages, and `frugal evaluate`
# reads it; 2 replicas of a 2-stage pipeline (--grid 2x1x2) train, and 2 stages sliced over 2 ranks each
# (--grid 1x2x2) save 2 slice files that 1 rank resumes; bad combinations are refused by name.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 3000 --labels 800 --train 2400 --test 300 --nnz 20 --labels-per-point 3 \
  --seed 5 --out "$TMP/data" > /dev/null
T=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --layers 48,32,32 --threads 1 --seed 2 --quiet)
L2=("$FRUGAL" launch -n 2 --)
L3=("$FRUGAL" launch -n 3 --)
L4=("$FRUGAL" launch -n 4 --)
run "$FRUGAL" "${T[@]}" --epochs 2 --metrics "$TMP/one.jsonl"
run "${L2[@]}" "$FRUGAL" "${T[@]}" --epochs 2 --pipeline 2 --micro-batches 1 --metrics "$TMP/p2.jsonl"
run "$FRUGAL" "${T[@]}" --epochs 2 --pipeline 1 --micro-batches 4 --metrics "$TMP/acc.jsonl"
# --clip-norm: the whole model's norm (the stages' squares summed: train/gradient_clipping.h), so 2
# stages clip as 1 rank does.
run "$FRUGAL" "${T[@]}" --epochs 2 --clip-norm 0.3 --metrics "$TMP/clip1.jsonl"
run "${L2[@]}" "$FRUGAL" "${T[@]}" --epochs 2 --pipeline 2 --micro-batches 1 --clip-norm 0.3 --metrics "$TMP/clip2.jsonl"
run "${L2[@]}" "$FRUGAL" "${T[@]}" --epochs 2 --pipeline 2 --micro-batches 4 --metrics "$TMP/p2m4.jsonl"
run "${L2[@]}" "$FRUGAL" "${T[@]}" --epochs 2 --pipeline 2 --mp-keep 0.1 --metrics "$TMP/p2k.jsonl"
# Checkpoints across stage counts: 1 epoch on 2 stages, the second on 2 stages, 1 rank, 3 stages.
run "${L2[@]}" "$FRUGAL" "${T[@]}" --epochs 1 --pipeline 2 --micro-batches 1 --checkpoint "$TMP/ck"
run "${L2[@]}" "$FRUGAL" "${T[@]}" --epochs 2 --pipeline 2 --micro-batches 1 --resume "$TMP/ck" --metrics "$TMP/r2.jsonl"
run "$FRUGAL" "${T[@]}" --epochs 2 --resume "$TMP/ck" --metrics "$TMP/r1.jsonl"
# The storage is not compared on resume (parameter files hold f32): f32 stages resume the defaults' checkpoint.
run "${L2[@]}" "$FRUGAL" "${T[@]}" --epochs 2 --pipeline 2 --micro-batches 1 --precision f32 --resume "$TMP/ck"
run "${L3[@]}" "$FRUGAL" "${T[@]}" --epochs 2 --pipeline 3 --micro-batches 1 --resume "$TMP/ck" --metrics "$TMP/r3.jsonl"
run "$FRUGAL" evaluate --model "$TMP/ck" --test "$TMP/data/test.txt" --json
cp "$TMP/last.log" "$TMP/evaluate.json"
# Replicas of the pipeline: 2 x 2 stages on 4 ranks; 2 stages each sliced over 2 ranks, its checkpoint
# (2 slice files) resumed on 1 rank.
run "${L4[@]}" "$FRUGAL" "${T[@]}" --epochs 1 --grid 2x1x2 --metrics "$TMP/grid.jsonl"
run "${L4[@]}" "$FRUGAL" "${T[@]}" --epochs 1 --grid 1x2x2 --checkpoint "$TMP/cks" --metrics "$TMP/sliced.jsonl"
run "$FRUGAL" "${T[@]}" --epochs 2 --resume "$TMP/cks" --metrics "$TMP/rs.jsonl"
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
def epochs(name):
    return [r for r in map(json.loads, open(f"{d}/{name}")) if r["event"] == "epoch"]
key = lambda r: (r["loss"], r["p@1"], r["p@5"], r["steps"])
one, p2 = epochs("one.jsonl"), epochs("p2.jsonl")
assert [key(r) for r in one] == [key(r) for r in p2], (key(one[-1]), key(p2[-1]))
assert [key(r) for r in epochs("acc.jsonl")] == [key(r) for r in epochs("p2m4.jsonl")]
clip1, clip2 = epochs("clip1.jsonl"), epochs("clip2.jsonl")
assert clip1[-1]["clipped_fraction"] > 0 and clip1[-1]["loss"] != one[-1]["loss"], clip1[-1]
for a, b in zip(clip1, clip2):
    assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]) and abs(a["p@1"] - b["p@1"]) <= 0.01, (a, b)
    assert abs(a["grad_norm"] - b["grad_norm"]) <= 1e-5 * a["grad_norm"], (a["grad_norm"], b["grad_norm"])
    assert abs(a["clipped_fraction"] - b["clipped_fraction"]) <= 0.01, (a, b)
full = p2[-1]["pipeline_bytes_sent_per_sample"]
# One activation row forward and its gradient back, 32 floats each (plus a 12-byte header a message).
assert 256 <= full <= 300, full
assert p2[-1]["pipeline"]["stages"] == 2 and p2[-1]["pipeline"]["split"] == [3, 1], p2[-1]["pipeline"]
compressed = epochs("p2k.jsonl")[-1]
assert compressed["pipeline_bytes_sent_per_sample"] < full / 8, compressed["pipeline_bytes_sent_per_sample"]
assert compressed["mp_compression"] > 8, compressed["mp_compression"]
for name in ("r2.jsonl", "r1.jsonl", "r3.jsonl"):
    r = epochs(name)[-1]
    assert r["epoch"] == 2 and r["steps"] == one[-1]["steps"], (name, r["steps"])
    if name != "r3.jsonl":  # 2 stages and 1 rank continue the bits of the uninterrupted run
        assert key(r) == key(one[-1]), (name, key(r), key(one[-1]))
ev = json.loads(open(f"{d}/evaluate.json").read().strip().splitlines()[-1])
ep1 = epochs("p2.jsonl")[0]
assert abs(ev["p@1"] - ep1["p@1"]) < 1e-12, (ev["p@1"], ep1["p@1"])
g = epochs("grid.jsonl")[-1]
assert g["pipeline"]["replicas"] == 2 and g["dp_bytes_sent_per_sample"] > 0, g
sl = epochs("sliced.jsonl")[-1]
assert sl["pipeline"]["slices"] == 2 and sl["pipeline_bytes_sent_per_sample"] > 0, sl["pipeline"]
assert epochs("rs.jsonl")[-1]["epoch"] == 2
print("ok: 2 stages = 1 rank; micro-batches = accumulation; boundary", full, "B/sample,",
      compressed["pipeline_bytes_sent_per_sample"], "with --mp-keep 0.1; checkpoints across 1, 2, 3 stages")
PY
fails_with "--pipeline 5: the network has 4 layers" "$FRUGAL" launch -n 5 -- "$FRUGAL" "${T[@]}" --epochs 1 --pipeline 5
fails_with "--micro-batches applies to a pipeline: give --pipeline S too" "$FRUGAL" "${T[@]}" --micro-batches 2
fails_with "--stage-split gives 3 layers in all; the network has 4" \
  "${L2[@]}" "$FRUGAL" "${T[@]}" --epochs 1 --pipeline 2 --stage-split 1,2
fails_with "--pipeline 2 needs a multiple of 2 ranks" "${L3[@]}" "$FRUGAL" "${T[@]}" --epochs 1 --pipeline 2
echo "all pipeline checks passed"
