#!/usr/bin/env bash
# Ranks must train on the same data: `frugal launch -n 2` where rank 1 reads a shuffled copy of the
# training file (same header, same size), or a copy with one digit changed (the whole file is hashed),
# fails, and the error names the training file's setting
# (train_fingerprint); the same file on both ranks trains; a checkpoint resumes on the shuffled
# copy (the fingerprints are compared at rendezvous, not on --resume); and `frugal predict` under
# launch with another input on rank 1 fails naming input_fingerprint (the same input predicts).
set -euo pipefail
FRUGAL=$(realpath "$1")  # absolute: predict ranks below run in other folders
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 500 --labels 100 --train 400 --test 50 --nnz 10 --labels-per-point 2 \
  --seed 4 --out "$TMP/data" > /dev/null
{ head -n 1 "$TMP/data/train.txt"; tail -n +2 "$TMP/data/train.txt" | sort -R --random-source=<(yes); } \
  > "$TMP/shuffled.txt"
cmp -s "$TMP/data/train.txt" "$TMP/shuffled.txt" && { echo "the shuffle left the file as it was"; exit 1; }
COMMON=(--test "$TMP/data/test.txt" --epochs 1 --threads 1 --quiet --sampler exact --hidden 8 --batch 32 --seed 3)
# Rank 1 gets the shuffled copy.
if "$FRUGAL" launch -n 2 -- bash -c \
    'f=$1; [ "$FRUGAL_RANK" = 1 ] && f=$2; shift 2; exec "$0" train --train "$f" "$@"' \
    "$FRUGAL" "$TMP/data/train.txt" "$TMP/shuffled.txt" "${COMMON[@]}" > "$TMP/mismatch.log" 2>&1; then
  cat "$TMP/mismatch.log"; echo "ranks with different training data trained anyway"; exit 1
fi
grep -q "train_fingerprint" "$TMP/mismatch.log" || { cat "$TMP/mismatch.log"; echo "the error does not name train_fingerprint"; exit 1; }
echo "OK: a shuffled training file on rank 1 is refused: $(grep -m1 train_fingerprint "$TMP/mismatch.log")"
# One digit changed in the middle of the file (same size, same header): the whole file is hashed,
# not sampled, so this copy is other data too.
python3 - "$TMP/data/train.txt" "$TMP/digit.txt" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = len(b) // 2
while not (b[i:i + 1].isdigit() and b[i - 1:i] == b":"):
    i += 1
b[i] = ord("7") if b[i] != ord("7") else ord("3")
open(sys.argv[2], "wb").write(bytes(b))
PY
if "$FRUGAL" launch -n 2 -- bash -c \
    'f=$1; [ "$FRUGAL_RANK" = 1 ] && f=$2; shift 2; exec "$0" train --train "$f" "$@"' \
    "$FRUGAL" "$TMP/data/train.txt" "$TMP/digit.txt" "${COMMON[@]}" > "$TMP/digit.log" 2>&1; then
  cat "$TMP/digit.log"; echo "ranks with one digit of difference in their training data trained anyway"; exit 1
fi
grep -q "train_fingerprint" "$TMP/digit.log" || { cat "$TMP/digit.log"; echo "the error does not name train_fingerprint"; exit 1; }
echo "OK: a training file with one digit changed on rank 1 is refused"
# The same file on both ranks trains.
run "$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$TMP/data/train.txt" "${COMMON[@]}" --checkpoint "$TMP/ckpt"
# Resuming on the shuffled copy (same data, other order) is not refused for its fingerprint.
run "$FRUGAL" train --train "$TMP/shuffled.txt" "${COMMON[@]}" --resume "$TMP/ckpt"
echo "OK: the same file on both ranks trains; a checkpoint resumes on a shuffled copy"
# frugal predict: ranks must read the same input.
run "$FRUGAL" launch -n 2 -- "$FRUGAL" predict --model "$TMP/ckpt" --input "$TMP/data/train.txt" --threads 1 \
  --out "$TMP/pred.txt"
# The input path is in the run configuration too, so both ranks name in.txt, in different folders.
mkdir "$TMP/r0" "$TMP/r1"
cp "$TMP/data/train.txt" "$TMP/r0/in.txt"
cp "$TMP/shuffled.txt" "$TMP/r1/in.txt"
if "$FRUGAL" launch -n 2 -- bash -c \
    'cd "$1"; [ "$FRUGAL_RANK" = 1 ] && cd "$2"; shift 2; exec "$0" predict --input in.txt "$@"' \
    "$FRUGAL" "$TMP/r0" "$TMP/r1" --model "$TMP/ckpt" --threads 1 --out "$TMP/pred2.txt" \
    > "$TMP/predict-mismatch.log" 2>&1; then
  cat "$TMP/predict-mismatch.log"; echo "predict ranks with different inputs ran anyway"; exit 1
fi
grep -q "input_fingerprint" "$TMP/predict-mismatch.log" || { cat "$TMP/predict-mismatch.log"; echo "the error does not name input_fingerprint"; exit 1; }
echo "OK: predict under launch refuses another input on rank 1"
