#!/usr/bin/env bash
# `frugal data pack IN OUT` and the packed form wherever a data file is read, through the binary:
#  1. an XMC set packs (stats unchanged); training on the packed train and test files gives the
#     text's losses and P@k bit for bit, and predict / evaluate on a packed file the text's output;
#     a checkpoint resumes on the packed form as the same data, and names other data;
#  2. Criteo logs pack; `--model dlrm` trains on them as on the text;
#  3. a damaged, truncated or other-kind packed file is refused naming the file (and the block);
#     pack refuses a missing input, an input already packed and writing over its input.
# Usage: test_data_pack.sh FRUGAL
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
D=$TMP/x

# 1.
run "$FRUGAL" data synth-xmc --features 2000 --labels 300 --train 3000 --test 400 --nnz 20 --seed 5 --out "$D"
run "$FRUGAL" data pack "$D/train.txt" "$D/train.fpk"
grep -q "wrote $D/train.fpk (3000 points, 2000 features, 300 labels, 1 blocks" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
run "$FRUGAL" data pack "$D/test.txt" "$D/test.fpk"
run "$FRUGAL" data stats "$D/train.txt"; tail -n +2 "$TMP/last.log" > "$TMP/stats.txt"
run "$FRUGAL" data stats "$D/train.fpk"; diff "$TMP/stats.txt" <(tail -n +2 "$TMP/last.log")
for form in txt fpk; do
  run "$FRUGAL" train --train "$D/train.$form" --test "$D/test.$form" --epochs 2 --hidden 32 --threads 1 --seed 2 \
    --checkpoint "$TMP/ck.$form" --metrics "$TMP/m.$form.jsonl"
  run "$FRUGAL" evaluate --model "$TMP/ck.$form" --test "$D/test.$form" --threads 1
  grep -E "@[0-9] " "$TMP/last.log" > "$TMP/eval.$form" || { cat "$TMP/last.log"; exit 1; }
  run "$FRUGAL" predict --model "$TMP/ck.$form" --input "$D/test.$form" --out "$TMP/pred.$form" --threads 1
done
python3 - "$TMP/m.txt.jsonl" "$TMP/m.fpk.jsonl" <<'PY'
import json, sys
def epochs(path):
    return [(r["epoch"], r["loss"], r["p@1"], r["p@5"]) for r in map(json.loads, open(path)) if "p@1" in r]
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
assert len(a) == 2 and a == b, (a, b)
PY
diff "$TMP/eval.txt" "$TMP/eval.fpk"
cmp "$TMP/pred.txt" "$TMP/pred.fpk"
# Checkpoints record the data's identity: resuming on the packed form of the text a checkpoint trained
# on is the same data (no note); on other data of the same shape the log says so.
run "$FRUGAL" train --train "$D/train.fpk" --test "$D/test.fpk" --epochs 3 --hidden 32 --threads 1 --seed 2 \
  --resume "$TMP/ck.txt"
! grep -q "trained on other data" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
run "$FRUGAL" data synth-xmc --features 2000 --labels 300 --train 3000 --test 400 --nnz 20 --seed 6 --out "$TMP/y"
run "$FRUGAL" train --train "$TMP/y/train.txt" --test "$D/test.fpk" --epochs 3 --hidden 32 --threads 1 --seed 2 \
  --resume "$TMP/ck.txt"
grep -qF "note: --resume $TMP/ck.txt: the checkpoint trained on other data" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }

# 2.
run "$FRUGAL" data synth-ctr --train 3000 --test 500 --vocab-scale 0.01 --seed 2 --out "$TMP/c"
run "$FRUGAL" data pack "$TMP/c/train.tsv" "$TMP/c/train.fpk"
grep -q "3000 click-log samples" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
run "$FRUGAL" data pack "$TMP/c/test.tsv" "$TMP/c/test.fpk"
for form in tsv fpk; do
  run "$FRUGAL" train --model dlrm --train "$TMP/c/train.$form" --test "$TMP/c/test.$form" --epochs 2 --threads 1 \
    --seed 3 --metrics "$TMP/d.$form.jsonl"
done
python3 - "$TMP/d.tsv.jsonl" "$TMP/d.fpk.jsonl" <<'PY'
import json, sys
def epochs(path):
    return [(r["epoch"], r["loss"], r["auc"]) for r in map(json.loads, open(path)) if "auc" in r]
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
assert len(a) == 2 and a == b, (a, b)
PY

# 3.
cp "$D/train.fpk" "$TMP/bad.fpk"
printf '\x7f' | dd of="$TMP/bad.fpk" bs=1 seek=5000 conv=notrunc status=none
fails_with "$TMP/bad.fpk: block 1 of 1 (points 0-2999) is damaged" \
  "$FRUGAL" train --train "$TMP/bad.fpk" --test "$D/test.fpk" --epochs 1 --threads 1
head -c 100000 "$D/train.fpk" > "$TMP/short.fpk"
fails_with "$TMP/short.fpk: truncated" "$FRUGAL" train --train "$TMP/short.fpk" --test "$D/test.fpk" --threads 1
fails_with "$TMP/short.fpk: truncated" "$FRUGAL" evaluate --model "$TMP/ck.txt" --test "$TMP/short.fpk" --threads 1
fails_with "not Criteo-format click logs" "$FRUGAL" train --model dlrm --train "$D/train.fpk" --test "$D/test.fpk"
fails_with "packed Criteo click logs, not" "$FRUGAL" train --train "$TMP/c/train.fpk" --test "$D/test.fpk" --model xmc \
  --format xmc
fails_with "$TMP/none.txt: no such file" "$FRUGAL" data pack "$TMP/none.txt" "$TMP/none.fpk"
fails_with "already packed" "$FRUGAL" data pack "$D/train.fpk" "$TMP/again.fpk"
fails_with "output and input are the same file" "$FRUGAL" data pack "$D/train.txt" "$D/train.txt"
[ ! -e "$TMP/none.fpk" ] && [ -z "$(ls "$D" | grep tmp || true)" ] || { ls "$D" "$TMP"; echo "a failed pack left files"; exit 1; }
echo "OK: packed XMC and Criteo files train, predict and evaluate as their text; damaged files are refused"
