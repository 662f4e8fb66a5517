#!/usr/bin/env bash
# `frugal predict` and `frugal evaluate` end to end, against a model trained by `frugal train`:
#  1. predict writes one 'label:score' line per point, the same to --out and to stdout, with or
#     without labels in the input, and the same under `frugal launch -n 2` (each rank scores half
#     the labels) as on one rank; a checkpoint made by 2 ranks predicts the same on 1;
#  2. evaluate prints every metric, its P@k equal to training's last epoch, PSP@k from the label
#     counts saved with the checkpoint equal to those from --train, the same under launch -n 2;
#  3. errors name the file and line: a malformed point, a feature id beyond the model's input, a
#     directory without a checkpoint; a failed predict leaves no output file.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 1000 --labels 200 --train 1500 --test 150 --nnz 15 --labels-per-point 3 \
  --seed 4 --out "$TMP/data" > /dev/null
D=$TMP/data
TRAIN=(train --train "$D/train.txt" --test "$D/test.txt" --epochs 2 --threads 1 --quiet --hidden 24 --batch 64
       --tables 10 --seed 3)
run "$FRUGAL" "${TRAIN[@]}" --metrics "$TMP/train.jsonl" --checkpoint "$TMP/ckpt"
test -f "$TMP/ckpt/label_counts.bin"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${TRAIN[@]}" --checkpoint "$TMP/ckpt2"

P=(predict --model "$TMP/ckpt" --top-k 4 --threads 1)
run "$FRUGAL" "${P[@]}" --input "$D/test.txt" --out "$TMP/pred1.txt"
"$FRUGAL" "${P[@]}" --input "$D/test.txt" > "$TMP/pred_stdout.txt"
cmp "$TMP/pred1.txt" "$TMP/pred_stdout.txt"
# Other chunk sizes give the same labels; the logits may differ in the last bits (oneDNN blocks
# products by their row count), so they are compared with a tolerance below.
"$FRUGAL" "${P[@]}" --input "$D/test.txt" --batch 7 > "$TMP/pred_batch7.txt"
# The same points without their labels (each line starts with a space).
awk 'NR == 1 { print; next } { sub(/^[^ ]*/, ""); print }' "$D/test.txt" > "$TMP/unlabelled.txt"
run "$FRUGAL" "${P[@]}" --input "$TMP/unlabelled.txt" --out "$TMP/pred_unlabelled.txt"
cmp "$TMP/pred1.txt" "$TMP/pred_unlabelled.txt"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${P[@]}" --input "$D/test.txt" --out "$TMP/pred2.txt"
run "$FRUGAL" predict --model "$TMP/ckpt2" --top-k 4 --threads 1 --input "$D/test.txt" --out "$TMP/pred_ckpt2_1.txt"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" predict --model "$TMP/ckpt2" --top-k 4 --threads 1 --input "$D/test.txt" \
  --out "$TMP/pred_ckpt2_2.txt"

E=(evaluate --model "$TMP/ckpt" --test "$D/test.txt" --threads 1)
run "$FRUGAL" "${E[@]}"
cp "$TMP/last.log" "$TMP/eval.txt"
run "$FRUGAL" "${E[@]}" --json
cp "$TMP/last.log" "$TMP/eval.json"
# LSH inference: scores fewer labels per point than the 200 of exact inference, same metric keys.
run "$FRUGAL" "${E[@]}" --json --infer lsh
cp "$TMP/last.log" "$TMP/eval_lsh.json"
run "$FRUGAL" "${P[@]}" --input "$D/test.txt" --infer lsh --out "$TMP/pred_lsh.txt"
run "$FRUGAL" "${E[@]}" --json --train "$D/train.txt" --k 1,2 --propensity-a 0.6 --propensity-b 2
cp "$TMP/last.log" "$TMP/eval_train.json"
run "$FRUGAL" "${E[@]}" --json --train "$D/train.txt" --propensity-a 0.55 --propensity-b 1.5
cp "$TMP/last.log" "$TMP/eval_train_default.json"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${E[@]}" --json
cp "$TMP/last.log" "$TMP/eval2.json"

# Errors: a malformed point (line 6 of the file), a feature id beyond the model's input, no checkpoint.
awk 'NR == 6 { print "1,2 3:0.5 oops"; next } { print }' "$D/test.txt" > "$TMP/bad.txt"
fails_with "$TMP/bad.txt:6: bad token 'oops'" "$FRUGAL" "${P[@]}" --input "$TMP/bad.txt" --out "$TMP/bad_pred.txt"
test ! -e "$TMP/bad_pred.txt" && test ! -e "$TMP/bad_pred.txt.tmp"
fails_with "$TMP/bad.txt:6: bad token 'oops'" "$FRUGAL" "${E[@]/$D\/test.txt/$TMP/bad.txt}"
fails_with "$TMP/bad.txt:6: bad token 'oops'" "$FRUGAL" launch -n 2 -- "$FRUGAL" "${P[@]}" --input "$TMP/bad.txt" \
  --out "$TMP/bad_pred.txt"
printf '2 5000 200\n1 3:1\n2 4000:1\n' > "$TMP/wide.txt"
fails_with "$TMP/wide.txt:3: feature id 4000 >= the model's input features F = 1000" \
  "$FRUGAL" "${P[@]}" --input "$TMP/wide.txt"
fails_with "$TMP/nothing: no checkpoint here" "$FRUGAL" predict --model "$TMP/nothing" --input "$D/test.txt"

python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def lines(name):
    return [l.rstrip("\n") for l in open(os.path.join(d, name))]
def parse(name):
    return [[(int(l), float(s)) for l, s in (p.split(":") for p in line.split())] for line in lines(name)]
one = parse("pred1.txt")
assert len(one) == 150 and all(len(r) == 4 for r in one), (len(one), one[:2])
for r in one:
    assert [s for _, s in r] == sorted((s for _, s in r), reverse=True), r  # best first
def same(a, b, what):
    assert len(a) == len(b), what
    for x, y in zip(a, b):
        assert [l for l, _ in x] == [l for l, _ in y], (what, x, y)
        assert all(abs(s - t) <= 1e-4 * max(1.0, abs(s)) for (_, s), (_, t) in zip(x, y)), (what, x, y)
same(one, parse("pred2.txt"), "launch -n 2 vs 1 rank")
same(one, parse("pred_batch7.txt"), "--batch 7 vs the default chunk")
same(parse("pred_ckpt2_1.txt"), parse("pred_ckpt2_2.txt"), "2-rank checkpoint on 1 vs 2 ranks")
epochs = [r for r in map(json.loads, open(os.path.join(d, "train.jsonl"))) if r["event"] == "epoch"]
last = epochs[-1]
for key in ("p@1", "p@3", "p@5", "ndcg@1", "ndcg@3", "ndcg@5", "psp@1", "psp@3", "psp@5"):
    assert key in last, key
# stderr (merged into these logs) also has evaluate's "scored N points in ..." line and the
# checkpoint's "DIR: epoch E, step S of run R" line: skip them.
def metric_lines(name):
    return [l for l in lines(name) if "scored" not in l and ": epoch " not in l]
assert any("scored 150 points" in l and "exact inference" in l for l in lines("eval.txt")), lines("eval.txt")
text = dict(l.split() for l in metric_lines("eval.txt"))
ev = json.loads(metric_lines("eval.json")[-1])
lsh = json.loads(metric_lines("eval_lsh.json")[-1])
assert set(lsh) == set(ev), lsh
scored = [l for l in lines("eval_lsh.json") if "lsh inference" in l]
assert scored and int(scored[0].split(" labels scored")[0].rsplit(" ", 1)[1]) < 200, scored
assert len(parse("pred_lsh.txt")) == 150
keys = [f"{m}@{k}" for m in ("p", "ndcg", "psp", "psndcg", "recall", "coverage") for k in (1, 3, 5)]
assert list(text) == keys, list(text)  # one metric per line, grouped by metric
assert set(ev) == set(keys), ev
for key in ("p@1", "p@3", "p@5", "ndcg@5", "psp@5"):
    assert abs(ev[key] - last[key]) < 1e-9, (key, ev[key], last[key])
    assert text[key] == "%.4f" % ev[key], (key, text[key])
default = json.loads(metric_lines("eval_train_default.json")[-1])
for key in keys:
    assert abs(default[key] - ev[key]) < 1e-9, ("--train vs saved counts", key)
other = json.loads(metric_lines("eval_train.json")[-1])
assert set(other) == {f"{m}@{k}" for m in ("p", "ndcg", "psp", "psndcg", "recall", "coverage") for k in (1, 2)}, other
assert other["p@1"] == ev["p@1"] and other["psp@1"] != ev["psp@1"], other
two = json.loads(metric_lines("eval2.json")[-1].split("] ", 1)[1])  # the launcher prefixes "[0] "
for key in keys:
    assert abs(two[key] - ev[key]) < 1e-6, ("launch -n 2", key, two[key], ev[key])
print("OK: predict on 1 rank == 2 ranks == stdout == unlabelled input; evaluate == training's last epoch "
      "(p@1 %.4f, ndcg@5 %.4f, psp@5 %.4f)" % (ev["p@1"], ev["ndcg@5"], ev["psp@5"]))
PY
