#!/usr/bin/env bash
# `frugal launch --max-restarts N` (elastic restart, torchrun's model):
#  1. a 2-rank run whose rank 1 is killed with kill -9 right after the first checkpoint is committed
#     finishes under --max-restarts 1, restarted from that checkpoint, with the same final metrics and
#     the same final slice files (byte for byte) as an uninterrupted run; its epoch lines after the
#     restart record restarts = 1;
#  2. without --max-restarts nothing changes: the same kill ends the launch with 128 + 9, no restart;
#  3. --min-ranks 2: rank 2 of 3 killed, the restart runs on 2 ranks, resuming the 3-slice checkpoint
#     resliced, and ends where the uninterrupted 3-rank run does (up to rounding: another slicing);
#  4. a restart gets FRUGAL_RESTART_COUNT and `--resume DIR` (replacing the command's --resume) once
#     the command's --checkpoint DIR holds a checkpoint; a job that keeps failing gives up after N
#     restarts with its status.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
LAUNCHER=
# A failed check must not leave a launcher (and its ranks) running.
trap '[ -n "$LAUNCHER" ] && kill "$LAUNCHER" 2> /dev/null; rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 5000 --labels 1000 --train 20000 --test 400 --nnz 20 --labels-per-point 3 \
  --seed 2 --out "$TMP/data" > /dev/null
TRAIN=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 4 --threads 1 --quiet --hidden 32
       --batch 64 --tables 10 --seed 3)

# The pid of rank $2 among the children of launcher $1 (each rank is a child with FRUGAL_RANK set).
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -cx "FRUGAL_RANK=$2" > /dev/null; then echo "$p"; return 0; fi
  done
  return 1
}
# Starts `frugal launch $@` in the background (output in $TMP/killed.log), waits for the first
# committed checkpoint in $CKPT, kills rank ${KILL_RANK:-1} with SIGKILL, and leaves the launcher's
# status in $STATUS.
launch_and_kill() {
  "$FRUGAL" launch "$@" > "$TMP/killed.log" 2>&1 &
  LAUNCHER=$!
  for _ in $(seq 1 1200); do [ -f "$CKPT/manifest.json" ] && break; sleep 0.05; done
  [ -f "$CKPT/manifest.json" ] || { cat "$TMP/killed.log"; echo "no checkpoint in $CKPT after 60 s"; exit 1; }
  local pid
  pid=$(rank_pid "$LAUNCHER" "${KILL_RANK:-1}") ||
    { cat "$TMP/killed.log"; echo "rank ${KILL_RANK:-1} is not running any more"; exit 1; }
  kill -9 "$pid"
  STATUS=0
  wait "$LAUNCHER" || STATUS=$?
  LAUNCHER=
}

echo "+ uninterrupted run under --max-restarts 1"
run "$FRUGAL" launch -n 2 --max-restarts 1 -- "$FRUGAL" "${TRAIN[@]}" --checkpoint "$TMP/whole" \
  --metrics "$TMP/whole.jsonl"
grep -q "restart" "$TMP/last.log" && { cat "$TMP/last.log"; echo "a run that did not fail was restarted"; exit 1; }

echo "+ rank 1 killed after the first checkpoint, --max-restarts 1"
CKPT=$TMP/killed
launch_and_kill -n 2 --max-restarts 1 -- "$FRUGAL" "${TRAIN[@]}" --checkpoint "$CKPT" \
  --metrics "$TMP/killed.jsonl"
[ "$STATUS" = 0 ] || { cat "$TMP/killed.log"; echo "the restarted run failed with status $STATUS"; exit 1; }
for text in "rank 1 was killed by signal 9" "restart 1 of 1 (--max-restarts)" "resuming from the newest intact checkpoint in $CKPT"; do
  grep -qF "$text" "$TMP/killed.log" || { cat "$TMP/killed.log"; echo "the launcher does not say '$text'"; exit 1; }
done
for f in "$TMP"/whole/epoch-4-step-*/slice*.ckpt; do
  cmp "$f" "$CKPT/$(basename "$(dirname "$f")")/$(basename "$f")" ||
    { echo "the restarted run's final $(basename "$f") differs from the uninterrupted run's"; exit 1; }
done
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def events(name, kind):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == kind]
whole, killed = events("whole.jsonl", "epoch"), events("killed.jsonl", "epoch")
assert [r["restarts"] for r in whole] == [0] * 4, whole
assert killed[-1]["epoch"] == 4 and killed[-1]["restarts"] == 1, killed[-1]
resumed = events("killed.jsonl", "resume")
assert len(resumed) == 1 and 1 <= resumed[0]["epoch"] < 4, resumed
for key in ("loss", "p@1", "p@3", "p@5", "ndcg@5", "steps"):
    assert whole[-1][key] == killed[-1][key], (key, whole[-1], killed[-1])
for rank in (1,):
    w, k = events("whole.rank%d.jsonl" % rank, "epoch"), events("killed.rank%d.jsonl" % rank, "epoch")
    assert w[-1]["loss"] == k[-1]["loss"] and k[-1]["restarts"] == 1, (w[-1], k[-1])
print("OK: killed at epoch %d, restarted, final P@1 %.4f == uninterrupted %.4f" %
      (resumed[0]["epoch"], killed[-1]["p@1"], whole[-1]["p@1"]))
PY

echo "+ rank 1 killed, no --max-restarts: the launch fails as before"
CKPT=$TMP/plain
launch_and_kill -n 2 -- "$FRUGAL" "${TRAIN[@]}" --checkpoint "$CKPT"
[ "$STATUS" = 137 ] || { cat "$TMP/killed.log"; echo "expected status 137, got $STATUS"; exit 1; }
grep -q "restart" "$TMP/killed.log" && { cat "$TMP/killed.log"; echo "restarted without --max-restarts"; exit 1; }

echo "+ rank 2 of 3 killed, --max-restarts 1 --min-ranks 2: the restart runs on 2 ranks, resliced"
EXACT=("${TRAIN[@]}" --sampler exact)
run "$FRUGAL" launch -n 3 -- "$FRUGAL" "${EXACT[@]}" --metrics "$TMP/three.jsonl"
CKPT=$TMP/shrunk
KILL_RANK=2 launch_and_kill -n 3 --max-restarts 1 --min-ranks 2 -- "$FRUGAL" "${EXACT[@]}" --checkpoint "$CKPT" \
  --metrics "$TMP/shrunk.jsonl"
[ "$STATUS" = 0 ] || { cat "$TMP/killed.log"; echo "the shrunk restart failed with status $STATUS"; exit 1; }
grep -qF "restart 1 of 1 (--max-restarts): every rank starts again, resuming from the newest intact checkpoint in $CKPT, on 2 of the 3 ranks (--min-ranks 2)" \
  "$TMP/killed.log" || { cat "$TMP/killed.log"; echo "the launcher does not say it restarts on 2 ranks"; exit 1; }
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def events(name, kind):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == kind]
three, shrunk = events("three.jsonl", "epoch"), events("shrunk.jsonl", "epoch")
starts, resumed = events("shrunk.jsonl", "start"), events("shrunk.jsonl", "resume")
assert [s["world_size"] for s in starts] == [3, 2], starts
assert len(resumed) == 1 and resumed[0]["saved_model_slices"] == 3, resumed
assert shrunk[-1]["epoch"] == 4 and shrunk[-1]["restarts"] == 1, shrunk[-1]
# Another slicing sums the softmax in another order: equal up to rounding, not bit for bit.
a, b = three[-1], shrunk[-1]
assert abs(a["loss"] - b["loss"]) <= 1e-4 * abs(a["loss"]), (a["loss"], b["loss"])
assert abs(a["p@1"] - b["p@1"]) <= 0.005, (a["p@1"], b["p@1"])
print("OK: 3 ranks, rank killed, finished on 2: loss %.6f vs %.6f, P@1 %.4f vs %.4f" %
      (b["loss"], a["loss"], b["p@1"], a["p@1"]))
PY

echo "+ the restarted command and environment"
mkdir -p "$TMP/given"
echo '{}' > "$TMP/given/manifest.json"  # the policy only looks for a committed manifest
run "$FRUGAL" launch -n 1 --max-restarts 1 -- bash -c \
  'echo "count=$FRUGAL_RESTART_COUNT args=$*"; [ "$FRUGAL_RESTART_COUNT" = 1 ]' x --checkpoint "$TMP/given" --resume old
grep -qF "count=0 args=--checkpoint $TMP/given --resume old" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
grep -qF "count=1 args=--checkpoint $TMP/given --resume $TMP/given" "$TMP/last.log" || { cat "$TMP/last.log"; exit 1; }
fails_with "all 2 restart(s) of --max-restarts are used; giving up with status 3" \
  "$FRUGAL" launch -n 2 --max-restarts 2 -- bash -c 'exit 3'
[ "$(grep -c "restart [12] of 2" "$TMP/fail.log")" = 2 ] || { cat "$TMP/fail.log"; exit 1; }
fails_with "--max-restarts" "$FRUGAL" launch -n 1 --max-restarts -1 -- true
fails_with "--min-ranks 2 needs --max-restarts" "$FRUGAL" launch -n 2 --min-ranks 2 -- true
fails_with "--min-ranks 3 must be between 0 (off) and -n 2" "$FRUGAL" launch -n 2 --max-restarts 1 --min-ranks 3 -- true
echo "OK: elastic restart"
