#!/usr/bin/env bash
# Model quality (issue 10): every figure beside the same-run references.
#  skew    synthetic XMC with a strongly skewed label distribution (most frequent label on ~55% of
#          the points): exact softmax vs the LSH softmax with its defaults vs the LSH softmax without
#          random negatives (the old default), per epoch, over SEEDS;
#  gcide   GCIDE reverse dictionary, min5 (4.6k labels) and full (112k labels): references (most
#          frequent, label centroid, kNN) vs exact and LSH networks; the defaults (few-shot: their
#          --infer ensemble) and their checkpoint scored by the network alone (--infer exact);
#  synth   synthetic XMC: model-parallel sparse (2 ranks, lazy sparse optimizer) vs the data-parallel
#          dense baseline (2 ranks, every row every step), P@1 after each epoch;
#  fmnist  Fashion-MNIST MLP, test accuracy;
#  infer   LSH inference vs exact at 100k and 1M labels: a model trained on synthetic data, then
#          `frugal evaluate --infer exact|lsh` (time and P@k);
#  fewshot a synthetic few-shot set (one label a point, ~2 points a label: label support 2) over SEEDS:
#          the references beside the defaults (which read the data: centroid start, lr 0.001, a wider
#          hidden layer, --infer ensemble), the network alone, and the defaults from before they read
#          it (hidden 128, random rows, exact inference);
#  precision  `--precision bf16` against f32, otherwise the same runs: the skewed sets (LSH, over
#          SEEDS), the single-node benchmark's 100k-label set (LSH, over SEEDS), GCIDE min5 (LSH,
#          tuned) and Fashion-MNIST (exact softmax: only the input layer is bf16);
#  valid   the validation split and the best epoch (issue 65), over SEEDS on sets that are still
#          learning (skewed synthetic, GCIDE min5, Fashion-MNIST, synthetic few-shot; GCIDE full with
#          seed 1; VALID_SETS picks some of skew gcide_min5 fmnist fewshot gcide_full; VALID_SCHEDULES
#          ("constant cosine") adds runs with each --lr-schedule): the defaults for VALID_EPOCHS (10) epochs with early stopping off, so that
#          validation.py can replay every patience and epoch cap from the same records (the last epoch,
#          the best, and what the defaults return), beside the previous defaults (no split, 3 epochs).
# Usage: bash bench/quality/run.sh [BUILD_DIR] [OUT_DIR] [SECTION...] (default: every section).
# THREADS (2), SEEDS ("1 2 3"), EPOCHS (5), GCIDE_VARIANTS ("min5 full") override. Prints every command it runs; metrics JSONL and
# logs go to OUT_DIR (default .bench/quality); `python3 bench/quality/summarize.py OUT_DIR` makes the
# tables of bench/REPORT.md (history: bench/history/quality.md). Needs Debian's dict-gcide and
# dataset-fashion-mnist.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=${2:-.bench/quality}
shift $(( $# > 2 ? 2 : $# )) || true
SECTIONS=("$@")
[ ${#SECTIONS[@]} -gt 0 ] || SECTIONS=(skew gcide fewshot synth fmnist infer precision valid)
THREADS=${THREADS:-2}
SEEDS=${SEEDS:-1 2 3}
EPOCHS=${EPOCHS:-5}
FRUGAL="$(pwd)/$BUILD/apps/frugal"
[ -x "$FRUGAL" ] || { echo "no $FRUGAL: build first (bash apps/dev.sh build)" >&2; exit 1; }
mkdir -p "$OUT"
run() { echo "+ $*" >&2; "$@"; }
{
  echo "commit $(git rev-parse --short HEAD), $(nproc) cores, threads $THREADS"
  echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -m1 'model name' /proc/cpuinfo || true
} | tee "$OUT/env.txt"

# train NAME ARGS...: one `frugal train` run, metrics in OUT/NAME.jsonl, output in OUT/NAME.log.
train() {
  local name=$1; shift
  run "$FRUGAL" train "$@" --threads "$THREADS" --quiet --metrics "$OUT/$name.jsonl" > "$OUT/$name.log" 2>&1 \
    || { echo "FAILED: $name (see $OUT/$name.log)" | tee -a "$OUT/failed.txt"; }
  tail -n 2 "$OUT/$name.log"
}
# network_alone NAME TEST: the checkpoint OUT/ck_NAME of a default run (its --infer ensemble) scored
# by the network alone, into OUT/NAME_network.json.
network_alone() {
  run "$FRUGAL" evaluate --model "$OUT/ck_$1" --test "$2" --infer exact --threads "$THREADS" --json \
    > "$OUT/$1_network.json" 2> /dev/null || echo "FAILED: evaluate $1" | tee -a "$OUT/failed.txt"
}
references() {  # references NAME TRAIN TEST
  run "$FRUGAL" data references "$2" "$3" | tee "$OUT/$1_references.txt"
}

for section in "${SECTIONS[@]}"; do
  echo "== $section ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/env.txt"
  case $section in
  skew)
    for seed in $SEEDS; do
      d="$OUT/data/skew$seed"
      [ -f "$d/test.txt" ] || run "$FRUGAL" data synth-xmc --features 20000 --labels 20000 --train 40000 --test 4000 \
        --nnz 40 --noise 0.5 --zipf 1.1 --seed "$seed" --out "$d"
      "$FRUGAL" data stats "$d/train.txt" > "$OUT/skew${seed}_stats.txt"
      references "skew$seed" "$d/train.txt" "$d/test.txt"
      base=(--train "$d/train.txt" --test "$d/test.txt" --epochs "$EPOCHS" --seed "$seed")
      train "skew${seed}_exact" "${base[@]}" --sampler exact
      train "skew${seed}_lsh" "${base[@]}"
      train "skew${seed}_lsh_noneg" "${base[@]}" --negatives 0
      train "skew${seed}_lsh_nologq" "${base[@]}" --logq off
    done ;;
  gcide)
    for variant in ${GCIDE_VARIANTS:-min5 full}; do
      d="$OUT/data/gcide_$variant"
      extra=()
      [ "$variant" = min5 ] && extra=(--min-label-points 5)
      [ -f "$d/test.txt" ] || run "$FRUGAL" data gcide --out "$d" --seed 1 "${extra[@]}" > "$OUT/gcide_${variant}_build.log"
      references "gcide_$variant" "$d/train.txt" "$d/test.txt"
      base=(--train "$d/train.txt" --test "$d/test.txt" --epochs "$EPOCHS" --seed 1)
      train "gcide_${variant}_lsh_default" "${base[@]}" --checkpoint "$OUT/ck_gcide_${variant}_lsh_default"
      network_alone "gcide_${variant}_lsh_default" "$d/test.txt"
      # The spread over training seeds (min5 only: full's 5 epochs take ~12 minutes a seed).
      if [ "$variant" = min5 ]; then
        for seed in $SEEDS; do
          [ "$seed" = 1 ] && continue
          train "gcide_${variant}_lsh_default_seed$seed" --train "$d/train.txt" --test "$d/test.txt" --epochs "$EPOCHS" \
            --seed "$seed"
        done
      fi
      # The defaults from before they read the data (few-shot GCIDE: centroid start, lr 0.001, wider).
      train "gcide_${variant}_lsh_before" "${base[@]}" --hidden 128 --output-init random --infer exact
      # The documented GCIDE settings (docs/tuning.md).
      tuned=(--hidden 2048 --output-init centroid)
      train "gcide_${variant}_lsh_tuned" "${base[@]}" "${tuned[@]}"
      # The exact softmax over 112k labels takes hours here: only on min5.
      [ "$variant" = min5 ] && train "gcide_${variant}_exact_tuned" "${base[@]}" "${tuned[@]}" --sampler exact
    done ;;
  fewshot)
    for seed in $SEEDS; do
      d="$OUT/data/fewshot$seed"
      [ -f "$d/test.txt" ] || run "$FRUGAL" data synth-xmc --features 50000 --labels 50000 --train 75000 --test 10000 \
        --nnz 30 --labels-per-point 1 --zipf 0.3 --noise 0.5 --seed "$seed" --out "$d"
      "$FRUGAL" data stats "$d/train.txt" > "$OUT/fewshot${seed}_stats.txt"
      references "fewshot$seed" "$d/train.txt" "$d/test.txt"
      base=(--train "$d/train.txt" --test "$d/test.txt" --epochs "$EPOCHS" --seed "$seed")
      train "fewshot${seed}_default" "${base[@]}" --checkpoint "$OUT/ck_fewshot${seed}_default"
      network_alone "fewshot${seed}_default" "$d/test.txt"
      train "fewshot${seed}_before" "${base[@]}" --hidden 128 --output-init random --infer exact
    done ;;
  synth)
    d="$OUT/data/synth"
    [ -f "$d/test.txt" ] || run "$FRUGAL" data synth-xmc --features 20000 --labels 5000 --train 20000 --test 2000 \
      --nnz 75 --labels-per-point 5 --seed 1 --out "$d"
    references synth "$d/train.txt" "$d/test.txt"
    base=(--train "$d/train.txt" --test "$d/test.txt" --epochs 3 --seed 1)
    run "$FRUGAL" launch -n 2 -- "$FRUGAL" train "${base[@]}" --threads 1 --quiet --metrics "$OUT/synth_mp_sparse.jsonl" \
      > "$OUT/synth_mp_sparse.log" 2>&1 || echo "FAILED: synth_mp_sparse" | tee -a "$OUT/failed.txt"
    run "$FRUGAL" launch -n 2 -- "$FRUGAL" train "${base[@]}" --parallel data --threads 1 --quiet \
      --metrics "$OUT/synth_dp_dense.jsonl" > "$OUT/synth_dp_dense.log" 2>&1 \
      || echo "FAILED: synth_dp_dense" | tee -a "$OUT/failed.txt"
    ;;
  fmnist)
    F=/usr/share/datasets/fashion-mnist
    train fmnist_default --format idx --train "$F/train" --test "$F/t10k" --layers 256,128 --epochs 10 --seed 1
    train fmnist_tuned --format idx --train "$F/train" --test "$F/t10k" --layers 1024,1024 --epochs 10 --seed 1 \
      --dropout 0.1 --lr-schedule cosine
    ;;
  infer)
    for labels in 100000 1000000; do
      d="$OUT/data/infer$labels"
      [ -f "$d/test.txt" ] || run "$FRUGAL" data synth-xmc --features 100000 --labels "$labels" --train 50000 \
        --test 5000 --seed 1 --out "$d"
      train "infer${labels}_train" --train "$d/train.txt" --test "$d/test.txt" --epochs 2 --seed 1 \
        --checkpoint "$OUT/infer${labels}_ckpt"
      for mode in exact lsh; do
        run "$FRUGAL" evaluate --model "$OUT/infer${labels}_ckpt" --test "$d/test.txt" --infer "$mode" \
          --threads "$THREADS" --json > "$OUT/infer${labels}_$mode.json" 2> "$OUT/infer${labels}_$mode.log"
        cat "$OUT/infer${labels}_$mode.log"
      done
    done ;;
  precision)
    for seed in $SEEDS; do
      d="$OUT/data/skew$seed"
      [ -f "$d/test.txt" ] || run "$FRUGAL" data synth-xmc --features 20000 --labels 20000 --train 40000 --test 4000 \
        --nnz 40 --noise 0.5 --zipf 1.1 --seed "$seed" --out "$d"
      for p in f32 bf16; do
        train "precision_skew${seed}_$p" --train "$d/train.txt" --test "$d/test.txt" --epochs "$EPOCHS" --seed "$seed" \
          --precision "$p"
      done
    done
    d=.bench/xmc100k   # bench/single_node's data set (run.sh generates it)
    [ -f "$d/test.txt" ] || run "$FRUGAL" data synth-xmc --features 100000 --labels 100000 --train 50000 --test 5000 \
      --nnz 75 --labels-per-point 5 --seed 1 --out "$d"
    for seed in $SEEDS; do
      for p in f32 bf16; do
        train "precision_xmc100k_s${seed}_$p" --train "$d/train.txt" --test "$d/test.txt" --epochs 3 --seed "$seed" \
          --precision "$p"
      done
    done
    d="$OUT/data/gcide_min5"
    [ -f "$d/test.txt" ] || run "$FRUGAL" data gcide --out "$d" --seed 1 --min-label-points 5 > "$OUT/gcide_min5_build.log"
    for p in f32 bf16; do
      train "precision_gcide_min5_$p" --train "$d/train.txt" --test "$d/test.txt" --epochs "$EPOCHS" --seed 1 \
        --hidden 2048 --output-init centroid --precision "$p"
    done
    F=/usr/share/datasets/fashion-mnist
    for p in f32 bf16; do
      train "precision_fmnist_$p" --format idx --train "$F/train" --test "$F/t10k" --layers 256,128 --epochs 10 \
        --seed 1 --precision "$p"
    done ;;
  valid)
    VE=${VALID_EPOCHS:-10}
    VS=" ${VALID_SETS:-skew gcide_min5 fmnist fewshot gcide_full} "  # which sets (all by default)
    wanted() { [[ "$VS" == *" $1 "* ]]; }
    # valid_run NAME ARGS...: the defaults (up to VE epochs, no early stop: validation.py replays it)
    # and the previous defaults (no validation split, 3 epochs, the last returned).
    # VALID_SCHEDULES: the learning-rate schedules tried beside the defaults' (auto: cosine here),
    # each as the set NAME plus "cos" (cosine) or "const" (constant), with the same previous defaults.
    valid_run() {
      local name=$1 schedule
      shift
      # --lr-schedule cosine: what auto chooses under the defaults' early stopping (with it off, auto
      # would be the constant rate, and the replay would not be the defaults').
      train "valid_${name}_default" "$@" --epochs "$VE" --early-stopping 0 --lr-schedule cosine
      train "valid_${name}_before" "$@" --epochs 3 --valid-fraction 0
      for schedule in ${VALID_SCHEDULES:-}; do
        local tag=${schedule/cosine/cos}
        tag=${tag/constant/const}
        local base=${name%_s*} seed=${name##*_s}
        train "valid_${base}${tag}_s${seed}_default" "$@" --epochs "$VE" --early-stopping 0 --lr-schedule "$schedule"
        ln -sf "valid_${name}_before.jsonl" "$OUT/valid_${base}${tag}_s${seed}_before.jsonl"
      done
    }
    wanted skew && for seed in $SEEDS; do
      d="$OUT/data/skew$seed"
      [ -f "$d/test.txt" ] || run "$FRUGAL" data synth-xmc --features 20000 --labels 20000 --train 40000 --test 4000 \
        --nnz 40 --noise 0.5 --zipf 1.1 --seed "$seed" --out "$d"
      valid_run "skew_s$seed" --train "$d/train.txt" --test "$d/test.txt" --seed "$seed"
    done
    d="$OUT/data/gcide_min5"
    wanted gcide_min5 && [ ! -f "$d/test.txt" ] && run "$FRUGAL" data gcide --out "$d" --seed 1 --min-label-points 5 > "$OUT/gcide_min5_build.log"
    wanted gcide_min5 && [ ! -f "$OUT/gcide_min5_references.txt" ] && references gcide_min5 "$d/train.txt" "$d/test.txt"
    wanted gcide_min5 && for seed in $SEEDS; do
      valid_run "gcide_min5_s$seed" --train "$d/train.txt" --test "$d/test.txt" --seed "$seed"
    done
    F=/usr/share/datasets/fashion-mnist
    wanted fmnist && for seed in $SEEDS; do
      valid_run "fmnist_s$seed" --format idx --train "$F/train" --test "$F/t10k" --layers 256,128 --seed "$seed"
    done
    wanted fewshot && for seed in $SEEDS; do
      d="$OUT/data/fewshot$seed"
      [ -f "$d/test.txt" ] || run "$FRUGAL" data synth-xmc --features 50000 --labels 50000 --train 75000 --test 10000 \
        --nnz 30 --labels-per-point 1 --zipf 0.3 --noise 0.5 --seed "$seed" --out "$d"
      [ -f "$OUT/fewshot${seed}_references.txt" ] || references "fewshot$seed" "$d/train.txt" "$d/test.txt"
      valid_run "fewshot_s$seed" --train "$d/train.txt" --test "$d/test.txt" --seed "$seed"
    done
    if wanted gcide_full; then
      d="$OUT/data/gcide_full"
      [ -f "$d/test.txt" ] || run "$FRUGAL" data gcide --out "$d" --seed 1 > "$OUT/gcide_full_build.log"
      [ -f "$OUT/gcide_full_references.txt" ] || references gcide_full "$d/train.txt" "$d/test.txt"
      valid_run "gcide_full_s1" --train "$d/train.txt" --test "$d/test.txt" --seed 1
    fi ;;
  *) echo "unknown section $section (skew gcide fewshot synth fmnist infer precision valid)" >&2; exit 2 ;;
  esac
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
echo "== logs and metrics in $OUT; tables: python3 bench/quality/summarize.py $OUT"
