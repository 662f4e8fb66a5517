#!/usr/bin/env bash
# How the default step scales with threads (issue 64, item 3): frugal train's defaults on a
# 1M-label set (hidden 128, batch 128), two "epochs" of STEPS steps each (the first warms up: tables
# over random weights, allocations; the second is measured) at --threads 1 and at --threads 2, one
# after the other; the machine's streaming and gather bandwidth at 1 and 2 threads (`frugal bench
# roofline`); then thread_model.py: the speed-up per phase, each phase's serial fraction, and the
# prediction for 4, 8 and 16 cores with its assumptions.
#
#   bash bench/single_node/threads.sh [BUILD_DIR] [OUT_DIR]
#
# Environment: LABELS (1000000), STEPS (150), DATA (.bench/sampled-data/l1m: bench/single_node/sampled.sh's
# 1M-label set, generated here when absent), FLAGS (extra flags for both runs, e.g. "--precision bf16").
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=${2:-.bench/threads}
STEPS=${STEPS:-150}
DATA=${DATA:-.bench/sampled-data/l1m}
LABELS=${LABELS:-1000000}
FRUGAL="$BUILD/apps/frugal"
read -r -a EXTRA <<< "${FLAGS:-}"
[ -x "$FRUGAL" ] || { echo "no $FRUGAL: build first (bash apps/dev.sh build)" >&2; exit 1; }
mkdir -p "$OUT"
run() { echo "+ $*" >&2; "$@"; }
if [ ! -f "$DATA/test.txt" ]; then
  rm -rf "$DATA.tmp"
  run "$FRUGAL" data synth-xmc --features 100000 --labels "$LABELS" --train 30000 --test 2000 --nnz 75 \
    --labels-per-point 5 --seed 1 --out "$DATA.tmp" > /dev/null
  mv "$DATA.tmp" "$DATA"
fi
{
  echo "commit $(git rev-parse --short HEAD), $(nproc) cores"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -m1 'model name' /proc/cpuinfo || true
} | tee "$OUT/env.txt"
for t in 1 2; do
  run "$FRUGAL" bench roofline --threads "$t" --json "$OUT/machine-t$t.json" > "$OUT/machine-t$t.txt"
  rm -f "$OUT/t$t.jsonl"
  run "$FRUGAL" train --train "$DATA/train.txt" --test "$DATA/test.txt" --hidden 128 --batch 128 --epochs 2 \
    --max-steps "$STEPS" --valid-fraction 0 --threads "$t" --seed 1 --quiet "${EXTRA[@]}" --metrics "$OUT/t$t.jsonl" \
    > "$OUT/t$t.log" 2>&1
  tail -n 2 "$OUT/t$t.log"
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
python3 bench/single_node/thread_model.py "$OUT" | tee "$OUT/summary.md"
