#!/usr/bin/env bash
# Nothing accepted silently (issue 46), one case of each class the hostile-input campaign found:
#   files read back are checked: a manifest edited, damaged, without its own checksum (refused unless
#   --accept-unchecked-checkpoint), an older epoch's copy put in place (named; an error with --strict),
#   a flipped bit in label_counts.bin, a slice that is a symlink to /dev/zero, manifest.json a directory;
#   numbers are range-checked in frugal's words (--tables, --active-target, --momentum nan, --threads,
#   evaluate --k 1e12) and sizes against --memory-limit before they are allocated (data stats of a header
#   declaring 2^32 - 1 labels runs in little memory; DLRM --embedding-dim 1e9 is refused);
#   suspicious but valid data warns, in the log and the metrics, and fails under --strict (a feature
#   value of 3e38, a stray label id); an empty training set runs zero steps; a gzipped Criteo file trains;
#   source locations appear with --verbose only; outputs on a full disk leave nothing behind (as root).
# Usage: test_hostile_inputs.sh FRUGAL
set -euo pipefail
F=$(realpath "$1")
TMP=$(mktemp -d)
trap 'mountpoint -q "$TMP/tiny" && umount "$TMP/tiny"; rm -rf "$TMP"' EXIT
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../shell_helpers.sh"
cd "$TMP"

run "$F" data synth-xmc --features 500 --labels 50 --train 2000 --test 300 --seed 1 --out d
T=(--test d/test.txt)
run "$F" train --train d/train.txt "${T[@]}" --epochs 3 --checkpoint ck --keep-checkpoints 3 --quiet
grep -q '"manifest_checksum"' ck/manifest.json && grep -q '"run"' ck/manifest.json
run "$F" evaluate --model ck "${T[@]}"
grep -qE "^ck: epoch 3, step [0-9]+ of run [0-9a-f]{16}$" last.log || { cat last.log; echo "evaluate does not say which epoch"; exit 1; }

# An older epoch's manifest copied over the top one: used, but named; refused under --strict.
cp -r ck old && cp old/epoch-1-*/manifest.json old/manifest.json
run "$F" evaluate --model old "${T[@]}"
grep -q "warning: old/manifest.json names epoch 1 .* holds a later checkpoint of the same run" last.log ||
  { cat last.log; echo "no warning about the older manifest"; exit 1; }
fails_with "(--strict makes warnings errors)" "$F" evaluate --model old "${T[@]}" --strict
fails_with "holds a later checkpoint of the same run" "$F" train --train d/train.txt "${T[@]}" --epochs 4 --resume old --strict --quiet

# An edited field, a removed checksum.
cp -r ck edited && sed -i 's/"epoch": 3/"epoch": 2/' edited/manifest.json
fails_with "edited/manifest.json: 'manifest_checksum' does not match its contents" "$F" evaluate --model edited "${T[@]}"
cp -r ck bare && python3 -c "
import json; p = 'bare/manifest.json'; m = json.load(open(p)); del m['manifest_checksum']; json.dump(m, open(p, 'w'))"
fails_with "pass --accept-unchecked-checkpoint to load it unchecked" "$F" evaluate --model bare "${T[@]}"
run "$F" evaluate --model bare "${T[@]}" --accept-unchecked-checkpoint

# label_counts.bin with one bit flipped.
cp -r ck counts && printf '\x07' | dd of=counts/label_counts.bin bs=1 seek=30 conv=notrunc status=none
fails_with "counts/label_counts.bin: its checksum" "$F" evaluate --model counts "${T[@]}"

# Special files: a slice that is a symlink to /dev/zero, a manifest that is a directory.
cp -r ck zero && slice=$(ls zero/epoch-3-*/slice0.ckpt) && rm "$slice" && ln -s /dev/zero "$slice"
fails_with "slice0.ckpt: a character device, expected a checkpoint slice" timeout 60 "$F" evaluate --model zero "${T[@]}"
fails_with "slice0.ckpt: a character device" timeout 60 "$F" evaluate --model zero "${T[@]}" --accept-unchecked-checkpoint
mkdir -p dir/manifest.json
fails_with "dir/manifest.json: not a regular file" "$F" evaluate --model dir "${T[@]}"
mkfifo fifo.txt
fails_with "fifo.txt: a FIFO, expected an XMC data file" timeout 60 "$F" train --train fifo.txt "${T[@]}"

# Numbers.
fails_with "--k 1000000000000: more than the model's 50 labels" timeout 60 "$F" evaluate --model ck "${T[@]}" --k 1000000000000
fails_with "--tables: 99999999999 is outside [1, 4096]" "$F" train --train d/train.txt "${T[@]}" --tables 99999999999
fails_with "--active-target: -5 is negative" "$F" train --train d/train.txt "${T[@]}" --active-target -5
fails_with "--momentum: nan is not a finite number" "$F" train --train d/train.txt "${T[@]}" --momentum nan
fails_with "--threads 1000000: expected 0 (all cores) up to" "$F" train --train d/train.txt "${T[@]}" --threads 1000000
fails_with "--memory-limit 1 MiB allows" "$F" train --train d/train.txt "${T[@]}" --hidden 4096 --memory-limit 1

# A header declaring 2^32 - 1 labels: data stats counts what occurs (and warns about the stray id).
{ echo "26 10 4294967295"; for l in $(seq 0 24) 4294967294; do echo "$l 0:1 3:2"; done; } > big.txt
run "$F" data stats big.txt
grep -q "labels               4294967295 (26 occur)" last.log && grep -q "label 4294967294 is far above every other label (the next largest is 24)" last.log ||
  { cat last.log; echo "data stats of 2^32 - 1 labels"; exit 1; }

# A feature value of 3e38: a warning in the log and the metrics; an error under --strict.
python3 - <<'PY'
lines = open("d/train.txt").read().split("\n")
fields = lines[5].split(" ")
fields[1] = fields[1].split(":")[0] + ":3e38"
lines[5] = " ".join(fields)
open("huge.txt", "w").write("\n".join(lines))
PY
run "$F" train --train huge.txt "${T[@]}" --epochs 1 --quiet --metrics m.jsonl
grep -q "warning: huge.txt: 1 feature value(s) beyond" last.log && grep -q '"event":"warning"' m.jsonl ||
  { cat last.log m.jsonl; echo "no warning for a feature value of 3e38"; exit 1; }
fails_with "(--strict makes warnings errors)" "$F" train --train huge.txt "${T[@]}" --epochs 1 --quiet --strict

# An empty training set: zero steps, PSP@k left out.
printf '0 500 50\n' > empty.txt
run "$F" train --train empty.txt "${T[@]}" --epochs 1 --quiet
grep -q "PSP@5 n/a" last.log || { cat last.log; echo "empty training set"; exit 1; }

# DLRM: a gzipped Criteo file trains; an embedding too large for memory is refused before allocation.
run "$F" data synth-ctr --train 2000 --test 300 --out c
gzip -k c/train.tsv
run "$F" train --model dlrm --train c/train.tsv.gz --test c/test.tsv --epochs 1 --quiet
fails_with "the model needs at least" "$F" train --model dlrm --train c/train.tsv --test c/test.tsv --epochs 1 --embedding-dim 1000000000

# IDX: a label byte of 255 among classes 0-9 (one image) warns; an error under --strict.
python3 - <<'PY'
import random, struct
random.seed(1)
n = 200
for kind in ("train", "t10k"):
    with open(f"{kind}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 2, 2) + bytes(random.randrange(256) for _ in range(n * 4)))
    labels = [i % 10 for i in range(n)]
    if kind == "train":
        labels[17] = 255
    with open(f"{kind}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))
PY
run "$F" train --format idx --train train --test t10k --epochs 1 --quiet
grep -q "warning: train-labels-idx1-ubyte: class 255 has a single image of 200" last.log ||
  { cat last.log; echo "no warning about a class of one image"; exit 1; }
fails_with "class 255 has a single image" "$F" train --format idx --train train --test t10k --epochs 1 --quiet --strict

# Source locations with --verbose only.
fails_with "--grid 3x1 needs 3 ranks, but the run has 1" "$F" train --train d/train.txt "${T[@]}" --grid 3x1
if grep -q "train/run/" fail.log; then cat fail.log; echo "a source location without --verbose"; exit 1; fi
fails_with "train/run/" "$F" train --train d/train.txt "${T[@]}" --grid 3x1 --verbose

# A full disk (root only: a 64 KiB tmpfs): no partial output, and keygen's retry works once there is room.
if [ "$(id -u)" = 0 ] && mkdir tiny && mount -t tmpfs -o size=64k tmpfs tiny 2>/dev/null; then
  fails_with "No space left on device" "$F" data synth-xmc --features 500 --labels 50 --train 2000 --test 300 --out tiny/d
  [ -z "$(ls -A tiny/d)" ] || { ls -la tiny/d; echo "synth-xmc left files on a full disk"; exit 1; }
  dd if=/dev/zero of=tiny/fill bs=1k count=64 status=none || true
  fails_with "tiny/key: write failed" "$F" keygen tiny/key
  if ls tiny | grep -c key > /dev/null; then ls -la tiny; echo "keygen left a file behind"; exit 1; fi
  rm tiny/fill
  run "$F" keygen tiny/key
  fails_with "exists already (it is not overwritten)" "$F" keygen tiny/key
else
  echo "(not root or no tmpfs: the full-disk cases are skipped)"
fi
# The check apps/dev.sh test runs over the suite's output finds library words (and passes clean output).
printf '%s\n' '{"name": "x", "stdout": "frugal: error: [json.exception.type_error.316] invalid UTF-8 byte"}' > words.json
if python3 "$HERE/../library_words.py" words.json > words.log; then cat words.log; echo "library_words.py missed one"; exit 1; fi
printf '%s\n' '{"name": "x", "stdout": "frugal: error: d/x.txt:3: bad token"}' > clean.json
python3 "$HERE/../library_words.py" clean.json > words.log || { cat words.log; exit 1; }
echo "OK: hostile inputs refused or warned about in frugal's words"
