#!/usr/bin/env bash
# `srun frugal train ...` without a launcher: ranks started by hand with only Slurm's variables
# (SLURM_PROCID, SLURM_NTASKS, the node list; no FRUGAL_RANK or FRUGAL_SIZE) train exactly as the
# same 2 ranks under `frugal launch`: once with FRUGAL_COORDINATOR, once with the coordinator taken
# from the node list's first host and FRUGAL_COORDINATOR_PORT. A task of one (an sbatch script) is a
# plain 1-rank run, and a Slurm run with no way to find the coordinator says which variables to set.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
# Whatever the caller's environment says about ranks must not leak into the hand-started ones.
for v in $(env | grep -o '^\(FRUGAL\|SLURM\|OMPI\)_[A-Z_]*'); do unset "$v"; done

"$FRUGAL" data synth-xmc --features 2000 --labels 300 --train 1500 --test 200 --nnz 15 --labels-per-point 3 \
  --seed 4 --out "$TMP/data" > /dev/null
COMMON=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 2 --threads 1 --quiet
        --sampler exact --hidden 16 --batch 64 --seed 5)

run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --metrics "$TMP/launch.jsonl"

# srun_by_hand NAME VAR=VALUE...: two tasks of a step on one node, as srun would start them.
srun_by_hand() {
  local name=$1; shift
  echo "+ 2 Slurm tasks ($name): $*"
  local pids=()
  for r in 0 1; do
    env "$@" SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_NODEID=0 SLURM_LOCALID=$r SLURM_STEP_TASKS_PER_NODE=2 \
      FRUGAL_RENDEZVOUS_TIMEOUT=60 "$FRUGAL" "${COMMON[@]}" --metrics "$TMP/$name.jsonl" > "$TMP/$name.$r.log" 2>&1 &
    pids+=($!); PIDS+=($!)
  done
  for r in 0 1; do
    wait "${pids[$r]}" || { cat "$TMP/$name.0.log" "$TMP/$name.1.log"; echo "Slurm task $r ($name) failed"; exit 1; }
  done
}
srun_by_hand coordinator FRUGAL_COORDINATOR=127.0.0.1:$(free_port) SLURM_STEP_NODELIST=nowhere[1-2]
srun_by_hand nodelist SLURM_STEP_NODELIST=127.0.0.1 SLURM_JOB_NODELIST=nowhere[01-04] \
  FRUGAL_COORDINATOR_PORT=$(free_port)

# One task: a 1-rank run (no coordinator needed), equal to a run started without Slurm.
run "$FRUGAL" "${COMMON[@]}" --metrics "$TMP/one.jsonl"
run env SLURM_PROCID=0 SLURM_NTASKS=1 "$FRUGAL" "${COMMON[@]}" --metrics "$TMP/one-task.jsonl"
# Several tasks and no node list: the error names what to set.
fails_with "SLURM_STEP_NODELIST" env SLURM_PROCID=1 SLURM_NTASKS=2 "$FRUGAL" "${COMMON[@]}"
fails_with "FRUGAL_COORDINATOR" env SLURM_PROCID=1 SLURM_NTASKS=2 "$FRUGAL" "${COMMON[@]}"
fails_with "SLURM_STEP_NODELIST 'node[1-': expected a Slurm host list" \
  env SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_STEP_NODELIST='node[1-' "$FRUGAL" "${COMMON[@]}"
fails_with "SLURM_PROCID 2 is not below SLURM_NTASKS 2" env SLURM_PROCID=2 SLURM_NTASKS=2 "$FRUGAL" "${COMMON[@]}"

python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def epochs(name):
    return [(r["loss"], r["p@1"], r["p@5"]) for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == "epoch"]
launch = epochs("launch.jsonl")
assert len(launch) == 2, launch
for name in ("coordinator.jsonl", "nodelist.jsonl"):
    assert epochs(name) == launch, (name, epochs(name), launch)
    assert epochs(name.replace(".jsonl", ".rank1.jsonl")) == epochs("launch.rank1.jsonl"), name
assert epochs("one-task.jsonl") == epochs("one.jsonl"), (epochs("one-task.jsonl"), epochs("one.jsonl"))
print("OK: 2 Slurm tasks (FRUGAL_COORDINATOR, or the node list's first host) == frugal launch -n 2; 1 task == 1 rank")
PY
