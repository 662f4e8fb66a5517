#!/usr/bin/env bash
# bench/comm: all-reduce and all-gather, 4 KB .. 64 MB per rank, 2 and 4 ranks on loopback:
# ZeroMQ (frugal launch) vs Open MPI over TCP (--mca btl tcp,self, the same medium) vs Open MPI
# default (shared memory between local ranks) vs in-process threads, in one run.
#   bash bench/comm/run.sh [BUILD_DIR]        -> .bench/comm/results.csv and a markdown table
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
OUT=.bench/comm
mkdir -p "$OUT"
ninja -C "$BUILD" bench/comm/comm_bench apps/frugal >/dev/null
BENCH=$BUILD/bench/comm/comm_bench
FRUGAL=$BUILD/apps/frugal
ROOT_FLAG=""; [ "$(id -u)" -eq 0 ] && ROOT_FLAG="--allow-run-as-root"
CSV=$OUT/results.csv
echo "backend,ranks,op,bytes,seconds,GBps" > "$CSV"
for p in 2 4; do
  echo "==> $p ranks: in-process" >&2
  "$BENCH" --local $p | sed 's/^local,/local,/' >> "$CSV"
  echo "==> $p ranks: ZeroMQ (frugal launch)" >&2
  "$FRUGAL" launch -n $p -- "$BENCH" | sed -n 's/^\[0\] //p' >> "$CSV"
  echo "==> $p ranks: Open MPI, TCP loopback" >&2
  mpirun $ROOT_FLAG --oversubscribe -n $p --mca btl tcp,self "$BENCH" | sed 's/^mpi,/mpi-tcp,/' >> "$CSV"
  echo "==> $p ranks: Open MPI, default (shared memory)" >&2
  mpirun $ROOT_FLAG --oversubscribe -n $p "$BENCH" | sed 's/^mpi,/mpi-shm,/' >> "$CSV"
done
python3 bench/comm/table.py "$CSV"
