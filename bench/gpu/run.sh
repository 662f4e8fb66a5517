#!/usr/bin/env bash
# frugal on the GPU machine (one H200, 16 cores, no network, python3 with PyTorch + CUDA), from the
# bundle (`bash apps/dev.sh bundle`, see bench/gpu/README.md). Sized to finish within 8 minutes
# there (a global deadline, BUDGET_S, skips what would not fit; every run also has its own timeout):
#  (a) every kernels and CUDA test executable of the bundle (bin/test_kernels*, test_cuda_*,
#      test_emulated_*, test_nccl_*): pass/fail, parity OK/FAIL/SKIP;
#  (b) synthetic sets of 100k and 1M labels (`frugal data synth-xmc`), hidden 128, batches 1024 and
#      128: frugal --device cuda --sampler exact, frugal --device cuda --sampler lsh, PyTorch on CUDA
#      (bench/baselines/torch_xmc.py --device cuda, fp32 and --amp bf16), frugal --device cpu
#      --threads 16; each for STEPS steps (samples/s, P@1 after them), then whole epochs until
#      the P@1 target (time to target: summed training seconds of the epochs up to the first one
#      at or above the target);
#  (c) a mixed group: frugal launch -n 3 -- frugal train --device auto --slice-weights auto with
#      rank 0 on the GPU and ranks 1-2 on CPU cores (CUDA_VISIBLE_DEVICES="" set by a wrapper from
#      FRUGAL_RANK), against the GPU rank alone.
# Each run's failure is recorded (its exit status and the end of its log) and never stops the others.
# Writes $OUT/results.json and $OUT/REPORT-gpu.md (plus $OUT/runs/*.log and *.jsonl).
#
# Usage: bash bench/gpu/run.sh            (from the unpacked bundle, or a checkout with the bundle beside it)
#        GPU_BENCH_TINY=1 bash bench/gpu/run.sh   tiny sets, --device cpu, 2 threads: checks the script (< 1 min)
# Environment: OUT (default ./gpu-bench-out), FRUGAL (the frugal executable; default: found, below),
#   PYTHON (python3), BUDGET_S (450), STEPS (100), EPOCHS (max epochs of a target run), CPU_THREADS (16),
#   TARGET_100K / TARGET_1M (P@1 targets), RUN_TIMEOUT_S, TARGET_TIMEOUT_S, TESTS_TIMEOUT_S (per run),
#   GPU_BENCH_ONLY (an extended regex: only the runs whose name matches, e.g. 'tests-|-100k-b128-steps|mixed-';
#   the data sets are always made), MIXED_STEPS (steps per epoch of the mixed group; default STEPS),
#   FRUGAL_CUDA_PROFILE (default 1: each CUDA run's log ends with its per-op profile, summed in the report).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$PWD/gpu-bench-out}
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
PYTHON=${PYTHON:-python3}
TINY=${GPU_BENCH_TINY:-0}
T0=$(date +%s)
say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# The frugal executable: $FRUGAL, else the bundle this script sits in (frugal-X/bench/gpu/run.sh),
# else a bundle unpacked beside the checkout or the current directory, else a checkout's build/.
if [ -z "${FRUGAL:-}" ]; then
  for c in "$ROOT/bin/frugal" "$ROOT"/frugal-*/bin/frugal "$PWD"/frugal-*/bin/frugal "$ROOT"/../frugal-*/bin/frugal \
           "$ROOT/build/apps/frugal"; do
    [ -x "$c" ] && { FRUGAL=$c; break; }
  done
fi
[ -n "${FRUGAL:-}" ] && [ -x "$FRUGAL" ] || { echo "no frugal executable found: set FRUGAL=/path/to/frugal-X/bin/frugal" >&2; exit 1; }
FRUGAL=$(cd "$(dirname "$FRUGAL")" && pwd)/$(basename "$FRUGAL")
BIN=$(dirname "$FRUGAL")

# A --cuda-from-target bundle (apps/dev.sh) has no CUDA runtime or cuBLAS of its own: they come from
# this machine's CUDA toolkit or PyTorch's nvidia-* wheels, found here and put on LD_LIBRARY_PATH
# (the bundle's RPATH is searched first, so a full bundle is never affected). NCCL likewise, for
# --dp-transport nccl (FRUGAL_NCCL_LIBRARY).
cuda_lib_dirs() {  # folders holding libcublas.so.* / libcudart.so.* / libnccl.so.*
  local roots=("${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/lib")
  local site
  site=$("$PYTHON" -c 'import nvidia, sys; print("\n".join(nvidia.__path__))' 2>/dev/null) || site=""
  [ -n "$site" ] && while read -r d; do roots+=("$d"); done <<<"$site"
  for r in "${roots[@]}"; do
    [ -d "$r" ] && find -H "$r" -maxdepth 3 \( -name 'libcublas.so.*' -o -name 'libcudart.so.*' -o -name 'libnccl.so.*' \) \
      -printf '%h\n' 2>/dev/null
  done | awk '!seen[$0]++'
}
if ldd "$FRUGAL" 2>/dev/null | grep -qE 'lib(cudart|cublas|cublasLt)\.so[^ ]* => not found'; then
  CUDA_DIRS=$(cuda_lib_dirs | paste -sd: -)
  export LD_LIBRARY_PATH=${CUDA_DIRS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  say "CUDA libraries from this machine: ${CUDA_DIRS:-none found}"
  ldd "$FRUGAL" | grep "not found" && echo "warning: libraries still missing (the cuda runs will fail)" >&2
fi
if [ -z "${FRUGAL_NCCL_LIBRARY:-}" ]; then
  NCCL_LIB=$(for d in $(cuda_lib_dirs); do ls "$d"/libnccl.so.2 2>/dev/null; done | head -1)
  [ -n "$NCCL_LIB" ] && export FRUGAL_NCCL_LIBRARY=$NCCL_LIB
fi
TORCH_XMC=$ROOT/bench/baselines/torch_xmc.py

if [ "$TINY" = 1 ]; then
  SETS=("1k:1000" "5k:5000"); FEATURES=2000; TRAIN=2000; TEST=200
  STEPS=${STEPS:-5}; EPOCHS=${EPOCHS:-2}; CPU_THREADS=${CPU_THREADS:-2}; BUDGET_S=${BUDGET_S:-120}
  RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-30}; TARGET_TIMEOUT_S=${TARGET_TIMEOUT_S:-30}
  TESTS_TIMEOUT_S=${TESTS_TIMEOUT_S:-30}
  GPU=cpu; TARGET_100K=${TARGET_100K:-0.1}; TARGET_1M=${TARGET_1M:-0.05}
else
  SETS=("100k:100000" "1M:1000000"); FEATURES=100000; TRAIN=50000; TEST=2000
  STEPS=${STEPS:-100}; EPOCHS=${EPOCHS:-3}; CPU_THREADS=${CPU_THREADS:-16}; BUDGET_S=${BUDGET_S:-450}
  RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-40}; TARGET_TIMEOUT_S=${TARGET_TIMEOUT_S:-60}
  TESTS_TIMEOUT_S=${TESTS_TIMEOUT_S:-90}
  GPU=cuda; TARGET_100K=${TARGET_100K:-0.5}; TARGET_1M=${TARGET_1M:-0.2}
fi
BATCHES=(1024 128)
ONLY=${GPU_BENCH_ONLY:-}
# A regex bash cannot compile would match nothing, silently skipping every run: refuse it.
if [ -n "$ONLY" ]; then
  [[ "" =~ $ONLY ]]
  [ $? -ne 2 ] || { echo "GPU_BENCH_ONLY='$ONLY' is not a valid extended regular expression" >&2; exit 2; }
fi
MIXED_STEPS=${MIXED_STEPS:-$STEPS}
# The CUDA backend's per-op profile (gpu/cuda_kernels.cu) at the end of each CUDA run's log.
export FRUGAL_CUDA_PROFILE=${FRUGAL_CUDA_PROFILE:-1}
mkdir -p "$OUT/runs" "$OUT/data"
RUNS=$OUT/runs.jsonl
: > "$RUNS"
NOTES=()
[ "$TINY" = 1 ] && NOTES+=("tiny mode: the systems named cuda ran on the CPU (torch_xmc.py --device cpu)")

# --device and --slice-weights auto come with the CUDA backend. A frugal without --device: the tiny
# mode drops the flag (and uses equal slices) so the script's CPU path still runs; the real mode
# keeps it, so those runs fail and are recorded as failures.
DEVICE_FLAG=yes
if ! "$FRUGAL" train --help 2>&1 | grep -q -- '--device'; then
  if [ "$TINY" = 1 ]; then
    DEVICE_FLAG=no
    NOTES+=("this frugal has no --device flag: tiny mode ran without --device and with --slice-weights 1,1,1")
  else
    NOTES+=("this frugal has no --device flag: the --device runs fail")
  fi
fi
device_args() {  # device_args DEV
  [ $DEVICE_FLAG = yes ] && printf '%s\n' --device "$1"
  return 0
}

# record NAME SYSTEM LABELS BATCH PHASE METRICS TIMEOUT CMD...: runs CMD with a timeout (cut to the
# global deadline), logs to runs/NAME.log and appends its outcome to runs.jsonl. Never fails.
record() {
  local name=$1 system=$2 labels=$3 batch=$4 phase=$5 metrics=$6 limit=$7; shift 7
  if [ -n "$ONLY" ] && [ "$phase" != data ] && ! [[ $name =~ $ONLY ]]; then return 0; fi
  local left=$((BUDGET_S - ($(date +%s) - T0))) rc start=$EPOCHREALTIME
  if [ $left -lt 10 ]; then
    echo "skip $name: time budget spent"
    rc=-1
    printf 'skipped: the %ss budget was spent\n' "$BUDGET_S" > "$OUT/runs/$name.log"
  else
    [ $limit -gt $left ] && limit=$left
    echo "+ [$name, ${limit}s] $*"
    timeout -k 5 "$limit" "$@" > "$OUT/runs/$name.log" 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "timed out after ${limit}s" >> "$OUT/runs/$name.log"
    echo "  rc $rc"
  fi
  "$PYTHON" - "$RUNS" "$name" "$system" "$labels" "$batch" "$phase" "$metrics" "$rc" "$start" "$EPOCHREALTIME" "$OUT/runs/$name.log" <<'PY' || true
import json, sys
runs, name, system, labels, batch, phase, metrics, rc, start, end, log = sys.argv[1:]
secs = 0.0 if rc == "-1" else float(end) - float(start)
rec = {"name": name, "system": system, "labels": labels, "batch": int(batch) if batch.isdigit() else batch,
       "phase": phase, "metrics": metrics, "rc": int(rc), "seconds": round(secs, 2)}
if rc != "0":
    try:
        tail = open(log, errors="replace").read().strip().splitlines()[-8:]
    except OSError:
        tail = []
    rec["error"] = {"-1": "skipped (time budget)", "124": "timeout"}.get(rc, f"exit status {rc}")
    if tail and rc not in ("-1", "124"):
        rec["error"] += ": " + tail[-1][:160]
    rec["log_tail"] = tail
open(runs, "a").write(json.dumps(rec) + "\n")
PY
}

say "frugal: $FRUGAL; output: $OUT; tiny: $TINY; budget ${BUDGET_S}s"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1 || echo "no nvidia-smi" > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"

# (a) the test executables that check the CUDA backend against the CPU one: the kernels parity
# harness (test_kernels*), whole trainings on cuda against cpu (test_cuda_end_to_end), the counting
# device (test_emulated_device) and the NCCL group (test_nccl_group).
say "(a) kernels and CUDA tests"
KTESTS=("$BIN"/test_kernels* "$BIN"/test_cuda_* "$BIN"/test_emulated_* "$BIN"/test_nccl_*)
# In a checkout (frugal from build/apps): the build's kernels tests.
[ -e "${KTESTS[0]}" ] || KTESTS=("$BIN"/../tests/kernels/test_kernels* "$BIN"/../tests/kernels/test_cuda_* \
                                  "$BIN"/../tests/kernels/test_emulated_* "$BIN"/../tests/kernels/test_nccl_* "$BIN"/../gpu/test_*)
for t in "${KTESTS[@]}"; do
  [ -f "$t" ] && [ -x "$t" ] && [ "${t%.log}" = "$t" ] || continue  # not the build's *.p folders
  record "tests-$(basename "$t")" "$(basename "$t")" - - tests - "$TESTS_TIMEOUT_S" "$t"
done

# (b) the data sets and the single-device runs.
say "(b) data sets"
for set in "${SETS[@]}"; do
  tag=${set%%:*}; labels=${set#*:}; d=$OUT/data/$tag
  if [ ! -f "$d/test.txt" ]; then
    record "data-$tag" synth-xmc "$tag" - data - "$RUN_TIMEOUT_S" "$FRUGAL" data synth-xmc --features "$FEATURES" \
      --labels "$labels" --train "$TRAIN" --test "$TEST" --nnz 75 --labels-per-point 5 --seed 1 --out "$d"
  fi
done

# one_run NAME-PREFIX SYSTEM TAG BATCH PHASE: one system on one set (PHASE steps: STEPS steps, one
# evaluation; PHASE target: up to EPOCHS whole epochs, evaluated after each).
one_run() {
  local system=$1 tag=$2 batch=$3 phase=$4 d=$OUT/data/$2 name="$1-$2-b$3-$4" m limit=$RUN_TIMEOUT_S
  m=$OUT/runs/$name.jsonl
  rm -f "$m"
  local len=(--epochs 1 --max-steps "$STEPS")
  [ "$phase" = target ] && { len=(--epochs "$EPOCHS"); limit=$TARGET_TIMEOUT_S; }
  [ -f "$d/test.txt" ] || { record "$name" "$system" "$tag" "$batch" "$phase" "$m" 1 false; return; }
  local ft=(train --train "$d/train.txt" --test "$d/test.txt" --hidden 128 --batch "$batch" --lr 1e-3 --seed 1
            --quiet --metrics "$m" "${len[@]}")
  local tt=("$PYTHON" "$TORCH_XMC" --train "$d/train.txt" --test "$d/test.txt" --hidden 128 --batch "$batch"
            --lr 1e-3 --seed 1 --threads "$CPU_THREADS" --device "$GPU" --metrics "$m" --progress-every 30 "${len[@]}")
  case $system in
    frugal-cuda-exact) record "$name" "$system" "$tag" "$batch" "$phase" "$m" "$limit" "$FRUGAL" "${ft[@]}" \
                         $(device_args "$GPU") --sampler exact --threads 4 ;;
    frugal-cuda-lsh)   record "$name" "$system" "$tag" "$batch" "$phase" "$m" "$limit" "$FRUGAL" "${ft[@]}" \
                         $(device_args "$GPU") --sampler lsh --threads 4 ;;
    frugal-cuda-exact-bf16) record "$name" "$system" "$tag" "$batch" "$phase" "$m" "$limit" "$FRUGAL" "${ft[@]}" \
                         $(device_args "$GPU") --sampler exact --precision bf16 --threads 4 ;;
    frugal-cuda-lsh-bf16) record "$name" "$system" "$tag" "$batch" "$phase" "$m" "$limit" "$FRUGAL" "${ft[@]}" \
                         $(device_args "$GPU") --sampler lsh --precision bf16 --threads 4 ;;
    torch-cuda-fp32)   record "$name" "$system" "$tag" "$batch" "$phase" "$m" "$limit" "${tt[@]}" ;;
    torch-cuda-bf16)   record "$name" "$system" "$tag" "$batch" "$phase" "$m" "$limit" "${tt[@]}" --amp bf16 ;;
    frugal-cpu-lsh)    record "$name" "$system" "$tag" "$batch" "$phase" "$m" "$limit" "$FRUGAL" "${ft[@]}" \
                         $(device_args cpu) --sampler lsh --threads "$CPU_THREADS" ;;
  esac
}
SYSTEMS=(frugal-cuda-exact frugal-cuda-lsh torch-cuda-fp32 torch-cuda-bf16 frugal-cpu-lsh)
# --precision bf16 on the GPU in the fixed-step runs only (the budget): bf16 storage with LSH, and
# the exact softmax's products on bf16 tensor cores (against torch-cuda-bf16's autocast).
STEP_SYSTEMS=("${SYSTEMS[@]}" frugal-cuda-exact-bf16 frugal-cuda-lsh-bf16)

say "(b) $STEPS-step runs"
for set in "${SETS[@]}"; do
  for batch in "${BATCHES[@]}"; do
    for s in "${STEP_SYSTEMS[@]}"; do one_run "$s" "${set%%:*}" "$batch" steps; done
  done
done

# (c) the mixed group, batch 1024 on the smaller set: rank 0 on the GPU, ranks 1-2 on CPU cores.
say "(c) mixed group (rank 0 GPU, ranks 1-2 CPU) against the GPU rank alone"
WRAP=$OUT/rank_device.sh
cat > "$WRAP" <<SH
#!/bin/sh
# Ranks other than 0 see no GPU, so --device auto puts them on CPU cores.
[ "\${FRUGAL_RANK:-0}" = 0 ] || export CUDA_VISIBLE_DEVICES=""
exec "$FRUGAL" "\$@"
SH
chmod +x "$WRAP"
tag=${SETS[0]%%:*}; d=$OUT/data/$tag
SW=(--slice-weights auto)
[ $DEVICE_FLAG = no ] && SW=(--slice-weights 1,1,1)
mixed=(train --train "$d/train.txt" --test "$d/test.txt" --hidden 128 --batch 1024 --lr 1e-3 --seed 1 --quiet
       --epochs 2 --max-steps "$MIXED_STEPS" --sampler lsh --threads $(( CPU_THREADS / 3 > 0 ? CPU_THREADS / 3 : 1 )))
# (Two epochs: the group calibrates in the first; the second, on the calibrated slices, is compared.)
record "mixed-gpu-alone-$tag-b1024-steps" "frugal-gpu-rank-alone" "$tag" 1024 steps "$OUT/runs/mixed-gpu-alone.jsonl" \
  "$RUN_TIMEOUT_S" "$WRAP" "${mixed[@]}" $(device_args auto) --metrics "$OUT/runs/mixed-gpu-alone.jsonl"
record "mixed-3ranks-$tag-b1024-steps" "frugal-mixed-1gpu+2cpu" "$tag" 1024 steps "$OUT/runs/mixed-3ranks.jsonl" \
  "$TARGET_TIMEOUT_S" "$FRUGAL" launch -n 3 -- "$WRAP" "${mixed[@]}" $(device_args auto) "${SW[@]}" \
  --metrics "$OUT/runs/mixed-3ranks.jsonl"

say "(b) runs to the P@1 target (up to $EPOCHS epochs each)"
for set in "${SETS[@]}"; do
  for batch in "${BATCHES[@]}"; do
    for s in "${SYSTEMS[@]}"; do one_run "$s" "${set%%:*}" "$batch" target; done
  done
done

say "results"
COMMIT=$(grep -m1 '^commit ' "$ROOT/MANIFEST" 2>/dev/null | cut -d' ' -f2- || true)
[ -n "$COMMIT" ] || COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
"$PYTHON" - "$OUT" "$TINY" "$COMMIT" "$STEPS" "$TARGET_100K" "$TARGET_1M" "${SETS[0]%%:*}" "$BUDGET_S" \
  "$(( $(date +%s) - T0 ))" "$FRUGAL" "${NOTES[@]}" <<'PY'
import datetime, json, os, sys
out, tiny, commit, steps, t_small, t_big, small_tag, budget, elapsed, frugal = sys.argv[1:11]
notes = sys.argv[11:]
runs = [json.loads(l) for l in open(os.path.join(out, "runs.jsonl")) if l.strip()]
gpu = open(os.path.join(out, "gpu.txt")).read().strip()

def epochs(path):
    try:
        recs = [json.loads(l) for l in open(path) if l.strip()]
    except (OSError, ValueError):
        return []
    return [r for r in recs if r.get("event") == "epoch"]

for r in runs:
    target = float(t_small) if r["labels"] == small_tag else float(t_big)
    e = epochs(r["metrics"]) if r["metrics"] not in ("-", "") else []
    if r["phase"] == "tests":
        log = os.path.join(out, "runs", r["name"] + ".log")
        text = open(log, errors="replace").read().splitlines() if os.path.exists(log) else []
        lines = [l.strip() for l in text if l.startswith("parity:")]
        r["parity"] = lines[-1] if lines else None
        # The steps' host <-> device bytes per sample (test_cuda_end_to_end, test_emulated_device: the
        # exact and the LSH step, each against its goal).
        moved = [l.strip() for l in text if "B/sample host <-> device" in l]
        if moved:
            r["host_device"] = "; ".join(moved)
        r["result"] = "pass" if r["rc"] == 0 else ("skip" if r["rc"] == 77 else "fail")
    if e:
        # The mixed group calibrates in epoch 1: both mixed runs are compared on their last epoch.
        r["samples_per_s"] = (e[-1] if r["name"].startswith("mixed-") else e[0]).get("train_samples_per_s")
        r["host_device_bytes_per_sample"] = e[-1].get("host_device_bytes_per_sample")
        if r["name"].startswith("mixed-"):
            r["rank_step_seconds"] = [e[-1].get("rank_step_seconds_max"), e[-1].get("rank_step_seconds_min")]
            cal = [json.loads(l) for l in open(r["metrics"]) if '"calibration"' in l]
            if cal:
                r["slice_weights"], r["left_out"] = cal[0].get("slice_weights"), cal[0].get("left_out")
        if r["phase"] == "steps":
            r["p@1"] = e[-1].get("p@1")
        if r["phase"] == "target":
            r["target_p@1"] = target
            t = 0.0
            r["time_to_target_s"] = None
            r["best_p@1"] = max(x.get("p@1", 0) for x in e)
            for x in e:
                t += x.get("train_seconds", 0)
                if x.get("p@1", 0) >= target:
                    r["time_to_target_s"] = round(t, 2)
                    r["epochs_to_target"] = x.get("epoch")
                    break
    elif r["rc"] == 0 and r["phase"] in ("steps", "target"):
        r.setdefault("error", "no epoch record in the metrics file")

result = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "commit": commit,
          "device": gpu, "tiny": tiny == "1", "steps": int(steps), "targets": {"small": float(t_small), "large": float(t_big)},
          "budget_s": int(budget), "elapsed_s": int(elapsed), "frugal": frugal, "notes": notes, "runs": runs}
json.dump(result, open(os.path.join(out, "results.json"), "w"), indent=1)

def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"
rows = {}
for r in runs:
    if r["phase"] not in ("steps", "target"):
        continue
    key = (r["system"], r["labels"], r["batch"])
    row = rows.setdefault(key, {"sps": None, "p1": None, "ttt": None, "hd": None, "errors": []})
    if r["phase"] == "steps":
        row["sps"], row["p1"], row["hd"] = r.get("samples_per_s"), r.get("p@1"), r.get("host_device_bytes_per_sample")
    elif r.get("time_to_target_s") is not None:
        row["ttt"] = f'{r["time_to_target_s"]:.1f} s ({r["epochs_to_target"]} ep)'
    elif "best_p@1" in r:
        row["ttt"] = f'not reached (best {r["best_p@1"]:.3f})'
    if "error" in r:
        row["errors"].append(f'{r["phase"]}: {r["error"]}')
md = [f"## GPU machine ({'tiny check, not a benchmark' if tiny == '1' else 'bench/gpu/run.sh'})", "",
      f"- date: {result['date']}", f"- commit: {commit}", f"- device: {gpu}",
      f"- P@1 after {steps} steps; time to target = training seconds (evaluation excluded) of the epochs up to "
      f"the first with P@1 >= {t_small} ({small_tag}) / {t_big} (larger set); elapsed {elapsed} s of {budget} s"]
md += [f"- note: {n}" for n in notes]
tests = [r for r in runs if r["phase"] == "tests"]
md += ["", "| kernels test | result | parity |", "|---|---|---|"]
md += [f"| {r['system']} | {r['result']} | {r.get('parity') or r.get('host_device') or '-'} |" for r in tests] or ["| (none in the bundle) | - | - |"]
md += ["", f"| system | labels | batch | samples/s | P@1 at {steps} steps | host <-> device B/sample | time to target | errors |",
       "|---|---|---|---|---|---|---|---|"]
for (system, labels, batch), row in rows.items():
    md.append(f"| {system} | {labels} | {batch} | {fmt(row['sps'], '.0f')} | {fmt(row['p1'], '.3f')} | "
              f"{fmt(row['hd'], '.0f')} | {row['ttt'] or '-'} | {'; '.join(row['errors']) or '-'} |")
# The CUDA runs' per-op profiles (FRUGAL_CUDA_PROFILE): where each run's time went, its five
# costliest ops and the sum over all of them.
prof_md = []
for r in runs:
    if r["phase"] != "steps" or "cuda" not in r["system"] or r["system"].startswith("torch"):
        continue
    log = os.path.join(out, "runs", r["name"] + ".log")
    lines = open(log, errors="replace").read().splitlines() if os.path.exists(log) else []
    try:
        start = next(i for i, l in enumerate(lines) if l.startswith("cuda profile"))
    except StopIteration:
        continue
    ops = []
    for l in lines[start + 2:]:
        f = l.split()
        if len(f) != 7:
            break
        ops.append(f)
    shown = [o for o in ops if o[0] != "(all)"][:5] + [o for o in ops if o[0] == "(all)"]
    prof_md += [f"| {r['name']} | {o[0]} | {o[1]} | {o[2]} | {o[3]} | {o[4]} | {o[5]} | {o[6]} |" for o in shown]
if prof_md:
    md += ["", "CUDA backend per-op profile (FRUGAL_CUDA_PROFILE; whole run, data loading and evaluation included; "
           "staging = the host's copies into and out of pinned memory, wait = waiting for kernels and DMA):", "",
           "| run | op | calls | MB up | MB down | staging s | wait s | total s |", "|---|---|---|---|---|---|---|---|"] + prof_md
mixed = {r["name"].split("-")[1]: r for r in runs if r["name"].startswith("mixed-")}
if "3ranks" in mixed and "gpu" in mixed:
    g, m = mixed["gpu"], mixed["3ranks"]
    ratio = m.get("samples_per_s") / g["samples_per_s"] if m.get("samples_per_s") and g.get("samples_per_s") else None
    steps_mm = m.get("rank_step_seconds") or [None, None]
    md += ["", "Mixed group (rank 0 GPU, ranks 1-2 CPU, --slice-weights auto), epoch 2 against the GPU rank alone "
           "(targets: not more than 10% slower; rank step times within 20%):", "",
           f"- samples/s: {fmt(m.get('samples_per_s'), '.0f')} against {fmt(g.get('samples_per_s'), '.0f')} alone: "
           f"{fmt(ratio, '.2f')}x",
           f"- rank step seconds max / min: {fmt(steps_mm[0], '.4f')} / {fmt(steps_mm[1], '.4f')}",
           f"- calibrated shares: {m.get('slice_weights')}, left out: {m.get('left_out')}"]
open(os.path.join(out, "REPORT-gpu.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
failed = sum(1 for r in runs if r["rc"] != 0)
print(f"\n{len(runs)} runs, {failed} failed or skipped; {out}/results.json, {out}/REPORT-gpu.md")
PY
