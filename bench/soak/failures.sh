#!/usr/bin/env bash
# How fast and how clearly a group of ranks fails (issue 17's target: a dead, stopped or
# misconfigured rank makes every rank fail with the same clear error within 2x the timeout, the
# misconfigured case within 2 s). Four `frugal train` ranks are started by hand (not by `frugal
# launch`, which would stop the others itself as soon as one fails) with --comm-timeout TIMEOUT, and
# once they train, rank 2 is
#   dead:       killed with kill -9;
#   stopped:    stopped with kill -STOP (the process stays, its sockets stay open; SIGCONT after
#               the others have failed, to see what it says itself);
#   mismatched: started with another --hidden (a configuration mismatch: found at start).
# For each case and rank: exit code, seconds from the event to the rank's exit, and its last line.
# Usage: bash bench/soak/failures.sh [BUILD_DIR] [OUT_DIR]; TIMEOUT (10 s) and CASES ("dead stopped
# mismatched") override. Writes OUT_DIR/summary.md (default .bench/failures); about 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=${2:-.bench/failures}
TIMEOUT=${TIMEOUT:-10}
FRUGAL="$(pwd)/$BUILD/apps/frugal"
[ -x "$FRUGAL" ] || { echo "no $FRUGAL: build first (bash apps/dev.sh build)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
echo "+ $FRUGAL data synth-xmc ... --out $OUT/data" >&2
"$FRUGAL" data synth-xmc --features 20000 --labels 2000 --train 20000 --test 1000 --nnz 20 --labels-per-point 3 \
  --seed 1 --out "$OUT/data" > /dev/null
now() { date +%s.%N; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_rank CASE R FLAGS...: rank R in the background; exit code and end time to $OUT/CASE.rR.{rc,end}.
start_rank() {
  local c=$1 r=$2
  shift 2
  ( rc=0
    FRUGAL_RANK=$r timeout 300 "$FRUGAL" train --train "$OUT/data/train.txt" --test "$OUT/data/test.txt" \
      --epochs 100 --threads 1 --tables 10 --comm-timeout "$TIMEOUT" --seed 1 "$@" \
      > "$OUT/$c.r$r.log" 2>&1 || rc=$?
    now > "$OUT/$c.r$r.end"; echo "$rc" > "$OUT/$c.r$r.rc" ) &
  PIDS[$r]=$!
}

report() {  # report CASE EVENT_TIME
  local c=$1 t0=$2 r
  echo "| case | rank | exit code | seconds after the event | last line |"
  echo "|---|---|---|---|---|"
  for r in 0 1 2 3; do
    [ -f "$OUT/$c.r$r.rc" ] || continue
    printf '| %s | %s | %s | %.1f | %s |\n' "$c" "$r" "$(cat "$OUT/$c.r$r.rc")" \
      "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$(cat "$OUT/$c.r$r.end")")" \
      "$(grep -v '^\s*$' "$OUT/$c.r$r.log" | tail -1 | cut -c1-200 | sed 's/|/\\|/g')"
  done
}

run_case() {  # run_case CASE
  local c=$1 r t0
  export FRUGAL_SIZE=4 FRUGAL_COORDINATOR=127.0.0.1:$(free_port) FRUGAL_RENDEZVOUS_TIMEOUT=$((3 * TIMEOUT))
  PIDS=()
  if [ "$c" = mismatched ]; then
    t0=$(now)
    for r in 0 1 3; do start_rank "$c" "$r" --hidden 64; done
    start_rank "$c" 2 --hidden 32
  else
    for r in 0 1 2 3; do start_rank "$c" "$r" --hidden 64; done
    # Until the ranks are past the rendezvous and training: rank 0's first progress line (only rank 0
    # prints progress; the ranks step together). Waiting for a line from every rank waited out the
    # whole minute, by when a fast machine had trained all 100 epochs and there was no rank to kill.
    for _ in $(seq 1 120); do
      grep -q "train epoch 1" "$OUT/$c.r0.log" 2> /dev/null && break
      sleep 0.5
    done
    sleep 2
    # Rank 2's frugal process: the child of `timeout`, the child of the rank's subshell.
    local victim
    victim=$(pgrep -P "$(pgrep -P "${PIDS[2]}")")
    t0=$(now)
    if [ "$c" = dead ]; then kill -9 "$victim"; else kill -STOP "$victim"; fi
    if [ "$c" = stopped ]; then
      for r in 0 1 3; do wait "${PIDS[$r]}" || true; done
      kill -CONT "$victim"
    fi
  fi
  wait
  report "$c" "$t0"
}

{
  echo "bench/soak/failures.sh: 4 ranks, --comm-timeout $TIMEOUT s, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
  for c in ${CASES:-dead stopped mismatched}; do echo; run_case "$c"; done
} | tee "$OUT/summary.md"
