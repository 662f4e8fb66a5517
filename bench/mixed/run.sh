#!/usr/bin/env bash
# A heterogeneous model-parallel group on one machine (issue 12's mixed GPU + CPU group, with the
# speeds of a CPU machine): rank 0 runs on a core of its own at full speed, ranks 1..N-1 on the other
# core, each held to QUOTA% of a core by a cgroup CPU quota. For each quota it runs, one after the
# other on the same data and flags:
#   alone   rank 0 by itself (1 rank: the fastest member alone)
#   equal   the group with equal slices
#   auto    the group with --slice-weights auto (calibrated in epoch 1: shares by measured
#           throughput, a rank too slow to help left out)
# and reports epoch 2's train samples/s (after the calibration), the per-rank compute times per step
# (rank_step_seconds_max / _min) and the calibrated shares. Targets (issue 12): auto not slower than
# the fastest member alone by more than 10%; the members' step times within 20% of each other.
#
#   sudo bash bench/mixed/run.sh            # root: cgroups for the CPU quotas
# Environment: MIXED_RANKS (3), MIXED_QUOTAS ("100 25 2": % of a core per slow rank), MIXED_STEPS
# (150 per epoch), MIXED_REPEATS (3: alone and auto alternate, this many times each), MIXED_OUT
# (.bench/mixed).
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=build/apps/frugal
OUT=${MIXED_OUT:-.bench/mixed}
RANKS=${MIXED_RANKS:-3}
QUOTAS=${MIXED_QUOTAS:-100 25 2}
STEPS=${MIXED_STEPS:-150}
REPEATS=${MIXED_REPEATS:-3}
DATA=.bench/xmc20k
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }
[ "$(id -u)" -eq 0 ] || { echo "bench/mixed needs root (cgroup CPU quotas)" >&2; exit 1; }
mkdir -p "$OUT"
bash apps/dev.sh build
if [ ! -f "$DATA/train.txt" ]; then
  say "generating $DATA"
  run $FRUGAL data synth-xmc --features 20000 --labels 20000 --train 40000 --test 2000 --nnz 40 \
    --labels-per-point 3 --seed 1 --out "$DATA"
fi
source bench/mixed/cgroup.sh
mixed_cgroups_make "$RANKS" || { echo "bench/mixed: cannot make cgroups with a CPU quota here" >&2; exit 1; }
trap mixed_cgroups_remove EXIT
COMMON=(train --train "$DATA/train.txt" --test "$DATA/test.txt" --hidden 128 --batch 128 --seed 1 --threads 1
        --quiet --epochs 2 --max-steps "$STEPS")
{ date -u +%FT%TZ; git rev-parse --short HEAD; uptime; nproc; } > "$OUT/env.txt"
for q in $QUOTAS; do
  mixed_quota "$q"
  say "slow ranks at $q% of a core"
  run $FRUGAL launch -n "$RANKS" -- bench/mixed/throttle.sh $FRUGAL "${COMMON[@]}" --metrics "$OUT/q$q-equal.jsonl"
  # alone and auto alternate, REPEATS times each: this machine's speed drifts between runs.
  for i in $(seq 1 "$REPEATS"); do
    run $FRUGAL launch -n 1 -- bench/mixed/throttle.sh $FRUGAL "${COMMON[@]}" --metrics "$OUT/q$q-alone-$i.jsonl"
    run $FRUGAL launch -n "$RANKS" -- bench/mixed/throttle.sh $FRUGAL "${COMMON[@]}" --slice-weights auto \
      --calibration-warmup 5 --calibration-steps 20 --metrics "$OUT/q$q-auto-$i.jsonl"
  done
done
uptime >> "$OUT/env.txt"
python3 bench/mixed/summarize.py "$OUT" "$REPEATS" $QUOTAS | tee "$OUT/summary.md"
