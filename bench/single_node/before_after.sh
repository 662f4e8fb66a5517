#!/usr/bin/env bash
# CPU speed before/after a change, side by side in one run: builds REF (a commit; default: the
# parent of the architecture split, a77e666) in a scratch worktree, then trains the single-node
# benchmark's network (hidden 128, batch 128, 2 threads, seed 1) with the LSH and the exact
# softmax, alternating REF and the working tree REPEATS times each, so drift in the machine's load
# hits both alike. Prints samples/s per run, the mean ratio after/before per sampler, and the load
# average before and after.
#
#   bash bench/single_node/before_after.sh [REF]
# Environment: REPEATS=3 STEPS=300 (training steps per run; the first epoch's first STEPS steps)
#   FRUGAL_BENCH_DATA=.bench/xmc100k (generated as bench/single_node/run.sh does when absent)
#   REF_EXE=path/to/frugal: a reference binary built earlier (REF is then only its label), instead of
#   building REF in a worktree (another full build on a 2-core machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
REF=${1:-a77e666}
REPEATS=${REPEATS:-3}
STEPS=${STEPS:-300}
DATA=${FRUGAL_BENCH_DATA:-.bench/xmc100k}
OUT=.bench/before_after
WT=.bench/before_after/ref-tree
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
mkdir -p "$OUT"

say "building the working tree"
bash apps/dev.sh build >/dev/null
REF_EXE=${REF_EXE:-}
if [ -n "$REF_EXE" ]; then
  [ -x "$REF_EXE" ] || { echo "REF_EXE=$REF_EXE is not an executable" >&2; exit 1; }
  say "reference: $REF_EXE (labelled $REF)"
else
  if [ ! -d "$WT/.git" ] && [ ! -f "$WT/.git" ]; then
    say "worktree of $REF in $WT"
    git worktree add -f --detach "$WT" "$REF" >/dev/null
  else
    git -C "$WT" checkout -q --detach "$REF"
  fi
  say "building $REF"
  (cd "$WT" && { [ -d build ] || meson setup build >/dev/null; } && ninja -C build -j2 apps/frugal >/dev/null)
  REF_EXE="$WT/build/apps/frugal"
fi
if [ ! -f "$DATA/train.txt" ]; then
  say "generating $DATA"
  build/apps/frugal data synth-xmc --features 100000 --labels 100000 --train 50000 --test 5000 --nnz 75 \
    --labels-per-point 5 --seed 1 --out "$DATA"
fi

rate() {  # metrics file -> train samples/s of its epoch line
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e.get("event")=="epoch": print(e["train_samples_per_s"]); break' "$1"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/summary.txt"
for sampler in lsh exact; do
  for r in $(seq 1 "$REPEATS"); do
    for side in before after; do
      exe=build/apps/frugal
      [ "$side" = before ] && exe="$REF_EXE"
      "$exe" train --train "$DATA/train.txt" --test "$DATA/test.txt" --hidden 128 --batch 128 --epochs 1 \
        --lr 1e-3 --threads 2 --seed 1 --sampler "$sampler" --max-steps "$STEPS" --quiet \
        --metrics "$OUT/$sampler-$side-$r.jsonl" >/dev/null 2>&1
      printf '%-5s %-6s run %d: %8.1f samples/s\n' "$sampler" "$side" "$r" "$(rate "$OUT/$sampler-$side-$r.jsonl")" | tee -a "$OUT/summary.txt"
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
python3 - "$OUT/summary.txt" <<'PY' | tee -a "$OUT/summary.txt"
import re, sys, statistics
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r'(\w+)\s+(before|after)\s+run \d+:\s+([\d.]+)', line)
    if m: runs.setdefault((m[1], m[2]), []).append(float(m[3]))
for s in ('lsh', 'exact'):
    b, a = runs.get((s, 'before'), []), runs.get((s, 'after'), [])
    if b and a:
        print(f'{s}: before {statistics.mean(b):.1f} (sd {statistics.pstdev(b):.1f}), after {statistics.mean(a):.1f} '
              f'(sd {statistics.pstdev(a):.1f}) samples/s: after/before = {statistics.mean(a)/statistics.mean(b):.3f} '
              f'(medians {statistics.median(b):.1f} / {statistics.median(a):.1f}: '
              f'{statistics.median(a)/statistics.median(b):.3f})')
PY
