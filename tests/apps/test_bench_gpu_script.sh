#!/usr/bin/env bash
# bench/gpu/run.sh's own logic, on this machine (tiny mode: the "cuda" systems run on the CPU), with
# a frugal wrapper that ends each training's output with a made-up CUDA per-op profile when
# FRUGAL_CUDA_PROFILE=1 is exported to it (as the real CUDA backend prints it at exit):
#  1. GPU_BENCH_ONLY keeps exactly the runs whose name matches (and the data sets);
#  2. the report's per-op profile table lists each selected CUDA run's costliest ops and its total,
#     and leaves out the CPU run;
#  3. results.json holds the selected runs only;
#  4. a GPU_BENCH_ONLY that is not a regular expression fails at once, naming it.
# Usage: test_bench_gpu_script.sh FRUGAL SOURCE_ROOT
set -euo pipefail
FRUGAL=$1
ROOT=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cat > "$TMP/frugal" <<SH
#!/usr/bin/env bash
"$FRUGAL" "\$@"; rc=\$?
case " \$* " in *" --help "*) exit \$rc ;; esac
if [ "\$1" = train ] && [ "\${FRUGAL_CUDA_PROFILE:-}" = 1 ]; then
  printf 'cuda profile (FRUGAL_CUDA_PROFILE), whole run, by op:\n' >&2
  printf '  %-22s %9s %10s %10s %10s %10s %10s\n' op calls "MB up" "MB down" "staging s" "wait s" "total s" >&2
  printf '  %-22s %9d %10.1f %10.1f %10.3f %10.3f %10.3f\n' adam_rows 80 1454.5 1393.4 0.603 0.051 0.764 >&2
  printf '  %-22s %9d %10.1f %10.1f %10.3f %10.3f %10.3f\n' row_accumulate 40 371.9 1404.2 0.307 0.034 0.385 >&2
  printf '  %-22s %9d %10.1f %10.1f %10.3f %10.3f %10.3f\n' "(all)" 120 1826.4 2797.6 0.910 0.085 1.149 >&2
fi
exit \$rc
SH
chmod +x "$TMP/frugal"

OUT=$TMP/out
echo "+ bench/gpu/run.sh (tiny, GPU_BENCH_ONLY)"
GPU_BENCH_TINY=1 FRUGAL="$TMP/frugal" OUT="$OUT" \
  GPU_BENCH_ONLY='^frugal-cuda-lsh-1k-b128-steps$|^frugal-cpu-lsh-1k-b128-steps$' \
  bash "$ROOT/bench/gpu/run.sh" > "$TMP/run.log" 2>&1 || { cat "$TMP/run.log"; exit 1; }

echo "+ bench/gpu/run.sh with a GPU_BENCH_ONLY that is not a regex (must fail, naming it)"
if GPU_BENCH_TINY=1 FRUGAL="$TMP/frugal" OUT="$TMP/bad" GPU_BENCH_ONLY='frugal-(cuda' \
     bash "$ROOT/bench/gpu/run.sh" > "$TMP/bad.log" 2>&1; then
  cat "$TMP/bad.log"; echo "succeeded, expected a failure"; exit 1
fi
grep -qF "GPU_BENCH_ONLY='frugal-(cuda' is not a valid extended regular expression" "$TMP/bad.log" ||
  { cat "$TMP/bad.log"; echo "the error does not name GPU_BENCH_ONLY"; exit 1; }

python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
res = json.load(open(os.path.join(out, "results.json")))
names = sorted(r["name"] for r in res["runs"])
expected = ["data-1k", "data-5k", "frugal-cpu-lsh-1k-b128-steps", "frugal-cuda-lsh-1k-b128-steps"]
assert names == expected, f"runs {names}, expected {expected}"
for r in res["runs"]:
    assert r["rc"] == 0, f"{r['name']} failed: {r.get('error')}"
report = open(os.path.join(out, "REPORT-gpu.md")).read()
assert "CUDA backend per-op profile" in report, "no profile table in the report"
assert "host <-> device B/sample" in report, "no host <-> device column in the results table"
# The profile's rows (a run's name, then its op), not the results table's (a system's name).
rows = [l for l in report.splitlines() if l.startswith("| frugal-") and l.count("|") == 9 and "-steps |" in l]
assert rows == ["| frugal-cuda-lsh-1k-b128-steps | adam_rows | 80 | 1454.5 | 1393.4 | 0.603 | 0.051 | 0.764 |",
                "| frugal-cuda-lsh-1k-b128-steps | row_accumulate | 40 | 371.9 | 1404.2 | 0.307 | 0.034 | 0.385 |",
                "| frugal-cuda-lsh-1k-b128-steps | (all) | 120 | 1826.4 | 2797.6 | 0.910 | 0.085 | 1.149 |"], rows
print("ok: 4 runs selected, the CUDA run's profile in the report, the CPU run's left out")
PY
