#!/usr/bin/env bash
# --compress auto on sets that are still learning (issue 42): long-tail synthetic XMC (50k features
# x 50k labels, 20k training points, ~5 points per label that occurs and 60% of the labels unseen;
# 3 epochs end near P@1 0.83, far from saturated), seeds 1-3, and one set of another generator
# setting (30k x 40k, 2 labels and 30 nonzeros a point, zipf 1.3, noise 0.4, seed 7).
# For each: DCT-DP on 2 replicas (--grid 2x1) uncompressed and --compress auto (also at the energy
# targets in FRUGAL_BENCH_ENERGIES), and DCT-MP on 2 model ranks (--grid 1x2) uncompressed and
# --compress auto (and --mp-mass in FRUGAL_BENCH_MASSES); the recommended fixed keep (--dp-keep
# 0.01) once for comparison. Loopback, 1 thread a rank: P@1 and bytes do not depend on the link.
# Prints one line per run: name, P@1 per epoch, compression (against a dense all-reduce for DP,
# against --mp-keep 1 for MP) and bytes per sample of the last epoch, DP back-offs, train seconds.
#   bash bench/dct/adaptive.sh            # ~30 min on 2 cores (+ ~30 min for FRUGAL_BENCH_MORE=1)
# FRUGAL_BENCH_MORE=1 adds (second session): the other generator at seeds 8 and 9, one tau
# (--dp-select global, energy 0.9) and the row floor (--dp-select floor) on both generators, GCIDE
# min5 (DP and MP, 4 epochs, seeds 1-3), Fashion-MNIST (DP and MP, 2 epochs, seed 1) and the
# recommendation model on synth-ctr (AUC, seeds 1-3).
# Environment: FRUGAL_BENCH_OUT (.bench/dct-adaptive), FRUGAL_BENCH_SEEDS ("1 2 3"),
#   FRUGAL_BENCH_ENERGIES ("0.6"), FRUGAL_BENCH_MASSES ("0.6 0.8"), FRUGAL_BENCH_EPOCHS (3),
#   FRUGAL_BENCH_FRUGAL (build/apps/frugal).
set -euo pipefail
FRUGAL=${FRUGAL_BENCH_FRUGAL:-build/apps/frugal}
OUT=${FRUGAL_BENCH_OUT:-.bench/dct-adaptive}
EPOCHS=${FRUGAL_BENCH_EPOCHS:-3}
mkdir -p "$OUT"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/summary.txt"

data() {  # data SET: makes .../SET/{train,test}.txt when missing
  local d="$OUT/$1"
  [ -f "$d/train.txt" ] || [ -f "$d/train.tsv" ] && return
  case "$1" in
    lt*) "$FRUGAL" data synth-xmc --features 50000 --labels 50000 --train 20000 --test 2000 --seed "${1#lt}" --out "$d" ;;
    alt*) "$FRUGAL" data synth-xmc --features 30000 --labels 40000 --train 20000 --test 2000 --nnz 30 \
            --labels-per-point 2 --zipf 1.3 --noise 0.4 --seed "${1#alt}" --out "$d" ;;
    gcide) "$FRUGAL" data gcide --out "$d" --seed 1 --min-label-points 5 ;;
    ctr*) "$FRUGAL" data synth-ctr --seed "${1#ctr}" --out "$d" ;;
    fmnist) return ;;
  esac > /dev/null
}

run() {  # run NAME SET SEED GRID FLAGS...
  local name=$1 set=$2 seed=$3 grid=$4
  shift 4
  data "$set"
  local d=(--train "$OUT/$set/train.txt" --test "$OUT/$set/test.txt")
  case "$set" in
    gcide) d+=(--hidden 512 --sampler exact --lr 0.005) ;;
    ctr*) d=(--model dlrm --train "$OUT/$set/train.tsv" --test "$OUT/$set/test.tsv") ;;
    fmnist) d=(--format idx --train /usr/share/datasets/fashion-mnist/train --test /usr/share/datasets/fashion-mnist/t10k
               --layers 1024,1024 --lr 1e-3) ;;
  esac
  [ -n "$grid" ] && d+=(--grid "$grid")
  "$FRUGAL" launch -n 2 -- "$FRUGAL" train "${d[@]}" --epochs "${EPOCHS_OF:-$EPOCHS}" --seed "$seed" --threads 1 \
    --metrics "$OUT/$name.jsonl" "$@" > "$OUT/$name.log" 2>&1 \
    || { echo "$name FAILED (see $OUT/$name.log)" | tee -a "$OUT/summary.txt"; return; }
  python3 - "$OUT/$name.jsonl" "$name" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
ep = [e for e in map(json.loads, open(sys.argv[1])) if e.get("event") == "epoch" and e.get("rank", 0) == 0]
last = ep[-1]
metric = "auc" if "auc" in last else "p@1"
dp = f"dp {last['dp_compression']:.1f}x {last.get('dp_bytes_sent_per_sample', 0):.0f} B" if last.get("dp_compression") else ""
mp = f"mp {last['mp_compression']:.1f}x {last['mp_bytes_sent_per_sample']:.0f} B" if last.get("mp_compression") else ""
print(sys.argv[2], metric, " ".join(f"{e[metric]:.4f}" for e in ep), dp, mp,
      f"backoffs {last['dp_auto']['backoffs']}" if "dp_auto" in last else "", f"{sum(e['train_seconds'] for e in ep):.0f} s")
PY
}

for seed in ${FRUGAL_BENCH_SEEDS:-1 2 3}; do
  set=lt$seed
  run "dp-off-$set" "$set" "$seed" 2x1
  run "dp-auto-$set" "$set" "$seed" 2x1 --compress auto
  for e in ${FRUGAL_BENCH_ENERGIES:-0.6}; do run "dp-auto$e-$set" "$set" "$seed" 2x1 --compress auto --compress-energy "$e"; done
  run "mp-off-$set" "$set" "$seed" 1x2
  run "mp-auto-$set" "$set" "$seed" 1x2 --compress auto
  for m in ${FRUGAL_BENCH_MASSES:-0.6 0.8}; do run "mp-mass$m-$set" "$set" "$seed" 1x2 --mp-mass "$m"; done
done
run dp-keep0.01-lt1 lt1 1 2x1 --dp-keep 0.01
run mp-off512-lt1 lt1 1 1x2 --hidden 512
run mp-auto512-lt1 lt1 1 1x2 --hidden 512 --compress auto
run dp-off-alt7 alt7 7 2x1
run dp-auto-alt7 alt7 7 2x1 --compress auto
run mp-off-alt7 alt7 7 1x2
run mp-auto-alt7 alt7 7 1x2 --compress auto
if [ "${FRUGAL_BENCH_MORE:-0}" = 1 ]; then
  for s in 7 8 9; do
    run "dp-off-alt$s" "alt$s" "$s" 2x1 --compress off
    run "dp-auto-alt$s" "alt$s" "$s" 2x1 --compress auto
    run "dp-global-alt$s" "alt$s" "$s" 2x1 --compress auto --dp-select global
    run "dp-floor-alt$s" "alt$s" "$s" 2x1 --compress auto --dp-select floor
  done
  for s in 1 2 3; do
    run "dp-global-lt$s" "lt$s" "$s" 2x1 --compress auto --dp-select global
    run "dp-floor-lt$s" "lt$s" "$s" 2x1 --compress auto --dp-select floor
    for mode in dp:2x1 mp:1x2; do
      EPOCHS_OF=4 run "${mode%%:*}-off-gcide-s$s" gcide "$s" "${mode#*:}" --compress off
      EPOCHS_OF=4 run "${mode%%:*}-auto-gcide-s$s" gcide "$s" "${mode#*:}" --compress auto
    done
    run "dlrm-off-ctr$s" "ctr$s" "$s" "" --compress off
    run "dlrm-auto-ctr$s" "ctr$s" "$s" "" --compress auto
  done
  for mode in dp:2x1 mp:1x2; do
    EPOCHS_OF=2 run "${mode%%:*}-off-fmnist" fmnist 1 "${mode#*:}" --compress off
    EPOCHS_OF=2 run "${mode%%:*}-auto-fmnist" fmnist 1 "${mode#*:}" --compress auto
  done
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
