#!/usr/bin/env bash
# What `frugal train` reads from the training set before it builds the network (train/run/data_defaults.h):
#  1. few-shot labels (a typical label occurrence with <= 8 training points) turn on the centroid
#     start, lr 0.001 and a wider hidden layer; the log says so in one line, and the run config
#     records the resolved values;
#  2. a flag the user gave is kept (and the rate belongs to the centroid start);
#  3. data whose labels have many points keeps today's defaults, and says so;
#  4. --resume keeps the checkpoint's width and rate whatever the data says;
#  5. --hidden takes auto or a width, and names the bad text otherwise;
#  6. --infer auto: the ensemble on few-shot labels, its centroids kept with the checkpoint, and
#     `frugal evaluate` scoring the checkpoint as the training run did; exact otherwise; the
#     ensemble's flags range-checked and refused where they do nothing;
#  7. --hidden auto's model-state estimate (train/run/state_estimate.h) is within 10% of the
#     model_state_bytes a run reports, for several optimizers and precisions, and a --memory-limit too
#     small for the width the data asks for narrows it, saying why.
# Usage: test_data_defaults.sh FRUGAL
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
# Few-shot: 400 labels drawn uniformly for 300 points (median support 2).
"$FRUGAL" data synth-xmc --features 300 --labels 400 --train 300 --test 50 --nnz 10 --labels-per-point 1 --zipf 0 \
  --seed 1 --out "$TMP/few" > /dev/null
# Many points a label: 10 labels for 400 points.
"$FRUGAL" data synth-xmc --features 300 --labels 10 --train 400 --test 50 --nnz 10 --labels-per-point 2 --seed 1 \
  --out "$TMP/many" > /dev/null
"$FRUGAL" data stats "$TMP/few/train.txt" | grep -cF "label support        median 2 training points" > /dev/null \
  || { "$FRUGAL" data stats "$TMP/few/train.txt"; exit 1; }
T=(--epochs 1 --threads 1 --tables 4 --max-steps 2)
config() {  # config METRICS KEY: the start event's config value (floats to 6 digits)
  python3 -c 'import json,sys; v=json.loads(open(sys.argv[1]).readline())["config"].get(sys.argv[2], "-")
print(f"{v:.6g}" if isinstance(v, float) else v)' "$1" "$2"
}
expect() {  # expect METRICS KEY VALUE
  local got; got=$(config "$1" "$2")
  [ "$got" = "$3" ] || { echo "$1: config $2 = $got, expected $3"; exit 1; }
}

# 1. Few-shot, every setting auto.
run "$FRUGAL" train --train "$TMP/few/train.txt" --test "$TMP/few/test.txt" "${T[@]}" --metrics "$TMP/auto.jsonl" \
  --checkpoint "$TMP/ckpt"
grep -qF "few-shot labels: median 2 training points behind a label occurrence" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
grep -qF -- "-> centroid start, lr 0.001, hidden 1024 (a step ~8x that of hidden 128; model state ~" "$TMP/last.log" \
  || { cat "$TMP/last.log"; exit 1; }
grep -qF "output rows set to label centroids" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
expect "$TMP/auto.jsonl" hidden 1024
expect "$TMP/auto.jsonl" output_init centroid
expect "$TMP/auto.jsonl" lr 0.001
expect "$TMP/auto.jsonl" infer ensemble
grep -qF -- "multiply-adds), --infer ensemble (the network blended with the label centroids)" \
  "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
for f in label_centroids.bin nearest_points.bin; do [ -f "$TMP/ckpt/$f" ] || { echo "no $f in the checkpoint"; exit 1; }; done
# --quiet keeps the run quiet.
"$FRUGAL" train --train "$TMP/few/train.txt" --test "$TMP/few/test.txt" "${T[@]}" --quiet > "$TMP/quiet.log" 2>&1
! grep -q "few-shot" "$TMP/quiet.log" || { cat "$TMP/quiet.log"; exit 1; }

# 2. What the user gave stays.
run "$FRUGAL" train --train "$TMP/few/train.txt" --test "$TMP/few/test.txt" "${T[@]}" --hidden 16 --metrics "$TMP/h16.jsonl"
grep -qF -- "-> centroid start, lr 0.001" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
expect "$TMP/h16.jsonl" hidden 16
run "$FRUGAL" train --train "$TMP/few/train.txt" --test "$TMP/few/test.txt" "${T[@]}" --hidden 16 --output-init random \
  --metrics "$TMP/random.jsonl"
expect "$TMP/random.jsonl" output_init -
expect "$TMP/random.jsonl" lr 0.01  # row-wise Adam's own rate: the low one is the centroid start's
run "$FRUGAL" train --train "$TMP/few/train.txt" --test "$TMP/few/test.txt" "${T[@]}" --hidden 16 --lr 0.05 \
  --metrics "$TMP/lr.jsonl"
expect "$TMP/lr.jsonl" lr 0.05
expect "$TMP/lr.jsonl" output_init centroid

# 3. Labels with many points: today's defaults.
run "$FRUGAL" train --train "$TMP/many/train.txt" --test "$TMP/many/test.txt" "${T[@]}" --metrics "$TMP/many.jsonl"
grep -qF "(not few-shot: the defaults; hidden 128: model state ~" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
! grep -qF "output rows set to label centroids" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
expect "$TMP/many.jsonl" hidden 128
expect "$TMP/many.jsonl" output_init -
expect "$TMP/many.jsonl" lr 0.01
expect "$TMP/many.jsonl" infer exact

# 4. --resume: the checkpoint's width and rate (saved with --hidden 16 --lr 0.02).
run "$FRUGAL" train --train "$TMP/few/train.txt" --test "$TMP/few/test.txt" "${T[@]}" --hidden 16 --lr 0.02 \
  --infer exact --checkpoint "$TMP/h16ckpt"
run "$FRUGAL" train --train "$TMP/few/train.txt" --test "$TMP/few/test.txt" --epochs 2 --threads 1 --tables 4 \
  --max-steps 2 --resume "$TMP/h16ckpt" --metrics "$TMP/resumed.jsonl"
grep -qF "(resumed: the checkpoint's hidden 16, lr 0.02)" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
expect "$TMP/resumed.jsonl" hidden 16
expect "$TMP/resumed.jsonl" lr 0.02
expect "$TMP/resumed.jsonl" infer exact  # as the checkpoint was trained to infer

# 5. --hidden's values.
for bad in 0 -5 x 1e3 2000000; do
  fails_with "--hidden '$bad': expected auto or a width from 1 to 1048576" \
    "$FRUGAL" train --train "$TMP/few/train.txt" --test "$TMP/few/test.txt" --hidden "$bad"
done
# 6. The ensemble at evaluation: `frugal evaluate` gives the training run's last P@1 by default.
last_p1() { python3 -c 'import json,sys
print("%.6f" % [json.loads(l) for l in open(sys.argv[1]) if "\"p@1\"" in l][-1]["p@1"])' "$1"; }
want=$(last_p1 "$TMP/auto.jsonl")
got=$("$FRUGAL" evaluate --model "$TMP/ckpt" --test "$TMP/few/test.txt" --threads 1 --json 2>/dev/null \
  | python3 -c 'import json,sys; print("%.6f" % json.load(sys.stdin)["p@1"])')
[ "$got" = "$want" ] || { echo "evaluate P@1 $got, the training run's last $want"; exit 1; }
"$FRUGAL" evaluate --model "$TMP/ckpt" --test "$TMP/few/test.txt" --threads 1 --infer exact > /dev/null 2>&1
"$FRUGAL" predict --model "$TMP/ckpt" --input "$TMP/few/test.txt" --threads 1 --top-k 3 --out "$TMP/pred.txt" 2> "$TMP/pred.err"
[ "$(wc -l < "$TMP/pred.txt")" = 50 ] || { echo "predict wrote $(wc -l < "$TMP/pred.txt") lines"; exit 1; }
fails_with "holds no label centroids (label_centroids.bin)" \
  "$FRUGAL" evaluate --model "$TMP/h16ckpt" --test "$TMP/few/test.txt" --threads 1 --infer ensemble
fails_with "--ensemble-weight 2: expected a share from 0" \
  "$FRUGAL" train --train "$TMP/few/train.txt" --test "$TMP/few/test.txt" "${T[@]}" --hidden 16 --ensemble-weight 2
fails_with "--ensemble-weight is for --infer ensemble (this run infers exact)" \
  "$FRUGAL" train --train "$TMP/many/train.txt" --test "$TMP/many/test.txt" "${T[@]}" --ensemble-weight 0.3
fails_with "--ensemble-temperature 0: expected a number above 0" \
  "$FRUGAL" evaluate --model "$TMP/ckpt" --test "$TMP/few/test.txt" --ensemble-temperature 0

# 7. The estimate against the state the run reports (100k labels: ~0.2 GiB, read to 0.01 GiB).
"$FRUGAL" data synth-xmc --features 20000 --labels 100000 --train 400 --test 20 --nnz 10 --labels-per-point 2 \
  --seed 1 --out "$TMP/wide" > /dev/null
for flags in "" "--precision bf16" "--optimizer adam" "--optimizer rowwise-adagrad" "--sampler exact"; do
  # shellcheck disable=SC2086  # the flags are words
  run "$FRUGAL" train --train "$TMP/wide/train.txt" --test "$TMP/wide/test.txt" --epochs 1 --threads 1 --max-steps 1 \
    --valid-fraction 0 --metrics "$TMP/wide.jsonl" $flags
  python3 - "$TMP/last.log" "$TMP/wide.jsonl" "$flags" <<'PY'
import json, re, sys
m = re.search(r"hidden (\d+)\S* (?:\(a step [^;]*; )?model state ~([0-9.]+) GiB", open(sys.argv[1]).read())
assert m, "no model-state estimate in the log:\n" + open(sys.argv[1]).read()
est = float(m.group(2)) * 2**30
got = [json.loads(l) for l in open(sys.argv[2]) if '"epoch"' in l][-1]["model_state_bytes"]["total"]
assert abs(est - got) <= 0.1 * got, f"{sys.argv[3] or 'defaults'}: estimated {est:.4g} bytes, the run holds {got:.4g}"
print(f"{sys.argv[3] or 'defaults'}: hidden {m.group(1)}, estimated {est / 2**30:.2f} GiB, held {got / 2**30:.3f} GiB")
PY
  rm -f "$TMP/wide.jsonl"
done
# A memory limit below twice hidden 1024's state (the width this few-shot set asks for): the widest
# narrower one within half of it, and the log says why.
run "$FRUGAL" train --train "$TMP/wide/train.txt" --test "$TMP/wide/test.txt" "${T[@]}" --memory-limit 600 \
  --metrics "$TMP/narrow.jsonl"
grep -qF "narrower than 1024: hidden 1024's model state" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
grep -qF -- "would take more than 50% of the 0.59 GiB --memory-limit 600 MiB allows" "$TMP/last.log" \
  || { cat "$TMP/last.log"; exit 1; }
python3 - "$TMP/last.log" "$(config "$TMP/narrow.jsonl" hidden)" <<'PY'
import re, sys
m = re.search(r"hidden (\d+) \(a step [^;]*; model state ~([0-9.]+) GiB", open(sys.argv[1]).read())
assert m and m.group(1) == sys.argv[2] and int(m.group(1)) < 1024, (m and m.groups(), sys.argv[2])
assert float(m.group(2)) <= 0.5 * 600 / 1024, m.group(2)
PY
echo "data defaults: OK"
