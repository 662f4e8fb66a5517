#!/usr/bin/env bash
# DLRM's validation split and best epoch (issue 65), side by side on synth-ctr sets (default 100k
# train / 20k test) for SEEDS (1 2 3): the previous defaults (no split, 3 epochs, constant rate, the
# last epoch) and the defaults with early stopping off for EPOCHS (10) epochs under each of SCHEDULES
# ("cosine constant": --lr-schedule auto is cosine where early stopping is on, so with it off the
# schedule is named), which validation.py replays under every patience (early stopping only cuts a
# run short). Writes $OUT/*.jsonl and prints the table (load average before and after).
# Usage: bash bench/recsys/validation.sh [BUILD_DIR]   (OUT=..., SEEDS="1 2 3", EPOCHS=10,
#        TRAIN=100000, TEST=20000, THREADS=1, SCHEDULES="cosine constant", BEFORE=0 to skip the
#        previous defaults' runs when they are there)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
FRUGAL="$BUILD/apps/frugal"
OUT=${OUT:-/tmp/frugal-recsys-valid}
SEEDS=${SEEDS:-1 2 3}
EPOCHS=${EPOCHS:-10}
TRAIN=${TRAIN:-100000}
TEST=${TEST:-20000}
THREADS=${THREADS:-1}
mkdir -p "$OUT"
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
[ -x "$FRUGAL" ] || { echo "no $FRUGAL: build first (bash apps/dev.sh build)" >&2; exit 1; }
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
say "commit $(git rev-parse --short HEAD), $(nproc) cores, load $LOAD_BEFORE"
source bench/recsys/synth_set.sh
for seed in $SEEDS; do
  d=$(synth_ctr_set "$seed")
  common=(train --model dlrm --format criteo --train "$d/train.tsv" --test "$d/test.tsv" --threads "$THREADS"
          --seed "$seed" --quiet)
  if [ "${BEFORE:-1}" = 1 ] || [ ! -f "$OUT/before_s$seed.jsonl" ]; then
    say "seed $seed: the previous defaults (no split, 3 epochs)"
    rm -f "$OUT/before_s$seed.jsonl"
    "$FRUGAL" "${common[@]}" --valid-fraction 0 --metrics "$OUT/before_s$seed.jsonl" > /dev/null
  fi
  for schedule in ${SCHEDULES:-cosine constant}; do
    say "seed $seed: the defaults, $EPOCHS epochs, --lr-schedule $schedule, no early stopping"
    rm -f "$OUT/${schedule}_s$seed.jsonl"
    "$FRUGAL" "${common[@]}" --epochs "$EPOCHS" --early-stopping 0 --lr-schedule "$schedule" \
      --metrics "$OUT/${schedule}_s$seed.jsonl" > /dev/null
  done
done
say "load average after: $(cut -d' ' -f1-3 /proc/loadavg) (before: $LOAD_BEFORE)"
python3 bench/recsys/validation.py "$OUT"
