#!/usr/bin/env bash
# Runs a command as one rank of an emulated heterogeneous group (bench/mixed/run.sh): rank 0 on CPU
# 0 at full speed; every other rank on CPU 1 (or 0 on a 1-core machine) inside the cgroup named by
# MIXED_CGROUP (a CPU quota: QUOTA% of a core each, set up by run.sh). FRUGAL_RANK is the launcher's.
set -euo pipefail
rank=${FRUGAL_RANK:?throttle.sh runs under frugal launch}
last=$(( $(nproc) - 1 ))
if [ "$rank" -eq 0 ]; then
  exec taskset -c 0 "$@"
fi
if [ -n "${MIXED_CGROUP:-}" ]; then
  echo $$ > "$MIXED_CGROUP/rank$rank/cgroup.procs"
fi
exec taskset -c "$last" "$@"
