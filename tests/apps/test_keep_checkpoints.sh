#!/usr/bin/env bash
# `frugal train --keep-checkpoints K` and `--resume`'s fallback, end to end:
#  1. K = 2 keeps the two newest epoch folders, K = 1 (as before K existed) the newest only;
#  2. a flipped byte in the newest slice file: --resume says which checkpoint it skips (naming the
#     file) and which one it resumes from, and the run continues from the previous epoch to the same
#     final metrics as an uninterrupted run (training is deterministic);
#  3. with K = 1 the same damage leaves nothing intact: --resume fails naming the file;
#  4. --keep-checkpoints 0 is refused naming the flag.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 1000 --labels 200 --train 1200 --test 150 --nnz 15 --labels-per-point 3 \
  --seed 4 --out "$TMP/data" > /dev/null
D=$TMP/data
TRAIN=(train --train "$D/train.txt" --test "$D/test.txt" --threads 1 --quiet --hidden 24 --batch 64 --tables 10
       --seed 3)
run "$FRUGAL" "${TRAIN[@]}" --epochs 4 --metrics "$TMP/whole.jsonl"
run "$FRUGAL" "${TRAIN[@]}" --epochs 3 --checkpoint "$TMP/k2"
run "$FRUGAL" "${TRAIN[@]}" --epochs 3 --checkpoint "$TMP/k1" --keep-checkpoints 1
[ "$(ls -d "$TMP"/k2/epoch-* | wc -l)" = 2 ] || { ls "$TMP/k2"; echo "--keep-checkpoints 2 kept another count"; exit 1; }
[ "$(ls -d "$TMP"/k1/epoch-* | wc -l)" = 1 ] || { ls "$TMP/k1"; echo "--keep-checkpoints 1 kept another count"; exit 1; }
ls -d "$TMP"/k2/epoch-2-step-* "$TMP"/k2/epoch-3-step-* > /dev/null

# Damage the newest checkpoint's slice file: one flipped byte in the middle.
flip() {
  python3 - "$1" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x01; open(p, "wb").write(b)
PY
}
newest=$(basename "$(ls -d "$TMP"/k2/epoch-3-step-*)")
flip "$TMP/k2/$newest/slice0.ckpt"
run "$FRUGAL" "${TRAIN[@]}" --epochs 4 --resume "$TMP/k2" --checkpoint "$TMP/k2" --metrics "$TMP/resumed.jsonl"
grep -qF "skipping the checkpoint of $TMP/k2/manifest.json: $TMP/k2/$newest/slice0.ckpt: checksum mismatch" \
  "$TMP/last.log" || { cat "$TMP/last.log"; echo "the skipped checkpoint is not named"; exit 1; }
grep -qF "resuming from the older checkpoint $TMP/k2/epoch-2-step-" "$TMP/last.log" ||
  { cat "$TMP/last.log"; echo "the checkpoint resumed from is not named"; exit 1; }
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def events(name, kind):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == kind]
res = events("resumed.jsonl", "resume")
assert len(res) == 1 and res[0]["epoch"] == 2, res
assert len(res[0]["skipped_checkpoints"]) == 1 and "checksum mismatch" in res[0]["skipped_checkpoints"][0]["reason"], res
whole, resumed = events("whole.jsonl", "epoch"), events("resumed.jsonl", "epoch")
assert [r["epoch"] for r in resumed] == [3, 4], resumed
for a, b in zip(whole[2:], resumed):
    for key in ("loss", "p@1", "p@3", "p@5"):
        assert a[key] == b[key], (key, a, b)
print("OK: resumed past a damaged checkpoint from epoch 2 to the uninterrupted run's metrics")
PY
# The run above saved epochs 3 and 4 again: two folders, the newest intact.
[ "$(ls -d "$TMP"/k2/epoch-* | wc -l)" = 2 ]

flip "$TMP/k1/$newest/slice0.ckpt"
fails_with "$TMP/k1/$newest/slice0.ckpt: checksum mismatch" "$FRUGAL" "${TRAIN[@]}" --epochs 4 --resume "$TMP/k1"
grep -qF "no intact checkpoint" "$TMP/fail.log" || { cat "$TMP/fail.log"; exit 1; }
fails_with "--keep-checkpoints" "$FRUGAL" "${TRAIN[@]}" --checkpoint "$TMP/k0" --keep-checkpoints 0
echo "OK: --keep-checkpoints 2 and 1, --resume falls back past a flipped byte, and fails when nothing is intact"
