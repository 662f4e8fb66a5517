#!/usr/bin/env bash
# The recommendation-model benchmark of issue #16, one run, side by side:
#  (a) quality: frugal --model dlrm against the same model in PyTorch (bench/baselines/dlrm_torch.py)
#      on synth-ctr sets (default 100k train / 20k test) for SEEDS (1 2 3), EPOCHS epochs each: AUC
#      and logloss per epoch, samples/s, and the generator's Bayes-optimal AUC;
#  (b) id maps: --ids full, hash, freq-double and qr (default compression 10) on the same sets: AUC
#      and embedding parameters;
#  (c) tables over RANKS (4) local ranks: --table-exchange des and ps and --parallel data (replicated):
#      bytes on the wire per sample, samples/s, AUC (all three train the same model).
# Writes $OUT/results.json and $OUT/REPORT-recsys.md (commit, load average before/after, cores).
# Usage: bash bench/recsys/run.sh [BUILD_DIR]   (OUT=..., SEEDS="1 2 3", EPOCHS=2, TRAIN=100000,
#        TEST=20000, RANKS=4, THREADS=1, SKIP_TORCH=1 to leave PyTorch out)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
FRUGAL="$BUILD/apps/frugal"
OUT=${OUT:-/tmp/frugal-recsys}
SEEDS=${SEEDS:-1 2 3}
EPOCHS=${EPOCHS:-2}
TRAIN=${TRAIN:-100000}
TEST=${TEST:-20000}
RANKS=${RANKS:-4}
THREADS=${THREADS:-1}
PYTHON=${PYTHON:-/usr/bin/python3}
mkdir -p "$OUT/runs"
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
[ -x "$FRUGAL" ] || { echo "no $FRUGAL: build first (bash apps/dev.sh build)" >&2; exit 1; }
if [ "${SKIP_TORCH:-0}" != 1 ] && ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  say "installing Debian's python3-torch (the baseline)"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends python3-torch > /dev/null
fi
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
say "commit $(git rev-parse --short HEAD), $(nproc) cores, load $LOAD_BEFORE"
source bench/recsys/synth_set.sh
for seed in $SEEDS; do
  d=$(synth_ctr_set "$seed")
  common=(train --model dlrm --format criteo --train "$d/train.tsv" --test "$d/test.tsv" --epochs "$EPOCHS"
          --threads "$THREADS" --seed "$seed" --quiet)
  for ids in full hash freq-double qr; do
    say "seed $seed: frugal --ids $ids"
    rm -f "$OUT/runs/frugal-$ids-$seed.jsonl"
    "$FRUGAL" "${common[@]}" --ids "$ids" --metrics "$OUT/runs/frugal-$ids-$seed.jsonl"
  done
  if [ "${SKIP_TORCH:-0}" != 1 ]; then
    say "seed $seed: PyTorch"
    rm -f "$OUT/runs/torch-$seed.jsonl"
    "$PYTHON" bench/baselines/dlrm_torch.py --train "$d/train.tsv" --test "$d/test.tsv" --epochs "$EPOCHS" \
      --threads "$THREADS" --seed "$seed" --metrics "$OUT/runs/torch-$seed.jsonl" > "$OUT/runs/torch-$seed.log"
  fi
done
seed=$(echo "$SEEDS" | awk '{print $1}')
d="$OUT/data-$seed"
for mode in des ps replicated; do
  say "$RANKS ranks: tables $mode"
  flag=(--table-exchange "$mode"); [ "$mode" = replicated ] && flag=(--parallel data)
  rm -f "$OUT/runs/ranks-$mode"*.jsonl
  "$FRUGAL" launch -n "$RANKS" -- "$FRUGAL" train --model dlrm --format criteo --train "$d/train.tsv" \
    --test "$d/test.tsv" --epochs 1 --threads 1 --seed "$seed" --quiet "${flag[@]}" \
    --metrics "$OUT/runs/ranks-$mode.jsonl"
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$OUT" "$SEEDS" "$RANKS" "$LOAD_BEFORE" "$LOAD_AFTER" "$(git rev-parse --short HEAD)" "$(nproc)" <<'PY'
import json, os, statistics, sys
out, seeds, ranks, load_before, load_after, commit, cores = sys.argv[1:8]
seeds = seeds.split()
def epochs(name):
    p = os.path.join(out, 'runs', name)
    return [r for r in map(json.loads, open(p)) if r.get('event', 'epoch') == 'epoch'] if os.path.exists(p) else []
res = {'commit': commit, 'cores': int(cores), 'load_before': load_before, 'load_after': load_after, 'seeds': {}}
rows = []
for s in seeds:
    info = json.load(open(os.path.join(out, f'data-{s}', 'info.json')))
    bayes = info.get('bayes_auc')
    r = {'bayes_auc': bayes}
    for ids in ('full', 'hash', 'freq-double', 'qr'):
        e = epochs(f'frugal-{ids}-{s}.jsonl')
        r[ids] = [{k: x[k] for k in ('epoch', 'auc', 'logloss', 'loss', 'train_samples_per_s', 'embedding_parameters')} for x in e]
    t = epochs(f'torch-{s}.jsonl')
    r['torch'] = [{k: x[k] for k in ('epoch', 'auc', 'logloss', 'loss', 'train_samples_per_s')} for x in t]
    res['seeds'][s] = r
res['ranks'] = {}
for mode in ('des', 'ps', 'replicated'):
    per_rank = [epochs(f'ranks-{mode}.jsonl')] + [epochs(f'ranks-{mode}.rank{k}.jsonl') for k in range(1, int(ranks))]
    last = [p[-1] for p in per_rank if p]
    res['ranks'][mode] = {'bytes_sent_per_sample': statistics.mean(x['bytes_sent_per_sample'] for x in last),
                          'train_samples_per_s': last[0]['train_samples_per_s'], 'auc': last[0]['auc']}
json.dump(res, open(os.path.join(out, 'results.json'), 'w'), indent=1)
def mean_sd(xs):
    xs = [x for x in xs if x == x]
    if not xs: return 'n/a'
    return f'{statistics.mean(xs):.4f} ± {statistics.pstdev(xs):.4f}' if len(xs) > 1 else f'{xs[0]:.4f}'
lines = [f'## Recommendation models (bench/recsys/run.sh)', '',
         f'commit {commit}, {cores} cores, load {load_before} before / {load_after} after; synth-ctr seeds {" ".join(seeds)}, '
         f'{len(res["seeds"][seeds[0]]["full"])} epochs, mean ± sd over seeds', '',
         '| system | AUC (last epoch) | best-epoch AUC | logloss (last) | train samples/s | embedding parameters |', '|---|---|---|---|---|---|']
def row(name, key):
    last = [res['seeds'][s][key][-1] for s in seeds if res['seeds'][s][key]]
    if not last: return
    best = [max(x['auc'] for x in res['seeds'][s][key]) for s in seeds if res['seeds'][s][key]]
    params = last[0].get('embedding_parameters', '')
    lines.append(f'| {name} | {mean_sd([x["auc"] for x in last])} | {mean_sd(best)} | {mean_sd([x["logloss"] for x in last])} | '
                 f'{statistics.mean(x["train_samples_per_s"] for x in last):.0f} | {params} |')
lines_bayes = [res['seeds'][s]['bayes_auc'] for s in seeds if res['seeds'][s]['bayes_auc'] is not None]
for ids in ('full', 'hash', 'freq-double', 'qr'):
    row(f'frugal --ids {ids}', ids)
row('PyTorch (same model and optimizer)', 'torch')
if lines_bayes: lines.append(f'| Bayes-optimal (planted model) | {mean_sd(lines_bayes)} | | | | |')
lines += ['', f'Tables over {ranks} local ranks (seed {seeds[0]}, 1 epoch):', '',
          '| tables | bytes sent per sample (mean over ranks) | train samples/s | AUC |', '|---|---|---|---|']
for mode, r in res['ranks'].items():
    lines.append(f'| {mode} | {r["bytes_sent_per_sample"]:.0f} | {r["train_samples_per_s"]:.0f} | {r["auc"]:.4f} |')
open(os.path.join(out, 'REPORT-recsys.md'), 'w').write('\n'.join(lines) + '\n')
print('\n'.join(lines))
PY
