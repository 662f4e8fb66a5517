#!/usr/bin/env bash
# `frugal train` optimizer and regularization flags end to end:
#  1. every flag at once (SGD, weight decay, cosine schedule with warm-up, clipping, dropout,
#     validation split, early stopping): epoch lines carry valid_p@1, grad_norm and
#     clipped_fraction; the best model is kept in CHECKPOINT/best (also on 2 ranks); the manifest
#     records the settings; 2 data-parallel replicas each score half the split and agree;
#     --valid-every scores within epochs without changing the training, and a better middle of an
#     epoch is the model returned and served;
#  2. --early-stopping with no validation set, and resuming with another --lr-schedule or --epochs
#     under a decaying schedule, fail naming the problem; without --checkpoint the best epoch is
#     kept in memory and returned;
#  3. 1 epoch + --resume for a 2nd equals 2 epochs straight (catch-up AdamW, warm-up, clipping,
#     dropout): identical loss and P@1;
#  4. ranks started with different --sparse-updates (or --max-steps, --eval-batch) refuse to run together;
#     ones with different --threads and --metrics run; --dp-explore repeats bit for bit and adds bytes;
#  5. --device emulated (the counting device) trains the CPU's bits and logs host_device_bytes_per_sample;
#     --dp-compress updates there fails naming the flags;
#  6. --compress link (the default) stays off on one machine's loopback and chooses auto through a
#     20 Mbit emulated link (root only);
#     --compress auto on two replicas: the keep falls, the epoch line says so, and a resumed run
#     continues the controller exactly.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # ip and tc, for the slow-link check
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 3000 --labels 600 --train 3000 --test 300 --nnz 20 --labels-per-point 3 \
  --seed 2 --out "$TMP/data" > /dev/null
COMMON=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --threads 1 --quiet --hidden 32 --batch 64
        --seed 3)
run "$FRUGAL" "${COMMON[@]}" --epochs 4 --optimizer sgd --sparse-updates catchup --momentum 0.8 --weight-decay 1e-4 --lr-schedule cosine \
  --warmup-steps 5 --clip-norm 0.5 --dropout 0.1 --valid-fraction 0.1 --early-stopping 1 \
  --checkpoint "$TMP/es" --metrics "$TMP/es.jsonl"
test -f "$TMP/es/best/manifest.json" || { echo "no best checkpoint in $TMP/es/best"; exit 1; }
# The same on 2 model-parallel ranks: saving the best model is collective, every rank decides alike.
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --epochs 3 --valid-fraction 0.1 --early-stopping 1 \
  --checkpoint "$TMP/es2" --metrics "$TMP/es2.jsonl"
test -f "$TMP/es2/best/manifest.json" || { echo "no best checkpoint in $TMP/es2/best"; exit 1; }
# Two data-parallel replicas each score half the split and sum: every point once, the same score on
# both, close to the one-process run's (the replicas train nearly the same model).
run "$FRUGAL" "${COMMON[@]}" --epochs 2 --valid-fraction 0.2 --early-stopping 0 --sampler exact --metrics "$TMP/v1.jsonl"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --epochs 2 --valid-fraction 0.2 --early-stopping 0 --sampler exact \
  --grid 2x1 --metrics "$TMP/vdp.jsonl"
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def epochs(name):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == "epoch"]
one, r0, r1 = epochs("v1.jsonl"), epochs("vdp.jsonl"), epochs("vdp.rank1.jsonl")
for a, b, c in zip(one, r0, r1):
    assert a["valid_points"] == a["valid_points_scored"] == b["valid_points"] == 600, (a, b)
    assert b["valid_points_scored"] == c["valid_points_scored"] == 300, (b, c)
    assert b["valid_p@1"] == c["valid_p@1"] and b["valid_p@5"] == c["valid_p@5"], (b, c)
    assert abs(a["valid_p@1"] - b["valid_p@1"]) < 0.02 and abs(a["valid_p@5"] - b["valid_p@5"]) < 0.02, (a, b)
PY
# --valid-every: a long epoch scored within (here every 10 of its 38 steps) trains exactly as one scored
# at its end only; a better middle is kept, returned, and served from CHECKPOINT/best.
WITHIN=(--epochs 3 --lr 0.3 --valid-fraction 0.2 --early-stopping 0)
run "$FRUGAL" "${COMMON[@]}" "${WITHIN[@]}" --metrics "$TMP/ends.jsonl"
run "$FRUGAL" "${COMMON[@]}" "${WITHIN[@]}" --valid-every 10 --checkpoint "$TMP/within" --metrics "$TMP/within.jsonl"
"$FRUGAL" evaluate --model "$TMP/within" --test "$TMP/data/test.txt" > /dev/null 2> "$TMP/within.err"
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def events(name, kind):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == kind]
ends, within, scored = events("ends.jsonl", "epoch"), events("within.jsonl", "epoch"), events("within.jsonl", "valid")
assert [(r["epoch"], r["epoch_step"]) for r in scored] == [(e, s) for e in (1, 2, 3) for s in (10, 20, 30)], scored
for a, b in zip(ends, within):
    assert abs(a["loss"] - b["loss"]) <= 1e-12 * a["loss"], (a["loss"], b["loss"])
    assert (a["p@1"], a["p@5"], a["valid_p@1"], a["valid_p@5"]) == (b["p@1"], b["p@5"], b["valid_p@1"], b["valid_p@5"]), (a, b)
every = [(r["valid_p@1"] + r["valid_p@5"], r["epoch"], r["step"]) for r in scored]
every += [(r["valid_p@1"] + r["valid_p@5"], r["epoch"], 0) for r in within]
top = max(s for s, _, _ in every)
first = min((e, s if s else 10**9) for v, e, s in every if v == top)  # the first to reach it
last = within[-1]
assert (last["best_epoch"], last["best_step"] or 10**9) == first, (last, first, every)
assert last["best_step"] != 0, "this run's best is within an epoch: " + str(every)
err = open(os.path.join(d, "within.err")).read()
assert ("epoch %d, step %d of run" % (last["best_epoch"] - 1, last["best_step"])) in err and "the best epoch on validation" in err, err
PY
fails_with "--early-stopping 2 watches a validation set, and this run has none" "$FRUGAL" "${COMMON[@]}" --epochs 1 \
  --valid-fraction 0 --early-stopping 2
# A set of 3,000 points holds none back by default, and says so.
run "$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --threads 1 --hidden 16 --epochs 1 --max-steps 2
grep -q "validation: off by default, the training set has 3000 points" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
# No checkpoint folder: the best epoch is kept in memory and is the model the run returns.
run "$FRUGAL" "${COMMON[@]}" --epochs 3 --lr 2 --valid-fraction 0.2 --early-stopping 0 --metrics "$TMP/mem.jsonl"
python3 - "$TMP/mem.jsonl" <<'PY'
import json, sys
es = [r for r in map(json.loads, open(sys.argv[1])) if r["event"] == "epoch"]
best = max(range(len(es)), key=lambda i: (es[i]["valid_p@1"] + es[i]["valid_p@5"], -i)) + 1
assert [r["best_epoch"] for r in es][-1] == best, es
PY
fails_with "lr_schedule" "$FRUGAL" "${COMMON[@]}" --epochs 4 --optimizer sgd --sparse-updates catchup --momentum 0.8 --weight-decay 1e-4 \
  --lr-schedule linear --warmup-steps 5 --clip-norm 0.5 --dropout 0.1 --valid-fraction 0.1 --resume "$TMP/es"
fails_with "schedule_steps" "$FRUGAL" "${COMMON[@]}" --epochs 5 --optimizer sgd --sparse-updates catchup --momentum 0.8 --weight-decay 1e-4 \
  --lr-schedule cosine --warmup-steps 5 --clip-norm 0.5 --dropout 0.1 --valid-fraction 0.1 --resume "$TMP/es"
OPTS=(--sparse-updates catchup --weight-decay 0.01 --warmup-steps 20 --clip-norm 0.5 --dropout 0.1)
run "$FRUGAL" "${COMMON[@]}" "${OPTS[@]}" --epochs 2 --metrics "$TMP/straight.jsonl"
run "$FRUGAL" "${COMMON[@]}" "${OPTS[@]}" --epochs 1 --checkpoint "$TMP/half"
run "$FRUGAL" "${COMMON[@]}" "${OPTS[@]}" --epochs 2 --resume "$TMP/half" --metrics "$TMP/resumed.jsonl"
# With a validation split: --resume without --valid-fraction holds back the checkpoint's points again
# (the same validation scores and training as the run straight through).
run "$FRUGAL" "${COMMON[@]}" --valid-fraction 0.2 --early-stopping 0 --epochs 2 --metrics "$TMP/vstraight.jsonl"
run "$FRUGAL" "${COMMON[@]}" --valid-fraction 0.2 --early-stopping 0 --epochs 1 --checkpoint "$TMP/vhalf"
run "$FRUGAL" "${COMMON[@]}" --epochs 2 --resume "$TMP/vhalf" --metrics "$TMP/vresumed.jsonl"
python3 - "$TMP/vstraight.jsonl" "$TMP/vresumed.jsonl" <<'PY'
import json, sys
straight, resumed = ([r for r in map(json.loads, open(p)) if r["event"] == "epoch"] for p in sys.argv[1:])
keys = ("loss", "p@1", "valid_p@1", "valid_p@5")
assert [resumed[0][k] for k in keys] == [straight[1][k] for k in keys], (straight[1], resumed[0])
PY
# Rank 1 with --sparse-updates lazy, rank 0 with catchup: the run-config check names the setting.
fails_with "sparse_updates" "$FRUGAL" launch -n 2 -- bash -c \
  'u=catchup; [ "$FRUGAL_RANK" = 1 ] && u=lazy; exec "$0" "$@" --sparse-updates $u' "$FRUGAL" "${COMMON[@]}" --epochs 1
# Every flag is compared unless a rank may set it for itself (kPerRankFlags): --max-steps and
# --eval-batch, which no hand-written record named, are refused by name; --threads and --metrics may differ.
fails_with "setting 'max_steps' differs" "$FRUGAL" launch -n 2 -- bash -c \
  'm=5; [ "$FRUGAL_RANK" = 1 ] && m=6; exec "$0" "$@" --max-steps $m' "$FRUGAL" "${COMMON[@]}" --epochs 1
fails_with "setting 'eval_batch' differs" "$FRUGAL" launch -n 2 -- bash -c \
  'b=256; [ "$FRUGAL_RANK" = 1 ] && b=512; exec "$0" "$@" --eval-batch $b' "$FRUGAL" "${COMMON[@]}" --epochs 1
M=$TMP run "$FRUGAL" launch -n 2 -- bash -c \
  't=1; [ "$FRUGAL_RANK" = 1 ] && t=2; exec "$0" "$@" --threads $t --metrics "$M/own$FRUGAL_RANK.jsonl"' "$FRUGAL" \
  train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --quiet --hidden 32 --batch 64 --seed 3 --epochs 1 \
  --max-steps 3
test -f "$TMP/own0.jsonl" && test -f "$TMP/own1.rank1.jsonl"
# --dp-explore on two replicas: the same bits twice (its draws are seeded), more DCT-DP bytes than the
# threshold alone, and the setting in the run config.
for r in a b; do
  run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --grid 2x1 --epochs 1 --max-steps 8 --dp-keep 0.05 \
    --dp-explore 0.05 --metrics "$TMP/explore-$r.jsonl"
done
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --grid 2x1 --epochs 1 --max-steps 8 --dp-keep 0.05 \
  --metrics "$TMP/threshold.jsonl"
python3 - "$TMP" <<'PY'
import json, sys
def lines(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}")]
a, b, t = lines("explore-a.jsonl"), lines("explore-b.jsonl"), lines("threshold.jsonl")
assert a[0]["config"]["dp_explore"] == 0.05 and "dp_explore" in t[0]["config"], (a[0]["config"], t[0]["config"])
assert (a[-1]["loss"], a[-1]["p@1"]) == (b[-1]["loss"], b[-1]["p@1"]), (a[-1], b[-1])
assert a[-1]["dp_bytes_sent_per_sample"] > t[-1]["dp_bytes_sent_per_sample"], (a[-1], t[-1])
print("ok: --dp-explore repeats bit for bit and sends", a[-1]["dp_bytes_sent_per_sample"], "B/sample against",
      t[-1]["dp_bytes_sent_per_sample"])
PY
# The counting device (--device emulated): the CPU's bits, and the bytes that crossed in the log;
# DCT-DP over updates, which changes the weights on the host, is refused there naming the flags.
run "$FRUGAL" "${COMMON[@]}" "${OPTS[@]}" --epochs 1 --device emulated --metrics "$TMP/emulated.jsonl"
run "$FRUGAL" "${COMMON[@]}" "${OPTS[@]}" --epochs 1 --device cpu --metrics "$TMP/cpu.jsonl"
fails_with "--dp-compress updates thresholds the weights' changes on the host" "$FRUGAL" "${COMMON[@]}" --epochs 1 \
  --device emulated --dp-keep 0.05 --dp-compress updates
# --compress auto on two data-parallel replicas: the controller's keep falls below 1, the epoch line
# says what it kept, and its state travels with a checkpoint (1 epoch + --resume = 2 epochs straight).
AUTO=(--grid 2x1 --compress auto)
"$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --threads 1 \
  --hidden 32 --batch 64 --seed 3 "${AUTO[@]}" --epochs 2 --metrics "$TMP/auto.jsonl" > "$TMP/auto.log" 2>&1 \
  || { cat "$TMP/auto.log"; exit 1; }
grep -q "compress auto: DCT-DP keeps, per parameter" "$TMP/auto.log" && grep -q "compress auto (rank 0): DCT-DP keeps" "$TMP/auto.log" \
  || { cat "$TMP/auto.log"; echo "no --compress auto lines"; exit 1; }
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" "${AUTO[@]}" --epochs 1 --checkpoint "$TMP/auto-ckpt"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" "${AUTO[@]}" --epochs 2 --resume "$TMP/auto-ckpt" \
  --metrics "$TMP/auto-resumed.jsonl"
python3 - "$TMP" <<'PY'
import json, sys, os
d = sys.argv[1]
def events(name, kind):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == kind]
auto, resumed = events("auto.jsonl", "epoch"), events("auto-resumed.jsonl", "epoch")
assert all(r["dp_auto"]["keep_min"] < 1 and r["dp_compression"] > 1 for r in auto), auto
assert len(resumed) == 1 and resumed[0]["loss"] == auto[1]["loss"] and resumed[0]["p@1"] == auto[1]["p@1"], (auto, resumed)
assert resumed[0]["dp_auto"] == auto[1]["dp_auto"], (auto[1]["dp_auto"], resumed[0]["dp_auto"])
PY
# --compress link (the default) on two replicas of this machine: the loopback never pays, so the
# exchange stays uncompressed without timing anything (the same choice however loaded the machine).
"$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --threads 1 \
  --hidden 16 --grid 2x1 --epochs 1 --max-steps 2 --metrics "$TMP/link.jsonl" > "$TMP/link.log" 2>&1 \
  || { cat "$TMP/link.log"; exit 1; }
grep -q "compress link: the 2 replicas share this machine's loopback" "$TMP/link.log" \
  || { cat "$TMP/link.log"; echo "no --compress link line"; exit 1; }
python3 -c 'import json,sys; r = json.loads(open(sys.argv[1]).readline()); assert (r["compress_chosen"], r["compress_choice"]) == ("off", None), r' \
  "$TMP/link.jsonl"
# Through a slow emulated link (root: a network namespace a rank, tc tbf) it measures, and chooses
# auto: at 20 Mbit the uncompressed exchange's wire per entry is ~100x auto's CPU.
if [ "$(id -u)" = 0 ] && command -v tc > /dev/null && ip netns add "frugaltest-$$" 2> /dev/null; then
  ip netns del "frugaltest-$$"
  "$FRUGAL" launch -n 2 --bandwidth 20mbit -- "$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" \
    --threads 1 --hidden 16 --grid 2x1 --epochs 1 --max-steps 2 --metrics "$TMP/slow.jsonl" > "$TMP/slow.log" 2>&1 \
    || { cat "$TMP/slow.log"; exit 1; }
  grep -q "compress link: a slow link between the 2 replicas" "$TMP/slow.log" && grep -q "compress auto: DCT-DP keeps" "$TMP/slow.log" \
    || { cat "$TMP/slow.log"; echo "--compress link did not choose auto at 20 Mbit"; exit 1; }
  python3 - "$TMP/slow.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
c = r["compress_choice"]
assert r["compress_chosen"] == "auto" and c["pays"] and c["chosen"] == "auto", r
assert c["wire_ns_off_per_entry"] > c["wire_ns_auto_per_entry"] + 1.5 * c["cpu_ns_per_entry"], c
assert 0 < c["keep"] < 1 and c["link_bytes_per_s"] > 0, c
PY
else
  echo "skipped the slow-link --compress link check (needs root and network namespaces)"
fi
python3 - "$TMP" <<'PY'
import json, sys, os
d = sys.argv[1]
def events(name, kind):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == kind]
es = events("es.jsonl", "epoch")
es2, es2_rank1 = events("es2.jsonl", "epoch"), events("es2.rank1.jsonl", "epoch")
assert [r["valid_p@1"] for r in es2] == [r["valid_p@1"] for r in es2_rank1], (es2, es2_rank1)
assert 1 <= len(es) <= 4 and all("valid_p@1" in r and "grad_norm" in r and "clipped_fraction" in r for r in es), es
best = max(r["valid_p@1"] + r["valid_p@5"] for r in es)  # the validation score
manifest = json.load(open(os.path.join(d, "es", "best", "manifest.json")))
config = manifest["config"]
assert config["optimizer"] == "sgd" and config["lr_schedule"] == "cosine" and config["dropout"] > 0, config
assert manifest["optimizer"] == {"method": "sgd", "sparse_updates": "catchup"}, manifest["optimizer"]
assert manifest["run_state"]["early_stopping"]["best"] == best, (manifest["run_state"], best)
straight, resumed = events("straight.jsonl", "epoch"), events("resumed.jsonl", "epoch")
assert len(straight) == 2 and len(resumed) == 1, (straight, resumed)
assert resumed[0]["loss"] == straight[1]["loss"] and resumed[0]["p@1"] == straight[1]["p@1"], (straight[1], resumed[0])
emulated, cpu = events("emulated.jsonl", "epoch"), events("cpu.jsonl", "epoch")
assert emulated[0]["loss"] == cpu[0]["loss"] and emulated[0]["p@1"] == cpu[0]["p@1"], (emulated[0], cpu[0])
assert cpu[0]["host_device_bytes_per_sample"] == 0 and emulated[0]["host_device_bytes_per_sample"] > 0, (cpu, emulated)
print("OK: every flag runs; early stopping keeps the best (valid P@1 + P@5 %.4f after %d epochs); resume is exact" %
      (best, len(es)))
PY
