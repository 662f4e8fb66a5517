#!/usr/bin/env bash
# How `frugal` turns flags into the library's typed options and names them in errors:
#  1. choice flags keep their spellings in run configs and checkpoints (sampler, hash, logq, ...);
#  2. an error the library raises about an option field names the flag that set it
#     (LshOptions::negatives -> --negatives, SynthXmcOptions::features -> --features, ...);
#  3. values outside flags (--grid, --slice-weights, --layers, FRUGAL_* variables) fail naming the
#     flag or variable and the bad text, in one style;
#  4. an unknown choice is refused by the parser, naming the accepted ones;
#  5. a flag of an unsigned type refuses a negative value (CLI11 would wrap it to 2^64-1).
# Usage: test_cli_options.sh FRUGAL SOURCE_ROOT
set -euo pipefail
FRUGAL=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "$0")/../shell_helpers.sh"
"$FRUGAL" data synth-xmc --features 300 --labels 40 --train 200 --test 50 --nnz 10 --labels-per-point 2 --seed 1 \
  --out "$TMP/data" > /dev/null
T=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 1 --threads 1 --quiet --hidden 8
   --tables 4 --max-steps 2)

# 1. Every choice flag set away from its default; the run config records the flags' spellings.
"$FRUGAL" "${T[@]}" --sampler exact --hash simhash --logq off --infer lsh --output-init centroid --optimizer sgd \
  --sparse-updates catchup --lr-schedule cosine --wire-dtype bf16 --dp-tau exact --parallel data \
  --metrics "$TMP/m.jsonl" --checkpoint "$TMP/ckpt" > /dev/null
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
start = json.loads(open(os.path.join(d, "m.jsonl")).readline())
c = start["config"]
want = {"sampler": "exact", "hash": "simhash", "infer": "lsh", "output_init": "centroid", "optimizer": "sgd",
        "sparse_updates": "catchup", "lr_schedule": "cosine", "wire_dtype": "bf16", "dp_tau": "exact",
        "parallel": "data"}
assert {k: c.get(k) for k in want} == want, c
manifest = json.load(open(os.path.join(d, "ckpt", "manifest.json")))
assert manifest["config"]["sampler"] == "exact" and manifest["config"]["hash"] == "simhash", manifest["config"]
PY
# --precision bf16: recorded in the run config, about half the model state, a checkpoint (f32 on
# disk) that evaluates; the centroid start and the bf16 scoring in evaluation run.
"$FRUGAL" "${T[@]}" --precision bf16 --output-init centroid --metrics "$TMP/bf16.jsonl" --checkpoint "$TMP/bf16" \
  > /dev/null
"$FRUGAL" "${T[@]}" --precision f32 --output-init centroid --metrics "$TMP/f32.jsonl" > /dev/null
# --precision auto (the default): bf16 for the LSH network where the CPU has AVX512-BF16 (said in the
# log and recorded with why), f32 for the exact softmax and with --dp-compress updates.
"$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 1 --threads 1 --hidden 8 \
  --output-init centroid --metrics "$TMP/auto.jsonl" > "$TMP/auto.log" 2>&1
"$FRUGAL" "${T[@]}" --sampler exact --metrics "$TMP/auto_exact.jsonl" > /dev/null
"$FRUGAL" "${T[@]}" --dp-compress updates --metrics "$TMP/auto_updates.jsonl" > /dev/null
cpu_bf16=0
grep -qw avx512_bf16 /proc/cpuinfo && cpu_bf16=1
python3 - "$TMP" "$cpu_bf16" <<'PY'
import json, os, sys
d = sys.argv[1]
def lines(name): return [json.loads(l) for l in open(os.path.join(d, name))]
b, f = lines("bf16.jsonl"), lines("f32.jsonl")
assert b[0]["config"]["precision"] == "bf16" and f[0]["config"]["precision"] == "f32", (b[0]["config"], f[0]["config"])
assert "precision_auto" not in b[0]["config"] and "precision_auto" not in f[0]["config"], b[0]["config"]
auto = lines("auto.jsonl")[0]["config"]
log = open(os.path.join(d, "auto.log")).read()
if sys.argv[2] == "1":
    assert auto["precision"] == "bf16" and auto["precision_auto"] == "this CPU has AVX512-BF16", auto
    assert "precision auto: bf16 storage" in log, log
else:
    assert auto["precision"] == "f32" and "no AVX512-BF16" in auto["precision_auto"], auto
for name in ("auto_exact.jsonl", "auto_updates.jsonl"):
    assert lines(name)[0]["config"]["precision"] == "f32", (name, lines(name)[0]["config"])
eb = [l for l in b if l.get("event") == "epoch"][-1]
ef = [l for l in f if l.get("event") == "epoch"][-1]
sb, sf = eb["model_state_bytes"], ef["model_state_bytes"]
assert sb["weights"] + sb["optimizer"] < 0.6 * (sf["weights"] + sf["optimizer"]), (sb, sf)
assert 0 <= eb["p@1"] <= 1, eb
PY
"$FRUGAL" evaluate --model "$TMP/bf16" --test "$TMP/data/test.txt" --threads 1 > /dev/null
# A checkpoint's table count (and storage) is what a resumed run keeps unless the flag is given.
R=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --threads 1 --quiet --hidden 8 --max-steps 2)
"$FRUGAL" "${R[@]}" --epochs 1 --tables 12 --precision f32 --checkpoint "$TMP/t12" > /dev/null
"$FRUGAL" "${R[@]}" --epochs 2 --resume "$TMP/t12" --metrics "$TMP/t12.jsonl" > /dev/null
python3 -c "import json,sys; c=json.loads(open(sys.argv[1]).readline())['config']; assert c['tables'] == 12 and c['precision'] == 'f32', c" "$TMP/t12.jsonl"
# --optimizer rowwise-adagrad: recorded, one accumulator per row of the sparse input and LSH output
# layers (a quarter of per-element Adagrad's state here, hidden 8 with 4 bytes a row), checkpointed
# and resumed.
"$FRUGAL" "${T[@]}" --optimizer rowwise-adagrad --metrics "$TMP/rowwise.jsonl" --checkpoint "$TMP/rowwise" > /dev/null
"$FRUGAL" "${T[@]}" --optimizer adagrad --metrics "$TMP/adagrad.jsonl" > /dev/null
"$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 2 --threads 1 --quiet --hidden 8 \
  --tables 4 --max-steps 4 --optimizer rowwise-adagrad --resume "$TMP/rowwise" \
  --metrics "$TMP/rowwise2.jsonl" > /dev/null
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def lines(name): return [json.loads(l) for l in open(os.path.join(d, name))]
r, a = lines("rowwise.jsonl"), lines("adagrad.jsonl")
assert r[0]["config"]["optimizer"] == "rowwise-adagrad" and "initial_accumulator" in r[0]["config"], r[0]["config"]
er = [l for l in r if l.get("event") == "epoch"][-1]
ea = [l for l in a if l.get("event") == "epoch"][-1]
assert er["model_state_bytes"]["optimizer"] < 0.5 * ea["model_state_bytes"]["optimizer"], (er["model_state_bytes"], ea["model_state_bytes"])
resumed = [l for l in lines("rowwise2.jsonl") if l.get("event") == "epoch"]
assert resumed and resumed[-1]["epoch"] == 2 and 0 <= resumed[-1]["p@1"] <= 1, resumed
PY
# --optimizer rowwise-adam: recorded with --rowwise-momentum; without momentum its state is one f32
# per row of the row-wise layers (below row-wise Adagrad's plus the biases' Adam); resumed.
"$FRUGAL" "${T[@]}" --optimizer rowwise-adam --rowwise-momentum off --metrics "$TMP/rwadam.jsonl" \
  --checkpoint "$TMP/rwadam" > /dev/null
"$FRUGAL" "${T[@]}" --optimizer adam --metrics "$TMP/adam.jsonl" > /dev/null
"$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 2 --threads 1 --quiet --hidden 8 \
  --tables 4 --max-steps 4 --optimizer rowwise-adam --rowwise-momentum off --resume "$TMP/rwadam" \
  --metrics "$TMP/rwadam2.jsonl" > /dev/null
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def lines(name): return [json.loads(l) for l in open(os.path.join(d, name))]
r, a = lines("rwadam.jsonl"), lines("adam.jsonl")
assert r[0]["config"]["optimizer"] == "rowwise-adam" and r[0]["config"]["rowwise_momentum"] is False, r[0]["config"]
er = [l for l in r if l.get("event") == "epoch"][-1]
ea = [l for l in a if l.get("event") == "epoch"][-1]
assert er["model_state_bytes"]["optimizer"] < 0.3 * ea["model_state_bytes"]["optimizer"], (er["model_state_bytes"], ea["model_state_bytes"])
resumed = [l for l in lines("rwadam2.jsonl") if l.get("event") == "epoch"]
assert resumed and resumed[-1]["epoch"] == 2 and 0 <= resumed[-1]["p@1"] <= 1, resumed
PY
# The saved run had no momentum: a resume that asks for it is refused by the config check.
fails_with "rowwise_momentum" "$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 2 \
  --threads 1 --quiet --hidden 8 --tables 4 --optimizer rowwise-adam --resume "$TMP/rwadam"
"$FRUGAL" "${T[@]}" --optimizer adam --rowwise-momentum off 2>&1 >/dev/null |
  grep -q "note: --rowwise-momentum only applies to --optimizer rowwise-adam" ||
  { echo "--rowwise-momentum with adam: no note"; exit 1; }
# --update-threshold: recorded, the rows held back counted in the epoch line; 0 is the run without it.
"$FRUGAL" "${T[@]}" --update-threshold 0.5 --metrics "$TMP/held.jsonl" > /dev/null
"$FRUGAL" "${T[@]}" --update-threshold 0 --metrics "$TMP/held0.jsonl" > /dev/null
"$FRUGAL" "${T[@]}" --metrics "$TMP/held-none.jsonl" > /dev/null
python3 - "$TMP" <<'PY'
import json, os, sys
d = sys.argv[1]
def lines(name): return [json.loads(l) for l in open(os.path.join(d, name))]
h = lines("held.jsonl")
assert h[0]["config"]["update_threshold"] == 0.5, h[0]["config"]
e = [l for l in h if l.get("event") == "epoch"][-1]
assert e["deferred_rows"]["listed"] > 0 and 0 <= e["deferred_rows"]["fraction"] <= 1, e["deferred_rows"]
z, n = [[l for l in lines(f) if l.get("event") == "epoch"][-1] for f in ("held0.jsonl", "held-none.jsonl")]
# The defaults (--optimizer auto) with the LSH sampler: row-wise Adam on the output layer's rows.
c = lines("held-none.jsonl")[0]["config"]
assert c["optimizer"] == "rowwise-adam" and c["rowwise_layers"] == "output" and c["rowwise_momentum"] is True, c
assert "deferred_rows" not in z and (z["loss"], z["p@1"]) == (n["loss"], n["p@1"]), (z, n)
PY
fails_with "--update-threshold needs --sparse-updates lazy" "$FRUGAL" "${T[@]}" --update-threshold 0.5 \
  --sparse-updates catchup
fails_with "--update-threshold decides on the host; --device emulated" "$FRUGAL" "${T[@]}" --update-threshold 0.5 \
  --device emulated
fails_with "--precision bf16 with --dp-compress updates is not supported" \
  "$FRUGAL" "${T[@]}" --precision bf16 --dp-compress updates --dp-keep 0.1
fails_with "--precision: fp8 not in {auto,f32,bf16}" "$FRUGAL" "${T[@]}" --precision fp8
# --dp-explore (Slim-DP's exploration): values only, refused with sign values naming the flags; its range.
fails_with "--dp-explore sends the explored entries with their values" "$FRUGAL" "${T[@]}" --dp-keep 0.1 \
  --dp-explore 0.01 --dp-wire-dtype sign
fails_with "--dp-explore: 0.7 is outside [0, 0.5]" "$FRUGAL" "${T[@]}" --dp-explore 0.7
# A flag given twice says so in frugal's words (CLI11: "At Most 1 required but received 2").
fails_with "--threads: given 2 times; give it once" "$FRUGAL" "${T[@]}" --threads 2

"$FRUGAL" "${T[@]}" --logq off --metrics "$TMP/lsh.jsonl" > /dev/null
python3 -c 'import json,sys; c = json.loads(open(sys.argv[1]).readline())["config"]; assert c["logq"] == "off" and c["sampler"] == "lsh", c' \
  "$TMP/lsh.jsonl"
# DCT-MP's value type: auto is i8 below --mp-keep 1 or with --mp-mass, --wire-dtype when given, f32
# otherwise; --mp-wire-dtype overrides. Recorded in the run config (ranks must agree on it).
for case in "f32" "i8 --mp-keep 0.5" "i8 --mp-mass 0.9" "bf16 --mp-keep 0.5 --wire-dtype bf16" \
            "f16 --mp-keep 0.5 --mp-wire-dtype f16" "i8 --mp-wire-dtype i8"; do
  read -r want flags <<< "$case"
  # shellcheck disable=SC2086
  "$FRUGAL" "${T[@]}" $flags --metrics "$TMP/mpwire.jsonl" > /dev/null
  python3 -c 'import json,sys; c = json.loads(open(sys.argv[1]).readline())["config"]; assert c["mp_wire_dtype"] == sys.argv[2], (sys.argv[3], c)' \
    "$TMP/mpwire.jsonl" "$want" "$flags"
done
# --dp-select row sends values: under --dp-wire-dtype auto the exchanged updates travel as bf16, not
# signs; per-parameter keeps are recorded.
"$FRUGAL" "${T[@]}" --dp-keep 0.1 --dp-select row --dp-compress updates --dp-keep-param softmax.=0.2 \
  --metrics "$TMP/dprow.jsonl" > /dev/null
python3 -c 'import json,sys; c = json.loads(open(sys.argv[1]).readline())["config"]; assert (c["dp_select"], c["dp_wire_dtype"], c["dp_keep_param"]) == ("row", "bf16", ["softmax.=0.2"]), c' \
  "$TMP/dprow.jsonl"
# --dp-select auto: per-row selection and the input layer at 2.5 x --dp-keep for thresholded gradients;
# one tau and sign values for exchanged updates; --dp-keep-input and --dp-select global override.
for case in "row 0.25 bf16 --dp-keep 0.1" "global 0.1 sign --dp-keep 0.1 --dp-compress updates" \
            "global 0.1 bf16 --dp-keep 0.1 --dp-select global" "row 0.5 bf16 --dp-keep 0.1 --dp-keep-input 0.5" \
            "row 1 bf16 --dp-keep 0.5" "floor 0.1 bf16 --dp-keep 0.1 --dp-compress updates --dp-select floor"; do
  read -r select input wire flags <<< "$case"
  # shellcheck disable=SC2086
  "$FRUGAL" "${T[@]}" $flags --metrics "$TMP/dpsel.jsonl" > /dev/null
  python3 -c 'import json,sys; c = json.loads(open(sys.argv[1]).readline())["config"]; got = (c["dp_select"], round(c["dp_keep_input"], 6), c["dp_wire_dtype"]); assert got == (sys.argv[2], float(sys.argv[3]), sys.argv[4]), (sys.argv[5], got)' \
    "$TMP/dpsel.jsonl" "$select" "$input" "$wire" "$flags"
done
# The remedies of issue 15 that stay options: recorded in the run config; refused where they cannot act.
"$FRUGAL" "${T[@]}" --dp-keep 0.1 --adam-freeze-v-after 30 --dp-momentum-correction on --dp-local-clip on \
  --clip-norm 1 --mp-error-feedback on --metrics "$TMP/remedies.jsonl" > /dev/null
python3 -c 'import json,sys; c = json.loads(open(sys.argv[1]).readline())["config"]; got = (c["adam_freeze_v_after"], c["dp_momentum_correction"], c["dp_local_clip"], c["mp_error_feedback"]); assert got == (30, True, True, True), got' \
  "$TMP/remedies.jsonl"
"$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 1 --threads 1 --hidden 8 \
  --tables 4 --max-steps 2 --dp-keep 1 --dp-momentum-correction on > "$TMP/mc.log" 2>&1
grep -q "dp-momentum-correction has no effect without data-parallel replicas" "$TMP/mc.log" \
  || { cat "$TMP/mc.log"; echo "no note on --dp-momentum-correction without replicas"; exit 1; }
fails_with "--adam-freeze-v-after freezes plain Adam's per-element second moment: --optimizer sgd has none" \
  "$FRUGAL" "${T[@]}" --adam-freeze-v-after 5 --optimizer sgd
fails_with "--dp-select floor sends each touched row's largest entry with its value" \
  "$FRUGAL" "${T[@]}" --dp-keep 0.1 --dp-select floor --dp-wire-dtype sign
fails_with "--adam-freeze-v-after needs --sparse-updates lazy" "$FRUGAL" "${T[@]}" --adam-freeze-v-after 5 --sparse-updates catchup
fails_with "--dp-momentum-correction on acts on DCT-DP's thresholded gradients: it needs --dp-keep ETA" \
  "$FRUGAL" "${T[@]}" --dp-momentum-correction on
fails_with "--dp-momentum-correction on acts on gradients; --dp-compress updates exchanges optimizer updates" \
  "$FRUGAL" "${T[@]}" --dp-momentum-correction on --dp-keep 0.1 --dp-compress updates
fails_with "--dp-local-clip on clips each replica's gradient to --clip-norm C / sqrt(replicas): give --clip-norm C" \
  "$FRUGAL" "${T[@]}" --dp-local-clip on --dp-keep 0.1
# --compress auto: recorded with its energy target; refuses the hand-set keeps and a target alone.
"$FRUGAL" "${T[@]}" --compress auto --compress-energy 0.8 --metrics "$TMP/auto.jsonl" > /dev/null
python3 -c 'import json,sys; c = json.loads(open(sys.argv[1]).readline())["config"]; got = (c["compress"], round(c["compress_energy"], 6)); assert got == ("auto", 0.8), got' \
  "$TMP/auto.jsonl"
fails_with "--compress auto sets DCT's keep fractions itself: drop --dp-keep" "$FRUGAL" "${T[@]}" --compress auto --dp-keep 0.1
fails_with "--compress auto sets DCT's keep fractions itself" "$FRUGAL" "${T[@]}" --compress auto --mp-keep 0.5
fails_with "--compress-energy sets --compress auto's target: give --compress auto too" \
  "$FRUGAL" "${T[@]}" --compress off --compress-energy 0.8
# The default, --compress link: recorded as such; one rank has no replicas, so it resolves to off.
"$FRUGAL" "${T[@]}" --metrics "$TMP/link.jsonl" > /dev/null
python3 -c 'import json,sys; r = json.loads(open(sys.argv[1]).readline()); got = (r["config"]["compress"], r["compress_chosen"], r["compress_choice"]); assert got == ("link", "off", None), got' \
  "$TMP/link.jsonl"
fails_with "--dp-keep-input: expected a fraction in (0, 1]" "$FRUGAL" "${T[@]}" --dp-keep 0.1 --dp-keep-input 0
fails_with "--dp-keep-param 'softmax.': expected PREFIX=ETA" "$FRUGAL" "${T[@]}" --dp-keep 0.1 --dp-keep-param softmax.
fails_with "--dp-keep-param 'softmax.=2': expected PREFIX=ETA" "$FRUGAL" "${T[@]}" --dp-keep 0.1 --dp-keep-param softmax.=2
# 2. Library errors name option fields; the command names its flags.
fails_with "--mp-mass 0: expected a fraction in (0, 1]" "$FRUGAL" "${T[@]}" --mp-mass 0
fails_with "--negatives must be at most 1048576 per point, got 2000000" "$FRUGAL" "${T[@]}" --negatives 2000000
fails_with "--max-active (5) must be >= --min-active (10)" "$FRUGAL" "${T[@]}" --max-active 5 --min-active 10
fails_with "--active-target: -5 is negative: expected a value from 0 up" "$FRUGAL" "${T[@]}" --active-target -5
fails_with "synth-xmc: --features must be > 0" "$FRUGAL" data synth-xmc --features 0 --out "$TMP/x"
fails_with "synth-xmc: --labels-per-point must be > 0" "$FRUGAL" data synth-xmc --labels-per-point 0 --out "$TMP/x"
G=$SRC/tests/data/fixtures/gcide
fails_with "gcide: --max-df 2: expected a share in (0, 1]" \
  "$FRUGAL" data gcide --dict "$G/gcide.dict" --index "$G/gcide.index" --max-df 2 --out "$TMP/g"
fails_with "gcide: --min-count must be >= 1" \
  "$FRUGAL" data gcide --dict "$G/gcide.dict" --index "$G/gcide.index" --min-count 0 --out "$TMP/g"
fails_with "--format idx: $TMP/none-images-idx3-ubyte[.gz]: no such file" \
  "$FRUGAL" train --format idx --train "$TMP/none" --test "$TMP/none" --quiet
fails_with "--format idx: $TMP/none-images-idx3-ubyte[.gz]: no such file" "$FRUGAL" data stats --format idx "$TMP/none"

# 3. Values outside flags.
fails_with "--grid '2y2': expected DxM, e.g. 2x2" "$FRUGAL" "${T[@]}" --grid 2y2
fails_with "--grid '0x1': expected DxM, e.g. 2x2" "$FRUGAL" "${T[@]}" --grid 0x1
fails_with "--grid '0x1x1': expected DxM, e.g. 2x2, or DxMxS" "$FRUGAL" "${T[@]}" --grid 0x1x1
fails_with "--grid '1x1x0': expected DxM, e.g. 2x2, or DxMxS" "$FRUGAL" "${T[@]}" --grid 1x1x0
fails_with "--grid 2x2 needs 4 ranks, but the run has 1" "$FRUGAL" "${T[@]}" --grid 2x2
fails_with "--slice-weights '1,x': bad weight 'x'" "$FRUGAL" "${T[@]}" --slice-weights 1,x
fails_with "--layers '8,0': bad width '0': expected positive integers separated by commas" \
  "$FRUGAL" "${T[@]}" --layers 8,0
fails_with "FRUGAL_SIZE 'four': expected an integer" env FRUGAL_SIZE=four "$FRUGAL" "${T[@]}"
fails_with "FRUGAL_TRANSPORT 'tcp': expected zmq, mpi or local" env FRUGAL_TRANSPORT=tcp "$FRUGAL" "${T[@]}"
fails_with "a ZeroMQ run needs the rank: FRUGAL_RANK" env FRUGAL_SIZE=2 "$FRUGAL" "${T[@]}"
fails_with "FRUGAL_COMM_TIMEOUT 'x': expected a positive number of seconds" \
  env FRUGAL_SIZE=2 FRUGAL_RANK=1 FRUGAL_COORDINATOR=127.0.0.1:1 FRUGAL_COMM_TIMEOUT=x "$FRUGAL" "${T[@]}"

# 4. Unknown choices.
fails_with "--sampler: bad not in {lsh,exact}" "$FRUGAL" "${T[@]}" --sampler bad
fails_with "--wire-dtype: f64 not in {f32,bf16,f16}" "$FRUGAL" "${T[@]}" --wire-dtype f64
fails_with "--mp-wire-dtype: sign not in {auto,f32,bf16,f16,i8}" "$FRUGAL" "${T[@]}" --mp-wire-dtype sign
fails_with "--transport: tcp not in {zmq,mpi}" "$FRUGAL" launch -n 2 --transport tcp -- true

# 5. A ZeroMQ run's key and timeout as flags of `frugal train` (not only FRUGAL_* variables), and
#    `frugal keygen FILE` as the README writes it.
if "$FRUGAL" keygen "$TMP/cluster.key" > "$TMP/keygen.log" 2>&1; then
  test -f "$TMP/cluster.key"
  "$FRUGAL" launch -n 2 -- "$FRUGAL" "${T[@]}" --cluster-key "$TMP/cluster.key" --comm-timeout 20 \
    --metrics "$TMP/keyed.jsonl" > "$TMP/keyed.log" 2>&1 || { cat "$TMP/keyed.log"; echo "keyed run failed"; exit 1; }
  grep -q '"event":"epoch"' "$TMP/keyed.jsonl" || { echo "keyed run wrote no epoch"; exit 1; }
  # Row-wise state needs whole rows: in a model-parallel group the input layer (sliced by columns)
  # keeps per-element state, and rank 0 says so.
  "$FRUGAL" launch -n 2 -- "$FRUGAL" "${T[@]}" --cluster-key "$TMP/cluster.key" --comm-timeout 20 --grid 1x2 \
    --optimizer rowwise-adagrad > "$TMP/rw-mp.log" 2>&1 || { cat "$TMP/rw-mp.log"; echo "rowwise over 1x2 failed"; exit 1; }
  grep -q "sparse_dense.weight is sliced by columns over the model-parallel group" "$TMP/rw-mp.log" ||
    { cat "$TMP/rw-mp.log"; echo "no note on the per-element input layer"; exit 1; }
  # ...and a checkpoint moves between the two: one rank's per-row second moment spreads over the
  # input layer's columns on a 1x2 grid, and comes back as the rows' means.
  R=(train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --threads 1 --quiet --hidden 8 --tables 4
     --max-steps 2 --optimizer rowwise-adam)
  "$FRUGAL" "${R[@]}" --epochs 1 --checkpoint "$TMP/rwa1" > /dev/null
  "$FRUGAL" launch -n 2 -- "$FRUGAL" "${R[@]}" --epochs 2 --resume "$TMP/rwa1" --checkpoint "$TMP/rwa2" --grid 1x2 \
    --cluster-key "$TMP/cluster.key" --comm-timeout 20 > "$TMP/rwa2.log" 2>&1 ||
    { cat "$TMP/rwa2.log"; echo "row-wise Adam resumed on 1x2 failed"; exit 1; }
  "$FRUGAL" "${R[@]}" --epochs 3 --resume "$TMP/rwa2" --metrics "$TMP/rwa3.jsonl" > /dev/null
  python3 -c 'import json,sys; e=[json.loads(l) for l in open(sys.argv[1])]; e=[l for l in e if l.get("event")=="epoch"]; assert e and e[-1]["epoch"] == 3 and 0 <= e[-1]["p@1"] <= 1, e' \
    "$TMP/rwa3.jsonl"
  # The straight-through estimate at every boundary of stacked hidden layers says what it costs
  # (here, with ZeroMQ launches, as the keyed run).
  "$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 1 \
    --threads 1 --layers 8,8 --grid 1x2 --max-steps 2 --mp-keep 0.5 --mp-straight-through all > "$TMP/ste.log" 2>&1 \
    || { cat "$TMP/ste.log"; echo "the straight-through run failed"; exit 1; }
  grep -q "mp-straight-through all adds the estimate at every sliced boundary" "$TMP/ste.log" \
    || { cat "$TMP/ste.log"; echo "no note on --mp-straight-through all with stacked layers"; exit 1; }
  # Momentum correction where every entry is sent is the optimizer without momentum, and says so.
  "$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 1 \
    --threads 1 --hidden 8 --tables 4 --max-steps 2 --grid 2x1 --dp-keep 1 --dp-momentum-correction on \
    > "$TMP/mc2.log" 2>&1 || { cat "$TMP/mc2.log"; echo "the momentum-correction run failed"; exit 1; }
  grep -q "dp-momentum-correction at --dp-keep 1 sends every velocity every step" "$TMP/mc2.log" \
    || { cat "$TMP/mc2.log"; echo "no note on --dp-momentum-correction at --dp-keep 1"; exit 1; }
  # DCT-DP between replicas measures the link and records whether compression pays; the log's note
  # follows the recorded verdict (which depends on timing: the test checks they agree, not which).
  "$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 1 \
    --threads 1 --hidden 8 --tables 4 --max-steps 2 --grid 2x1 --dp-keep 0.1 --metrics "$TMP/cost.jsonl" \
    > "$TMP/cost.log" 2>&1 || { cat "$TMP/cost.log"; echo "the DCT-DP run failed"; exit 1; }
  python3 - "$TMP/cost.jsonl" "$TMP/cost.log" <<'PY'
import json, sys
line = [json.loads(l) for l in open(sys.argv[1]) if '"event":"epoch"' in l][0]
c = line["dct_dp_cost"]
steps = line["steps"]
assert c["link_bytes_per_s"] > 0 and c["cpu_seconds_per_step"] > 0, c
assert abs(c["bytes_saved_per_step"] - (line["dp_payload_touched"] - line["dp_payload_sent"]) / steps) < 1e-6 * max(1, abs(c["bytes_saved_per_step"])), (c, line)
assert abs(c["wire_seconds_saved_per_step"] - c["bytes_saved_per_step"] / c["link_bytes_per_s"]) < 1e-12 + 1e-9 * abs(c["wire_seconds_saved_per_step"]), c
assert c["pays"] == (c["wire_seconds_saved_per_step"] >= c["cpu_seconds_per_step"]), c
noted = "--dp-keep does not pay on this link" in open(sys.argv[2]).read()
assert noted == (not c["pays"]), (noted, c)
PY
  # Uncompressed replicas measure the link too and say when compression would pay (the exchange's
  # wire time above the step's compute; again the test checks the note follows the record).
  "$FRUGAL" launch -n 2 -- "$FRUGAL" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 1 \
    --threads 1 --hidden 8 --tables 4 --max-steps 2 --grid 2x1 --metrics "$TMP/off.jsonl" \
    > "$TMP/off.log" 2>&1 || { cat "$TMP/off.log"; echo "the uncompressed DP run failed"; exit 1; }
  python3 - "$TMP/off.jsonl" "$TMP/off.log" <<'PY'
import json, sys
line = [json.loads(l) for l in open(sys.argv[1]) if '"event":"epoch"' in l][0]
c = line["dp_exchange_cost"]
assert c["link_bytes_per_s"] > 0 and c["compute_seconds_per_step"] > 0, c
want = line["dp_payload_sent"] / line["steps"] / c["link_bytes_per_s"]
assert abs(c["wire_seconds_per_step"] - want) <= 1e-9 * max(1.0, want), (c, want)
assert c["would_pay"] == (c["wire_seconds_per_step"] > c["compute_seconds_per_step"]), c
noted = "the data-parallel exchange outweighs the computation on this link" in open(sys.argv[2]).read()
assert noted == c["would_pay"], (noted, c)
PY
else  # a build without ZeroMQ has no cluster keys, and says why
  grep -q "built without it" "$TMP/keygen.log" || { cat "$TMP/keygen.log"; echo "keygen failed unexplained"; exit 1; }
fi
fails_with "--cluster-key" "$FRUGAL" "${T[@]}" --cluster-key /nonexistent/key
fails_with "--comm-timeout" "$FRUGAL" "${T[@]}" --comm-timeout -1
fails_with "--max-queued-bytes" "$FRUGAL" "${T[@]}" --max-queued-bytes 10
fails_with "--transport: tcp not in {zmq,mpi,local}" "$FRUGAL" "${T[@]}" --transport tcp
fails_with "--run-token: a run token of 300 bytes; expected 1 to 255" "$FRUGAL" "${T[@]}" \
  --run-token "$(printf 'x%.0s' $(seq 300))"
fails_with "FRUGAL_RUN_TOKEN: a run token of 256 bytes; at most 255" \
  env FRUGAL_RUN_TOKEN="$(printf 'x%.0s' $(seq 256))" FRUGAL_SIZE=2 FRUGAL_RANK=1 FRUGAL_COORDINATOR=127.0.0.1:1 \
  "$FRUGAL" "${T[@]}"
# An error about a token never shows it.
if "$FRUGAL" "${T[@]}" --run-token "$(printf 'secret%.0s' $(seq 50))" > "$TMP/token-error.log" 2>&1; then
  echo "a 300-byte run token was accepted"; exit 1
fi
if grep -q secretsecret "$TMP/token-error.log"; then echo "the error shows the run token"; exit 1; fi

# frugal launch gives ZeroMQ ranks a run token made for the launch (the same on every rank, 64 hex
# digits, another one next launch); none with --no-run-token or a cluster key; one already set wins.
tokens() { "$@" | sed -n 's/.*token=//p' | sort | uniq -c | awk '{print $1, $2}'; }
first=$(tokens "$FRUGAL" launch -n 2 -- sh -c 'echo "token=$FRUGAL_RUN_TOKEN"')
second=$(tokens "$FRUGAL" launch -n 2 -- sh -c 'echo "token=$FRUGAL_RUN_TOKEN"')
[[ $first =~ ^2\ [0-9a-f]{64}$ ]] || { echo "launch's ranks got run tokens '$first'"; exit 1; }
[ "$first" != "$second" ] || { echo "two launches got the same run token"; exit 1; }
[ "$(tokens "$FRUGAL" launch -n 2 --no-run-token -- sh -c 'echo "token=${FRUGAL_RUN_TOKEN:-none}"')" = "2 none" ] \
  || { echo "--no-run-token still set a run token"; exit 1; }
[ "$(FRUGAL_RUN_TOKEN=mine tokens "$FRUGAL" launch -n 2 -- sh -c 'echo "token=$FRUGAL_RUN_TOKEN"')" = "2 mine" ] \
  || { echo "launch replaced the launcher's FRUGAL_RUN_TOKEN"; exit 1; }
touch "$TMP/some.key"
[ "$(tokens "$FRUGAL" launch -n 2 --cluster-key "$TMP/some.key" -- sh -c 'echo "token=${FRUGAL_RUN_TOKEN:-none}"')" \
  = "2 none" ] || { echo "a keyed launch also got a run token"; exit 1; }

# 6. Every FRUGAL_* setting is a flag of `frugal train`, and the flag wins over the variable: two ranks
#    joined by flags alone, their variables set to values that would fail; a rendezvous timeout given
#    as a flag (1 s) beats the variable's 600 s.
if "$FRUGAL" keygen "$TMP/k2" > /dev/null 2>&1; then  # a build with ZeroMQ
  PORT=$(free_port)
  BAD=(env FRUGAL_SIZE=9 FRUGAL_RANK=8 FRUGAL_COORDINATOR=nowhere:1 FRUGAL_COMM_TIMEOUT=x FRUGAL_RENDEZVOUS_TIMEOUT=x
       FRUGAL_BIND_HOST=no.such.host FRUGAL_MAX_MESSAGE_BYTES=x FRUGAL_MAX_QUEUED_BYTES=x FRUGAL_TRANSPORT=mpi)
  FLAGS=(--transport zmq --size 2 --coordinator "127.0.0.1:$PORT" --comm-timeout 20 --rendezvous-timeout 30
         --bind-host 127.0.0.1 --max-message-bytes 100000000 --max-queued-bytes 200000000 --run-token both-know-it)
  for r in 0 1; do
    "${BAD[@]}" FRUGAL_RUN_TOKEN="rank-$r-only" "$FRUGAL" "${T[@]}" "${FLAGS[@]}" --rank $r --metrics "$TMP/flags$r.jsonl" > "$TMP/flags$r.log" 2>&1 &
  done
  wait %1 || { cat "$TMP/flags0.log" "$TMP/flags1.log"; echo "rank 0 joined by flags failed"; exit 1; }
  wait %2 || { cat "$TMP/flags1.log"; echo "rank 1 joined by flags failed"; exit 1; }
  grep -q '"event":"epoch"' "$TMP/flags0.jsonl" || { echo "the run joined by flags wrote no epoch"; exit 1; }
  fails_with "no answer from the coordinator at tcp://127.0.0.1:1 within 1 s" \
    env FRUGAL_RENDEZVOUS_TIMEOUT=600 timeout 60 "$FRUGAL" "${T[@]}" --size 2 --rank 1 --coordinator 127.0.0.1:1 \
    --rendezvous-timeout 1
  fails_with "--size 'x': expected an integer" env FRUGAL_SIZE=2 "$FRUGAL" "${T[@]}" --size x --transport zmq
fi
# 5. Negative values for unsigned flags, in every command.
for flag in --epochs --warmup-steps --seed --max-steps; do
  fails_with "$flag: -1 is negative: expected a count from 0 up" "$FRUGAL" "${T[@]}" "$flag" -1
done
fails_with "--batch: -1 is negative: expected a count from 1 up" "$FRUGAL" "${T[@]}" --batch -1
fails_with "--batch: 0 is not positive: expected a count from 1 up" "$FRUGAL" "${T[@]}" --batch 0
fails_with "--seed: 99999999999999999999 is too large: at most 18446744073709551615" "$FRUGAL" "${T[@]}" \
  --seed 99999999999999999999
fails_with "--top-k: -2 is negative" "$FRUGAL" predict --model "$TMP/ckpt" --input "$TMP/data/test.txt" --top-k -2
fails_with "--features: -5 is negative" "$FRUGAL" data synth-xmc --features -5 --labels 3 --train 3 --test 3 \
  --out "$TMP/neg"
echo "OK: choices keep their spellings; errors name flags and variables"
