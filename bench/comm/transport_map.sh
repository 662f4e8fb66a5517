#!/usr/bin/env bash
# --transport-map against each transport alone on the DCT-DP step (issue 47 item 4): 4 data-parallel
# replicas under mpirun (--grid 4x1, --dp-keep, --threads 1 a rank, loopback), one run per map and
# repeat, maps in turn so that drift in the machine's speed touches each alike:
#   mpi    every kind over Open MPI (no --transport-map)
#   zmq    every kind over frugal's ZeroMQ mesh
#   MAPS   the mixed maps to try (default: all_gather over one and all_reduce over the other, both ways)
#   auto   --transport-map auto with the table `frugal bench comm --tune` measured just before
# Reports training samples/s (rank 0, epochs after the first, mean over repeats with min and max), the
# bytes per sample by transport, and the load average; the P@1 of every run (the same bits at 2 ranks;
# at 4 MPI's all-reduce may add in another order).
#
#   bash bench/comm/transport_map.sh          # ~6 min on 2 cores
# Environment: OUT (.bench/transport-map), RANKS (4), REPEATS (3), EPOCHS (3), STEPS (100 a epoch),
#   KEEP (0.05), MAPS, FRUGAL (build/apps/frugal).
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=${FRUGAL:-build/apps/frugal}
OUT=${OUT:-.bench/transport-map}
RANKS=${RANKS:-4}
REPEATS=${REPEATS:-3}
EPOCHS=${EPOCHS:-3}
STEPS=${STEPS:-100}
KEEP=${KEEP:-0.05}
ZMQ_ALL=all_reduce=zmq,all_gather=zmq,reduce_scatter=zmq,broadcast=zmq,p2p=zmq,barrier=zmq
MAPS=${MAPS:-"all_reduce=mpi,all_gather=zmq,reduce_scatter=zmq,p2p=zmq all_reduce=zmq,all_gather=mpi"}
mkdir -p "$OUT"
if [ ! -f "$OUT/data/test.txt" ]; then
  "$FRUGAL" data synth-xmc --features 20000 --labels 5000 --train 20000 --test 2000 --noise 0.8 --nnz 40 --seed 7 \
    --out "$OUT/data" > /dev/null
fi
MPIRUN=(mpirun --oversubscribe -n "$RANKS")
[ "$(id -u)" = 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe -n "$RANKS")
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/load.txt"
# --tune last: Open MPI's mpirun also reads a `--tune FILE` option anywhere on its command line.
"${MPIRUN[@]}" "$FRUGAL" bench comm --out "$OUT/table.json" --tune | tee "$OUT/tune.txt"
names=(mpi zmq)
maps=("" "$ZMQ_ALL")
i=0
for m in $MAPS; do names+=("mixed$i"); maps+=("$m"); i=$((i + 1)); done
names+=(auto)
maps+=(auto)
for rep in $(seq 1 "$REPEATS"); do
  for k in "${!names[@]}"; do
    name=${names[$k]} map=${maps[$k]}
    log="$OUT/$name-r$rep.jsonl"
    rm -f "$log"
    flags=()
    [ -n "$map" ] && flags=(--transport-map "$map")
    [ "$map" = auto ] && flags+=(--transport-table "$OUT/table.json")
    echo "+ $name repeat $rep ${map:+(--transport-map $map)}"
    "${MPIRUN[@]}" "$FRUGAL" train --train "$OUT/data/train.txt" --test "$OUT/data/test.txt" --grid "${RANKS}x1" \
      --dp-keep "$KEEP" --threads 1 --epochs "$EPOCHS" --max-steps "$STEPS" --seed 1 --quiet --metrics "$log" \
      "${flags[@]}" > "$OUT/$name-r$rep.log" 2>&1
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt"
python3 - "$OUT" "$REPEATS" "${names[@]}" -- "${maps[@]}" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
rest = sys.argv[3:]
names, maps = rest[:rest.index("--")], rest[rest.index("--") + 1:]
print("| run | map | train samples/s (mean [min, max]) | bytes/sample by transport | P@1 |")
print("|---|---|---|---|---|")
speed = {}
for name, m in zip(names, maps):
    runs = [[json.loads(l) for l in open(f"{out}/{name}-r{r}.jsonl") if '"event":"epoch"' in l] for r in range(1, repeats + 1)]
    per_run = [statistics.mean(e["train_samples_per_s"] for e in r[1:] or r) for r in runs]
    speed[name] = statistics.mean(per_run)
    by = runs[0][-1].get("transport_bytes_sent_per_sample", {"mpi": runs[0][-1]["bytes_sent_per_sample"]})
    p1 = sorted({round(r[-1]["p@1"], 4) for r in runs})
    print(f"| {name} | {m or 'MPI only'} | {speed[name]:.0f} [{min(per_run):.0f}, {max(per_run):.0f}] | "
          f"{', '.join(f'{k} {v:.0f}' for k, v in by.items())} | {', '.join(map(str, p1))} |")
best_single = max(("mpi", "zmq"), key=lambda n: speed[n])
best_mixed = max((n for n in names if n.startswith("mixed") or n == "auto"), key=lambda n: speed[n], default=None)
if best_mixed:
    print(f"best mixed map ({best_mixed}) / faster single transport ({best_single}): {speed[best_mixed] / speed[best_single]:.3f}")
PY
