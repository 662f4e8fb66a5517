#!/usr/bin/env bash
# A misconfigured rank fails every rank at once, with the same message: three ranks started by hand
# (not by `frugal launch`, which would stop the others as soon as one fails), rank 2 on a shuffled
# copy of the training file, rank 1 started a moment later so that its hello reaches rank 0 after
# rank 0 has found the mismatch. Every rank must fail naming train_fingerprint and ranks 0 and 2,
# well before the 60 s rendezvous and peer timeouts (before the fix rank 1 waited out its
# rendezvous timeout: `timeout 30` ends it and the test fails).
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$FRUGAL" data synth-xmc --features 300 --labels 40 --train 200 --test 50 --nnz 10 --labels-per-point 2 --seed 1 \
  --out "$TMP/data" > /dev/null
{ head -n 1 "$TMP/data/train.txt"; tail -n +2 "$TMP/data/train.txt" | sort -R --random-source=<(yes); } \
  > "$TMP/shuffled.txt"
source "$(dirname "$0")/../shell_helpers.sh"
PORT=$(free_port)
export FRUGAL_SIZE=3 FRUGAL_COORDINATOR=127.0.0.1:$PORT FRUGAL_RENDEZVOUS_TIMEOUT=60
COMMON=(--test "$TMP/data/test.txt" --epochs 1 --threads 1 --quiet --hidden 8 --tables 4 --max-steps 2 --comm-timeout 60)
rank() {  # rank R TRAINFILE: runs one rank, its output in $TMP/rR.log and exit code in $TMP/rR.rc
  local rc=0
  FRUGAL_RANK=$1 timeout 30 "$FRUGAL" train --train "$2" "${COMMON[@]}" > "$TMP/r$1.log" 2>&1 || rc=$?
  echo "$rc" > "$TMP/r$1.rc"
}
start=$(date +%s)
rank 0 "$TMP/data/train.txt" &
rank 2 "$TMP/shuffled.txt" &
{ sleep 0.3; rank 1 "$TMP/data/train.txt"; } &
wait
elapsed=$(( $(date +%s) - start ))
want="ranks 0 and 2 were started with different configurations: setting 'train_fingerprint' differs"
for r in 0 1 2; do
  rc=$(cat "$TMP/r$r.rc")
  if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then
    cat "$TMP/r$r.log"; echo "rank $r: exit code $rc, expected a failure before the timeout"; exit 1
  fi
  grep -qF "$want" "$TMP/r$r.log" || { cat "$TMP/r$r.log"; echo "rank $r: the error does not say: $want"; exit 1; }
done
echo "OK: all 3 ranks failed in ${elapsed} s (timeouts 60 s): $(cat "$TMP/r1.log")"
