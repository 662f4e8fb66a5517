#!/usr/bin/env bash
# The checks every trainer makes (issue 62), from the command line:
#  - a diverged run (NaN loss) stops naming the epoch and step, exits non-zero and keeps the last
#    good checkpoint; --on-divergence skip-batch drops such batches and counts them; the modes that
#    cannot skip say so;
#  - the files beside a checkpoint belong to its run: another run's label_counts.bin or
#    label_centroids.bin of the same shape is refused naming it, or used with a warning under
#    --accept-unchecked-checkpoint; a run that fails leaves them as they were;
#  - the pipeline trainer records --infer in its checkpoints and applies --memory-limit;
#  - what each trainer does not implement is refused by name, and what does not apply is named;
#  - writes that fail are errors: predictions, --json and data files into /dev/full.
# Usage: test_run_checks.sh FRUGAL
set -euo pipefail
F=$(realpath "$1")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../shell_helpers.sh"
cd "$TMP"
T=(--threads 1 --hidden 16 --quiet)
run "$F" data synth-xmc --features 300 --labels 30 --train 800 --test 100 --seed 1 --out d
run "$F" data synth-xmc --features 300 --labels 30 --train 800 --test 100 --seed 2 --out e

# --- Divergence ---
# A training file with one feature value of 3e38 (warned, not refused) diverges at --lr 10: the loss
# becomes NaN within a few steps.
python3 -c "
import sys
lines = open('d/train.txt').read().split('\n')
lines[300] += ' 5:3e38'
open('big.txt', 'w').write('\n'.join(lines))"
B=(--train big.txt --test d/test.txt --lr 10)
run "$F" train --train d/train.txt --test d/test.txt --epochs 1 "${T[@]}" --checkpoint good
cp good/manifest.json good.manifest
fails_with "epoch 1, step " "$F" train "${B[@]}" --epochs 2 "${T[@]}" --checkpoint good
grep -q "training diverged" fail.log && grep -q "last good checkpoint is kept" fail.log && grep -q "lr 10" fail.log ||
  { cat fail.log; echo "the divergence error lacks its cause"; exit 1; }
cmp -s good/manifest.json good.manifest || { echo "a diverged run replaced the last good checkpoint"; exit 1; }
run "$F" evaluate --model good --test d/test.txt   # its files beside it are still its own
grep -q "psp@5" last.log || { cat last.log; echo "the good checkpoint lost its label counts"; exit 1; }
# The pipeline trainer (only its last stage sees the loss) stops at the epoch's end, saving nothing.
fails_with "training diverged" "$F" train "${B[@]}" --epochs 1 "${T[@]}" --pipeline 1 --checkpoint pbad
[ ! -e pbad/manifest.json ] || { echo "a diverged pipeline run saved its model"; exit 1; }
# The gradient norm too (with --clip-norm every rank sees the same norm).
fails_with "the gradient norm is NaN" "$F" train "${B[@]}" --epochs 2 "${T[@]}" --clip-norm 1
# skip-batch: the batch whose loss or gradients are not finite (the one with the 3e38 value) is
# dropped and counted, and the run goes on.
run "$F" train "${B[@]}" --epochs 1 "${T[@]}" --on-divergence skip-batch --metrics skip.jsonl
grep -q '"skipped_batches":[1-9]' skip.jsonl || { cat skip.jsonl; echo "no skipped batch counted"; exit 1; }
grep -q "batch(es) whose loss or gradients were not finite were skipped" last.log || { cat last.log; exit 1; }
run "$F" train --train d/train.txt --test d/test.txt --epochs 1 "${T[@]}" --on-divergence skip-batch --metrics ok.jsonl
grep -q '"skipped_batches":0' ok.jsonl || { cat ok.jsonl; echo "a healthy skip-batch run skipped batches"; exit 1; }
fails_with "--on-divergence skip-batch is not implemented for pipeline stages" \
  "$F" train --train d/train.txt --test d/test.txt --epochs 1 "${T[@]}" --pipeline 1 --on-divergence skip-batch
fails_with "--model dlrm: --on-divergence skip-batch" "$F" train --model dlrm --train d/train.txt --test d/test.txt \
  --on-divergence skip-batch
fails_with "--on-divergence: bad not in {stop,skip-batch}" "$F" train --train d/train.txt --test d/test.txt --on-divergence bad

# --- What each trainer implements: one table (train/run/trainer_support.cpp) ---
# The pipeline scores a validation split and keeps its best epoch as every trainer does.
run "$F" train --train d/train.txt --test d/test.txt --epochs 2 "${T[@]}" --pipeline 1 --valid-fraction 0.2 \
  --checkpoint pipe-ck --metrics pipe.jsonl
grep -q '"valid_p@1"' pipe.jsonl && grep -q '"best_epoch"' pipe.jsonl || { cat pipe.jsonl; echo "no validation in the pipeline's records"; exit 1; }
test -f pipe-ck/best/manifest.json || { ls -R pipe-ck; echo "the pipeline kept no best epoch"; exit 1; }
fails_with "--pipeline: --valid-every (scoring the validation set within an epoch) is not implemented for pipeline stages" \
  "$F" train --train d/train.txt --test d/test.txt --epochs 1 "${T[@]}" --pipeline 1 --valid-fraction 0.2 --valid-every 3
fails_with "--pipeline: --sparse-updates catchup is not implemented for pipeline stages" \
  "$F" train --train d/train.txt --test d/test.txt --epochs 1 "${T[@]}" --pipeline 1 --sparse-updates catchup
fails_with "--model dlrm: --grid does not apply" "$F" train --model dlrm --train d/train.txt --test d/test.txt --grid 1x1
run "$F" data synth-ctr --train 400 --test 100 --seed 1 --out c
run "$F" train --model dlrm --train c/train.tsv --test c/test.tsv --epochs 1 --threads 1 --quiet --clip-norm 1 \
  --warmup-steps 5 --bucket-capacity 64
grep -qF "note: --bucket-capacity do(es) not apply to --model dlrm: ignored" last.log ||
  { cat last.log; echo "the options DLRM does not have are not named"; exit 1; }
# DLRM's trainer clips and schedules as the XMC trainer does: a tiny --clip-norm scales every step,
# and the run's record says so; a cosine schedule with warm-up trains to other weights than constant.
run "$F" train --model dlrm --train c/train.tsv --test c/test.tsv --epochs 2 --threads 1 --quiet --clip-norm 1e-4 \
  --metrics clip.jsonl
python3 - clip.jsonl <<'PYEOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
epochs = [l for l in lines if l.get("event") == "epoch"]
start = [l for l in lines if l.get("event") == "start"][0]
assert start["config"]["clip_norm"] > 0, start["config"]
assert len(epochs) == 2 and all(e["clipped_fraction"] == 1 and e["grad_norm"] > 1e-4 for e in epochs), epochs
PYEOF
run "$F" train --model dlrm --train c/train.tsv --test c/test.tsv --epochs 2 --threads 1 --quiet --metrics const.jsonl
run "$F" train --model dlrm --train c/train.tsv --test c/test.tsv --epochs 2 --threads 1 --quiet --metrics cos.jsonl \
  --lr-schedule cosine --warmup-steps 2
python3 - const.jsonl cos.jsonl clip.jsonl <<'PYEOF'
import json, sys
loss = [[json.loads(l)["loss"] for l in open(f) if json.loads(l).get("event") == "epoch"] for f in sys.argv[1:]]
assert loss[0] != loss[1] and loss[0] != loss[2], loss
PYEOF

# --- Files beside a checkpoint ---
run "$F" train --train d/train.txt --test d/test.txt --epochs 1 "${T[@]}" --checkpoint a --infer ensemble
run "$F" train --train e/train.txt --test e/test.txt --epochs 1 "${T[@]}" --checkpoint b --infer ensemble
grep -q '"member_checksums"' a/manifest.json || { echo "the manifest lists no member files"; exit 1; }
run "$F" evaluate --model a --test d/test.txt
for member in label_counts.bin label_centroids.bin; do
  rm -rf mixed && cp -r a mixed && cp "b/$member" "mixed/$member"
  fails_with "mixed/$member: its checksum" "$F" evaluate --model mixed --test d/test.txt
  run "$F" evaluate --model mixed --test d/test.txt --accept-unchecked-checkpoint
  grep -q "used unchecked" last.log || { cat last.log; echo "no warning for an unchecked $member"; exit 1; }
done
# A member file the manifest does not list (dropped into the folder) is refused too.
rm -rf extra && cp -r good extra && cp a/label_centroids.bin extra/
fails_with "extra/label_centroids.bin: manifest.json does not list it" "$F" evaluate --model extra --test d/test.txt --infer ensemble
# A new run into a folder drops the earlier run's members it does not write (its manifest lists only its own).
run "$F" train --train d/train.txt --test d/test.txt --epochs 1 "${T[@]}" --checkpoint a
[ ! -e a/label_centroids.bin ] || { echo "an earlier run's label_centroids.bin stayed beside a new checkpoint"; exit 1; }

# --- The pipeline trainer: --infer recorded, --memory-limit applied ---
run "$F" train --train d/train.txt --test d/test.txt --epochs 1 "${T[@]}" --pipeline 1 --checkpoint p --infer ensemble
grep -q '"infer"' p/manifest.json || { echo "the pipeline checkpoint does not record --infer"; exit 1; }
run "$F" evaluate --model p --test d/test.txt
grep -q "ensemble inference" last.log || { cat last.log; echo "evaluate did not infer as the pipeline run did"; exit 1; }
fails_with "--memory-limit" "$F" train --train d/train.txt --test d/test.txt --epochs 1 --threads 1 --quiet \
  --hidden 4096 --pipeline 1 --memory-limit 1

# --- Writes that fail ---
fails_with "standard output: write failed" sh -c "'$F' predict --model good --input d/test.txt > /dev/full"
fails_with "/dev/full: write failed" "$F" predict --model good --input d/test.txt --out /dev/full
fails_with "standard output: write failed" sh -c "'$F' evaluate --model good --test d/test.txt --json > /dev/full"
fails_with "/dev/full: write failed" "$F" data shuffle d/train.txt /dev/full
[ -c /dev/full ] || { echo "/dev/full was replaced"; exit 1; }
fails_with "is a folder" "$F" predict --model good --input d/test.txt --out d
run "$F" predict --model good --input d/test.txt --out /dev/null
echo "OK: divergence stops or skips, member files belong to their run, the pipeline records --infer, failed writes fail"
