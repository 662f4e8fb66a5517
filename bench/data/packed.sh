#!/usr/bin/env bash
# Packed data files (issue 66), on a synthetic set of Amazon-3M's size (1.7M training points, 337,067
# features, 1M labels; 36 features a point before merging, 5 labels a point), side by side with its text:
#  1. `frugal data pack`: seconds and peak memory (it streams: memory holds one block);
#  2. reading the training set whole (`frugal bench read`, what a run does at start-up), text then
#     packed, REPEATS (3) times each: seconds, bytes read, peak memory;
#  3. one training run on each form, and one streaming the packed form (1 rank, --hidden 128
#     --output-init random, MAX_STEPS steps,
#     no validation split, a 2,000-point test file): the "read" seconds of its log (both sets, the
#     checks), steady samples/s, peak RSS, and that the losses agree bit for bit.
# Writes $OUT/*.json, *.jsonl and *.log; prints the table (load average before and after).
# Usage: bash bench/data/packed.sh [BUILD_DIR] [OUT_DIR]   (THREADS=2, REPEATS=3, MAX_STEPS=300,
#        POINTS=1700000: a smaller POINTS for a quick look)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=${2:-.bench/data/packed}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-3}
MAX_STEPS=${MAX_STEPS:-300}
POINTS=${POINTS:-1700000}
FRUGAL="$BUILD/apps/frugal"
[ -x "$FRUGAL" ] || { echo "no $FRUGAL: build first (bash apps/dev.sh build)" >&2; exit 1; }
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
mkdir -p "$OUT"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
say "commit $(git rev-parse --short HEAD), $(nproc) cores, load $LOAD_BEFORE"
D="$OUT/set"
if [ ! -f "$D/train.txt" ] || [ "$(head -1 "$D/train.txt" | cut -d' ' -f1)" != "$POINTS" ] ||
   [ "$(head -1 "$D/test.txt" | cut -d' ' -f1)" != 2000 ]; then
  say "generating $POINTS points (Amazon-3M's size)"
  "$FRUGAL" data synth-xmc --out "$D" --train "$POINTS" --test 2000 --features 337067 --labels 1000000 --nnz 36 \
    --labels-per-point 5 --seed 1
fi
say "1. frugal data pack"
rm -f "$D/train.fpk" "$D/test.fpk"
/usr/bin/time -f '{"seconds": %e, "peak_rss_kib": %M}' -o "$OUT/pack_time.json" \
  "$FRUGAL" data pack "$D/train.txt" "$D/train.fpk" | tee "$OUT/pack.log"
"$FRUGAL" data pack "$D/test.txt" "$D/test.fpk" > /dev/null
say "2. reading the training set whole, $REPEATS times each form"
: > "$OUT/read.jsonl"
for i in $(seq "$REPEATS"); do
  for form in txt fpk; do "$FRUGAL" bench read "$D/train.$form" | tee -a "$OUT/read.jsonl"; done
done
say "3. training, $MAX_STEPS steps, each form"
for form in txt fpk stream; do
  rm -f "$OUT/train_$form.jsonl"
  file=$form stream=off
  [ "$form" = stream ] && file=fpk stream=on  # the packed file streamed: its start-up reads no points whole
  "$FRUGAL" train --train "$D/train.$file" --test "$D/test.$file" --hidden 128 --output-init random --epochs 1 \
    --max-steps "$MAX_STEPS" --valid-fraction 0 --seed 1 --threads "$THREADS" --stream "$stream" \
    --metrics "$OUT/train_$form.jsonl" 2>&1 | tee "$OUT/train_$form.log" | grep -E "^read|^streaming|samples/s"
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$OUT" "$LOAD_BEFORE" "$LOAD_AFTER" <<'PY'
import json, os, statistics, sys
out, before, after = sys.argv[1:4]
pack = json.load(open(os.path.join(out, "pack_time.json")))
reads = [json.loads(l) for l in open(os.path.join(out, "read.jsonl"))]
def med(form, key):
    return statistics.median(r[key] for r in reads if r["packed"] == (form == "fpk"))
def run(form):
    recs = [json.loads(l) for l in open(os.path.join(out, f"train_{form}.jsonl"))]
    start = next(r for r in recs if r.get("event") == "start")
    last = [r for r in recs if "train_samples_per_s" in r][-1]
    return start, last
text_bytes = os.path.getsize(os.path.join(out, "set", "train.txt"))
packed_bytes = os.path.getsize(os.path.join(out, "set", "train.fpk"))
print(f"\nload average before {before}, after {after}")
print(f"pack: {pack['seconds']:.1f} s, peak RSS {pack['peak_rss_kib'] / 1024:.0f} MiB; "
      f"text {text_bytes / 1e6:.0f} MB -> packed {packed_bytes / 1e6:.0f} MB")
print("\n| form | read whole (median of runs) | bytes read | peak RSS | run's read line (both sets, checks) | samples/s | peak RSS of the run |")
print("|---|---|---|---|---|---|---|")
runs = {}
for form, name in (("txt", "text"), ("fpk", "packed"), ("stream", "packed, streamed")):
    start, last = runs[form] = run(form)
    whole = (f"{med(form, 'seconds'):.2f} s | {med(form, 'bytes_read') / 1e6:.0f} MB | "
             f"{med(form, 'peak_rss_bytes') / 2**20:.0f} MiB" if form != "stream" else "- | - | -")
    print(f"| {name} | {whole} | {start['parse_seconds']:.2f} s | "
          f"{last['train_samples_per_s']:.0f} | {last['peak_rss_bytes'] / 2**20:.0f} MiB |")
ratio = med("txt", "seconds") / med("fpk", "seconds")
same = runs["txt"][1]["loss"] == runs["fpk"][1]["loss"]
print(f"\nreading: packed {ratio:.1f}x faster than parsing the text; training: "
      f"{runs['fpk'][1]['train_samples_per_s'] / runs['txt'][1]['train_samples_per_s']:.2f}x the text's samples/s; "
      f"losses {'bit-identical' if same else 'DIFFER'} ({runs['txt'][1]['loss']!r}); start-up streamed "
      f"{runs['stream'][0]['parse_seconds']:.2f} s: {runs['txt'][0]['parse_seconds'] / runs['stream'][0]['parse_seconds']:.0f}x "
      f"the text's run")
PY
