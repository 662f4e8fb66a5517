#!/usr/bin/env bash
# Label-count sweep (issue 13, item 1): does the cost of a step grow with the label count? The XMC
# network of bench/single_node (100k features, hidden 128, batch 128, 2 threads, seed 1, the same
# generator settings) at 100k, 300k, 1M and 3M labels, for frugal LSH, frugal exact and PyTorch CPU.
# Each run trains two "epochs" of a fixed number of steps (--max-steps): the first is the warm-up
# (tables built over random weights, allocations), the second is measured (samples/s, the step
# profile, peak RSS, model state bytes). The dense systems take fewer steps at large label counts
# (their steps cost ~L); a run that would take more than FRUGAL_SWEEP_MAX_SECONDS (600) is not
# started and its figure is extrapolated from the two largest measured label counts, said so in the
# table. Then the summary (markdown), a JSON file and a plot (gnuplot, PNG).
#
#   bash bench/single_node/sweep.sh                 # ~25 minutes on 2 cores
#   FRUGAL_SWEEP_LABELS="100000 300000" FRUGAL_SWEEP_SYSTEMS="lsh exact" bash bench/single_node/sweep.sh
#
# Environment: FRUGAL_SWEEP_LABELS, FRUGAL_SWEEP_SYSTEMS ("lsh exact torch_cpu"), FRUGAL_SWEEP_OUT
# (.bench/sweep), FRUGAL_SWEEP_LSH_STEPS (200), FRUGAL_SWEEP_DENSE_LABEL_STEPS (2e7: a dense system
# takes max(10, min(200, this / labels)) steps per epoch), FRUGAL_SWEEP_THREADS (2),
# FRUGAL_SWEEP_MAX_SECONDS (600), FRUGAL_BENCH_PYTHON (/usr/bin/python3), FRUGAL_BENCH_NO_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
LABELS=${FRUGAL_SWEEP_LABELS:-100000 300000 1000000 3000000}
SYSTEMS=${FRUGAL_SWEEP_SYSTEMS:-lsh lsh_bf16 lsh_rowwise lsh_rowwise_bf16 lsh_rowwise_adam lsh_rowwise_adam_bf16 lsh_default lsh_default_uncapped lsh_default_bf16 exact torch_cpu}
OUT=${FRUGAL_SWEEP_OUT:-.bench/sweep}
LSH_STEPS=${FRUGAL_SWEEP_LSH_STEPS:-200}
DENSE_LABEL_STEPS=${FRUGAL_SWEEP_DENSE_LABEL_STEPS:-20000000}
THREADS=${FRUGAL_SWEEP_THREADS:-2}
MAX_SECONDS=${FRUGAL_SWEEP_MAX_SECONDS:-600}
PYTHON=${FRUGAL_BENCH_PYTHON:-/usr/bin/python3}
FRUGAL=build/apps/frugal
source bench/single_node/common.sh   # say, run, wants, GLIBC_TUNABLES, build_frugal, install_missing, write_env

build_frugal
packages=()
wants torch_cpu && packages+=("${TORCH_PACKAGES[@]}")
command -v gnuplot > /dev/null || packages+=(gnuplot-nox)
[ ${#packages[@]} -eq 0 ] || install_missing "${packages[@]}"

mkdir -p "$OUT"
write_env
: > "$OUT/commands.txt"
say "machine probe"
printf '+ %s\n' "$FRUGAL bench roofline --threads $THREADS --json $OUT/machine.json"
"$FRUGAL" bench roofline --threads "$THREADS" --json "$OUT/machine.json" | tee "$OUT/machine.txt"

# data LABELS: the generator settings of bench/single_node (a 1,000-point test set: evaluating
# every label of 3M is the slow part, and only the training speed is measured here).
data_dir() { echo ".bench/sweep-data/l$1"; }
for L in $LABELS; do
  d=$(data_dir "$L")
  if [ -f "$d/train.txt" ] && [ -f "$d/test.txt" ]; then continue; fi
  say "generating $d"
  rm -rf "$d.tmp"
  run "$FRUGAL" data synth-xmc --features 100000 --labels "$L" --train 50000 --test 1000 --nnz 75 \
    --labels-per-point 5 --seed 1 --out "$d.tmp"
  rm -rf "$d"; mv "$d.tmp" "$d"
done

# The seconds a run of NAME at LABELS would take, from the largest smaller label count measured
# (cost taken as linear in the labels for the dense systems), or 0 when none was measured.
predicted_seconds() {
  "$PYTHON" - "$OUT" "$1" "$2" "$3" <<'PY'
import glob, json, os, sys
out, name, labels, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
best = None
for path in glob.glob(os.path.join(out, f"{name}-l*.jsonl")):
    l = int(path.rsplit("-l", 1)[1].split(".")[0])
    eps = [json.loads(x) for x in open(path) if '"epoch"' in x]
    eps = [e for e in eps if e.get("event") == "epoch" and e.get("epoch") == 2]
    if l < labels and eps and (best is None or l > best[0]):
        best = (l, eps[0]["train_samples_per_s"])
print(0 if best is None else int(2 * steps * 128 / best[1] * labels / best[0]))
PY
}

failed=()
for L in $LABELS; do
  d=$(data_dir "$L")
  dense_steps=$(( DENSE_LABEL_STEPS / L )); [ "$dense_steps" -gt 200 ] && dense_steps=200; [ "$dense_steps" -lt 10 ] && dense_steps=10
  for sys in $SYSTEMS; do
    name="$sys-l$L"
    steps=$dense_steps; case $sys in lsh*) steps=$LSH_STEPS ;; esac
    if [ "$steps" != "$LSH_STEPS" ]; then
      predicted=$(predicted_seconds "$sys" "$L" "$steps")
      if [ "$predicted" -gt "$MAX_SECONDS" ]; then
        say "$name: skipped, would take ~$predicted s (> $MAX_SECONDS): extrapolated in the summary"
        rm -f "$OUT/$name.jsonl"
        continue
      fi
    fi
    base=(--train "$d/train.txt" --test "$d/test.txt" --hidden 128 --batch 128 --epochs 2 --max-steps "$steps"
          --threads "$THREADS" --seed 1 --metrics "$OUT/$name.jsonl")
    common=("${base[@]}" --lr 1e-3)
    adam=("${common[@]}" --optimizer adam)   # the baselines stay Adam whatever frugal's default optimizer
    case $sys in
      # Row-wise Adagrad at its own default rate (frugal's --lr default for it).
      lsh_rowwise) cmd=("$FRUGAL" train "${base[@]}" --sampler lsh --optimizer rowwise-adagrad --quiet) ;;
      lsh_rowwise_bf16) cmd=("$FRUGAL" train "${base[@]}" --sampler lsh --optimizer rowwise-adagrad --precision bf16
                             --quiet) ;;
      # Row-wise Adam and frugal train's defaults at their own rates.
      lsh_rowwise_adam) cmd=("$FRUGAL" train "${base[@]}" --sampler lsh --optimizer rowwise-adam --quiet) ;;
      lsh_rowwise_adam_bf16) cmd=("$FRUGAL" train "${base[@]}" --sampler lsh --optimizer rowwise-adam --precision bf16
                                  --quiet) ;;
      lsh_default) cmd=("$FRUGAL" train "${base[@]}" --quiet) ;;
      # The defaults before --max-active auto: every label the tables return (a set that grows with L).
      lsh_default_uncapped) cmd=("$FRUGAL" train "${base[@]}" --max-active 0 --quiet) ;;
      lsh_default_bf16) cmd=("$FRUGAL" train "${base[@]}" --precision bf16 --quiet) ;;
      # The defaults with f32 storage (what --precision auto picks on a CPU without AVX512-BF16), and
      # the capped defaults before issue 64's second session (100 tables, f32).
      lsh_default_f32) cmd=("$FRUGAL" train "${base[@]}" --precision f32 --quiet) ;;
      lsh_default_t100_f32) cmd=("$FRUGAL" train "${base[@]}" --tables 100 --precision f32 --quiet) ;;
      lsh) cmd=("$FRUGAL" train "${adam[@]}" --sampler lsh --quiet) ;;
      lsh_bf16) cmd=("$FRUGAL" train "${adam[@]}" --sampler lsh --precision bf16 --quiet) ;;
      exact) cmd=("$FRUGAL" train "${adam[@]}" --sampler exact --quiet) ;;
      # Evaluation in batches of 64: at 3M labels its default 512 x 3M logits (and their top-k
      # temporaries) ran this 24 GiB machine out of memory. Training is unaffected.
      torch_cpu) cmd=("$PYTHON" bench/baselines/torch_xmc.py "${common[@]}" --device cpu --progress-every 60
                      --eval-batch 64) ;;
    esac
    rm -f "$OUT/$name.jsonl"
    say "$name ($steps steps warm-up + $steps measured)"
    printf '%s\n' "${cmd[*]}" >> "$OUT/commands.txt"
    start=$SECONDS
    if run "${cmd[@]}" > "$OUT/$name.log" 2>&1; then
      say "$name: $((SECONDS - start)) s; $(grep -E '^epoch 2' "$OUT/$name.log" | head -1 || true)"
      if [ "$sys" != torch_cpu ]; then
        "$FRUGAL" bench roofline --threads "$THREADS" --metrics "$OUT/$name.jsonl" --json "$OUT/$name.roofline.json" \
          > "$OUT/$name.roofline.txt"
      fi
    else
      say "$name FAILED after $((SECONDS - start)) s (see $OUT/$name.log)"; failed+=("$name")
    fi
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/env.txt"

say "summary"
"$PYTHON" bench/single_node/sweep_summary.py "$OUT" | tee "$OUT/summary.md"
if [ ${#failed[@]} -gt 0 ]; then echo "failed runs: ${failed[*]}" >&2; exit 1; fi
