#!/usr/bin/env bash
# `frugal data synth-ctr` and `frugal data stats` on Criteo-format files, through the binary:
#  1. synth-ctr writes DIR/train.tsv, DIR/test.tsv and DIR/info.json, prints the Bayes-optimal AUC
#     it records, and the same seed writes the same files;
#  2. stats reads .tsv and .tsv.gz as Criteo (or any name with --format criteo) and counts them;
#  3. a malformed line fails naming file:line and the column; a bad flag fails naming the flag.
# Usage: test_data_ctr.sh FRUGAL
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"

# 1.
run "$FRUGAL" data synth-ctr --train 2000 --test 500 --seed 3 --out "$TMP/a"
grep -q "Bayes-optimal on the test set: AUC 0\.[0-9]" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
for f in train.tsv test.tsv info.json; do [ -s "$TMP/a/$f" ] || { echo "no $TMP/a/$f"; exit 1; }; done
[ "$(wc -l < "$TMP/a/train.tsv")" = 2000 ] && [ "$(wc -l < "$TMP/a/test.tsv")" = 500 ] || { echo "wrong line counts"; exit 1; }
python3 - "$TMP/a/info.json" "$TMP/last.log" <<'PY'
import json, re, sys
info = json.load(open(sys.argv[1]))
printed = float(re.search(r"AUC ([0-9.]+)", open(sys.argv[2]).read()).group(1))
assert abs(info["bayes_auc"] - printed) < 1e-4, (info["bayes_auc"], printed)
assert 0.6 < info["bayes_auc"] < 0.95 and len(info["vocab_sizes"]) == 26 and info["seed"] == 3, info
PY
run "$FRUGAL" data synth-ctr --train 2000 --test 500 --seed 3 --out "$TMP/b"
cmp "$TMP/a/train.tsv" "$TMP/b/train.tsv" && cmp "$TMP/a/info.json" "$TMP/b/info.json"

# 2.
run "$FRUGAL" data stats "$TMP/a/train.tsv"
grep -q "samples   2000" "$TMP/last.log" && grep -qE "^ +C26 " "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
gzip -c "$TMP/a/train.tsv" > "$TMP/a/train.tsv.gz"
cp "$TMP/last.log" "$TMP/plain.log"
run "$FRUGAL" data stats "$TMP/a/train.tsv.gz"
diff <(tail -n +2 "$TMP/plain.log") <(tail -n +2 "$TMP/last.log")
cp "$TMP/a/test.tsv" "$TMP/a/test.data"
run "$FRUGAL" data stats --format criteo "$TMP/a/test.data"
grep -q "samples   500" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
fails_with "test.tsv:1: bad header" "$FRUGAL" data stats --format xmc "$TMP/a/test.tsv"

# 3.
{ head -n 4 "$TMP/a/test.tsv"; head -n 1 "$TMP/a/test.tsv" | sed 's/^[01]\t/x\t/'; } > "$TMP/bad.tsv"
fails_with "$TMP/bad.tsv:5: column 1 (label): bad label 'x': expected 0 or 1" "$FRUGAL" data stats "$TMP/bad.tsv"
fails_with "synth-ctr: --zipf must be in (0, 10]" "$FRUGAL" data synth-ctr --zipf 0 --out "$TMP/c"
echo "ok: synth-ctr and stats on Criteo-format files"
