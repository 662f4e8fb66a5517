#!/usr/bin/env bash
# --transport-map under mpirun (comm/routed_communicator.h): the ranks open the ZeroMQ mesh beside MPI
# and route each kind of operation as the map says. With 2 ranks a sum is one addition, so every map
# gives the same bits as plain MPI: model-parallel (1x2) and DCT-DP replicas (2x1). The start record
# names the map, the epoch record splits the bytes by transport as routed; a bad map fails on every
# rank naming the flag, before any data is read; outside mpirun the flag is said to be ignored.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 3000 --labels 600 --train 2000 --test 300 --nnz 20 --labels-per-point 3 \
  --seed 2 --out "$TMP/data" > /dev/null
MPIRUN=(mpirun --oversubscribe -n 2)
[ "$(id -u)" = 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe -n 2)
T=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 1 --hidden 32 --threads 1 --quiet
   --max-steps 12)
MIXED=all_reduce=mpi,all_gather=zmq,reduce_scatter=zmq,p2p=zmq
ZMQ=all_reduce=zmq,all_gather=zmq,reduce_scatter=zmq,broadcast=zmq,p2p=zmq,barrier=zmq
for grid in 1x2 2x1; do
  keep=(); [ "$grid" = 2x1 ] && keep=(--dp-keep 0.05)
  run "${MPIRUN[@]}" "$FRUGAL" "${T[@]}" --grid $grid "${keep[@]}" --metrics "$TMP/mpi-$grid.jsonl"
  run "${MPIRUN[@]}" "$FRUGAL" "${T[@]}" --grid $grid "${keep[@]}" --transport-map $MIXED --metrics "$TMP/mixed-$grid.jsonl"
  run "${MPIRUN[@]}" "$FRUGAL" "${T[@]}" --grid $grid "${keep[@]}" --transport-map $ZMQ --metrics "$TMP/zmq-$grid.jsonl"
done
python3 - "$TMP" <<'PY'
import json, sys
def lines(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}")]
for grid in ("1x2", "2x1"):
    mpi, mixed, zmq = (lines(f"{m}-{grid}.jsonl") for m in ("mpi", "mixed", "zmq"))
    key = lambda r: (r[-1]["loss"], r[-1]["p@1"], r[-1]["p@5"], r[-1]["steps"])
    assert key(mpi) == key(mixed) == key(zmq), (grid, key(mpi), key(mixed), key(zmq))
    assert mpi[0]["transport_map"] is None and mpi[0]["backend"] == "mpi", mpi[0]
    assert mixed[0]["backend"] == "mpi+zmq" and mixed[0]["transport_map"].startswith("all_reduce=mpi,all_gather=zmq"), mixed[0]
    assert "transport_bytes_sent_per_sample" not in mpi[-1]
    by = mixed[-1]["transport_bytes_sent_per_sample"]
    # Model slices exchange by all-gather and reduce-scatter (zmq here); DCT-DP replicas all-gather
    # their selections (zmq) and sum their dense remainder by all-reduce (mpi).
    assert by["zmq"] > 0, (grid, by)
    # The two transports' bytes are the epoch's bytes (within 1%: the trainer's own count leaves out
    # a few bytes of bookkeeping a step, such as DCT-DP's two-float totals).
    assert abs(by["mpi"] + by["zmq"] - mixed[-1]["bytes_sent_per_sample"]) < 0.01 * by["zmq"], (grid, by)
    assert zmq[-1]["transport_bytes_sent_per_sample"]["mpi"] == 0, zmq[-1]
    print(f"ok {grid}: loss {key(mpi)[0]:.6f} whatever the map; mixed map bytes/sample {by}")
PY
# auto: the table `frugal bench comm --tune` measures (--tune last: mpirun reads a --tune FILE of its own).
run "${MPIRUN[@]}" "$FRUGAL" bench comm --sizes 4096,262144 --iterations 3 --out "$TMP/table.json" --tune
run "${MPIRUN[@]}" "$FRUGAL" "${T[@]}" --grid 1x2 --transport-map auto --transport-table "$TMP/table.json" \
  --metrics "$TMP/auto.jsonl"
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
table = json.load(open(f"{d}/table.json"))
assert table["ranks"] == 2 and set(table["kinds"]) == {"all_reduce", "all_gather", "reduce_scatter", "broadcast"}, table
auto = [json.loads(l) for l in open(f"{d}/auto.jsonl")]
mpi = [json.loads(l) for l in open(f"{d}/mpi-1x2.jsonl")]
assert auto[0]["transport_map"].startswith("auto (table "), auto[0]["transport_map"]
assert (auto[-1]["loss"], auto[-1]["p@1"]) == (mpi[-1]["loss"], mpi[-1]["p@1"]), (auto[-1]["loss"], mpi[-1]["loss"])
print("ok auto:", auto[0]["transport_map"], auto[-1]["transport_bytes_sent_per_sample"])
PY
fails_with "no transport table there" "${MPIRUN[@]}" "$FRUGAL" "${T[@]}" --transport-map auto \
  --transport-table "$TMP/missing.json"
fails_with "frugal bench comm times Open MPI against ZeroMQ between the ranks of an mpirun job" \
  "$FRUGAL" bench comm --sizes 4096
fails_with "--transport-map: unknown kind 'allreduce'" "${MPIRUN[@]}" "$FRUGAL" "${T[@]}" --transport-map allreduce=zmq
"$FRUGAL" "${T[@]}" --transport-map $MIXED > "$TMP/one.log" 2>&1
grep -c "note: --transport-map applies to jobs mpirun starts" "$TMP/one.log" > /dev/null || { cat "$TMP/one.log"; exit 1; }
echo "OK: --transport-map routes, keeps the bits, counts bytes per transport and names its errors"
