#!/usr/bin/env bash
# One run, three faces (issue 63): the same settings through `frugal train`, through the run API from
# C++ (run_api_driver) and through Python's frugal.train give the same bits: every epoch's loss and
# P@1 in the metrics logs are equal. XMC on 1 rank, a 2-rank model-parallel grid, a 2-stage pipeline
# (both under `frugal launch`) and DLRM.
#   test_run_api.sh FRUGAL DRIVER SOURCE_ROOT BUILD_ROOT
set -euo pipefail
F=$1 DRIVER=$2 ROOT=$3 BUILD=$4
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
run() { echo "+ $*"; "$@" > run.log 2>&1 || { cat run.log; exit 1; }; }
# Every epoch record's loss and P@1 (or AUC) of two metrics logs, equal to the last bit.
same() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def epochs(path):
    out = []
    for line in open(path):
        r = json.loads(line)
        if r.get("event") == "epoch":
            out.append((r["epoch"], r["loss"], r.get("p@1", r.get("auc"))))
    return out
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
if not a or a != b:
    sys.exit(f"{sys.argv[1]} and {sys.argv[2]} differ:\n{a}\n{b}")
print(f"same bits: {sys.argv[1]} and {sys.argv[2]} ({len(a)} epochs, loss {a[-1][1]!r})")
PY
}
run "$F" data synth-xmc --features 1500 --labels 400 --train 1500 --test 300 --seed 5 --out x
T=(--train x/train.txt --test x/test.txt --epochs 2 --threads 1 --quiet)

# XMC, one rank: the command line, C++ and Python.
run "$F" train "${T[@]}" --metrics cli.jsonl
run "$DRIVER" x/train.txt x/test.txt api.jsonl epochs=2 threads=1
same cli.jsonl api.jsonl
if [ -d "$BUILD/python/frugal" ]; then
  PYTHONPATH="$BUILD/python" run "${FRUGAL_PYTHON:-python3}" -c '
import frugal
frugal.train("x/train.txt", test="x/test.txt", epochs=2, threads=1, quiet=True, metrics="py.jsonl")'
  same cli.jsonl py.jsonl
fi

# A 2-rank model-parallel grid and a 2-stage pipeline, under frugal launch.
L2=("$F" launch --ranks 2 --)
run "${L2[@]}" "$F" train "${T[@]}" --metrics grid-cli.jsonl
run "${L2[@]}" "$DRIVER" x/train.txt x/test.txt grid-api.jsonl epochs=2 threads=1
same grid-cli.jsonl grid-api.jsonl
same grid-cli.rank1.jsonl grid-api.rank1.jsonl
run "${L2[@]}" "$F" train "${T[@]}" --layers 48,32 --pipeline 2 --metrics pipe-cli.jsonl
run "${L2[@]}" "$DRIVER" x/train.txt x/test.txt pipe-api.jsonl epochs=2 threads=1 layers=48,32 pipeline=2
same pipe-cli.jsonl pipe-api.jsonl

# DLRM on click logs.
run "$F" data synth-ctr --train 1500 --test 300 --seed 3 --out c
run "$F" train --model dlrm --train c/train.tsv --test c/test.tsv --epochs 2 --threads 1 --quiet --metrics dlrm-cli.jsonl
run "$DRIVER" c/train.tsv c/test.tsv dlrm-api.jsonl model=dlrm epochs=2 threads=1
same dlrm-cli.jsonl dlrm-api.jsonl
grep -q "^epochs 2$" run.log && grep -q "^auc 0\.[0-9]*$" run.log ||
  { cat run.log; echo "DLRM's epochs did not reach the run's result"; exit 1; }
# Options set from their text through the library's table (run::set_option), DLRM's clipping and
# schedule among them: the command line's bits.
run "$F" train --model dlrm --train c/train.tsv --test c/test.tsv --epochs 2 --threads 1 --quiet --clip-norm 0.05 \
  --lr-schedule cosine --warmup-steps 3 --metrics dlrm-clip-cli.jsonl
run "$DRIVER" c/train.tsv c/test.tsv dlrm-clip-api.jsonl model=dlrm epochs=2 threads=1 --clip-norm=0.05 \
  --lr-schedule=cosine --warmup-steps=3
same dlrm-clip-cli.jsonl dlrm-clip-api.jsonl
echo "test_run_api: PASS"
