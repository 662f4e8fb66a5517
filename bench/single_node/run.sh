#!/usr/bin/env bash
# Single-node benchmark (issue 2): frugal with the LSH sampler, frugal with the exact (full) softmax
# and the dense PyTorch baseline, trained one after the other on the same synthetic XMC data with the
# same network, batch, learning rate, seed and thread count; then a summary table with the targets.
#
#   bash bench/single_node/run.sh            # from the repository root (or anywhere: it cds there)
#
# Idempotent: the build is incremental, the data set is generated once, and each system's metrics
# file is rewritten by its own run. Environment overrides, for quick runs and experiments:
#   FRUGAL_BENCH_EPOCHS=3  FRUGAL_BENCH_THREADS=2  FRUGAL_BENCH_HIDDEN=128  FRUGAL_BENCH_BATCH=128
#   FRUGAL_BENCH_LR=1e-3   FRUGAL_BENCH_SEED=1
#   FRUGAL_BENCH_FEATURES=100000 FRUGAL_BENCH_LABELS=100000 FRUGAL_BENCH_TRAIN=50000 FRUGAL_BENCH_TEST=5000
#   FRUGAL_BENCH_DATA=DIR            use DIR/train.txt and DIR/test.txt (generated there if absent)
#   FRUGAL_BENCH_OUT=.bench/single_node   where metrics, logs and the summary go
#   FRUGAL_BENCH_SYSTEMS="lsh lsh_bf16 lsh_rowwise lsh_rowwise_bf16 lsh_rowwise_adam lsh_rowwise_adam_bf16
#                         lsh_threshold lsh_default lsh_default_bf16 exact torch_cpu torch_sampled"   which runs to do
#                                    (the summary reads whatever exists; lsh, lsh_bf16 and exact are Adam
#                                    at --lr (issue 2's baseline, whatever frugal's defaults); lsh_bf16 is
#                                    the LSH run with --precision bf16, lsh_rowwise[_bf16] with --optimizer
#                                    rowwise-adagrad, lsh_rowwise_adam[_bf16] with --optimizer rowwise-adam,
#                                    lsh_threshold that with --update-threshold FRUGAL_BENCH_THRESHOLD,
#                                    lsh_default frugal train with its defaults, lsh_default_bf16 those
#                                    and --precision bf16, torch_sampled PyTorch with a sampled softmax
#                                    at FRUGAL_BENCH_SAMPLED_FLAGS: see sampled.sh, which tunes it per set)
#   FRUGAL_BENCH_ROWWISE_LR=         --lr of the row-wise runs (empty: frugal's default for each)
#   FRUGAL_BENCH_THRESHOLD=0.3       --update-threshold of lsh_threshold
#   FRUGAL_BENCH_FRUGAL_FLAGS="..."  extra flags for both frugal runs (e.g. "--hash simhash")
#   FRUGAL_BENCH_LSH_FLAGS="..."     extra flags for the LSH run only (e.g. "--k 6 --tables 50")
#   FRUGAL_BENCH_TORCH_FLAGS="..."   extra flags for torch_xmc.py (e.g. "--sparse-adam")
#   FRUGAL_BENCH_SAMPLED_FLAGS="--lr 0.01 --negatives 1024 --alpha 0.5"   torch_sampled's settings (sampled.sh's
#                                    tuning on a 100k-label set; they replace --lr)
#   FRUGAL_BENCH_PYTHON=/usr/bin/python3   the interpreter with Debian's python3-torch
#   FRUGAL_BENCH_GLIBC_TUNABLES=...  malloc tunables given to all three runs (empty: none; see README)
#   FRUGAL_BENCH_NO_BUILD=1          use build/apps/frugal as it is
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)

EPOCHS=${FRUGAL_BENCH_EPOCHS:-3}
THREADS=${FRUGAL_BENCH_THREADS:-2}
HIDDEN=${FRUGAL_BENCH_HIDDEN:-128}
BATCH=${FRUGAL_BENCH_BATCH:-128}
LR=${FRUGAL_BENCH_LR:-1e-3}
SEED=${FRUGAL_BENCH_SEED:-1}
FEATURES=${FRUGAL_BENCH_FEATURES:-100000}
LABELS=${FRUGAL_BENCH_LABELS:-100000}
NTRAIN=${FRUGAL_BENCH_TRAIN:-50000}
NTEST=${FRUGAL_BENCH_TEST:-5000}
SYSTEMS=${FRUGAL_BENCH_SYSTEMS:-lsh lsh_bf16 lsh_rowwise lsh_rowwise_bf16 lsh_rowwise_adam lsh_rowwise_adam_bf16 lsh_threshold lsh_default lsh_default_bf16 exact torch_cpu torch_sampled}
ROWWISE_LR=${FRUGAL_BENCH_ROWWISE_LR:-}
THRESHOLD=${FRUGAL_BENCH_THRESHOLD:-0.3}
PYTHON=${FRUGAL_BENCH_PYTHON:-/usr/bin/python3}
OUT=${FRUGAL_BENCH_OUT:-.bench/single_node}
FRUGAL=build/apps/frugal
# The issue's data set keeps the issue's directory name; any other size gets its own directory, so a
# quick run never mistakes a differently sized data set for the real one.
if [ "$FEATURES $LABELS $NTRAIN $NTEST" = "100000 100000 50000 5000" ]; then
  DATA=${FRUGAL_BENCH_DATA:-.bench/xmc100k}
else
  DATA=${FRUGAL_BENCH_DATA:-.bench/xmc-f$FEATURES-l$LABELS-n$NTRAIN-m$NTEST}
fi
source bench/single_node/common.sh   # say, run, wants, GLIBC_TUNABLES, build_frugal, install_missing, write_env

mkdir -p "$OUT"
needs_frugal=0
{ [ -n "$(echo " $SYSTEMS " | tr ' ' '\n' | grep -v '^torch_cpu$' | grep -v '^torch_sampled$' | grep .)" ] || [ ! -f "$DATA/train.txt" ] ||
  [ ! -f "$DATA/test.txt" ]; } && needs_frugal=1

# 1. Build (ninja only rebuilds what changed).
[ "$needs_frugal" = 1 ] && build_frugal

# 2. The baseline's packages (common.sh's TORCH_PACKAGES).
{ wants torch_cpu || wants torch_sampled; } && install_missing "${TORCH_PACKAGES[@]}"

# 3. Data, generated once; written to a temporary directory and renamed so that an interrupted run
#    never leaves a half-written data set that a later run would take as present.
if [ -f "$DATA/train.txt" ] && [ -f "$DATA/test.txt" ]; then
  say "data present: $DATA ($(head -n1 "$DATA/train.txt") train header)"
else
  say "generating $DATA"
  tmp="$DATA.tmp.$$"
  rm -rf "$tmp"
  run "$FRUGAL" data synth-xmc --features "$FEATURES" --labels "$LABELS" --train "$NTRAIN" --test "$NTEST" \
    --nnz 75 --labels-per-point 5 --seed "$SEED" --out "$tmp"
  rm -rf "$DATA"
  mv "$tmp" "$DATA"
fi

# 4. The runs. Each rewrites its own metrics file and log; the commands are kept for the report.
BASE=(--train "$DATA/train.txt" --test "$DATA/test.txt" --hidden "$HIDDEN" --batch "$BATCH"
      --epochs "$EPOCHS" --threads "$THREADS" --seed "$SEED")
COMMON=("${BASE[@]}" --lr "$LR")
ADAM=("${COMMON[@]}" --optimizer adam)   # the frugal baselines stay Adam whatever the default optimizer
ROWWISE=("${BASE[@]}" --optimizer rowwise-adagrad)
ROWWISE_ADAM=("${BASE[@]}" --optimizer rowwise-adam)
[ -n "$ROWWISE_LR" ] && ROWWISE+=(--lr "$ROWWISE_LR") && ROWWISE_ADAM+=(--lr "$ROWWISE_LR")
read -r -a FRUGAL_EXTRA <<< "${FRUGAL_BENCH_FRUGAL_FLAGS:-}"
read -r -a LSH_EXTRA <<< "${FRUGAL_BENCH_LSH_FLAGS:-}"
read -r -a TORCH_EXTRA <<< "${FRUGAL_BENCH_TORCH_FLAGS:-}"
read -r -a SAMPLED <<< "${FRUGAL_BENCH_SAMPLED_FLAGS:---lr 0.01 --negatives 1024 --alpha 0.5}"

write_env
: > "$OUT/commands.txt"

bench() {   # bench NAME CMD...: run CMD, its output to the terminal and to $OUT/NAME.log
  local name=$1; shift
  rm -f "$OUT/$name.jsonl"
  say "training: $name"
  printf '%s\n' "$*" >> "$OUT/commands.txt"
  printf '+ %s\n' "$*"
  local start=$SECONDS
  # A failed system does not stop the others: the summary then names what is missing.
  if "$@" 2>&1 | tee "$OUT/$name.log"; then
    say "$name finished in $((SECONDS - start)) s (metrics: $OUT/$name.jsonl, log: $OUT/$name.log)"
  else
    say "$name FAILED after $((SECONDS - start)) s (see $OUT/$name.log)"
    failed+=("$name")
  fi
}
failed=()

if wants lsh; then
  bench lsh "$FRUGAL" train "${ADAM[@]}" --sampler lsh "${FRUGAL_EXTRA[@]}" "${LSH_EXTRA[@]}" \
    --metrics "$OUT/lsh.jsonl"
fi
if wants lsh_bf16; then
  bench lsh_bf16 "$FRUGAL" train "${ADAM[@]}" --sampler lsh --precision bf16 "${FRUGAL_EXTRA[@]}" "${LSH_EXTRA[@]}" \
    --metrics "$OUT/lsh_bf16.jsonl"
fi
if wants lsh_rowwise; then
  bench lsh_rowwise "$FRUGAL" train "${ROWWISE[@]}" --sampler lsh "${FRUGAL_EXTRA[@]}" "${LSH_EXTRA[@]}" \
    --metrics "$OUT/lsh_rowwise.jsonl"
fi
if wants lsh_rowwise_bf16; then
  bench lsh_rowwise_bf16 "$FRUGAL" train "${ROWWISE[@]}" --sampler lsh --precision bf16 "${FRUGAL_EXTRA[@]}" \
    "${LSH_EXTRA[@]}" --metrics "$OUT/lsh_rowwise_bf16.jsonl"
fi
if wants lsh_rowwise_adam; then
  bench lsh_rowwise_adam "$FRUGAL" train "${ROWWISE_ADAM[@]}" --sampler lsh "${FRUGAL_EXTRA[@]}" "${LSH_EXTRA[@]}" \
    --metrics "$OUT/lsh_rowwise_adam.jsonl"
fi
if wants lsh_rowwise_adam_bf16; then
  bench lsh_rowwise_adam_bf16 "$FRUGAL" train "${ROWWISE_ADAM[@]}" --sampler lsh --precision bf16 "${FRUGAL_EXTRA[@]}" \
    "${LSH_EXTRA[@]}" --metrics "$OUT/lsh_rowwise_adam_bf16.jsonl"
fi
if wants lsh_threshold; then
  bench lsh_threshold "$FRUGAL" train "${ROWWISE_ADAM[@]}" --sampler lsh --update-threshold "$THRESHOLD" \
    "${FRUGAL_EXTRA[@]}" "${LSH_EXTRA[@]}" --metrics "$OUT/lsh_threshold.jsonl"
fi
if wants lsh_default; then   # frugal train's defaults: nothing but the data, the size and the seed
  bench lsh_default "$FRUGAL" train "${BASE[@]}" "${FRUGAL_EXTRA[@]}" --metrics "$OUT/lsh_default.jsonl"
fi
if wants lsh_default_bf16; then
  bench lsh_default_bf16 "$FRUGAL" train "${BASE[@]}" --precision bf16 "${FRUGAL_EXTRA[@]}" \
    --metrics "$OUT/lsh_default_bf16.jsonl"
fi
if wants exact; then
  bench exact "$FRUGAL" train "${ADAM[@]}" --sampler exact "${FRUGAL_EXTRA[@]}" --metrics "$OUT/exact.jsonl"
fi
if wants torch_cpu; then
  bench torch_cpu "$PYTHON" bench/baselines/torch_xmc.py "${COMMON[@]}" --device cpu "${TORCH_EXTRA[@]}" \
    --metrics "$OUT/torch_cpu.jsonl"
fi
if wants torch_sampled; then
  bench torch_sampled "$PYTHON" bench/baselines/torch_xmc.py "${COMMON[@]}" --device cpu --loss sampled "${SAMPLED[@]}" \
    "${TORCH_EXTRA[@]}" --metrics "$OUT/torch_sampled.jsonl"
fi

# 5. Summary (also saved as markdown for bench/REPORT.md), then the roofline of each frugal run's
#    last epoch (its step profile against this machine's measured peak rates).
say "summary"
"$PYTHON" bench/single_node/summarize.py "$OUT" | tee "$OUT/summary.md"
for name in lsh lsh_bf16 lsh_rowwise lsh_rowwise_bf16 lsh_rowwise_adam lsh_rowwise_adam_bf16 lsh_threshold lsh_default \
            lsh_default_bf16 exact; do
  [ -f "$OUT/$name.jsonl" ] || continue
  say "roofline: $name"
  "$FRUGAL" bench roofline --threads "$THREADS" --metrics "$OUT/$name.jsonl" --json "$OUT/$name.roofline.json" \
    | tee "$OUT/$name.roofline.txt"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed runs: ${failed[*]}" >&2
  exit 1
fi
