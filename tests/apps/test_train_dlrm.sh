#!/usr/bin/env bash
# `frugal train --model dlrm` through the built binary (20000 synth-ctr samples, whose large fields
# freq-double and qr squeeze):
#  1. one rank on a synth-ctr set: progress lines within an epoch, epoch lines with AUC and
#     logloss, epoch records with auc, logloss, embedding_parameters and the byte counts; the model learns (AUC above 0.6); the same
#     seed gives the same records; every --ids mode trains, freq-double and qr with fewer
#     embedding parameters than full; --optimizer sgd and adagrad learn (the start record names
#     adagrad with its initial accumulator);
#  2. `frugal launch -n 3`: --table-exchange des and ps and --parallel data give the 1-rank run's
#     loss and AUC (to 1e-4) and report bytes on the wire per sample;
#     --dp-keep 0.1 (DCT-DP on the MLP gradients) compresses them and keeps the AUC within 0.02, and
#     so does --compress auto (its keep set online);
#     and, without --threads, each launched rank takes its share of the host's cores;
#  3. --checkpoint / --resume: resuming continues exactly (1 rank) and on 3 ranks (resliced), also
#     with --optimizer rowwise-adagrad (one accumulator per embedding row, resliced by rows); a
#     damaged file and another configuration are refused, naming them; frugal evaluate / predict
#     on the 3-rank checkpoint give the training run's AUC and one probability per test sample;
#  4. validation (issue 65): the defaults hold back 5% (click-stratified) and score its AUC after every
#     epoch with a cosine rate; --valid FILE scores a file; the best epoch is kept in CHECKPOINT/best
#     and served by evaluate; --valid-every scores within epochs without changing the training and
#     keeps a better middle; early stopping stops after the patience and a resumed run stops as the
#     run straight through; a validation set without clicks is refused;
#  5. bad combinations say so: --format xmc with --model dlrm fails, --format criteo without --model
#     dlrm fails, XMC-only flags are reported as ignored, a malformed file is named with its line.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-ctr --train 20000 --test 2000 --seed 4 --out "$TMP/d" > /dev/null
COMMON=(train --model dlrm --format criteo --train "$TMP/d/train.tsv" --test "$TMP/d/test.tsv" --threads 1 --epochs 2
        --seed 3)
run "$FRUGAL" "${COMMON[@]}" --metrics "$TMP/one.jsonl"
grep -q "^epoch 2: loss .*, AUC 0\.[0-9]*, logloss 0\.[0-9]*" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
# Progress lines within the epoch (stderr is a file here: plain lines every ~10%).
# The defaults hold back 5% of the 20000 samples to validate on: 19000 train.
grep -q "^validation: 1000 samples (5.0%) held back from the training set, 19000 train, scored by AUC" "$TMP/last.log" ||
  { cat "$TMP/last.log"; echo "no validation line"; exit 1; }
grep -q "^epoch 2: loss .*, valid AUC 0\.[0-9]*, AUC 0\.[0-9]*" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
grep -q "^train epoch 2  50\.[0-9]% ([0-9]*/19000) [0-9]* samples/s loss 0\.[0-9]*$" "$TMP/last.log" ||
  { cat "$TMP/last.log"; echo "no progress line"; exit 1; }
run "$FRUGAL" "${COMMON[@]}" --metrics "$TMP/again.jsonl" --quiet
# --quiet: the epoch lines alone, as every trainer's (no progress, no setup lines).
[ "$(grep -cv '^epoch [0-9]*: loss ' "$TMP/last.log")" = 0 ] && [ "$(grep -c '^epoch ' "$TMP/last.log")" = 2 ] ||
  { cat "$TMP/last.log"; echo "--quiet printed more (or less) than the epoch lines"; exit 1; }
for ids in hash freq-double qr; do
  run "$FRUGAL" "${COMMON[@]}" --ids "$ids" --metrics "$TMP/$ids.jsonl" --quiet --min-id-count 1
done
run "$FRUGAL" "${COMMON[@]}" --optimizer sgd --metrics "$TMP/sgd.jsonl" --quiet
run "$FRUGAL" "${COMMON[@]}" --optimizer adagrad --metrics "$TMP/adagrad.jsonl" --quiet
for mode in des ps; do
  run "$FRUGAL" launch -n 3 -- "$FRUGAL" "${COMMON[@]}" --table-exchange "$mode" --metrics "$TMP/$mode.jsonl"
  grep -q "wire: [0-9]* B/sample sent ($mode tables)" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
done
run "$FRUGAL" launch -n 3 -- "$FRUGAL" "${COMMON[@]}" --parallel data --metrics "$TMP/replicated.jsonl"
# --clip-norm: the whole model's norm after the exchanges, the same factor on every rank: 3 ranks
# (sliced tables) train as 1 does.
run "$FRUGAL" "${COMMON[@]}" --clip-norm 0.05 --lr-schedule cosine --warmup-steps 20 --metrics "$TMP/clip.jsonl" --quiet
run "$FRUGAL" launch -n 3 -- "$FRUGAL" "${COMMON[@]}" --clip-norm 0.05 --lr-schedule cosine --warmup-steps 20 \
  --metrics "$TMP/clip3.jsonl" --quiet
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --dp-keep 0.1 --metrics "$TMP/dct.jsonl"
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --compress auto --metrics "$TMP/dct-auto.jsonl"
grep -q "MLP gradients [0-9.]*x compressed by DCT-DP" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
# Without --threads, launched ranks share the host's cores (FRUGAL_LOCAL_SIZE): max(1, cores / 3) each.
run "$FRUGAL" launch -n 3 -- "$FRUGAL" train --model dlrm --train "$TMP/d/train.tsv" --test "$TMP/d/test.tsv" \
  --epochs 1 --max-steps 5
share=$(( $(nproc) / 3 )); [ "$share" -ge 1 ] || share=1
grep -q "^\[0\] model: DLRM.*, $share threads$" "$TMP/last.log" || { cat "$TMP/last.log"; echo "not $share threads"; exit 1; }
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def epochs(name):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == "epoch"]
one = epochs("one.jsonl")
assert len(one) == 2, one
for e in one:
    for key in ("auc", "logloss", "embedding_parameters", "bytes_sent_per_sample", "bytes_received_per_sample",
                "train_samples_per_s", "loss"):
        assert key in e, (key, e)
assert one[-1]["auc"] > 0.6, one[-1]
# Validation by default: AUC of the held-back 5% after every epoch, the best epoch, the cosine rate.
start = [r for r in map(json.loads, open(os.path.join(d, "one.jsonl"))) if r["event"] == "start"][0]["config"]
assert start["valid_fraction"] == 0.05 and start["early_stopping"] == 2 and start["lr_schedule"] == "cosine", start
assert all(0.55 < e["valid_auc"] < 1 and e["valid_logloss"] > 0 and e["best_epoch"] in (1, 2) for e in one), one
assert [(e["loss"], e["auc"]) for e in epochs("again.jsonl")] == [(e["loss"], e["auc"]) for e in one], "not deterministic"
assert epochs("sgd.jsonl")[-1]["auc"] > 0.55, epochs("sgd.jsonl")[-1]
adagrad = [r for r in map(json.loads, open(os.path.join(d, "adagrad.jsonl"))) if r["event"] == "start"][0]
assert adagrad["config"]["optimizer"] == "adagrad" and adagrad["config"]["initial_accumulator"] == 0, adagrad
assert epochs("adagrad.jsonl")[-1]["auc"] > 0.6, epochs("adagrad.jsonl")[-1]
full_params = one[0]["embedding_parameters"]
for ids in ("hash", "freq-double", "qr"):
    e = epochs(ids + ".jsonl")[-1]
    assert e["auc"] > 0.55, (ids, e)
    if ids != "hash":
        assert e["embedding_parameters"] < full_params, (ids, e["embedding_parameters"], full_params)
for mode in ("des", "ps", "replicated"):
    for rank_file in (mode + ".jsonl", mode + ".rank1.jsonl", mode + ".rank2.jsonl"):
        runs = epochs(rank_file)
        for a, b in zip(runs, one):
            assert abs(a["loss"] - b["loss"]) <= 1e-4 * max(1, abs(b["loss"])), (rank_file, a["loss"], b["loss"])
            assert abs(a["auc"] - b["auc"]) <= 1e-4, (rank_file, a["auc"], b["auc"])
        assert runs[-1]["bytes_sent_per_sample"] > 0, (rank_file, runs[-1])
clip = epochs("clip.jsonl")
assert all(e["clipped_fraction"] > 0 for e in clip) and clip[-1]["auc"] > 0.6, clip
for rank_file in ("clip3.jsonl", "clip3.rank1.jsonl", "clip3.rank2.jsonl"):
    for a, b in zip(epochs(rank_file), clip):
        assert abs(a["loss"] - b["loss"]) <= 1e-4 * max(1, abs(b["loss"])), (rank_file, a["loss"], b["loss"])
        assert abs(a["clipped_fraction"] - b["clipped_fraction"]) <= 0.01, (rank_file, a, b)
dct = epochs("dct.jsonl")[-1]
assert dct["dp_compression"] > 1.5 and dct["dp_payload_sent"] < dct["dp_payload_uncompressed"], dct
assert abs(dct["auc"] - one[-1]["auc"]) < 0.02, (dct["auc"], one[-1]["auc"])
assert epochs("des.jsonl")[-1]["dp_compression"] == 1.0, "an exact MLP sum reports compression 1"
# --compress auto: DCT-DP's keep on the MLP gradients set online (one tau, energy 0.9), recorded.
auto = epochs("dct-auto.jsonl")[-1]
start = [r for r in map(json.loads, open(os.path.join(d, "dct-auto.jsonl"))) if r["event"] == "start"][0]
assert abs(start["config"]["dp_auto_energy"] - 0.9) < 1e-6, start["config"]
assert auto["dp_compression"] > 1.0 and abs(auto["auc"] - one[-1]["auc"]) < 0.02, (auto, one[-1]["auc"])
print("dlrm: 1 rank AUC %.4f; bytes/sample des %.0f, ps %.0f, replicated %.0f" % (
    one[-1]["auc"], epochs("des.jsonl")[-1]["bytes_sent_per_sample"], epochs("ps.jsonl")[-1]["bytes_sent_per_sample"],
    epochs("replicated.jsonl")[-1]["bytes_sent_per_sample"]))
PY
# Checkpoints: 2 epochs saved, resumed to 3 = 3 uninterrupted (bit for bit on 1 rank), also on 3
# ranks (resliced tables, to 1e-4); a damaged file or another configuration is refused, named.
# (--lr-schedule constant: a cosine rate spans --epochs, and resuming with another bound is refused.)
CK=(train --model dlrm --train "$TMP/d/train.tsv" --test "$TMP/d/test.tsv" --threads 1 --seed 3 --ids qr
    --min-id-count 1 --lr-schedule constant)
run "$FRUGAL" "${CK[@]}" --epochs 3 --metrics "$TMP/three.jsonl" --quiet
run "$FRUGAL" "${CK[@]}" --epochs 2 --checkpoint "$TMP/ck" --quiet
[ -f "$TMP/ck/manifest.json" ] && [ -f "$TMP/ck/dlrm-epoch-2/rank0.bin" ] && [ -f "$TMP/ck/dlrm-epoch-2/ids.bin" ] ||
  { ls -R "$TMP/ck"; echo "checkpoint files missing"; exit 1; }
cp -r "$TMP/ck" "$TMP/ck-copy"
run "$FRUGAL" "${CK[@]}" --epochs 3 --resume "$TMP/ck" --metrics "$TMP/resumed.jsonl"
grep -q "resumed from $TMP/ck at epoch 2" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
run "$FRUGAL" launch -n 3 -- "$FRUGAL" "${CK[@]}" --epochs 3 --resume "$TMP/ck" \
  --metrics "$TMP/resumed3.jsonl" --checkpoint "$TMP/ck3"
[ -f "$TMP/ck3/dlrm-epoch-3/rank2.bin" ] || { ls -R "$TMP/ck3"; echo "3-rank checkpoint missing"; exit 1; }
# Row-wise Adagrad: its per-row state is checkpointed and resliced like the rows themselves.
run "$FRUGAL" "${CK[@]}" --optimizer rowwise-adagrad --epochs 3 --metrics "$TMP/rw-three.jsonl" --quiet
run "$FRUGAL" "${CK[@]}" --optimizer rowwise-adagrad --epochs 2 --checkpoint "$TMP/rw-ck" --quiet
run "$FRUGAL" "${CK[@]}" --optimizer rowwise-adagrad --epochs 3 --resume "$TMP/rw-ck" --metrics "$TMP/rw-resumed.jsonl" \
  --quiet
run "$FRUGAL" launch -n 3 -- "$FRUGAL" "${CK[@]}" --optimizer rowwise-adagrad --epochs 3 --resume "$TMP/rw-ck" \
  --metrics "$TMP/rw-resumed3.jsonl"
# Row-wise Adam (second moment per embedding row, per-element first moment): checkpointed and
# resumed to the same bits.
run "$FRUGAL" "${CK[@]}" --optimizer rowwise-adam --epochs 3 --metrics "$TMP/rwa-three.jsonl" --quiet
run "$FRUGAL" "${CK[@]}" --optimizer rowwise-adam --epochs 2 --checkpoint "$TMP/rwa-ck" --quiet
run "$FRUGAL" "${CK[@]}" --optimizer rowwise-adam --epochs 3 --resume "$TMP/rwa-ck" \
  --metrics "$TMP/rwa-resumed.jsonl" --quiet
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def epochs(name):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == "epoch"]
three, resumed = epochs("rwa-three.jsonl")[-1], epochs("rwa-resumed.jsonl")[-1]
assert resumed["epoch"] == 3 and (resumed["loss"], resumed["auc"]) == (three["loss"], three["auc"]), (resumed, three)
for prefix in ("", "rw-"):
    three, resumed = epochs(prefix + "three.jsonl")[-1], epochs(prefix + "resumed.jsonl")[-1]
    resumed3 = epochs(prefix + "resumed3.jsonl")[-1]
    assert resumed["epoch"] == 3 and (resumed["loss"], resumed["auc"]) == (three["loss"], three["auc"]), (prefix, resumed, three)
    assert abs(resumed3["loss"] - three["loss"]) < 1e-4 and abs(resumed3["auc"] - three["auc"]) < 1e-4, (prefix, resumed3, three)
assert epochs("rw-three.jsonl")[-1]["auc"] > 0.6, epochs("rw-three.jsonl")[-1]
PY
# evaluate / predict on the 3-rank checkpoint (one process assembles the sliced tables).
"$FRUGAL" evaluate --model "$TMP/ck3" --test "$TMP/d/test.tsv" --json > "$TMP/eval.json"
"$FRUGAL" predict --model "$TMP/ck3" --input "$TMP/d/test.tsv" --out "$TMP/pred.txt"
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
final = [r for r in map(json.loads, open(os.path.join(d, "resumed3.jsonl"))) if r["event"] == "epoch"][-1]
ev = json.load(open(os.path.join(d, "eval.json")))
assert abs(ev["auc"] - final["auc"]) < 1e-4 and abs(ev["logloss"] - final["logloss"]) < 1e-4, (ev, final)
assert ev["samples"] == 2000, ev
p = [float(x) for x in open(os.path.join(d, "pred.txt"))]
assert len(p) == 2000 and all(0 < x < 1 for x in p), len(p)
PY
# Validation (issue 65). --valid FILE scores that file: the test file here, so its AUC is the test AUC.
run "$FRUGAL" "${COMMON[@]}" --valid "$TMP/d/test.tsv" --metrics "$TMP/vfile.jsonl" --quiet
# The best epoch is kept in CHECKPOINT/best and served: a rate that overfits 2,000 samples after its
# first epochs, no early stopping.
head -2000 "$TMP/d/train.tsv" > "$TMP/small.tsv"
SMALL=(train --model dlrm --train "$TMP/small.tsv" --test "$TMP/d/test.tsv" --threads 1 --seed 3 --min-id-count 1
       --lr 0.02 --lr-schedule constant)
run "$FRUGAL" "${SMALL[@]}" --valid-fraction 0.25 --early-stopping 0 --epochs 5 --checkpoint "$TMP/best-ck" \
  --metrics "$TMP/best.jsonl"
grep -q "^the best epoch on validation was [1-4] of 5 (valid AUC 0\.[0-9]*); $TMP/best-ck serves it from $TMP/best-ck/best$" \
  "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
"$FRUGAL" evaluate --model "$TMP/best-ck" --test "$TMP/d/test.tsv" --json > "$TMP/best-eval.json" 2> "$TMP/best-eval.err"
grep -q "^$TMP/best-ck: epoch [1-4], step [0-9]* of run [0-9a-f]* (the best epoch on validation, from $TMP/best-ck/best; the newest is epoch 5)$" \
  "$TMP/best-eval.err" || { cat "$TMP/best-eval.err"; exit 1; }
# --valid-every 3: scored within each epoch of 12 steps too, training exactly as the run above; a
# better middle of an epoch is kept and served.
run "$FRUGAL" "${SMALL[@]}" --valid-fraction 0.25 --early-stopping 0 --epochs 5 --valid-every 3 --checkpoint "$TMP/within-ck" \
  --metrics "$TMP/within.jsonl" --quiet
"$FRUGAL" evaluate --model "$TMP/within-ck" --test "$TMP/d/test.tsv" --json > /dev/null 2> "$TMP/within-eval.err"
# Early stopping (patience 1) stops after the first epoch that is not better; resuming its epoch-1
# checkpoint (without --valid-fraction: the checkpoint's share) goes on as the run straight through.
run "$FRUGAL" "${SMALL[@]}" --valid-fraction 0.25 --early-stopping 1 --epochs 5 --metrics "$TMP/es.jsonl"
grep -q "^early stopping: no better valid AUC for 1 epochs (--early-stopping 1); the best was 0\.[0-9]* after epoch" \
  "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
run "$FRUGAL" "${SMALL[@]}" --valid-fraction 0.25 --early-stopping 1 --epochs 1 --checkpoint "$TMP/es-ck" --quiet
run "$FRUGAL" "${SMALL[@]}" --early-stopping 1 --epochs 5 --resume "$TMP/es-ck" --metrics "$TMP/es-resumed.jsonl" --quiet
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def epochs(name):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == "epoch"]
vfile = epochs("vfile.jsonl")
assert all(abs(e["valid_auc"] - e["auc"]) < 1e-6 for e in vfile), vfile
best = epochs("best.jsonl")
assert len(best) == 5, best
chosen = best[-1]["best_epoch"]
aucs = [e["valid_auc"] for e in best]
assert chosen == aucs.index(max(aucs)) + 1 and chosen < 5, aucs
ev = json.load(open(os.path.join(d, "best-eval.json")))
assert abs(ev["auc"] - best[chosen - 1]["auc"]) < 1e-4, (ev, best[chosen - 1])
within = epochs("within.jsonl")
scored = [r for r in map(json.loads, open(os.path.join(d, "within.jsonl"))) if r["event"] == "valid"]
assert [(r["epoch"], r["epoch_step"]) for r in scored] == [(e, s) for e in range(1, 6) for s in (3, 6, 9)], scored
for a, b in zip(best, within):
    assert abs(a["loss"] - b["loss"]) <= 1e-12 * a["loss"] and (a["auc"], a["valid_auc"]) == (b["auc"], b["valid_auc"]), (a, b)
every = [(r["valid_auc"], r["epoch"], r["step"]) for r in scored] + [(r["valid_auc"], r["epoch"], 10**9) for r in within]
top = max(v for v, _, _ in every)
first = min((e, s) for v, e, s in every if v == top)
assert (within[-1]["best_epoch"], within[-1]["best_step"] or 10**9) == first and within[-1]["best_step"] != 0, (within[-1], every)
err = open(os.path.join(d, "within-eval.err")).read()
assert ", step %d of run" % within[-1]["best_step"] in err and "the best epoch on validation" in err, err
es, resumed = epochs("es.jsonl"), epochs("es-resumed.jsonl")
assert len(es) == chosen + 1 and es[-1]["best_epoch"] == chosen, (chosen, es)
keys = ("loss", "auc", "valid_auc", "best_epoch")
assert [[e[k] for k in keys] for e in resumed] == [[e[k] for k in keys] for e in es[1:]], (resumed, es)
PY
# A validation set AUC cannot rank is refused, naming it.
grep "^0" "$TMP/d/test.tsv" > "$TMP/no-clicks.tsv"
fails_with "--valid $TMP/no-clicks.tsv (1" "$FRUGAL" "${COMMON[@]}" --valid "$TMP/no-clicks.tsv"
fails_with "samples) has no clicks: AUC needs clicks and non-clicks to rank; give another file, or --valid-fraction F" \
  "$FRUGAL" "${COMMON[@]}" --valid "$TMP/no-clicks.tsv"
fails_with "--resume $TMP/ck-copy: the checkpoint was saved with embedding_dim = 16, this run has embedding_dim = 8" \
  "$FRUGAL" "${CK[@]}" --epochs 3 --resume "$TMP/ck-copy" --embedding-dim 8
printf '\xff' | dd of="$TMP/ck-copy/dlrm-epoch-2/rank0.bin" bs=1 seek=100 conv=notrunc status=none
fails_with "$TMP/ck-copy/dlrm-epoch-2/rank0.bin: checksum mismatch" \
  "$FRUGAL" "${CK[@]}" --epochs 3 --resume "$TMP/ck-copy"
fails_with "--model dlrm reads Criteo-format click logs (--format criteo), not --format xmc" \
  "$FRUGAL" train --model dlrm --format xmc --train "$TMP/d/train.tsv" --test "$TMP/d/test.tsv"
fails_with "--model dlrm: --sparse-updates catchup is not implemented" "$FRUGAL" "${COMMON[@]}" --sparse-updates catchup
fails_with "--model dlrm: --dp-momentum-correction is not implemented" "$FRUGAL" "${COMMON[@]}" --dp-momentum-correction on
fails_with "--model dlrm: --device other than cpu or auto is not implemented" "$FRUGAL" "${COMMON[@]}" --device emulated
# The default --device auto is the CPU for DLRM, whatever the machine has.
"$FRUGAL" "${COMMON[@]}" --device auto --max-steps 2 > "$TMP/auto.log" 2>&1 || { cat "$TMP/auto.log"; exit 1; }
fails_with "--format criteo is click-log data: it trains --model dlrm" \
  "$FRUGAL" train --format criteo --train "$TMP/d/train.tsv" --test "$TMP/d/test.tsv"
run "$FRUGAL" "${COMMON[@]}" --hidden 64 --sampler exact --quiet
grep -qF "note: --hidden, --sampler do(es) not apply to --model dlrm: ignored" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
head -3 "$TMP/d/train.tsv" > "$TMP/bad.tsv"
printf '1\tx\n' >> "$TMP/bad.tsv"
fails_with "bad.tsv:4:" "$FRUGAL" train --model dlrm --train "$TMP/bad.tsv" --test "$TMP/d/test.tsv"
echo "train --model dlrm OK"
