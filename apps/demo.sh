#!/usr/bin/env bash
# The demo: generates a small learnable XMC data set with the built-in generator (no download),
# then trains the LSH-sampled network on it across 2 local ranks that slice the model (ZeroMQ over
# loopback, `frugal launch`), with progress, and prints the final P@1.
set -euo pipefail
BUILD=${1:-build}
FRUGAL="$BUILD/apps/frugal"
DATA=${FRUGAL_DEMO_DIR:-$BUILD/demo-data}
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

if [ ! -f "$DATA/train.txt" ]; then
  say "generating the demo data set in $DATA (20k features, 5k labels, 20k train / 2k test points)"
  "$FRUGAL" data synth-xmc --features 20000 --labels 5000 --train 20000 --test 2000 --nnz 75 \
    --labels-per-point 5 --seed 1 --out "$DATA"
else
  say "demo data set already in $DATA"
fi
say "training on 2 ranks (each owns half the hidden neurons and half the labels with its own LSH tables):"
say "sparse input -> 128 hidden (ReLU) -> LSH-sampled softmax over 5000 labels, 3 epochs; 5% of the training"
say "points held back to score each epoch, and the best epoch on them is the model the run returns"
"$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$DATA/train.txt" --test "$DATA/test.txt" --hidden 128 \
  --batch 128 --epochs 3 --sampler lsh --threads 1 --seed 1 \
  --metrics "$BUILD/demo-metrics.jsonl" | tee "$BUILD/demo.log"
# The returned model is the best epoch's on the held-back points (the last record's best_epoch).
best=$(grep -o '"best_epoch":[0-9]*' "$BUILD/demo-metrics.jsonl" | tail -1 | cut -d: -f2)
p1=$(grep '"event":"epoch"' "$BUILD/demo-metrics.jsonl" | grep "\"epoch\":${best:-0}," | grep -o '"p@1":[0-9.e-]*' |
  tail -1 | cut -d: -f2)
[ -n "$p1" ] || p1=$(grep -o '"p@1":[0-9.e-]*' "$BUILD/demo-metrics.jsonl" | tail -1 | cut -d: -f2)
say "final P@1 = $p1, the returned model's (epoch ${best:-3}; metrics in $BUILD/demo-metrics.jsonl)"
