#!/usr/bin/env bash
# Pipeline parallelism (issue 47, items 1-3 and 6): the planner against measured plans, and compressed
# stage boundaries against uncompressed ones, in one run.
#
#   sudo bash bench/pipeline/run.sh          # root: `frugal launch --bandwidth` (network namespaces, tc)
#
# plans    --layers 1024,1024,1024 on the 100k x 100k synthetic XMC set (batch 128, LSH, --threads 1 a
#          rank), FRUGAL_BENCH_STEPS (30) steps: 1-rank calibrations (1 and 2 threads, and batch 32 for
#          the micro-batches, twice each), then `frugal plan --one-host` (ranks sharing this machine's
#          cores, as the measured runs do) for 2 and 4 ranks at 100 Mbit, then every plan of 4 ranks
#          measured at 100 Mbit
#          (`frugal launch --bandwidth 100mbit`): data-parallel (4x1, the touched rows), DCT-DP (4x1,
#          --dp-keep 0.02), model-parallel (1x4), the hybrids 2x2 (touched rows; DCT-DP), the pipeline 1x1x4 and the hybrid
#          pipeline 2x1x2 (each pipeline with the split and micro-batches the planner names), and at 2
#          ranks DP, MP and the pipeline 1x1x2. `frugal plan --validate` on all of them; the summary
#          says whether the planner's pick is within 10% of the best measured and >= 1.5x the worst.
# quality  2 stages (--pipeline 2, --layers 256,256), bench/dct/explore.sh's still-learning set (noise
#          0.8), 3 epochs, seeds 1 2 3, loopback: the boundary uncompressed, and DCT-MP at --mp-keep
#          0.1 and 0.05 with the pipeline's defaults (one-byte values, a warm-up over the first two
#          epochs, error feedback), 0.1 without error feedback, 0.1 warming up over one epoch, and 0.1
#          with neither. P@1 and the boundary's
#          bytes per sample (pipeline_bytes_sent_per_sample, the mean over the epochs: the warm-up
#          included), mean and spread over the seeds.
# Writes OUT/summary.json, OUT/plans.png and OUT/compression.png (gnuplot), OUT/plan.txt.
# The data-parallel runs (4x1, 2x1) move tens of MB a step at 100 Mbit: FRUGAL_BENCH_DP_STEPS (4) steps.
# Environment: OUT (.bench/pipeline), PARTS ("plans quality"), FRUGAL_BENCH_STEPS (30), SEEDS ("1 2 3"),
#   EPOCHS (3), FRUGAL (build/apps/frugal). A rerun skips runs whose metrics are complete.
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=${FRUGAL:-build/apps/frugal}
OUT=${OUT:-.bench/pipeline}
PARTS=${PARTS:-plans quality}
STEPS=${FRUGAL_BENCH_STEPS:-30}
DP_STEPS=${FRUGAL_BENCH_DP_STEPS:-4}
SEEDS=${SEEDS:-1 2 3}
EPOCHS=${EPOCHS:-3}
PY=/usr/bin/python3
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
wants() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$OUT"
{ date -u; echo "commit $(git rev-parse --short HEAD)"; echo "cores $(nproc)"; echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"; } \
  | tee "$OUT/env.txt"
# done_run FILE N: FILE has N epoch records (a rerun skips it).
done_run() { [ -f "$1" ] && [ "$(grep -c '"event":"epoch"' "$1" || true)" -ge "$2" ]; }
train() {  # train NAME EPOCHS [launch flags --] train flags...
  local name=$1 epochs=$2
  shift 2
  if done_run "$OUT/$name.jsonl" "$epochs"; then echo "= $name (done)"; return; fi
  rm -f "$OUT/$name".jsonl "$OUT/$name".rank*.jsonl
  echo "+ $name: $*"
  "$@" --metrics "$OUT/$name.jsonl" > "$OUT/$name.log" 2>&1 || { tail -5 "$OUT/$name.log"; echo "FAILED: $name"; exit 1; }
  grep -E "^(\[0\] )?(epoch|  pipeline|  wire)" "$OUT/$name.log" | sed 's/^/    /' || true
}

if wants plans; then
  [ "$(id -u)" -eq 0 ] || { echo "bench/pipeline: the plans part needs root (--bandwidth)" >&2; exit 1; }
  DATA=.bench/xmc100k
  if [ ! -f "$DATA/train.txt" ]; then
    say "generating $DATA"
    "$FRUGAL" data synth-xmc --features 100000 --labels 100000 --train 50000 --test 5000 --nnz 75 \
      --labels-per-point 5 --seed 1 --out "$DATA.tmp" > /dev/null
    rm -rf "$DATA"; mv "$DATA.tmp" "$DATA"
  fi
  # 200 test points: evaluation is not what is timed (and scores 100k labels a point).
  [ -f "$DATA/test200.txt" ] || { echo "200 100000 100000"; sed -n '2,201p' "$DATA/test.txt"; } > "$DATA/test200.txt"
  T=(train --train "$DATA/train.txt" --test "$DATA/test200.txt" --layers 1024,1024,1024 --lr 1e-3
     --sampler lsh --seed 1 --quiet --epochs 1)
  # T_STEPS: the batch and the timed steps of every run but the data-parallel ones and the batch-32
  # calibration (below)
  T_STEPS=(--batch 128 --max-steps "$STEPS")
  say "calibration: 1 rank, 1 and 2 threads, and batch 32 at 1 thread (micro-batches), twice each"
  cal=()
  for rep in 1 2; do
    for t in 1 2; do
      train "calib-t$t-r$rep" 1 "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads "$t"
      cal+=(--metrics "$OUT/calib-t$t-r$rep.jsonl")
    done
    train "calib-b32-r$rep" 1 "$FRUGAL" "${T[@]}" --max-steps $((STEPS * 4)) --threads 1 --batch 32
    cal+=(--metrics "$OUT/calib-b32-r$rep.jsonl")
  done
  say "the planner's plans for 4 and 2 nodes at 100 Mbit (before any multi-rank run)"
  "$FRUGAL" plan "${cal[@]}" --nodes 2,4 --one-host --link 100mbit --host-cores "$(nproc)" \
    --json "$OUT/plan-before.json" > "$OUT/plan-before.txt"
  cat "$OUT/plan-before.txt"
  # split_of GRID: the planner's --stage-split and micro-batches of the pipeline GRID.
  split_of() {
    "$PY" - "$OUT/plan-before.json" "$1" <<'PY'
import json, sys
plans, grid = json.load(open(sys.argv[1])), sys.argv[2]
p = [p for p in plans["predictions"] if p["grid"] == grid][0]
print(",".join(str(n) for n in p["stage_split"]), p["micro_batches"])
PY
  }
  L4=("$FRUGAL" launch -n 4 --bandwidth 100mbit --)
  L2=("$FRUGAL" launch -n 2 --bandwidth 100mbit --)
  say "4 ranks at 100 Mbit"
  # The touched rows of every layer cross 100 Mbit each step (tens of MB: most of the output layer's
  # rows): DP_STEPS steps measure its step as well as more.
  train n4-dp-4x1 1 "${L4[@]}" "$FRUGAL" "${T[@]}" --threads 1 --grid 4x1 --compress off --batch 128 --max-steps "$DP_STEPS"
  train n4-dctdp-4x1 1 "${L4[@]}" "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads 1 --grid 4x1 --dp-keep 0.02
  train n4-mp-1x4 1 "${L4[@]}" "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads 1 --grid 1x4
  train n4-mp-2x2 1 "${L4[@]}" "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads 1 --grid 2x2 --compress off
  train n4-dctdp-2x2 1 "${L4[@]}" "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads 1 --grid 2x2 --dp-keep 0.02
  read -r split micro <<< "$(split_of 1x1x4)"
  train n4-pp-1x1x4 1 "${L4[@]}" "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads 1 --pipeline 4 --stage-split "$split" --micro-batches "$micro"
  read -r split micro <<< "$(split_of 2x1x2)"
  train n4-pp-2x1x2 1 "${L4[@]}" "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads 1 --grid 2x1x2 --stage-split "$split" --micro-batches "$micro"
  read -r split micro <<< "$(split_of 1x2x2)"
  train n4-pp-1x2x2 1 "${L4[@]}" "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads 1 --grid 1x2x2 --stage-split "$split" --micro-batches "$micro"
  say "2 ranks at 100 Mbit"
  train n2-dp-2x1 1 "${L2[@]}" "$FRUGAL" "${T[@]}" --threads 1 --grid 2x1 --compress off --batch 128 --max-steps "$DP_STEPS"
  train n2-mp-1x2 1 "${L2[@]}" "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads 1 --grid 1x2
  read -r split micro <<< "$(split_of 1x1x2)"
  train n2-pp-1x1x2 1 "${L2[@]}" "$FRUGAL" "${T[@]}" "${T_STEPS[@]}" --threads 1 --pipeline 2 --stage-split "$split" --micro-batches "$micro"
  val=()
  for f in n4-dp-4x1 n4-dctdp-4x1 n4-mp-1x4 n4-mp-2x2 n4-dctdp-2x2 n4-pp-1x1x4 n4-pp-2x1x2 n4-pp-1x2x2 n2-dp-2x1 n2-mp-1x2 \
           n2-pp-1x1x2; do
    val+=(--validate "$OUT/$f.jsonl@100mbit")
  done
  say "the planner against the measured runs"
  "$FRUGAL" plan "${cal[@]}" --nodes 2,4 --one-host --link 100mbit --host-cores "$(nproc)" "${val[@]}" \
    --json "$OUT/plan.json" | tee "$OUT/plan.txt"
fi

if wants quality; then
  DATA=.bench/explore/data
  if [ ! -f "$DATA/test.txt" ]; then
    "$FRUGAL" data synth-xmc --features 20000 --labels 5000 --train 20000 --test 2000 --noise 0.8 --nnz 40 --seed 7 \
      --out "$DATA" > /dev/null
  fi
  Q=(train --train "$DATA/train.txt" --test "$DATA/test.txt" --layers 256,256 --batch 128 --lr 1e-3 --epochs "$EPOCHS"
     --threads 1 --quiet)
  L=("$FRUGAL" launch -n 2 --)
  for seed in $SEEDS; do
    say "quality: 2 stages, seed $seed"
    train "q-none-s$seed" "$EPOCHS" "${L[@]}" "$FRUGAL" "${Q[@]}" --seed "$seed" --pipeline 2
    train "q-k0.1-s$seed" "$EPOCHS" "${L[@]}" "$FRUGAL" "${Q[@]}" --seed "$seed" --pipeline 2 --mp-keep 0.1
    train "q-k0.05-s$seed" "$EPOCHS" "${L[@]}" "$FRUGAL" "${Q[@]}" --seed "$seed" --pipeline 2 --mp-keep 0.05
    train "q-k0.1noef-s$seed" "$EPOCHS" "${L[@]}" "$FRUGAL" "${Q[@]}" --seed "$seed" --pipeline 2 --mp-keep 0.1 \
      --mp-error-feedback off
    train "q-k0.1w1-s$seed" "$EPOCHS" "${L[@]}" "$FRUGAL" "${Q[@]}" --seed "$seed" --pipeline 2 --mp-keep 0.1 \
      --mp-warmup-steps 157
    train "q-k0.1bare-s$seed" "$EPOCHS" "${L[@]}" "$FRUGAL" "${Q[@]}" --seed "$seed" --pipeline 2 --mp-keep 0.1 \
      --mp-error-feedback off --mp-warmup-steps 0
  done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
"$PY" bench/pipeline/summarize.py "$OUT" "$SEEDS"
