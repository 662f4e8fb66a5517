#!/usr/bin/env bash
# Runs a command as one rank of an emulated heterogeneous group (bench/mixed/run.sh): the fast ranks
# on CPU 0 at full speed; the slow ones (MIXED_SLOW: world ranks, default every rank but 0) on the
# last CPU, each inside its cgroup under MIXED_CGROUP (a CPU quota set up by bench/mixed/cgroup.sh).
# FRUGAL_RANK is the launcher's.
set -euo pipefail
rank=${FRUGAL_RANK:?throttle.sh runs under frugal launch}
last=$(( $(nproc) - 1 ))
slow=${MIXED_SLOW:-$(seq -s ' ' 1 $(( ${FRUGAL_SIZE:-1} - 1 )))}
case " $slow " in
  *" $rank "*) ;;
  *) exec taskset -c 0 "$@" ;;
esac
if [ -n "${MIXED_CGROUP:-}" ]; then
  echo $$ > "$MIXED_CGROUP/rank$rank/cgroup.procs"
fi
exec taskset -c "$last" "$@"
