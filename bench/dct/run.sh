#!/usr/bin/env bash
# Dynamic Communication Thresholding benchmark (issue 5): DCT-DP (`--grid 2x1 --dp-keep ETA`,
# hard-thresholded parameter gradients with error feedback) and DCT-MP (`--grid 1xM --mp-keep K`,
# top-k activations per sample at every sliced layer boundary) on three data sets, in one run:
#   xmc     synthetic XMC 20k features x 5k labels (build/demo-data; LSH network, hidden 128),
#   fmnist  Fashion-MNIST, MLP 784-1024-1024-10 (exact softmax, every layer sliced over M ranks),
#   gcide   GCIDE reverse dictionary, headwords with >= 5 definitions (~4.6k labels; hidden 512,
#           exact softmax, lr 0.005 as in bench/data).
#
#   sudo bash bench/dct/run.sh              # root: the timing part uses `frugal launch --bandwidth`
#   python3 bench/dct/summarize.py .bench/dct   # tables + gnuplot plots (run.sh calls it at the end)
#
# 1. Quality (loopback, whole epochs; P@1 does not depend on link speed), every run --seed 1:
#    DP sweep on --grid 2x1: no --dp-keep (reference: every touched row, uncompressed), eta in
#    FRUGAL_BENCH_ETAS with --dp-reestimate-every FRUGAL_BENCH_REEST; then at the best eta (smallest
#    whose final P@1 is within 0.5 points of the reference, else the most accurate one): exact top-k
#    every step (--dp-tau exact --dp-reestimate-every 1), the default re-estimation interval (1000 until
#    issue 15, 1 since),
#    and --wire-dtype bf16; and the dense all-reduce baseline (--parallel data, 2 ranks).
#    MP sweep on --grid 1xM: --mp-keep 1 (reference) and k in FRUGAL_BENCH_KS, each also with the
#    warm-up --mp-warmup-steps (FRUGAL_BENCH_WARMUP_XMC 450, _FMNIST 469, _GCIDE 234: ~3, 1 and 1
#    epochs); bf16 at the best k.
#    Fashion-MNIST: M in FRUGAL_BENCH_FMNIST_MS (full sweep) and FRUGAL_BENCH_FMNIST_MS_BEST (keep 1
#    and the best k of M=2 only).
# 2. Timing: the first FRUGAL_BENCH_STEPS steps (dense: FRUGAL_BENCH_DENSE_STEPS) of dense, DP keep
#    1, DP best eta, MP keep 1 and MP best k, 2 ranks, at 100 Mbit and 1 Gbit (netns + tc tbf);
#    seconds per epoch = training points / measured train samples/s.
# Environment: FRUGAL_BENCH_OUT (.bench/dct), FRUGAL_BENCH_PARTS ("xmc fmnist gcide timing"),
#   FRUGAL_BENCH_EPOCHS_XMC (8), _FMNIST (3), _GCIDE (4), FRUGAL_BENCH_MAX_STEPS (0 = whole epochs;
#   a dry run sets e.g. 5), FRUGAL_BENCH_ETAS ("1 0.1 0.01 0.001"), FRUGAL_BENCH_KS ("0.25 0.1 0.05"),
#   FRUGAL_BENCH_REEST (50), FRUGAL_BENCH_FMNIST_MS ("2 4"), FRUGAL_BENCH_FMNIST_MS_BEST ("3"),
#   FRUGAL_BENCH_STEPS (40), FRUGAL_BENCH_DENSE_STEPS (12; 6 at 100 Mbit),
#   FRUGAL_BENCH_GCIDE_DENSE_STEPS (30: the dense GCIDE baseline, ~3 min per epoch on loopback, runs
#   this many steps for its bytes per sample; its bytes per step are constant),
#   FRUGAL_BENCH_PLOTS (bench/dct/plots: the PNGs), FRUGAL_BENCH_FRUGAL (build/apps/frugal).
# A configuration that fails is listed in $OUT/failed.txt and the benchmark goes on; env.txt and
# failed.txt accumulate over runs into the same OUT (a rerun of one part replaces its own entries).
# Dry run: FRUGAL_BENCH_OUT=/tmp/dct-dry FRUGAL_BENCH_PLOTS=/tmp/dct-dry/plots FRUGAL_BENCH_MAX_STEPS=5 \
#   FRUGAL_BENCH_EPOCHS_XMC=2 FRUGAL_BENCH_EPOCHS_FMNIST=2 FRUGAL_BENCH_EPOCHS_GCIDE=2 FRUGAL_BENCH_STEPS=5 \
#   FRUGAL_BENCH_DENSE_STEPS=2 FRUGAL_BENCH_GCIDE_DENSE_STEPS=2 bash bench/dct/run.sh
# Each command is printed before it runs; metrics JSONL in $FRUGAL_BENCH_OUT/<set>-<config>.jsonl.
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=${FRUGAL_BENCH_FRUGAL:-build/apps/frugal}
OUT=${FRUGAL_BENCH_OUT:-.bench/dct}
PARTS=${FRUGAL_BENCH_PARTS:-xmc fmnist gcide timing}
EPOCHS_XMC=${FRUGAL_BENCH_EPOCHS_XMC:-8}
EPOCHS_FMNIST=${FRUGAL_BENCH_EPOCHS_FMNIST:-3}
EPOCHS_GCIDE=${FRUGAL_BENCH_EPOCHS_GCIDE:-4}
MAX_STEPS=${FRUGAL_BENCH_MAX_STEPS:-0}
ETAS=${FRUGAL_BENCH_ETAS:-1 0.1 0.01 0.001}
KS=${FRUGAL_BENCH_KS:-0.25 0.1 0.05}
REEST=${FRUGAL_BENCH_REEST:-50}
FMNIST_MS=${FRUGAL_BENCH_FMNIST_MS:-2 4}
FMNIST_MS_BEST=${FRUGAL_BENCH_FMNIST_MS_BEST:-3}
STEPS=${FRUGAL_BENCH_STEPS:-40}
DENSE_STEPS=${FRUGAL_BENCH_DENSE_STEPS:-12}
GCIDE_DENSE_STEPS=${FRUGAL_BENCH_GCIDE_DENSE_STEPS:-30}
WARMUP_XMC=${FRUGAL_BENCH_WARMUP_XMC:-450}
WARMUP_FMNIST=${FRUGAL_BENCH_WARMUP_FMNIST:-469}
WARMUP_GCIDE=${FRUGAL_BENCH_WARMUP_GCIDE:-234}
source bench/dct/sets.sh
SUMMARIZE=bench/dct/summarize.py
PLOTS=${FRUGAL_BENCH_PLOTS:-bench/dct/plots}
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }
wants() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
[ -x "$FRUGAL" ] || { echo "missing $FRUGAL (build it first: bash apps/dev.sh build)" >&2; exit 1; }
if wants timing && [ "$(id -u)" -ne 0 ]; then
  echo "the timing part needs root (network namespaces and tc for --bandwidth); FRUGAL_BENCH_PARTS skips it" >&2
  exit 1
fi
mkdir -p "$OUT"
load() { echo "$(date -u +%FT%TZ) $1: $(uptime)" | tee -a "$OUT/env.txt"; }
echo "commit $(git rev-parse --short HEAD) (worktree $(git status --porcelain | wc -l) changed files), $(nproc) cores, parts: $PARTS" \
  >> "$OUT/env.txt"
echo "epochs xmc $EPOCHS_XMC fmnist $EPOCHS_FMNIST gcide $EPOCHS_GCIDE; max-steps $MAX_STEPS; reestimate $REEST; steps $STEPS / dense $DENSE_STEPS" \
  >> "$OUT/env.txt"
load start

# Data.
if wants gcide || wants timing; then dct_data gcide; else dct_data; fi

# Training points per set (seconds per epoch = points / train samples/s).
{ echo "xmc $(head -1 "$XMC/train.txt" | cut -d' ' -f1)"; echo "fmnist 60000"
  [ -f "$GCIDE/train.txt" ] && echo "gcide $(head -1 "$GCIDE/train.txt" | cut -d' ' -f1)"; } > "$OUT/points.txt"

epochs() { case "$1" in xmc) echo "$EPOCHS_XMC" ;; fmnist) echo "$EPOCHS_FMNIST" ;; gcide) echo "$EPOCHS_GCIDE" ;; esac; }
warmup() { case "$1" in xmc) echo "$WARMUP_XMC" ;; fmnist) echo "$WARMUP_FMNIST" ;; gcide) echo "$WARMUP_GCIDE" ;; esac; }

# train SET NAME RANKS [--bandwidth RATE] -- EXTRA...: one launch, metrics in $OUT/SET-NAME.jsonl.
train() {
  local set=$1 name=$2 n=$3 rc=0
  shift 3
  local launch=()
  while [ "$1" != -- ]; do launch+=("$1"); shift; done
  shift
  rm -f "$OUT/$set-$name".jsonl "$OUT/$set-$name".rank*.jsonl
  if [ -f "$OUT/failed.txt" ]; then grep -v -F "$set-$name: " "$OUT/failed.txt" > "$OUT/failed.tmp" || true; mv "$OUT/failed.tmp" "$OUT/failed.txt"; fi
  # A failing configuration is recorded in $OUT/failed.txt (summarize.py lists it) and the run goes on.
  # shellcheck disable=SC2046
  run $FRUGAL launch -n "$n" "${launch[@]}" -- $FRUGAL train $(args "$set") --seed 1 --threads 1 --quiet \
    --metrics "$OUT/$set-$name.jsonl" "$@" 2>&1 | tee "$OUT/$set-$name.log" || rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q '"event":"epoch"' "$OUT/$set-$name.jsonl" 2>/dev/null; then
    echo "$set-$name: $(grep -m1 'error' "$OUT/$set-$name.log" || echo 'no epoch record')" | tee -a "$OUT/failed.txt"
    rm -f "$OUT/$set-$name".jsonl "$OUT/$set-$name".rank*.jsonl
  fi
}
# quality SET NAME RANKS EXTRA...: whole epochs on loopback (or FRUGAL_BENCH_MAX_STEPS steps each).
quality() {
  local set=$1 name=$2 n=$3
  shift 3
  train "$set" "$name" "$n" -- --epochs "$(epochs "$set")" --max-steps "$MAX_STEPS" "$@"
}
best() { /usr/bin/python3 "$SUMMARIZE" "$OUT" --best "$1" "$2"; }

dp_sweep() {
  local set=$1 eta b
  say "$set: DCT-DP sweep, --grid 2x1 (reference: no --dp-keep), --dp-reestimate-every $REEST"
  quality "$set" dp-keep1 2 --grid 2x1
  for eta in $ETAS; do
    quality "$set" "dp-eta$eta" 2 --grid 2x1 --dp-keep "$eta" --dp-reestimate-every "$REEST"
  done
  b=$(best "$set" dp)
  say "$set: best eta $b: exact top-k every step, default re-estimation interval, bf16 wire"
  quality "$set" "dp-exact-eta$b" 2 --grid 2x1 --dp-keep "$b" --dp-tau exact --dp-reestimate-every 1
  quality "$set" "dp-default-eta$b" 2 --grid 2x1 --dp-keep "$b"
  quality "$set" "dp-bf16-eta$b" 2 --grid 2x1 --dp-keep "$b" --dp-reestimate-every "$REEST" --wire-dtype bf16
  say "$set: dense all-reduce baseline (--parallel data, 2 ranks)"
  if [ "$set" = gcide ]; then
    train "$set" dense 2 -- --epochs 1 --max-steps "$GCIDE_DENSE_STEPS" --parallel data
  else
    quality "$set" dense 2 --parallel data
  fi
}
# mp_sweep SET M "KS" [bf16]: --mp-keep 1 and each k on --grid 1xM; bf16 at the best k.
mp_sweep() {
  local set=$1 m=$2 ks=$3 k b
  say "$set: DCT-MP sweep, --grid 1x$m (reference: --mp-keep 1)"
  quality "$set" "mp$m-k1" "$m" --grid "1x$m" --mp-keep 1
  for k in $ks; do
    quality "$set" "mp$m-k$k" "$m" --grid "1x$m" --mp-keep "$k"
    quality "$set" "mp$m-warm-k$k" "$m" --grid "1x$m" --mp-keep "$k" --mp-warmup-steps "$(warmup "$set")"
  done
  if [ "${4:-}" = bf16 ]; then
    b=$(best "$set" mp$m)
    quality "$set" "mp$m-bf16-k$b" "$m" --grid "1x$m" --mp-keep "$b" --wire-dtype bf16
  fi
}

for set in xmc fmnist gcide; do
  wants "$set" || continue
  dp_sweep "$set"
  mp_sweep "$set" 2 "$KS" bf16
  if [ "$set" = fmnist ]; then
    for m in $FMNIST_MS; do [ "$m" = 2 ] || mp_sweep fmnist "$m" "$KS"; done
    for m in $FMNIST_MS_BEST; do mp_sweep fmnist "$m" "$(best fmnist mp2)"; done
  fi
  load "after $set"
done

if wants timing; then
  for set in xmc fmnist gcide; do
    eta=$(best "$set" dp)
    k=$(best "$set" mp2)
    for bw in 100mbit 1gbit; do
      say "$set: timing at $bw (first $STEPS steps; dense $DENSE_STEPS at 1 Gbit, half at 100 Mbit)"
      dsteps=$DENSE_STEPS
      [ "$bw" = 100mbit ] && dsteps=$(( (DENSE_STEPS + 1) / 2 ))
      train "$set" "t$bw-dense" 2 --bandwidth "$bw" -- --epochs 1 --max-steps "$dsteps" --parallel data
      train "$set" "t$bw-dp-keep1" 2 --bandwidth "$bw" -- --epochs 1 --max-steps "$STEPS" --grid 2x1 --compress off
      train "$set" "t$bw-dp-eta$eta" 2 --bandwidth "$bw" -- --epochs 1 --max-steps "$STEPS" --grid 2x1 \
        --dp-keep "$eta" --dp-reestimate-every "$REEST"
      train "$set" "t$bw-mp2-k1" 2 --bandwidth "$bw" -- --epochs 1 --max-steps "$STEPS" --grid 1x2 --mp-keep 1
      train "$set" "t$bw-mp2-k$k" 2 --bandwidth "$bw" -- --epochs 1 --max-steps "$STEPS" --grid 1x2 --mp-keep "$k"
    done
  done
  load "after timing"
fi
/usr/bin/python3 "$SUMMARIZE" "$OUT" --plots "$PLOTS" | tee "$OUT/summary.md"
