#!/usr/bin/env bash
# The XMC network streaming a packed training file larger than the rank's memory limit (issue 66),
# against the same set held in memory, on a synthetic set that is still learning (TRAIN, 3,000,000
# points; 20,000 features, 10,000 labels, 12 features a point, noise 0.8: P@1 about 0.6 after 200k
# points), hidden HIDDEN (64), EPOCHS (2) epochs, THREADS (2) threads, seed SEED (1):
#  1. held in memory (--stream off), no limit;
#  2. streamed (--stream on) inside a memory cgroup capped at LIMIT_MIB (480: under half of what the
#     held run takes), the page cache included (cgroup v1 memory.limit_in_bytes, or v2 memory.max);
#  3. REPLICAS (4; 0: none) data-parallel replicas streaming it (frugal launch, --grid 4x1), one
#     epoch: the bytes each read (its shard).
# Reports per epoch: test P@1 held and streamed, train samples/s and their ratio, peak RSS, the start-up
# (the start record's parse_seconds), bytes read per rank; and the load average. Needs root (cgroup).
# Usage: bash bench/data/stream_xmc.sh [BUILD_DIR] [OUT_DIR]  (TRAIN, EPOCHS, THREADS, LIMIT_MIB, HIDDEN,
#        SEED, REPLICAS; SET: the set's folder, default OUT_DIR/set, made with seed 1 when missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=${2:-.bench/data/stream-xmc}
TRAIN=${TRAIN:-3000000}
EPOCHS=${EPOCHS:-2}
THREADS=${THREADS:-2}
LIMIT_MIB=${LIMIT_MIB:-480}
HIDDEN=${HIDDEN:-64}
SEED=${SEED:-1}
REPLICAS=${REPLICAS:-4}
FRUGAL="$(realpath "$BUILD/apps/frugal")"
source bench/data/cgroup.sh
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
mkdir -p "$OUT"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
say "commit $(git rev-parse --short HEAD), $(nproc) cores, load $LOAD_BEFORE"
D="${SET:-$OUT/set}"
if [ ! -f "$D/train.fpk" ] || [ "$(cat "$D/points" 2>/dev/null)" != "$TRAIN" ]; then
  say "synth-xmc: $TRAIN training points, packed"
  t0=$(date +%s.%N)
  "$FRUGAL" data synth-xmc --features 20000 --labels 10000 --train "$TRAIN" --test 20000 --nnz 12 \
    --labels-per-point 3 --noise 0.8 --seed 1 --out "$D"
  t1=$(date +%s.%N)
  "$FRUGAL" data pack "$D/train.txt" "$D/train.fpk"
  t2=$(date +%s.%N)
  python3 -c "print(f'generated in {$t1 - $t0:.1f} s, packed in {$t2 - $t1:.1f} s')" | tee "$D/times"
  ls -l "$D/train.txt" | tee -a "$D/times"
  rm -f "$D/train.txt"  # the packed form is what every run reads
  echo "$TRAIN" > "$D/points"
fi
COMMON=(train --train "$D/train.fpk" --test "$D/test.txt" --epochs "$EPOCHS" --early-stopping 0 --hidden "$HIDDEN"
        --seed "$SEED" --threads "$THREADS")
say "1. held in memory"
rm -f "$OUT/memory.jsonl"
"$FRUGAL" "${COMMON[@]}" --stream off --metrics "$OUT/memory.jsonl" 2>&1 | grep -v "%" | tee "$OUT/memory.log"
say "2. streamed, in a memory cgroup of $LIMIT_MIB MiB"
rm -f "$OUT/stream.jsonl"
make_cgroup frugal-stream-xmc "$LIMIT_MIB"
bash -c "echo \$\$ > '$CG/cgroup.procs'; exec '$FRUGAL' ${COMMON[*]} --stream on --memory-limit $LIMIT_MIB \
  --metrics '$OUT/stream.jsonl'" 2>&1 | grep -v "%" | tee "$OUT/stream.log"
PEAK=$(cgroup_peak)
rm -f "$OUT"/replicas*.jsonl
if [ "$REPLICAS" -gt 0 ]; then
  say "3. $REPLICAS data-parallel replicas streaming it, one epoch"
  "$FRUGAL" launch -n "$REPLICAS" -- "$FRUGAL" train --train "$D/train.fpk" --test "$D/test.txt" --epochs 1 \
    --hidden "$HIDDEN" --seed "$SEED" --threads 1 --stream on --grid "${REPLICAS}x1" --metrics "$OUT/replicas.jsonl" \
    2>&1 | grep -v "%" | tee "$OUT/replicas.log"
fi
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$OUT" "$LIMIT_MIB" "$PEAK" "$LOAD_BEFORE" "$LOAD_AFTER" "$(stat -c %s "$D/train.fpk")" "$REPLICAS" <<'PY'
import glob, json, os, sys
out, limit, peak, before, after, size, replicas = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
    sys.argv[5], int(sys.argv[6]), int(sys.argv[7])
def events(name, kind):
    return [r for r in map(json.loads, open(os.path.join(out, name))) if r.get("event") == kind]
mem, st = events("memory.jsonl", "epoch"), events("stream.jsonl", "epoch")
start_mem, start_st = events("memory.jsonl", "start")[0], events("stream.jsonl", "start")[0]
print(f"\nload average before {before}, after {after}; packed file {size / 1e6:.0f} MB; cgroup limit {limit} MiB "
      f"(peak use of the cgroup, page cache included: {peak / 2**20:.0f} MiB)")
print(f"start-up (reading the training set and its statistics): held {start_mem['parse_seconds']:.2f} s, "
      f"streamed {start_st['parse_seconds']:.2f} s")
print("\n| epoch | P@1 held | P@1 streamed | samples/s held | samples/s streamed | ratio | peak RSS held | peak RSS streamed | bytes read streamed |")
print("|---|---|---|---|---|---|---|---|---|")
for m, s in zip(mem, st):
    print(f"| {m['epoch']} | {m['p@1']:.4f} | {s['p@1']:.4f} | {m['train_samples_per_s']:.0f} | {s['train_samples_per_s']:.0f} | "
          f"{s['train_samples_per_s'] / m['train_samples_per_s']:.2f} | {m['peak_rss_bytes'] / 2**20:.0f} MiB | "
          f"{s['peak_rss_bytes'] / 2**20:.0f} MiB | {s.get('data_bytes_read', 0) / 1e6:.0f} MB |")
files = sorted(glob.glob(os.path.join(out, "replicas*.jsonl")))
if not files:
    sys.exit(0)
reads = [events(os.path.basename(f), "epoch")[0]["data_bytes_read"] for f in files]
rep = events("replicas.jsonl", "epoch")[0]
print(f"\n{replicas} replicas, one epoch: P@1 {rep['p@1']:.4f}, {rep['train_samples_per_s']:.0f} samples/s over the group; "
      "bytes read per rank: " + ", ".join(f"{r / 1e6:.0f} MB ({100 * r / size:.1f}%)" for r in reads))
PY
