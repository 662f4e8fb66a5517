#!/usr/bin/env bash
# --slice-weights auto and --device through the built binary:
#  1. `frugal launch -n 2 -- frugal train --slice-weights auto`: rank 0 logs the calibration (per-rank
#     step times and new shares), every rank logs a `calibration` record with the same weights, the
#     start record names the device, and every epoch line has rank_step_seconds_max >= _min > 0
#     (also without auto); --memory-limit caps the shares (recorded as memory_caps) and is ignored,
#     saying so, without auto; the checkpoint saved on the calibrated slices resumes on 1 rank with the
#     P@1 it was saved with;
#  2. --device cpu works; --device cuda / cuda:N without a CUDA backend fail saying why, in train
#     and predict; a malformed --device is refused while parsing;
#  3. --dp-transport: nccl on CPU replicas fails on every rank naming them, auto keeps the host
#     transport, nccl without a data-parallel group is ignored with a note.
set -euo pipefail
FRUGAL=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 2000 --labels 400 --train 2000 --test 200 --nnz 15 --labels-per-point 3 \
  --seed 2 --out "$TMP/data" > /dev/null
COMMON=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --threads 1 --sampler exact --hidden 32
        --batch 64 --seed 3)
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --epochs 2 --slice-weights auto --calibration-steps 6 \
  --calibration-warmup 2 --metrics "$TMP/auto.jsonl" --checkpoint "$TMP/ckpt"
cp "$TMP/last.log" "$TMP/auto.log"
grep -q -- "--slice-weights auto: calibrated over 6 steps (after 2 warm-up); shares capped by each rank's free memory" \
  "$TMP/auto.log" ||
  { cat "$TMP/auto.log"; echo "no calibration line"; exit 1; }
grep -q "model rank 1: .* s/step, new share" "$TMP/auto.log" || { cat "$TMP/auto.log"; echo "no per-rank share"; exit 1; }
grep -q "device cpu" "$TMP/auto.log" || { cat "$TMP/auto.log"; echo "the start line names no device"; exit 1; }
ls "$TMP/ckpt" | grep -c reslice > /dev/null && { echo "the reslice folder was left behind"; exit 1; }
run "$FRUGAL" "${COMMON[@]}" --epochs 3 --resume "$TMP/ckpt" --metrics "$TMP/resumed.jsonl" --quiet
# --memory-limit: half a MiB of model state per rank caps both shares below the whole model.
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --epochs 1 --slice-weights auto --calibration-steps 4 \
  --calibration-warmup 1 --memory-limit 0.5 --metrics "$TMP/capped.jsonl"
grep -q "model rank 1: .* s/step, new share .*, memory holds 0\.[0-9]*" "$TMP/last.log" ||
  { cat "$TMP/last.log"; echo "no memory cap in the per-rank line"; exit 1; }
# Without --slice-weights auto, --memory-limit still bounds the model (refused before allocation).
run "$FRUGAL" "${COMMON[@]}" --epochs 1 --quiet --calibration-steps 4
grep -qF "note: --calibration-steps only appl(y/ies) to --slice-weights auto: ignored (unless the model group mixes GPU" \
  "$TMP/last.log" ||
  { cat "$TMP/last.log"; echo "no note that --calibration-steps was ignored"; exit 1; }
fails_with "--memory-limit 0.01 MiB allows" "$FRUGAL" "${COMMON[@]}" --epochs 1 --quiet --memory-limit 0.01
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --epochs 1 --quiet --device cpu --metrics "$TMP/fixed.jsonl"
# A weight of 0 leaves a rank out: it holds no neurons, and the run is the 1-rank run's.
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --epochs 1 --quiet --slice-weights 0,1 --metrics "$TMP/zero.jsonl" \
  --checkpoint "$TMP/zckpt"
run "$FRUGAL" "${COMMON[@]}" --epochs 1 --quiet --resume "$TMP/zckpt" --metrics "$TMP/zresumed.jsonl"
run "$FRUGAL" "${COMMON[@]}" --epochs 1 --quiet --metrics "$TMP/one.jsonl"
# An empty slice through the other paths (the exact sampler; LSH is tested in test_model_parallel):
# DCT-MP, replicas with DCT-DP, bf16, a multi-layer network,
# centroid initialization (each must train: a finite loss on every rank).
i=0
for extra in "--mp-keep 0.25 --slice-weights 0,1" "--grid 2x2 --dp-keep 0.1 --slice-weights 1,0" \
             "--precision bf16 --slice-weights 0,1" "--layers 48,32 --slice-weights 1,0,2" \
             "--output-init centroid --slice-weights 0,1"; do
  n=$(( $(tr -cd ',' <<< "${extra##*--slice-weights }" | wc -c) + 1 ))
  case "$extra" in *--grid*) n=4 ;; esac
  # shellcheck disable=SC2086
  run "$FRUGAL" launch -n "$n" -- "$FRUGAL" "${COMMON[@]}" --epochs 1 --quiet $extra --metrics "$TMP/empty$i.jsonl"
  i=$((i + 1))
done
# A rank far too slow to help: ranks 1 and 2 held to 1% of a core (a cgroup CPU quota, as bench/mixed
# does; skipped where cgroups cannot be written) are left out by --slice-weights auto, say so, and
# stop; rank 0 trains the whole model to the end.
source "$(dirname "$0")/../../bench/mixed/cgroup.sh"
THROTTLED=0
if [ "$(id -u)" -eq 0 ] && command -v taskset > /dev/null && mixed_cgroups_make 3; then
  trap 'mixed_cgroups_remove; rm -rf "$TMP"' EXIT
  mixed_quota 1
  run "$FRUGAL" launch -n 3 -- "$(dirname "$0")/../../bench/mixed/throttle.sh" "$FRUGAL" "${COMMON[@]}" --epochs 2 \
    --slice-weights auto --calibration-steps 20 --calibration-warmup 2 --metrics "$TMP/slow.jsonl"
  grep -q "model rank 2: .* -- left out: its throughput is" "$TMP/last.log" ||
    { cat "$TMP/last.log"; echo "rank 2 was not left out"; exit 1; }
  grep -q "\[1\] rank 1: left out of the model by --slice-weights auto" "$TMP/last.log" ||
    { cat "$TMP/last.log"; echo "rank 1 did not say it was left out"; exit 1; }
  THROTTLED=1
else
  echo "SKIP: no cgroup CPU quota here (root and a writable cgroup cpu controller needed): the left-out run"
fi
fails_with "--slice-weights 0,0: at least one rank must hold neurons" "$FRUGAL" launch -n 2 -- "$FRUGAL" \
  "${COMMON[@]}" --epochs 1 --quiet --slice-weights 0,0
fails_with "--slice-weights '1,-1': bad weight '-1'" "$FRUGAL" "${COMMON[@]}" --slice-weights 1,-1
# Devices: what exists here decides; without a CUDA backend the errors say why.
if ! "$FRUGAL" "${COMMON[@]}" --epochs 1 --quiet --device cuda > "$TMP/cuda.log" 2>&1; then
  grep -q "device cuda: no CUDA backend is registered" "$TMP/cuda.log" || { cat "$TMP/cuda.log"; exit 1; }
  fails_with "no CUDA backend is registered" "$FRUGAL" predict --model "$TMP/ckpt" --input "$TMP/data/test.txt" \
    --device cuda
  fails_with "device cuda:3: no CUDA backend" "$FRUGAL" evaluate --model "$TMP/ckpt" --test "$TMP/data/test.txt" \
    --device cuda:3
  # A checkpoint saved on CPU ranks, resumed by a run configured for CUDA: the device error, never a crash.
  fails_with "device cuda: no CUDA backend is registered" "$FRUGAL" "${COMMON[@]}" --epochs 3 --resume "$TMP/ckpt" \
    --device cuda
else
  fails_with "no CUDA device 9" "$FRUGAL" "${COMMON[@]}" --epochs 1 --quiet --device cuda:9
fi
fails_with "not one of cpu, cuda, cuda:N, auto" "$FRUGAL" "${COMMON[@]}" --device gpu
# --dp-transport nccl needs a GPU on every replica: CPU replicas make every rank fail naming them;
# auto (the default) keeps the host transport there; without a data-parallel group nccl is ignored, saying so.
fails_with "rank(s) 0, 1 of the data-parallel group run on the CPU" "$FRUGAL" launch -n 2 -- "$FRUGAL" \
  "${COMMON[@]}" --epochs 1 --quiet --device cpu --grid 2x1 --dp-transport nccl
# Every rank takes the same decision, but the launcher stops the others as soon as one fails, so a
# rank may be stopped before it prints: each rank must either print the NCCL message or have been
# stopped by the launcher after another rank's failure, and some rank must print it.
grep -qF "] frugal: error: --dp-transport nccl: rank(s) 0, 1" "$TMP/fail.log" ||
  { cat "$TMP/fail.log"; echo "no rank failed with the NCCL message"; exit 1; }
for r in 0 1; do
  grep -qF "[$r] frugal: error: --dp-transport nccl: rank(s) 0, 1" "$TMP/fail.log" ||
    grep -qE "frugal launch: rank [01] exited with status 1; stopping the other ranks" "$TMP/fail.log" ||
    { cat "$TMP/fail.log"; echo "rank $r neither failed with the NCCL message nor was stopped by the launcher"; exit 1; }
  ! grep -E "^\[$r\] frugal: error:" "$TMP/fail.log" | grep -vqF -- "--dp-transport nccl: rank(s) 0, 1" ||
    { cat "$TMP/fail.log"; echo "rank $r failed with another error"; exit 1; }
done
run "$FRUGAL" launch -n 2 -- "$FRUGAL" "${COMMON[@]}" --epochs 1 --device cpu --grid 2x1 --dp-transport auto
grep -q "NCCL" "$TMP/last.log" && { cat "$TMP/last.log"; echo "auto chose NCCL on CPU replicas"; exit 1; }
run "$FRUGAL" "${COMMON[@]}" --epochs 1 --device cpu --dp-transport nccl
grep -qF -- "--dp-transport nccl: ignored, there is no data-parallel group" "$TMP/last.log" ||
  { cat "$TMP/last.log"; echo "no note that nccl was ignored"; exit 1; }
fails_with "--dp-transport: gloo not in" "$FRUGAL" "${COMMON[@]}" --dp-transport gloo
run "$FRUGAL" predict --model "$TMP/ckpt" --input "$TMP/data/test.txt" --device cpu --out "$TMP/pred.txt"
python3 - "$TMP" <<'PY'
import json, sys, os
d = sys.argv[1]
def records(name, kind):
    return [r for r in map(json.loads, open(os.path.join(d, name))) if r["event"] == kind]
for name in ("auto.jsonl", "auto.rank1.jsonl"):
    start = records(name, "start")[0]
    assert start["device"] == "cpu" and "device" not in start["config"], start
    assert start["config"]["slice_weights"] == "auto", start["config"]
cal0, cal1 = records("auto.jsonl", "calibration")[0], records("auto.rank1.jsonl", "calibration")[0]
assert cal0["slice_weights"] == cal1["slice_weights"] and cal0["rank_step_seconds"] == cal1["rank_step_seconds"], (cal0, cal1)
assert abs(sum(cal0["slice_weights"]) - 1) < 1e-9 and sum(cal0["slice_labels"]) == 400 and cal0["steps"] == 6, cal0
for name in ("auto.jsonl", "auto.rank1.jsonl", "fixed.jsonl", "fixed.rank1.jsonl", "resumed.jsonl"):
    for e in records(name, "epoch"):
        assert e["rank_step_seconds_max"] >= e["rank_step_seconds_min"] > 0, (name, e)
zero, one = records("zero.jsonl", "epoch")[0], records("one.jsonl", "epoch")[0]
assert zero["p@1"] == one["p@1"] and abs(zero["loss"] - one["loss"]) <= 1e-5 * abs(one["loss"]), (zero, one)
held = [records(n, "start")[0]["parameters"] for n in ("zero.jsonl", "zero.rank1.jsonl", "one.jsonl")]
assert held[0] == 0 and held[1] == held[2], held  # rank 0 holds no neuron of either sliced layer
import glob, math
if os.path.exists(os.path.join(d, "slow.jsonl")):
    cal = records("slow.jsonl", "calibration")[0]
    assert cal["left_out"] == [False, True, True] and cal["slice_weights"] == [1.0, 0.0, 0.0], cal
    assert records("slow.rank1.jsonl", "left_out") and not records("slow.rank1.jsonl", "epoch"), "rank 1 kept training"
    slow = records("slow.jsonl", "epoch")
    assert len(slow) == 2 and slow[1]["rank_step_seconds_max"] == slow[1]["rank_step_seconds_min"], slow
for name in sorted(glob.glob(os.path.join(d, "empty*.jsonl"))):
    for e in records(os.path.basename(name), "epoch"):
        assert math.isfinite(e["loss"]) and e["loss"] > 0, (name, e)
assert len(glob.glob(os.path.join(d, "empty*.jsonl"))) == 13, sorted(glob.glob(os.path.join(d, "empty*.jsonl")))
assert zero["rank_step_seconds_min"] > 0, zero
assert records("zresumed.jsonl", "resume")[0]["p@1"] == zero["p@1"]  # the empty slice's checkpoint loads on 1 rank
capped = [records(n, "calibration")[0] for n in ("capped.jsonl", "capped.rank1.jsonl")]
assert capped[0]["memory_caps"] == capped[1]["memory_caps"] and capped[0]["slice_weights"] == capped[1]["slice_weights"]
assert all(0 < c < 1 for c in capped[0]["memory_caps"]), capped[0]
assert all(w <= c + 1e-6 for w, c in zip(capped[0]["slice_weights"], capped[0]["memory_caps"])), capped[0]
assert capped[0]["memory_cap"] == any(capped[0]["capped_by_memory"]), capped[0]
assert len(cal0["memory_caps"]) == 2 and all(0 < c <= 1 for c in cal0["memory_caps"]), cal0
auto = records("auto.jsonl", "epoch")
assert len(auto) == 2 and auto[0]["steps"] == 32 and auto[1]["steps"] == 64, auto
resume = records("resumed.jsonl", "resume")[0]
assert resume["p@1"] == auto[-1]["p@1"], (resume, auto[-1])
one = records("resumed.jsonl", "epoch")
assert one[0]["rank_step_seconds_max"] == one[0]["rank_step_seconds_min"], one
print("OK: calibrated shares %s from step times %s; resumed on 1 rank at P@1 %.4f" %
      (cal0["slice_weights"], cal0["rank_step_seconds"], resume["p@1"]))
PY
