#!/usr/bin/env bash
# The two README commands live here:
#   bash apps/dev.sh demo   install what is missing, build, and run a real training run
#   bash apps/dev.sh test   install what is missing, build, and run the whole test suite
# Both are idempotent: packages already present and an up-to-date build are left as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${FRUGAL_BUILD_DIR:-$ROOT/build}
JOBS=${FRUGAL_JOBS:-2}

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Debian packages the build, tests, demo and baselines need (dataset-fashion-mnist and dict-gcide:
# the real data sets of `frugal train --format idx` and `frugal data gcide`, see bench/data).
PACKAGES=(
  g++ meson ninja-build pkg-config cmake
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  libtbb-dev libzmq3-dev cppzmq-dev libopenmpi-dev openmpi-bin
  libcereal-dev catch2 libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  iproute2 clang libclang-rt-14-dev
  dataset-fashion-mnist dict-gcide
)

install_packages() {
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "all ${#PACKAGES[@]} Debian packages already installed"
    return
  fi
  say "installing missing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {
  if [ ! -f "$BUILD/build.ninja" ]; then
    say "configuring $BUILD (meson setup)"
    meson setup "$BUILD" "$ROOT"
  fi
  say "building with $JOBS jobs"
  ninja -C "$BUILD" -j "$JOBS"
}

demo() {
  install_packages
  build
  "$ROOT/apps/demo.sh" "$BUILD"
}

run_tests() {
  install_packages
  build
  say "running the test suite (meson test)"
  local rc=0
  meson test -C "$BUILD" --num-processes "$JOBS" --print-errorlogs || rc=$?
  # One plain summary line for tools that read the last line of a test run.
  python3 - "$BUILD/meson-logs/testlog.json" <<'PY' || true
import json, sys
results = [json.loads(line)["result"] for line in open(sys.argv[1]) if line.strip()]
passed = sum(r == "OK" for r in results)
skipped = sum(r == "SKIP" for r in results)
print(f"{passed} passed, {len(results) - passed - skipped} failed, {skipped} skipped")
PY
  return $rc
}

case "${1:-}" in
  demo) demo ;;
  test) run_tests ;;
  build) install_packages; build ;;
  *) echo "usage: bash apps/dev.sh demo|test|build" >&2; exit 2 ;;
esac
