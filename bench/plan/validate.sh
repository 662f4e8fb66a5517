#!/usr/bin/env bash
# The cost model (`frugal plan`) against measured runs (issue 14, item 5): calibrate on 1-rank runs,
# then measure every 2- and 4-rank grid of model-parallel sparse, DCT-DP and the dense data-parallel
# baseline at 100 Mbit and 1 Gbit (`frugal launch --bandwidth`: a network namespace per rank, tc tbf
# on every link) and print the model's prediction error for each, then its projections.
#
#   sudo bash bench/plan/validate.sh         # root: network namespaces
#
# Data and network: bench/cluster's (100k features x 100k labels, hidden 128, batch 128, LSH), the
# first FRUGAL_BENCH_STEPS (40) steps of each run; the dense baseline runs 4 (each of its steps moves
# ~100 MB per rank), its calibration too: the LSH tables rebuild on a schedule that starts often, so
# a calibration and the runs it predicts must cover the same steps. Grids: 1xN model-parallel, Nx1
# DCT-DP (--dp-keep 0.02), 1xN DCT-MP (--mp-keep 0.1), 2x2 (4 ranks) and the dense baseline.
# Every rank runs 1 thread; the ranks of one measured run share this machine's cores, which the
# model is told (--host-cores), so a 4-rank run on 2 cores is predicted at half a core per rank.
# Environment: FRUGAL_BENCH_OUT (.bench/plan), FRUGAL_BENCH_STEPS (40), FRUGAL_BENCH_LINKS
# ("100mbit 1gbit"), FRUGAL_BENCH_RANKS ("2 4"), FRUGAL_BENCH_FRUGAL (build/apps/frugal).
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=${FRUGAL_BENCH_FRUGAL:-build/apps/frugal}
OUT=${FRUGAL_BENCH_OUT:-.bench/plan}
STEPS=${FRUGAL_BENCH_STEPS:-40}
LINKS=${FRUGAL_BENCH_LINKS:-100mbit 1gbit}
RANKS=${FRUGAL_BENCH_RANKS:-2 4}
DATA=.bench/xmc100k
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }
[ "$(id -u)" -eq 0 ] || { echo "bench/plan/validate.sh needs root (network namespaces and tc for --bandwidth)" >&2; exit 1; }
mkdir -p "$OUT"
if [ ! -f "$DATA/train.txt" ]; then
  say "generating $DATA"
  run "$FRUGAL" data synth-xmc --features 100000 --labels 100000 --train 50000 --test 5000 --nnz 75 \
    --labels-per-point 5 --seed 1 --out "$DATA"
fi
# A 1000-point test set: evaluation is not what is timed, and the dense one scores 100k labels a point.
if [ ! -f "$DATA/test1000.txt" ]; then
  { echo "1000 100000 100000"; sed -n '2,1001p' "$DATA/test.txt"; } > "$DATA/test1000.txt"
fi
COMMON=(train --train "$DATA/train.txt" --test "$DATA/test1000.txt" --hidden 128 --batch 128 --lr 1e-3 --seed 1
        --quiet --sampler lsh --epochs 1)
{ date -u; echo "commit $(git rev-parse --short HEAD)"; echo "cores $(nproc)"; echo "load before: $(cat /proc/loadavg)"; } \
  | tee "$OUT/env.txt"

say "calibration: 1 rank, sparse at 1 and 2 threads, dense at 1 thread, each twice (plan takes the faster)"
calib=()
for rep in 1 2; do
  run "$FRUGAL" "${COMMON[@]}" --threads 1 --max-steps "$STEPS" --metrics "$OUT/calib-sparse-t1-r$rep.jsonl"
  run "$FRUGAL" "${COMMON[@]}" --threads 2 --max-steps "$STEPS" --metrics "$OUT/calib-sparse-t2-r$rep.jsonl"
  run "$FRUGAL" "${COMMON[@]}" --threads 1 --max-steps 4 --parallel data --metrics "$OUT/calib-dense-t1-r$rep.jsonl"
  calib+=(--metrics "$OUT/calib-sparse-t1-r$rep.jsonl" --metrics "$OUT/calib-sparse-t2-r$rep.jsonl"
          --metrics "$OUT/calib-dense-t1-r$rep.jsonl")
done

validate=()
for bw in $LINKS; do
  for n in $RANKS; do
    say "$n ranks at $bw"
    run "$FRUGAL" launch -n "$n" --bandwidth "$bw" -- "$FRUGAL" "${COMMON[@]}" --threads 1 --max-steps "$STEPS" \
      --grid "1x$n" --metrics "$OUT/mp-1x$n-$bw.jsonl"
    validate+=(--validate "$OUT/mp-1x$n-$bw.jsonl@$bw")
    run "$FRUGAL" launch -n "$n" --bandwidth "$bw" -- "$FRUGAL" "${COMMON[@]}" --threads 1 --max-steps "$STEPS" \
      --grid "${n}x1" --dp-keep 0.02 --metrics "$OUT/dct-${n}x1-$bw.jsonl"
    validate+=(--validate "$OUT/dct-${n}x1-$bw.jsonl@$bw")
    if [ "$n" -eq 4 ]; then
      run "$FRUGAL" launch -n 4 --bandwidth "$bw" -- "$FRUGAL" "${COMMON[@]}" --threads 1 --max-steps "$STEPS" \
        --grid 2x2 --compress off --metrics "$OUT/mp-2x2-$bw.jsonl"
      validate+=(--validate "$OUT/mp-2x2-$bw.jsonl@$bw")
    fi
    run "$FRUGAL" launch -n "$n" --bandwidth "$bw" -- "$FRUGAL" "${COMMON[@]}" --threads 1 --max-steps "$STEPS" \
      --grid "1x$n" --mp-keep 0.1 --metrics "$OUT/dctmp-1x$n-$bw.jsonl"
    validate+=(--validate "$OUT/dctmp-1x$n-$bw.jsonl@$bw")
    run "$FRUGAL" launch -n "$n" --bandwidth "$bw" -- "$FRUGAL" "${COMMON[@]}" --threads 1 --max-steps 4 \
      --parallel data --metrics "$OUT/dense-$n-$bw.jsonl"
    validate+=(--validate "$OUT/dense-$n-$bw.jsonl@$bw")
  done
done
echo "load after: $(cat /proc/loadavg)" | tee -a "$OUT/env.txt"

say "the model against the measured runs, then its projections"
run "$FRUGAL" plan "${calib[@]}" --host-cores "$(nproc)" "${validate[@]}" \
  --nodes 2,4,8,16,32,64 --cores 2,4,16 --link 100mbit,1gbit,10gbit --json "$OUT/plan.json" | tee "$OUT/plan.txt"
