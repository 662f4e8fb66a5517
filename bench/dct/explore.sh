#!/usr/bin/env bash
# Slim-DP's exploration (`--dp-explore F`, issue 47 item 5) against DCT-DP at the same bytes: two
# data-parallel replicas (--grid 2x1, ZeroMQ over loopback, --threads 1 a rank), each seed with
#   dct      --dp-keep KEEP                          (DCT-DP: each touched row's top keep share)
#   explore  --dp-keep EXPLORE_KEEP --dp-explore F   (a smaller top share, plus F of the rest)
#   none     no --dp-keep                            (every touched row travels: the reference)
# on a synthetic set that is still learning (noise 0.8: P@1 well below 1 after the epochs). The
# summary gives P@1 / P@5 after the last epoch and DCT-DP's bytes per sample (dp_bytes_sent_per_sample,
# mean over epochs), mean and spread over the seeds.
#
#   bash bench/dct/explore.sh                   # ~10 min on 2 cores
# Environment: OUT (.bench/explore), SEEDS ("1 2 3"), EPOCHS (3), KEEP (0.05), EXPLORE_KEEP (0.04),
#   EXPLORE (unset: the F at which the explore runs send DCT-DP's bytes, from two calibration runs on
#   the first seed), HIDDEN (128), FRUGAL (build/apps/frugal). A rerun skips runs whose log is complete.
set -euo pipefail
cd "$(dirname "$0")/../.."
FRUGAL=${FRUGAL:-build/apps/frugal}
OUT=${OUT:-.bench/explore}
SEEDS=${SEEDS:-1 2 3}
EPOCHS=${EPOCHS:-3}
KEEP=${KEEP:-0.05}
EXPLORE_KEEP=${EXPLORE_KEEP:-0.04}
HIDDEN=${HIDDEN:-128}
mkdir -p "$OUT"
DATA=$OUT/data
if [ ! -f "$DATA/test.txt" ]; then
  echo "+ synth-xmc into $DATA"
  "$FRUGAL" data synth-xmc --features 20000 --labels 5000 --train 20000 --test 2000 --noise 0.8 --nnz 40 --seed 7 \
    --out "$DATA" > /dev/null
fi
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # run NAME SEED FLAGS...
  local name=$1 seed=$2
  shift 2
  local log="$OUT/$name-s$seed.jsonl"
  if [ -f "$log" ] && [ "$(grep -c '"event":"epoch"' "$log" || true)" -ge "$EPOCHS" ]; then
    echo "= $name seed $seed (done)"; return
  fi
  rm -f "$log" "$OUT/$name-s$seed.rank1.jsonl"
  echo "+ $name seed $seed: $*"
  "$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$DATA/train.txt" --test "$DATA/test.txt" --grid 2x1 \
    --threads 1 --hidden "$HIDDEN" --epochs "$EPOCHS" --seed "$seed" --quiet --metrics "$log" "$@" > "$OUT/$name-s$seed.log" 2>&1
}
bytes_of() {  # the mean dp_bytes_sent_per_sample over a log's epochs
  python3 -c 'import json, statistics, sys
print(statistics.mean(json.loads(l)["dp_bytes_sent_per_sample"] for l in open(sys.argv[1]) if "\"event\":\"epoch\"" in l))' "$1"
}
# The same bytes: the explored share is linear in F, so two calibration runs on the first seed (F and
# 2F) give the F at which exploration sends what DCT-DP alone sends (the smaller top share also
# shrinks the input layer's, whose keep follows --dp-keep: an F fixed by hand misses the bytes).
first=${SEEDS%% *}
run dct "$first" --dp-keep "$KEEP"
if [ -z "${EXPLORE:-}" ]; then
  f0=0.01
  run cal1 "$first" --dp-keep "$EXPLORE_KEEP" --dp-explore $f0
  run cal2 "$first" --dp-keep "$EXPLORE_KEEP" --dp-explore 0.02
  EXPLORE=$(python3 -c 'import sys; t, b1, b2 = map(float, sys.argv[1:4]); f = 0.01 + (t - b1) / (b2 - b1) * 0.01
print(f"{min(max(f, 0.0005), 0.5):.4f}")' "$(bytes_of "$OUT/dct-s$first.jsonl")" "$(bytes_of "$OUT/cal1-s$first.jsonl")" \
      "$(bytes_of "$OUT/cal2-s$first.jsonl")")
  echo "--dp-explore $EXPLORE sends DCT-DP's bytes (interpolated from $f0 and 0.02 on seed $first)"
fi
export EXPLORE
for seed in $SEEDS; do
  run none "$seed"
  run dct "$seed" --dp-keep "$KEEP"
  run explore "$seed" --dp-keep "$EXPLORE_KEEP" --dp-explore "$EXPLORE"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" $SEEDS <<'PY'
import json, statistics, sys
out, seeds = sys.argv[1], sys.argv[2:]
def epochs(path):
    return [json.loads(l) for l in open(path) if '"event":"epoch"' in l]
print("| run | P@1 (mean [min, max]) | P@5 | DCT-DP bytes/sample (mean over epochs) |")
print("|---|---|---|---|")
summary = {}
for name in ("none", "dct", "explore"):
    runs = [epochs(f"{out}/{name}-s{s}.jsonl") for s in seeds]
    p1 = [r[-1]["p@1"] for r in runs]
    p5 = [r[-1]["p@5"] for r in runs]
    dp = [statistics.mean(e["dp_bytes_sent_per_sample"] for e in r) for r in runs]
    summary[name] = dict(p1=p1, p5=p5, dp=dp)
    f = lambda v, d: f"{statistics.mean(v):.{d}f} [{min(v):.{d}f}, {max(v):.{d}f}]"
    print(f"| {name} | {f(p1, 4)} | {f(p5, 4)} | {f(dp, 0)} |")
d, e = summary["dct"], summary["explore"]
diff = [100 * (x - y) for x, y in zip(e["p1"], d["p1"])]
print(f"--dp-explore {__import__('os').environ['EXPLORE']}")
print(f"explore - dct P@1 per seed (points): {', '.join(f'{v:+.2f}' for v in diff)}; mean {statistics.mean(diff):+.2f}; "
      f"bytes explore / dct: {statistics.mean(e['dp']) / statistics.mean(d['dp']):.3f}")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
PY
