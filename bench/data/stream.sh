#!/usr/bin/env bash
# DLRM streaming a packed training file larger than the rank's memory limit (issue 66), against the
# same set held in memory: a synth-ctr set of TRAIN (6,000,000) samples (1.5 GiB in memory, 1.9 GB
# packed), EPOCHS (2) epochs each, THREADS (2) threads:
#  1. in memory (--stream off), no limit;
#  2. streamed (--stream on) inside a memory cgroup capped at LIMIT_MIB (750: half the set's size in
#     memory), the page cache included (cgroup v1 memory.limit_in_bytes, or v2 memory.max).
# Reports per epoch: test AUC, train samples/s, peak RSS, bytes read; and the ratios. Needs root.
# Usage: bash bench/data/stream.sh [BUILD_DIR] [OUT_DIR]   (TRAIN, EPOCHS, THREADS, LIMIT_MIB; SEED: the
#        runs' seed, default 1; SET: the set's folder, default OUT_DIR/set, made with seed 1 when missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=${2:-.bench/data/stream}
TRAIN=${TRAIN:-6000000}
EPOCHS=${EPOCHS:-2}
THREADS=${THREADS:-2}
LIMIT_MIB=${LIMIT_MIB:-750}
SEED=${SEED:-1}
FRUGAL="$(realpath "$BUILD/apps/frugal")"
source bench/data/cgroup.sh
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
mkdir -p "$OUT"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
say "commit $(git rev-parse --short HEAD), $(nproc) cores, load $LOAD_BEFORE"
D="${SET:-$OUT/set}"
if [ ! -f "$D/train.fpk" ] || [ "$(python3 -c "import json; print(json.load(open('$D/info.json'))['train'])" 2>/dev/null)" != "$TRAIN" ]; then
  say "synth-ctr: $TRAIN training samples, packed"
  "$FRUGAL" data synth-ctr --train "$TRAIN" --test 50000 --seed 1 --out "$D"
  "$FRUGAL" data pack "$D/train.tsv" "$D/train.fpk"
  rm -f "$D/train.tsv"  # the packed form is what both runs read
fi
COMMON=(train --model dlrm --train "$D/train.fpk" --test "$D/test.tsv" --epochs "$EPOCHS" --early-stopping 0
        --seed "$SEED" --threads "$THREADS")
say "1. in memory"
rm -f "$OUT/memory.jsonl"
"$FRUGAL" "${COMMON[@]}" --stream off --metrics "$OUT/memory.jsonl" 2>&1 | grep -v "%" | tee "$OUT/memory.log"
say "2. streamed, in a memory cgroup of $LIMIT_MIB MiB"
rm -f "$OUT/stream.jsonl"
make_cgroup frugal-stream "$LIMIT_MIB"
bash -c "echo \$\$ > '$CG/cgroup.procs'; exec '$FRUGAL' ${COMMON[*]} --stream on --memory-limit $LIMIT_MIB \
  --metrics '$OUT/stream.jsonl'" 2>&1 | grep -v "%" | tee "$OUT/stream.log"
PEAK=$(cgroup_peak)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$OUT" "$LIMIT_MIB" "$PEAK" "$LOAD_BEFORE" "$LOAD_AFTER" "$(stat -c %s "$D/train.fpk")" <<'PY'
import json, os, sys
out, limit, peak, before, after, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
def epochs(name):
    return [r for r in map(json.loads, open(os.path.join(out, name))) if r.get("event") == "epoch"]
mem, st = epochs("memory.jsonl"), epochs("stream.jsonl")
print(f"\nload average before {before}, after {after}; packed file {size / 1e9:.2f} GB; cgroup limit {limit} MiB "
      f"(peak use of the cgroup, page cache included: {peak / 2**20:.0f} MiB)")
print("\n| epoch | AUC in memory | AUC streamed | samples/s in memory | samples/s streamed | ratio | peak RSS in memory | peak RSS streamed | bytes read streamed |")
print("|---|---|---|---|---|---|---|---|---|")
for m, s in zip(mem, st):
    print(f"| {m['epoch']} | {m['auc']:.4f} | {s['auc']:.4f} | {m['train_samples_per_s']:.0f} | {s['train_samples_per_s']:.0f} | "
          f"{s['train_samples_per_s'] / m['train_samples_per_s']:.2f} | {m['peak_rss_bytes'] / 2**20:.0f} MiB | "
          f"{s['peak_rss_bytes'] / 2**20:.0f} MiB | {s.get('data_bytes_read', 0) / 1e9:.2f} GB |")
PY
