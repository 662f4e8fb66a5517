#!/usr/bin/env bash
# Data-set benchmarks (see bench/data/README.md and the "Data sets" section of bench/REPORT.md
# (history: bench/history/quality.md)):
#  1. Fashion-MNIST, MLP 784 -> 256 -> 128 -> 10 (ReLU, exact softmax), test accuracy per epoch;
#  2. GCIDE reverse dictionary, built by `frugal data gcide` (full: ~112k labels; and the variant
#     keeping headwords with >= 5 definitions: ~4.6k labels): the LSH network's P@1/P@5 and train
#     samples/s next to the two references that `frugal data gcide` prints;
#  3. packed data files (bench/data/packed.sh): `frugal data pack` and reading a 1.7M-point,
#     1M-label set packed against parsing its text, and training on each form;
#  4. (PARTS=stream-xmc, root) the XMC network streaming a set larger than a memory cgroup against the
#     set held, and 4 replicas' shards (bench/data/stream_xmc.sh).
# Usage: bash bench/data/run.sh [BUILD_DIR] [OUT_DIR]; THREADS (default 2) and EPOCHS_* override;
# PARTS (default "fmnist gcide packed") picks the parts.
# Needs Debian's dataset-fashion-mnist and dict-gcide (bash apps/dev.sh build installs them).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=${2:-.bench/data}
THREADS=${THREADS:-2}
EPOCHS_FMNIST=${EPOCHS_FMNIST:-10}
EPOCHS_GCIDE=${EPOCHS_GCIDE:-5}
PARTS=${PARTS:-fmnist gcide packed}
part() { [[ " $PARTS " == *" $1 "* ]]; }
FRUGAL="$BUILD/apps/frugal"
FMNIST=/usr/share/datasets/fashion-mnist
mkdir -p "$OUT"
for f in "$FMNIST/train-images-idx3-ubyte.gz" /usr/share/dictd/gcide.dict.dz; do
  [ -f "$f" ] || { echo "missing $f: apt-get install dataset-fashion-mnist dict-gcide" >&2; exit 1; }
done
echo "== commit $(git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

if part fmnist; then
echo "== Fashion-MNIST MLP"
"$FRUGAL" train --format idx --train "$FMNIST/train" --test "$FMNIST/t10k" --layers 256,128 \
  --epochs "$EPOCHS_FMNIST" --batch 128 --lr 1e-3 --seed 1 --threads "$THREADS" --quiet \
  --metrics "$OUT/fashion_mnist.jsonl" | tee "$OUT/fashion_mnist.log"
fi

for variant in full min5; do
  part gcide || break
  dir="$OUT/gcide_$variant"
  extra=()
  [ "$variant" = min5 ] && extra=(--min-label-points 5)
  echo "== GCIDE ($variant): build and references"
  "$FRUGAL" data gcide --out "$dir" --seed 1 "${extra[@]}" | tee "$OUT/gcide_${variant}_build.log"
  # hidden 128 on the full set (evaluation scores all 112k labels per test point), 512 on min5.
  hidden=128
  [ "$variant" = min5 ] && hidden=512
  for sampler in lsh exact; do
    # The exact softmax over 112k labels is the slow reference; only run it on the small variant.
    [ "$variant" = full ] && [ "$sampler" = exact ] && continue
    echo "== GCIDE ($variant): $sampler, hidden $hidden"
    "$FRUGAL" train --train "$dir/train.txt" --test "$dir/test.txt" --hidden "$hidden" --sampler "$sampler" \
      --tables 50 --epochs "$EPOCHS_GCIDE" --batch 128 --lr 0.005 --seed 1 --threads "$THREADS" --quiet \
      --metrics "$OUT/gcide_${variant}_${sampler}.jsonl" | tee "$OUT/gcide_${variant}_${sampler}.log"
  done
done
if part packed; then
  echo "== packed data files"
  THREADS="$THREADS" bash bench/data/packed.sh "$BUILD" "$OUT/packed"
fi
if part stream-xmc; then
  echo "== the XMC network streaming a set larger than memory (root: a memory cgroup)"
  THREADS="$THREADS" bash bench/data/stream_xmc.sh "$BUILD" "$OUT/stream-xmc"
fi
echo "== logs and metrics in $OUT"
