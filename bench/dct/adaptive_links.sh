#!/usr/bin/env bash
# --compress auto and the default --compress link on emulated slow links (issue 42, part 2): time to
# the uncompressed run's final P@1 on the long-tail synthetic XMC set of bench/dct/adaptive.sh.
#   DCT-MP (--grid 1xM, M = 2 and 4): whole 3-epoch runs through the link, off against auto, seeds
#     in FRUGAL_BENCH_SEEDS; time to accuracy from the metrics (train + eval seconds per epoch).
#   DCT-DP (--grid Nx1, N = 2 and 4): an uncompressed epoch at 100 Mbit takes ~1,000 s on 2 ranks,
#     so the link times FRUGAL_BENCH_STEPS steps from the start of a run (auto's include its fall
#     from keep 1, its dearest steps) and P@1 per epoch comes from loopback runs of the same seed
#     and grid (P@1 does not depend on the link); time to accuracy = the steps to reach the
#     uncompressed final P@1 (whole epochs) at the measured pace: off's over its STEPS, auto's first
#     STEPS as timed (its keep falling from 1) and the rest at its pace over steps STEPS..100. The default
#     (--compress link) is run too, and its choice recorded.
# Root (network namespaces and tc for `frugal launch --bandwidth`). ~40 min on 2 cores.
#   sudo bash bench/dct/adaptive_links.sh
# Environment: FRUGAL_BENCH_OUT (.bench/dct-links), FRUGAL_BENCH_SEEDS ("1 2 3"), FRUGAL_BENCH_STEPS (30),
#   FRUGAL_BENCH_LINKS ("100mbit 1gbit"), FRUGAL_BENCH_DP_RANKS ("2 4"), FRUGAL_BENCH_FRUGAL (build/apps/frugal).
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=${FRUGAL_BENCH_FRUGAL:-build/apps/frugal}
OUT=${FRUGAL_BENCH_OUT:-.bench/dct-links}
STEPS=${FRUGAL_BENCH_STEPS:-30}
[ "$(id -u)" -eq 0 ] || { echo "bench/dct/adaptive_links.sh needs root (network namespaces and tc for --bandwidth)" >&2; exit 1; }
mkdir -p "$OUT"
echo "$(date -u +%FT%TZ) start: commit $(git rev-parse --short HEAD), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
data() {
  [ -f "$OUT/lt$1/train.txt" ] || "$FRUGAL" data synth-xmc --features 50000 --labels 50000 --train 20000 --test 2000 \
    --seed "$1" --out "$OUT/lt$1" > /dev/null
}
# one NAME SEED RANKS LINK FLAGS...: a run (LINK a rate, or loopback), skipped when its metrics exist.
one() {
  local name=$1 seed=$2 n=$3 link=$4
  shift 4
  [ -f "$OUT/$name.done" ] && return
  data "$seed"
  local bw=()
  [ "$link" = loopback ] || bw=(--bandwidth "$link")
  echo "+ $name: ranks $n, $link, $*"
  "$FRUGAL" launch -n "$n" "${bw[@]}" -- "$FRUGAL" train --train "$OUT/lt$seed/train.txt" --test "$OUT/lt$seed/test.txt" \
    --seed "$seed" --threads 1 --quiet --metrics "$OUT/$name.jsonl" "$@" > "$OUT/$name.log" 2>&1
  touch "$OUT/$name.done"
}
for link in ${FRUGAL_BENCH_LINKS:-100mbit 1gbit}; do
  for m in 2 4; do
    for seed in ${FRUGAL_BENCH_SEEDS:-1 2 3}; do
      [ "$m" = 4 ] && [ "$seed" != 1 ] && continue  # 4 ranks on 2 cores: seed 1 only
      one "mp$m-off-s$seed-$link" "$seed" "$m" "$link" --grid "1x$m" --epochs 3 --compress off
      one "mp$m-auto-s$seed-$link" "$seed" "$m" "$link" --grid "1x$m" --epochs 3 --compress auto
    done
  done
  for n in ${FRUGAL_BENCH_DP_RANKS:-2 4}; do
    one "dp$n-off-time-$link" 1 "$n" "$link" --grid "${n}x1" --epochs 1 --max-steps "$STEPS" --compress off
    one "dp$n-auto-time-$link" 1 "$n" "$link" --grid "${n}x1" --epochs 1 --max-steps "$STEPS" --compress auto
    # 100 steps: the difference from the first STEPS is auto's pace once its keep has settled.
    one "dp$n-auto-time100-$link" 1 "$n" "$link" --grid "${n}x1" --epochs 1 --max-steps 100 --compress auto
    one "dp$n-link-time-$link" 1 "$n" "$link" --grid "${n}x1" --epochs 1 --max-steps "$STEPS"
  done
done
for n in ${FRUGAL_BENCH_DP_RANKS:-2 4}; do
  one "dp$n-off-loopback" 1 "$n" loopback --grid "${n}x1" --epochs 3 --compress off
  one "dp$n-auto-loopback" 1 "$n" loopback --grid "${n}x1" --epochs 3 --compress auto
done
echo "$(date -u +%FT%TZ) end: load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
python3 bench/dct/adaptive_links.py "$OUT" | tee "$OUT/summary.md"
