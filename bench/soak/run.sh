#!/usr/bin/env bash
# Soak test of elastic restart and of garbage on the wire (issue 17; not part of the test suite):
# 4 ranks train under `frugal launch --max-restarts --no-run-token` (no cluster key and no run token,
# so that garbage gets past the ZeroMQ handshake to frugal's own frame checks) for about DURATION seconds while a
# random rank is killed with kill -9 every KILL_EVERY seconds on average (uniform between half and
# one and a half times that) and bench/soak/garbage.py keeps sending garbage to every port the
# launcher and the ranks listen on (random bytes, ZMTP handshakes with random frames, frames shaped
# like frugal's with bad checksums, lengths and senders; comm/README.md, "Security"); then the same run
# undisturbed. Training is deterministic, every restart resumes all ranks from the newest intact
# checkpoint and garbage from strangers is dropped, so the final P@1 must be equal, not just close:
# the script fails when it is not, or when the disturbed launch fails.
# Usage: bash bench/soak/run.sh [BUILD_DIR] [OUT_DIR]. DURATION (1800 s), KILL_EVERY (180 s),
# RANKS (4), SEED (1) override; KILLS=0 kills no rank (garbage only: with DURATION=120, a short
# check of the garbage half), GARBAGE=0 sends no garbage (kills only), GARBAGE_RATE (300) caps the
# garbage messages per second. It takes about twice DURATION (the disturbed run, then the reference).
# Prints every command it runs; logs and metrics go to OUT_DIR (default .bench/soak).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=${2:-.bench/soak}
DURATION=${DURATION:-1800}
KILL_EVERY=${KILL_EVERY:-180}
RANKS=${RANKS:-4}
SEED=${SEED:-1}
KILLS=${KILLS:-1}
GARBAGE=${GARBAGE:-1}
GARBAGE_RATE=${GARBAGE_RATE:-300}
FRUGAL="$(pwd)/$BUILD/apps/frugal"
[ -x "$FRUGAL" ] || { echo "no $FRUGAL: build first (bash apps/dev.sh build)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
run() { echo "+ $*" >&2; "$@"; }
LAUNCHER=
GARBAGE_PID=
trap '[ -n "$LAUNCHER" ] && kill "$LAUNCHER" 2> /dev/null; [ -n "$GARBAGE_PID" ] && kill "$GARBAGE_PID" 2> /dev/null || true' EXIT

run "$FRUGAL" data synth-xmc --features 20000 --labels 2000 --train 20000 --test 1000 --nnz 20 \
  --labels-per-point 3 --seed "$SEED" --out "$OUT/data" > /dev/null
TRAIN=(train --train "$OUT/data/train.txt" --test "$OUT/data/test.txt" --threads 1 --quiet --hidden 64
       --batch 128 --tables 20 --seed "$SEED")

# Epochs to fill DURATION: the wall time of a three-epoch run minus a one-epoch run's, halved (the
# start-up cancels out; a one-epoch run alone overestimated an epoch nearly twice, and the soak ran
# 17 of its 30 minutes).
t0=$(date +%s.%N)
run "$FRUGAL" launch -n "$RANKS" -- "$FRUGAL" "${TRAIN[@]}" --epochs 1 > "$OUT/calibrate.log" 2>&1
t1=$(date +%s.%N)
run "$FRUGAL" launch -n "$RANKS" -- "$FRUGAL" "${TRAIN[@]}" --epochs 3 >> "$OUT/calibrate.log" 2>&1
EPOCH_SECONDS=$(python3 -c "import sys; t0, t1, t2 = map(float, sys.argv[1:]); print(round(max(0.1, (t2 - t1 - (t1 - t0)) / 2), 2))" \
  "$t0" "$t1" "$(date +%s.%N)")
EPOCHS=$(python3 -c "import math, sys; print(max(2, math.ceil(float(sys.argv[1]) / float(sys.argv[2]))))" \
  "$DURATION" "$EPOCH_SECONDS")
# Enough restarts for every kill the duration can hold, and some to spare.
MAX_RESTARTS=$(( 2 * DURATION / KILL_EVERY + 5 ))
echo "soak: $RANKS ranks, $EPOCHS epochs (~$EPOCH_SECONDS s each), $([ "$KILLS" = 0 ] && echo "no kills" ||
  echo "a kill every ~$KILL_EVERY s"), $([ "$GARBAGE" = 0 ] && echo "no garbage" ||
  echo "garbage at up to $GARBAGE_RATE messages/s"), --max-restarts $MAX_RESTARTS"

# The pid of rank $2 among the children of launcher $1 (empty while the job is between starts).
rank_pid() {
  local p
  for p in $(pgrep -P "$1" || true); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "FRUGAL_RANK=$2"; then echo "$p"; return; fi
  done
}

start=$(date +%s)
echo "+ $FRUGAL launch -n $RANKS --max-restarts $MAX_RESTARTS --no-run-token -- $FRUGAL ${TRAIN[*]} --epochs $EPOCHS --checkpoint $OUT/ckpt --metrics $OUT/soak.jsonl" >&2
"$FRUGAL" launch -n "$RANKS" --max-restarts "$MAX_RESTARTS" --no-run-token -- "$FRUGAL" "${TRAIN[@]}" --epochs "$EPOCHS" \
  --checkpoint "$OUT/ckpt" --metrics "$OUT/soak.jsonl" > "$OUT/soak.log" 2>&1 &
LAUNCHER=$!
if [ "$GARBAGE" != 0 ]; then
  # It finds the ports itself (four times a second: restarted ranks listen on new ones) and stops
  # when the launcher exits.
  GARBAGE_CMD=(python3 bench/soak/garbage.py --launcher "$LAUNCHER" --ranks "$RANKS" --rate "$GARBAGE_RATE"
               --seed "$SEED" --stats "$OUT/garbage.json")
  echo "+ ${GARBAGE_CMD[*]}" >&2
  "${GARBAGE_CMD[@]}" 2> "$OUT/garbage.log" &
  GARBAGE_PID=$!
fi
kills=0
while [ "$KILLS" != 0 ] && kill -0 "$LAUNCHER" 2> /dev/null; do
  wait_s=$(( KILL_EVERY / 2 + RANDOM % (KILL_EVERY + 1) ))
  for _ in $(seq 1 "$wait_s"); do kill -0 "$LAUNCHER" 2> /dev/null || break; sleep 1; done
  kill -0 "$LAUNCHER" 2> /dev/null || break
  rank=$(( RANDOM % RANKS ))
  pid=$(rank_pid "$LAUNCHER" "$rank")
  if [ -n "$pid" ] && kill -9 "$pid" 2> /dev/null; then
    kills=$(( kills + 1 ))
    echo "soak: $(( $(date +%s) - start )) s: killed rank $rank (pid $pid)"
  fi
done
status=0
wait "$LAUNCHER" || status=$?
LAUNCHER=
soak_seconds=$(( $(date +%s) - start ))
if [ -n "$GARBAGE_PID" ]; then
  wait "$GARBAGE_PID" || { cat "$OUT/garbage.log"; echo "soak: the garbage sender failed"; exit 1; }
  GARBAGE_PID=
fi
[ "$status" = 0 ] || { tail -30 "$OUT/soak.log"; echo "soak: the disturbed launch failed with status $status"; exit 1; }

run "$FRUGAL" launch -n "$RANKS" -- "$FRUGAL" "${TRAIN[@]}" --epochs "$EPOCHS" --checkpoint "$OUT/ref-ckpt" \
  --metrics "$OUT/reference.jsonl" > "$OUT/reference.log" 2>&1

restarts=$(grep -c "frugal launch: restart [0-9]* of" "$OUT/soak.log" || true)
python3 - "$OUT" "$kills" "$soak_seconds" "$restarts" <<'PY'
import json, os, re, sys
out, kills, seconds, restarts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def epochs(name):
    return [r for r in map(json.loads, open(os.path.join(out, name))) if r["event"] == "epoch"]
soak, ref = epochs("soak.jsonl")[-1], epochs("reference.jsonl")[-1]
if os.path.exists(os.path.join(out, "garbage.json")):
    g = json.load(open(os.path.join(out, "garbage.json")))
    # What the ranks logged about it: a line per rank at most every 10 s, whatever the rate.
    lines = [l for l in open(os.path.join(out, "soak.log")) if "unknown sender" in l]
    logged = sum(int(m.group(1)) for l in lines for m in [re.search(r"dropped (\d+) more message", l)] if m) + \
        sum(1 for l in lines if "dropped a message from an unknown sender" in l)
    print(f"soak: garbage: {g['messages']} messages ({g['bytes']} bytes; raw {g['by_kind']['raw']}, "
          f"zmtp {g['by_kind']['zmtp']}, frugal-shaped {g['by_kind']['frugal']}) over {g['connections']} "
          f"connections to {g['ports_seen']} ports, {g['disconnected_by_rank']} closed by a rank; the ranks "
          f"reported {logged} message(s) dropped in {len(lines)} log line(s)")
print(f"soak: {seconds} s, {kills} kill(s), {restarts} restart(s) ({soak['restarts']} before the last epoch); after epoch {soak['epoch']}: "
      f"P@1 {soak['p@1']:.4f} (undisturbed {ref['p@1']:.4f}), P@5 {soak['p@5']:.4f} (undisturbed {ref['p@5']:.4f}), "
      f"loss {soak['loss']:.6f} (undisturbed {ref['loss']:.6f})")
same = soak["epoch"] == ref["epoch"] and all(soak[k] == ref[k] for k in ("p@1", "p@3", "p@5", "loss"))
print("soak: final metrics " + ("equal to the undisturbed run's" if same else "DIFFER from the undisturbed run's"))
sys.exit(0 if same else 1)
PY
