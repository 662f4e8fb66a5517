#!/usr/bin/env bash
# `frugal train --checkpoint-every N` and `--resume` within an epoch (issue 66), end to end:
#  1. XMC: checkpoints within an epoch change nothing about the run; resumed from one (the history's
#     folders: any point of the run) it ends with the uninterrupted run's metrics exactly, on one rank,
#     and close to them on 2 data-parallel replicas (the epoch's order does not depend on the ranks);
#     --checkpoint-every 0 saves at epoch ends only; another --batch within an epoch is refused;
#  2. DLRM in memory and streamed from a packed file: killed (SIGKILL) after a checkpoint within an
#     epoch, resumed, the same final loss and AUC as the uninterrupted run.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"

"$FRUGAL" data synth-xmc --features 1000 --labels 200 --train 1200 --test 150 --nnz 15 --labels-per-point 3 \
  --seed 4 --out "$TMP/xmc" > /dev/null
X0=(train --train "$TMP/xmc/train.txt" --test "$TMP/xmc/test.txt" --threads 1 --hidden 24 --tables 10 --seed 3
    --epochs 2)
X=("${X0[@]}" --batch 64)
run "$FRUGAL" "${X[@]}" --quiet --metrics "$TMP/whole.jsonl"
run "$FRUGAL" "${X[@]}" --checkpoint "$TMP/ck" --checkpoint-every 5 --keep-checkpoints 20 --metrics "$TMP/ck.jsonl"
grep -qF "checkpoints: also every 5 steps within an epoch of 19 (--checkpoint-every 5)" "$TMP/last.log" ||
  { cat "$TMP/last.log"; echo "the log does not say where it checkpoints"; exit 1; }
ls -d "$TMP"/ck/epoch-0-step-5 "$TMP"/ck/epoch-0-step-15 "$TMP"/ck/epoch-1-step-29 > /dev/null

# A copy of the folder as a run killed right after the checkpoint `$1` would have left it: nothing newer.
cut_after() {
  rm -rf "$TMP/cut" && cp -r "$TMP/ck" "$TMP/cut" && rm "$TMP/cut/manifest.json"
  python3 - "$TMP/cut" "$1" <<'PY'
import os, re, shutil, sys
root, keep = sys.argv[1], sys.argv[2]
key = lambda name: tuple(map(int, re.match(r"epoch-(\d+)-step-(\d+)$", name).groups()))
for name in os.listdir(root):
    if name.startswith("epoch-") and key(name) > key(keep):
        shutil.rmtree(os.path.join(root, name))
PY
}
for keep in epoch-0-step-10 epoch-1-step-29; do
  cut_after $keep
  run "$FRUGAL" "${X[@]}" --resume "$TMP/cut" --metrics "$TMP/r-$keep.jsonl"
  grep -qF "steps into epoch" "$TMP/last.log" || { cat "$TMP/last.log"; echo "the resume does not say where"; exit 1; }
done
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def events(name, kind="epoch"):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == kind]
whole = events("whole.jsonl")
ck = events("ck.jsonl")
for a, b in zip(whole, ck):  # checkpoints within epochs leave the run as it was
    for key in ("loss", "p@1", "p@3", "p@5"):
        assert a[key] == b[key], ("checkpointing changed the run", key, a, b)
saved = events("ck.jsonl", "checkpoint")
assert [s["epoch_step"] for s in saved] == [5, 10, 15, 5, 10, 15], saved
for keep, first, at in (("epoch-0-step-10", 1, 10), ("epoch-1-step-29", 2, 10)):
    resumed = events(f"r-{keep}.jsonl")
    res = events(f"r-{keep}.jsonl", "resume")
    assert res[0]["step"] == int(keep.split("-")[-1]), res
    assert [r["epoch"] for r in resumed] == list(range(first, 3)), resumed
    assert resumed[0]["resumed_at_step"] == at, resumed[0]
    for a, b in zip(whole[first - 1:], resumed):
        for key in ("p@1", "p@3", "p@5"):
            assert a[key] == b[key], (keep, key, a, b)
        if "resumed_at_step" not in b:
            assert a["loss"] == b["loss"], (keep, a, b)
print("OK: resumed within epochs 1 and 2 to the uninterrupted run's metrics")
PY

# On 2 data-parallel replicas: the same batches (sums in another order), close to the one-rank run.
cut_after epoch-0-step-10
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${X[@]}" --grid 2x1 --resume "$TMP/cut" --metrics "$TMP/r2.jsonl"
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
ep = lambda n: [r for r in map(json.loads, open(os.path.join(d, n))) if r["event"] == "epoch"]
whole, two = ep("whole.jsonl"), ep("r2.jsonl")
assert two[0]["resumed_at_step"] == 10 and len(two) == 2, two
assert abs(whole[1]["p@1"] - two[1]["p@1"]) <= 0.03 and abs(whole[1]["loss"] - two[1]["loss"]) <= 0.05, (whole, two)
print("OK: resumed on 2 replicas within an epoch:", two[1]["p@1"], "against", whole[1]["p@1"])
PY

# Another batch within an epoch is refused; at epoch ends only with 0.
fails_with "the checkpoint was saved 10 steps of --batch 64 into an epoch; resume it with --batch 64" \
  "$FRUGAL" "${X0[@]}" --batch 32 --resume "$TMP/cut"
run "$FRUGAL" "${X[@]}" --quiet --checkpoint "$TMP/ends" --checkpoint-every 0 --keep-checkpoints 20
[ "$(ls -d "$TMP"/ends/epoch-* | xargs -n1 basename | tr '\n' ' ')" = "epoch-1-step-19 epoch-2-step-38 " ] ||
  { ls "$TMP/ends"; echo "--checkpoint-every 0 saved within an epoch"; exit 1; }

# DLRM, in memory and streamed: killed after its first checkpoint within an epoch, then resumed.
"$FRUGAL" data synth-ctr --train 30000 --test 3000 --seed 1 --out "$TMP/ctr" > /dev/null
run "$FRUGAL" data pack "$TMP/ctr/train.tsv" "$TMP/ctr/train.fpk" --block-points 4096
for form in tsv fpk; do
  D=(train --model dlrm --train "$TMP/ctr/train.$form" --test "$TMP/ctr/test.tsv" --threads 1 --seed 2 --epochs 2
     --valid-fraction 0 --quiet)
  [ $form = fpk ] && D+=(--stream on)
  run "$FRUGAL" "${D[@]}" --metrics "$TMP/dw-$form.jsonl"
  python3 - "$TMP" "$form" "$FRUGAL" "${D[@]}" <<'PY'
import json, os, signal, subprocess, sys, time
d, form, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
log = os.path.join(d, f"dk-{form}.jsonl")
p = subprocess.Popen(cmd + ["--checkpoint", os.path.join(d, f"dck-{form}"), "--checkpoint-every", "7",
                            "--metrics", log], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
deadline = time.time() + 120
while p.poll() is None and time.time() < deadline:
    if os.path.exists(log) and '"checkpoint"' in open(log).read():
        p.send_signal(signal.SIGKILL)
        break
    time.sleep(0.002)
p.wait()
assert p.returncode == -signal.SIGKILL, f"the run ended ({p.returncode}) before it could be killed"
PY
  run "$FRUGAL" "${D[@]}" --resume "$TMP/dck-$form" --checkpoint "$TMP/dck-$form" --metrics "$TMP/dr-$form.jsonl"
  python3 - "$TMP" "$form" <<'PY'
import json, os, sys
d, form = sys.argv[1], sys.argv[2]
ev = lambda n, k: [r for r in map(json.loads, open(os.path.join(d, n))) if r["event"] == k]
whole, resumed, res = ev(f"dw-{form}.jsonl", "epoch"), ev(f"dr-{form}.jsonl", "epoch"), ev(f"dr-{form}.jsonl", "resume")
assert res and res[0]["epoch_step"] > 0, ("not resumed within an epoch", res)
assert resumed[-1]["epoch"] == 2, resumed
for key in ("loss", "auc", "logloss"):
    assert whole[-1][key] == resumed[-1][key], (form, key, whole[-1], resumed[-1])
print(f"OK: DLRM ({form}) killed {res[0]['epoch_step']} steps into epoch {res[0]['epoch'] + 1}, resumed to the same "
      f"AUC {resumed[-1]['auc']:.4f}")
PY
done
echo "OK: --checkpoint-every and --resume within an epoch"
