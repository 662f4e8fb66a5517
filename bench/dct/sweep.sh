#!/usr/bin/env bash
# DCT compression sweep over seeds (issue 15): per data set and scheme, the largest compression whose
# P@1 (accuracy on Fashion-MNIST), averaged over seeds, stays within 0.5 points of the uncompressed
# run of the same grid and seeds. Every configuration runs with every seed; the summary gives the
# mean and the spread (min..max) of P@1 and of the bytes ratio.
#
#   bash bench/dct/sweep.sh                         # prints every command; ~60 min on 2 cores (DP, 3 seeds)
#   python3 bench/dct/sweep_summary.py .bench/dct-sweep   # the tables (run.sh calls it at the end)
#
# Settings are bench/dct/run.sh's (same data sets, models, epochs, batch 128, --threads 1 per rank);
# DCT runs use the defaults of `frugal train` for everything but the keep fraction, so the figures
# are what a user gets from `--dp-keep ETA` / `--mp-keep K` alone.
#   DP: --grid 2x1 (reference: no --dp-keep) and --dp-keep ETA for ETA in FRUGAL_BENCH_ETAS; the dense
#       all-reduce (--parallel data) runs FRUGAL_BENCH_DENSE_STEPS steps with the first seed for its
#       bytes per sample (constant per step), the denominator of the DP ratio.
#   MP: --grid 1xM (reference: --mp-keep 1) and --mp-keep K for K in FRUGAL_BENCH_KS, M in
#       FRUGAL_BENCH_MS.
# Environment: FRUGAL_BENCH_OUT (.bench/dct-sweep), FRUGAL_BENCH_SETS ("xmc fmnist gcide"),
#   FRUGAL_BENCH_MODES ("dp"; add "mp"), FRUGAL_BENCH_SEEDS ("1 2 3"), FRUGAL_BENCH_ETAS ("0.1 0.05 0.02"),
#   FRUGAL_BENCH_KS ("0.1 0.05"), FRUGAL_BENCH_MS ("2"), FRUGAL_BENCH_EPOCHS_XMC (8), _FMNIST (3),
#   _GCIDE (4), FRUGAL_BENCH_MAX_STEPS (0: whole epochs), FRUGAL_BENCH_DENSE_STEPS (30),
#   FRUGAL_BENCH_EXTRA (flags added to every DCT run, e.g. "--dp-compress gradients"), FRUGAL_BENCH_TAG
#   (appended to those runs' names, e.g. "-bf16", so that several EXTRA settings share one OUT),
#   FRUGAL_BENCH_FRUGAL (build/apps/frugal).
# A rerun skips configurations whose metrics file is complete (delete OUT to start over).
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=${FRUGAL_BENCH_FRUGAL:-build/apps/frugal}
OUT=${FRUGAL_BENCH_OUT:-.bench/dct-sweep}
SETS=${FRUGAL_BENCH_SETS:-xmc fmnist gcide}
MODES=${FRUGAL_BENCH_MODES:-dp}
SEEDS=${FRUGAL_BENCH_SEEDS:-1 2 3}
ETAS=${FRUGAL_BENCH_ETAS:-0.1 0.05 0.02}
KS=${FRUGAL_BENCH_KS:-0.1 0.05}
MS=${FRUGAL_BENCH_MS:-2}
MAX_STEPS=${FRUGAL_BENCH_MAX_STEPS:-0}
DENSE_STEPS=${FRUGAL_BENCH_DENSE_STEPS:-30}
EXTRA=${FRUGAL_BENCH_EXTRA:-}
TAG=${FRUGAL_BENCH_TAG:-}
source bench/dct/sets.sh
run() { printf '+ %s\n' "$*"; "$@"; }  # prints every command it runs
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
[ -x "$FRUGAL" ] || { echo "missing $FRUGAL (build it first: bash apps/dev.sh build)" >&2; exit 1; }
mkdir -p "$OUT"
echo "$(date -u +%FT%TZ) start: commit $(git rev-parse --short HEAD) (worktree $(git status --porcelain | wc -l) changed files), $(nproc) cores, sets: $SETS, modes: $MODES, seeds: $SEEDS, etas: $ETAS, ks: $KS, extra: '$EXTRA'; $(uptime)" >> "$OUT/env.txt"

case " $SETS " in *" gcide "*) dct_data gcide ;; *) dct_data ;; esac

epochs() { case "$1" in xmc|xmc512) echo "${FRUGAL_BENCH_EPOCHS_XMC:-8}" ;; fmnist) echo "${FRUGAL_BENCH_EPOCHS_FMNIST:-3}" ;;
                         gcide) echo "${FRUGAL_BENCH_EPOCHS_GCIDE:-4}" ;; esac; }

# [STEPS=N] train SET NAME RANKS EPOCHS FLAGS...: one launch (N steps per epoch; default
# FRUGAL_BENCH_MAX_STEPS) unless SET-NAME.done says it finished before.
train() {
  local set=$1 name=$2 n=$3 ep=$4
  shift 4
  if [ -f "$OUT/$set-$name.done" ]; then echo "(have $set-$name)"; return; fi
  rm -f "$OUT/$set-$name".jsonl "$OUT/$set-$name".rank*.jsonl
  # shellcheck disable=SC2046,SC2206
  local cmd=($FRUGAL launch -n "$n" -- $FRUGAL train $(args "$set") --epochs "$ep" --threads 1 --quiet
             --max-steps "${STEPS:-$MAX_STEPS}" --metrics "$OUT/$set-$name.jsonl" "$@")
  printf '+ %s\n' "${cmd[*]}"
  if "${cmd[@]}" > "$OUT/$set-$name.log" 2>&1; then
    touch "$OUT/$set-$name.done"
  else
    echo "$set-$name failed: $(grep -m1 -i error "$OUT/$set-$name.log")" | tee -a "$OUT/failed.txt"
  fi
}

for set in $SETS; do
  first=${SEEDS%% *}
  case " $MODES " in *" dp "*)
    say "$set: DCT-DP, --grid 2x1; seeds $SEEDS"
    STEPS=$DENSE_STEPS train "$set" "dense-s$first" 2 1 --parallel data --seed "$first"
    for seed in $SEEDS; do
      train "$set" "dp-ref-s$seed" 2 "$(epochs "$set")" --grid 2x1 --seed "$seed"
      for eta in $ETAS; do
        # shellcheck disable=SC2086
        train "$set" "dp-eta$eta$TAG-s$seed" 2 "$(epochs "$set")" --grid 2x1 --seed "$seed" --dp-keep "$eta" $EXTRA
      done
    done ;;
  esac
  case " $MODES " in *" mp "*)
    for m in $MS; do
      say "$set: DCT-MP, --grid 1x$m; seeds $SEEDS"
      for seed in $SEEDS; do
        train "$set" "mp$m-ref-s$seed" "$m" "$(epochs "$set")" --grid "1x$m" --seed "$seed" --mp-keep 1
        for k in $KS; do
          # shellcheck disable=SC2086
          train "$set" "mp$m-k$k$TAG-s$seed" "$m" "$(epochs "$set")" --grid "1x$m" --seed "$seed" --mp-keep "$k" $EXTRA
        done
      done
    done ;;
  esac
  echo "$(date -u +%FT%TZ) after $set: $(uptime)" >> "$OUT/env.txt"
done
/usr/bin/python3 bench/dct/sweep_summary.py "$OUT" | tee "$OUT/summary.md"
