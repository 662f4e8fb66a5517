#!/usr/bin/env bash
# `frugal train --model dlrm` streaming a packed training file (core/data/ctr_stream.h), through the
# binary, on a 200,000-sample synth-ctr set (4 blocks):
#  1. --stream on: the same seed gives the same run; its test AUC is the in-memory run's within 0.01
#     (another order: shuffled within windows of blocks, not over the whole file);
#  2. 2 ranks under `frugal launch` agree on every epoch's loss, each reads its share of the blocks
#     (data_bytes_read below 3/4 of the file), and end within 0.02 AUC of one rank;
#     ranks whose packed files are cut into other blocks are refused, naming train_blocks;
#  3. by default a set that would take more than half of --memory-limit streams, and says so;
#  4. --stream on with a text file names the pack command (DLRM and the XMC network alike);
#  5. in a memory cgroup of 450 MiB (where root may make one), a 2M-sample set (528 MiB in memory)
#     streams to the end below the cap, and the same set held in memory is killed.
# Usage: test_train_stream.sh FRUGAL
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
run "$FRUGAL" data synth-ctr --train 200000 --test 5000 --vocab-scale 0.05 --seed 2 --out "$TMP/d"
run "$FRUGAL" data pack "$TMP/d/train.tsv" "$TMP/d/train.fpk"
COMMON=(train --model dlrm --train "$TMP/d/train.fpk" --test "$TMP/d/test.tsv" --epochs 2 --seed 3 --batch 256)

# 1.
run "$FRUGAL" "${COMMON[@]}" --threads 1 --stream on --metrics "$TMP/s1.jsonl"
grep -qF "streaming $TMP/d/train.fpk from disk: 200000 samples in 4 blocks" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
run "$FRUGAL" "${COMMON[@]}" --threads 1 --stream on --metrics "$TMP/s2.jsonl"
run "$FRUGAL" "${COMMON[@]}" --threads 1 --stream off --metrics "$TMP/mem.jsonl"
# 2.
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --threads 1 --stream on --metrics "$TMP/r2.jsonl"
python3 - "$TMP" "$(stat -c %s "$TMP/d/train.fpk")" <<'PY'
import json, sys
tmp, size = sys.argv[1], int(sys.argv[2])
def epochs(path):
    return [r for r in map(json.loads, open(path)) if r.get("event") == "epoch"]
s1, s2, mem = epochs(f"{tmp}/s1.jsonl"), epochs(f"{tmp}/s2.jsonl"), epochs(f"{tmp}/mem.jsonl")
keys = ("loss", "auc", "valid_auc")
assert [[e[k] for k in keys] for e in s1] == [[e[k] for k in keys] for e in s2], (s1, s2)
assert len(s1) == 2 and abs(s1[-1]["auc"] - mem[-1]["auc"]) < 0.01, (s1[-1]["auc"], mem[-1]["auc"])
assert all(e["data_bytes_read"] > 0.9 * size for e in s1), [e["data_bytes_read"] for e in s1]  # one rank: the file
r0, r1 = epochs(f"{tmp}/r2.jsonl"), epochs(f"{tmp}/r2.rank1.jsonl")
assert [e["loss"] for e in r0] == [e["loss"] for e in r1], (r0, r1)
for e in r0 + r1:
    assert 0 < e["data_bytes_read"] < 0.75 * size, (e["data_bytes_read"], size)
assert abs(r0[-1]["auc"] - s1[-1]["auc"]) < 0.02, (r0[-1]["auc"], s1[-1]["auc"])
print("stream AUC", s1[-1]["auc"], "in memory", mem[-1]["auc"], "2 ranks", r0[-1]["auc"])
PY
# Ranks that cut the file into other blocks (the same data packed with another --block-points) are
# refused at rendezvous: each reads its own blocks.
run "$FRUGAL" data pack --block-points 30000 "$TMP/d/train.tsv" "$TMP/d/train-30k.fpk"
grep -qF "7 blocks" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
if "$FRUGAL" launch -n 2 -- bash -c \
    'f=$1; [ "$FRUGAL_RANK" = 1 ] && f=$2; shift 2; exec "$0" train --model dlrm --train "$f" "$@"' \
    "$FRUGAL" "$TMP/d/train.fpk" "$TMP/d/train-30k.fpk" --test "$TMP/d/test.tsv" --stream on --max-steps 5 \
    --threads 1 > "$TMP/blocks.log" 2>&1; then
  cat "$TMP/blocks.log"; echo "ranks streaming other blocks trained anyway"; exit 1
fi
grep -q "train_blocks" "$TMP/blocks.log" || { cat "$TMP/blocks.log"; echo "the error does not name train_blocks"; exit 1; }

# 3.
run "$FRUGAL" train --model dlrm --train "$TMP/d/train.fpk" --test "$TMP/d/test.tsv" --threads 1 --epochs 1 \
  --max-steps 20 --memory-limit 80
grep -qF "more than half of what this run may use: --stream auto" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
# 4.
fails_with "--stream on: $TMP/d/train.tsv is a text file; streaming reads the packed form (frugal data pack" \
  "$FRUGAL" train --model dlrm --train "$TMP/d/train.tsv" --test "$TMP/d/test.tsv" --stream on
"$FRUGAL" data synth-xmc --features 200 --labels 20 --train 200 --test 20 --nnz 5 --out "$TMP/x" > /dev/null
fails_with "--stream on: $TMP/x/train.txt is a text file; streaming reads the packed form (frugal data pack" \
  "$FRUGAL" train --train "$TMP/x/train.txt" --test "$TMP/x/test.txt" --stream on
# 5. Under a real memory cap (a memory cgroup, page cache included, where this machine lets root make
# one): a set larger than the cap streams to the end, and held in memory it is killed, so the cap binds.
if memory_cgroup 450; then
  # 2M samples: 528 MiB as a data set in memory, 640 MB packed, against 450 MiB for the whole process.
  run "$FRUGAL" data synth-ctr --train 2000000 --test 2000 --vocab-scale 0.02 --seed 1 --out "$TMP/big"
  run "$FRUGAL" data pack "$TMP/big/train.tsv" "$TMP/big/train.fpk"
  rm "$TMP/big/train.tsv"
  BIG=(train --model dlrm --train "$TMP/big/train.fpk" --test "$TMP/big/test.tsv" --epochs 1 --max-steps 300
       --threads 1 --metrics "$TMP/big.jsonl")
  run capped "$FRUGAL" "${BIG[@]}" --stream on
  python3 - "$TMP/big.jsonl" <<'PY'
import json, sys
e = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "epoch"][-1]
assert e["peak_rss_bytes"] < 450 * 2**20 and e["auc"] > 0.55, e
print("streamed under a 450 MiB cap: peak RSS", e["peak_rss_bytes"] >> 20, "MiB, AUC", round(e["auc"], 4))
PY
  fails_capped "$TMP/held.log" "$FRUGAL" "${BIG[@]}" --stream off
else
  echo "no writable memory cgroup here: the capped run (part 5) is skipped"
fi
echo "OK: DLRM streams a packed file (repeatable, its shards per rank, auto under a memory limit, under a cap)"
