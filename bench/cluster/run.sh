#!/usr/bin/env bash
# Cluster benchmark (issue 4): model-parallel sparse training (LSH softmax sliced over the ranks)
# against the data-parallel dense baseline (whole model on every rank, dense all-reduce of every
# gradient each step: the Horovod scheme), with 2 and 4 ranks on emulated 100 Mbit and 1 Gbit links
# (`frugal launch --bandwidth`: one network namespace per rank, tc tbf on every link), in one run.
#
#   sudo bash bench/cluster/run.sh          # needs root for the network namespaces
#
# 1. Throughput and bytes on the wire: each configuration trains FRUGAL_BENCH_STEPS steps (the
#    dense baseline fewer at 100 Mbit, where one step moves ~100 MB per rank) on the 100k x 100k
#    synthetic set, batch 128, hidden 128.
# 2. Quality: P@1 of both schemes after the same epochs, 2 ranks. P@1 does not depend on link
#    speed (the arithmetic is the same), so these runs use unthrottled loopback to finish in time.
# 3. Memory: the largest model that trains on 4 ranks here: hidden 1024, 1M labels (~1.1 billion
#    parameters, Adam state included), its per-rank peak RSS and samples/s.
# Environment: FRUGAL_BENCH_STEPS (40), FRUGAL_BENCH_EPOCHS (3), FRUGAL_BENCH_OUT (.bench/cluster),
# FRUGAL_BENCH_PARTS ("throughput quality memory").
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=build/apps/frugal
OUT=${FRUGAL_BENCH_OUT:-.bench/cluster}
STEPS=${FRUGAL_BENCH_STEPS:-40}
EPOCHS=${FRUGAL_BENCH_EPOCHS:-3}
PARTS=${FRUGAL_BENCH_PARTS:-throughput quality memory}
DATA=.bench/xmc100k
BIG=.bench/xmc1m
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }
wants() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
[ "$(id -u)" -eq 0 ] || { echo "bench/cluster needs root (network namespaces and tc for --bandwidth)" >&2; exit 1; }
mkdir -p "$OUT"
bash apps/dev.sh build
if [ ! -f "$DATA/train.txt" ]; then
  say "generating $DATA"
  run $FRUGAL data synth-xmc --features 100000 --labels 100000 --train 50000 --test 5000 --nnz 75 \
    --labels-per-point 5 --seed 1 --out "$DATA"
fi
COMMON=(train --train "$DATA/train.txt" --test "$DATA/test.txt" --hidden 128 --batch 128 --lr 1e-3 --seed 1
        --threads 1 --quiet --sampler lsh)
uptime > "$OUT/env.txt"; nproc >> "$OUT/env.txt"

if wants throughput; then
  for n in 2 4; do
    for bw in 100mbit 1gbit; do
      say "throughput: $n ranks at $bw"
      run $FRUGAL launch -n "$n" --bandwidth "$bw" -- $FRUGAL "${COMMON[@]}" --epochs 1 --max-steps "$STEPS" \
        --grid "1x$n" --metrics "$OUT/mp-n$n-$bw.jsonl"
      # One dense step moves ~2(n-1)/n x 103 MB per rank: keep the 100 Mbit runs short.
      dsteps=$([ "$bw" = 100mbit ] && echo 4 || echo 12)
      run $FRUGAL launch -n "$n" --bandwidth "$bw" -- $FRUGAL "${COMMON[@]}" --epochs 1 --max-steps "$dsteps" \
        --parallel data --metrics "$OUT/dp-n$n-$bw.jsonl"
    done
  done
fi

if wants quality; then
  say "quality: P@1 after $EPOCHS epochs, 2 ranks, model-parallel sparse vs data-parallel dense (loopback)"
  run $FRUGAL launch -n 2 -- $FRUGAL "${COMMON[@]}" --epochs "$EPOCHS" --grid 1x2 --metrics "$OUT/quality-mp.jsonl"
  run $FRUGAL launch -n 2 -- $FRUGAL "${COMMON[@]}" --epochs "$EPOCHS" --parallel data --metrics "$OUT/quality-dp.jsonl"
fi

if wants memory; then
  if [ ! -f "$BIG/train.txt" ]; then
    say "generating $BIG (1M labels)"
    run $FRUGAL data synth-xmc --features 100000 --labels 1000000 --train 20000 --test 500 --nnz 75 \
      --labels-per-point 5 --seed 1 --out "$BIG"
  fi
  say "memory: hidden 1024 x 1M labels on 4 ranks"
  run $FRUGAL launch -n 4 -- $FRUGAL train --train "$BIG/train.txt" --test "$BIG/test.txt" --hidden 1024 \
    --batch 128 --lr 1e-3 --seed 1 --threads 1 --quiet --sampler lsh --epochs 1 --max-steps "$STEPS" \
    --metrics "$OUT/memory-n4.jsonl"
fi
/usr/bin/python3 bench/cluster/summarize.py "$OUT" | tee "$OUT/summary.md"
