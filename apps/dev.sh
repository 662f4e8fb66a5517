#!/usr/bin/env bash
# The two README commands live here:
#   bash apps/dev.sh demo   install what is missing, build, and run a real training run
#   bash apps/dev.sh test   install what is missing, build, and run the whole test suite
#   bash apps/dev.sh test --sanitize
#                           the same in its own build folder (build-sanitize) with AddressSanitizer
#                           and UndefinedBehaviorSanitizer (-Db_sanitize=address,undefined); any
#                           report fails the test that triggered it
# and, for machines without Debian packages (the GPU machine, see bench/gpu/README.md):
#   bash apps/dev.sh bundle build, then pack frugal, the kernels/core/layers test executables and
#                           every shared library they need except glibc into
#                           build/frugal-<version>-x86_64.tar.xz (RPATH $ORIGIN/../lib)
#   bash apps/dev.sh bundle --cuda-from-target
#                           the same without CUDA's runtime and cuBLAS (found on the target: a CUDA
#                           toolkit or PyTorch's nvidia-* wheels), about 20x smaller:
#                           build/frugal-<version>-x86_64-cuda-from-target.tar.xz
# All are idempotent: packages already present and an up-to-date build are left as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${FRUGAL_BUILD_DIR:-$ROOT/build}
JOBS=${FRUGAL_JOBS:-2}

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# The CUDA toolkit lives outside PATH on these machines; Meson finds nvcc only on PATH, and with it
# -Dcuda=auto builds gpu/ (the CUDA backend) on every machine that has the toolkit.
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null 2>&1; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

# Debian packages the build, tests, demo and baselines need (dataset-fashion-mnist and dict-gcide:
# the real data sets of `frugal train --format idx` and `frugal data gcide`, see bench/data;
# openssh-server: the sshd per network namespace of tests/distributed/test_launch_hosts.sh;
# python3-dev, pybind11-dev, python3-numpy, python3-scipy, python3-pytest: `import frugal` and its
# tests. The PyTorch baselines of bench/ need python3-torch, which bench/python/frugal_vs_torch.py
# names when it is missing: it is not installed here, being large).
PACKAGES=(
  g++ meson ninja-build pkg-config cmake
  libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  libtbb-dev libzmq3-dev cppzmq-dev libopenmpi-dev openmpi-bin
  libcereal-dev catch2 libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  iproute2 openssh-server clang libclang-rt-14-dev
  patchelf xz-utils
  dataset-fashion-mnist dict-gcide
  gnuplot-nox
  python3-dev pybind11-dev python3-numpy python3-scipy python3-pytest
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

# configure: a build folder with the Python module on (-Dpython=enabled: `import frugal`).
configure() {
  if [ ! -f "$BUILD/build.ninja" ]; then
    say "configuring $BUILD (meson setup -Dpython=enabled)"
    meson setup "$BUILD" "$ROOT" -Dpython=enabled
  elif [ "$(meson introspect --buildoptions "$BUILD" |
            python3 -c 'import json, sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "python"), "missing"))')" != enabled ]; then
    say "turning the Python module on in $BUILD (meson configure -Dpython=enabled)"
    meson configure "$BUILD" -Dpython=enabled
  fi
}

# build [TARGET...]: everything, or only the named targets (the demo builds the frugal program first).
build() {
  configure
  say "building ${*:-everything} with $JOBS jobs"
  ninja -C "$BUILD" -j "$JOBS" "$@"
}

# ---- the bundle: a tree that runs on a machine without Debian packages --------------------------
# Libraries never copied: glibc's own (the target's C library must be glibc >= the one built
# against; the bundle's MANIFEST says which version) and the GPU driver's (they must match the
# target's kernel driver: libcuda is found on the target, never shipped).
GLIBC_LIBS=" linux-vdso.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2
  librt.so.1 libresolv.so.2 libutil.so.1 libanl.so.1 libnsl.so.1 libBrokenLocale.so.1 libthread_db.so.1
  libc_malloc_debug.so.0 libnss_files.so.2 libnss_dns.so.2 libnss_compat.so.2 libnss_hesiod.so.2 "
is_system_lib() {  # is_system_lib SONAME: glibc or the GPU driver (never bundled)
  case "$GLIBC_LIBS" in *" $1 "*) return 0 ;; esac
  case "$1" in libcuda.so*|libnvidia-*|libnvcuvid.so*) return 0 ;; esac
  return 1
}

# ldd_deps ELF: "soname path" for every library ELF needs (ldd lists the whole closure), glibc
# and driver libraries left out; a library ldd cannot find fails (the driver's libcuda may be
# missing on a build machine without a GPU).
ldd_deps() {
  local out missing
  out=$(ldd "$1") || { echo "ldd failed on $1" >&2; return 1; }
  missing=$(awk '/not found/ { print $1 }' <<<"$out" | while read -r name; do
              is_system_lib "$name" || echo "$name"; done)
  if [ -n "$missing" ]; then
    echo "$1 needs libraries that are not found:" $missing >&2; return 1
  fi
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' <<<"$out" | while read -r name path; do
    is_system_lib "$name" || echo "$name $path"
  done
}

# The CUDA toolkit's libraries a --cuda-from-target bundle leaves out (the driver's are never in).
is_cuda_toolkit_lib() {
  case "$1" in libcudart.so*|libcublas.so*|libcublasLt.so*) return 0 ;; esac
  return 1
}

is_elf() { [ "$(head -c 4 "$1" | tail -c 3)" = ELF ]; }

project_version() {
  meson introspect --projectinfo "$BUILD" | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])'
}

# bundle_tree DIR: (re)creates DIR/frugal-<version>/ from the build (no build, no compression):
#   bin/frugal, bin/test_* (kernels, core, optim, layers, any CUDA test), bin/run-tests.sh
#   lib/libfrugal.so and every library of the closure but glibc's (libstdc++ and libgcc_s included)
#   bench/gpu/ and bench/baselines/torch_xmc.py (the GPU benchmark, run from the unpacked tree)
#   MANIFEST (version, commit, glibc needed, sha256 of every file)
# Executables get RPATH $ORIGIN/../lib, libraries $ORIGIN (DT_RPATH: it wins over a target's
# LD_LIBRARY_PATH, which stays in use for libcuda only). Open MPI's dlopen'ed plugins are not
# included: the bundle runs one rank, `frugal launch` (ZeroMQ) and threads, never mpirun.
bundle_tree() {
  local dest=$1 version name tree f
  command -v patchelf > /dev/null || { echo "patchelf is missing: bash apps/dev.sh build installs it" >&2; return 1; }
  version=$(project_version)
  name="frugal-$version"
  tree="$dest/$name"
  say "bundle tree $tree"
  rm -rf "$tree"
  mkdir -p "$tree/bin" "$tree/lib" "$tree/bench/gpu" "$tree/bench/baselines"
  cp -L "$BUILD/apps/frugal" "$tree/bin/"
  cp -L "$BUILD/libfrugal.so" "$tree/lib/"
  # Test executables that run standalone (no source tree): the parity harness and the
  # core/optim/layers suites, plus every test_* of tests/kernels and gpu (the CUDA parity test
  # when the CUDA backend is built).
  for f in "$BUILD"/tests/kernels/test_* "$BUILD"/tests/core/test_* "$BUILD"/tests/layers/test_* \
           "$BUILD"/tests/gpu/test_* "$BUILD"/gpu/test_*; do
    if [ -f "$f" ] && [ -x "$f" ]; then cp -L "$f" "$tree/bin/"; fi
  done
  cp "$ROOT/bench/gpu/"*.sh "$ROOT/bench/gpu/README.md" "$tree/bench/gpu/"
  cp "$ROOT/bench/baselines/torch_xmc.py" "$tree/bench/baselines/"
  cat > "$tree/bin/run-tests.sh" <<'SH'
#!/usr/bin/env bash
# Runs every test executable of the bundle; prints one line per executable (PASS/FAIL) and
# exits non-zero when one failed. Usage: bin/run-tests.sh [catch2 arguments]
cd "$(dirname "$0")"
rc=0
for t in ./test_*; do
  [ -x "$t" ] || continue
  if "$t" "$@" > "$t.log" 2>&1; then echo "PASS ${t#./}"; else echo "FAIL ${t#./} (log: bin/${t#./}.log)"; rc=1; fi
done
exit $rc
SH
  chmod +x "$tree/bin/run-tests.sh"
  # RPATHs first (the build tree's own RPATHs point into the build tree), so that ldd below finds
  # libfrugal.so in the tree's lib/.
  for f in "$tree"/bin/*; do
    if is_elf "$f"; then patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$f"; fi
  done
  patchelf --force-rpath --set-rpath '$ORIGIN' "$tree/lib/libfrugal.so"
  # The library closure: ldd of every executable (ldd is recursive), plus oneTBB's optional
  # companions that libtbb dlopens from its own directory (tbbmalloc, tbbbind).
  local libs="$tree/.libs" tbbdir
  : > "$libs"
  for f in "$tree"/bin/*; do
    is_elf "$f" || continue
    ldd_deps "$f" >> "$libs"
  done
  tbbdir=$(awk '$1 ~ /^libtbb\.so/ { print $2 }' "$libs" | head -1)
  if [ -n "$tbbdir" ]; then
    for f in "$(dirname "$tbbdir")"/libtbbmalloc*.so.* "$(dirname "$tbbdir")"/libtbbbind*.so.*; do
      # one file per library, under its SONAME (the name libtbb dlopens)
      [ -f "$f" ] && [ "$(patchelf --print-soname "$f" 2>/dev/null)" = "$(basename "$f")" ] || continue
      echo "$(basename "$f") $f" >> "$libs"
      ldd_deps "$f" >> "$libs" || true   # tbbbind without its hwloc is skipped by TBB itself
    done
  fi
  # FRUGAL_BUNDLE_CUDA_FROM_TARGET=1 (bundle --cuda-from-target): CUDA's runtime and cuBLAS are left
  # out (0.6 GB, most of the bundle) and found on the target, which has them wherever it has a CUDA
  # toolkit or PyTorch's nvidia-* wheels (bench/gpu/run.sh looks there).
  local from_target=""
  sort -u "$libs" | while read -r soname path; do
    case "$path" in "$tree"/*) continue ;; esac   # already in the tree (libfrugal.so)
    if [ "${FRUGAL_BUNDLE_CUDA_FROM_TARGET:-0}" = 1 ] && is_cuda_toolkit_lib "$soname"; then
      echo "$soname" >> "$tree/.from_target"; continue
    fi
    cp -L "$path" "$tree/lib/$soname"
  done
  if [ -f "$tree/.from_target" ]; then from_target=$(sort -u "$tree/.from_target" | tr '\n' ' '); rm -f "$tree/.from_target"; fi
  rm -f "$libs"
  # Libraries that already look beside themselves (CUDA's: libcublas -> libcublasLt) are left
  # as they are rather than rewritten (libcublasLt is half a gigabyte).
  for f in "$tree"/lib/*; do
    chmod u+w "$f"
    [ "$(patchelf --print-rpath "$f")" = '$ORIGIN' ] || patchelf --force-rpath --set-rpath '$ORIGIN' "$f"
  done
  local glibc
  glibc=$(for f in "$tree"/bin/* "$tree"/lib/*; do if is_elf "$f"; then objdump -T "$f"; fi; done |
          grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1) || true
  {
    echo "frugal $version"
    echo "commit $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), needs ${glibc:-GLIBC_?} or newer"
    echo "cuda $(ls "$tree"/lib | grep -qE '^libcudart' && echo yes || echo no)"
    [ -z "$from_target" ] || echo "from the target: ${from_target% }"
    (cd "$tree" && find bin lib bench -type f | sort | xargs sha256sum)
  } > "$tree/MANIFEST"
  say "bundle tree: $(ls "$tree/bin" | wc -l) files in bin/, $(ls "$tree/lib" | wc -l) libraries in lib/, $(du -sh "$tree" | cut -f1), needs ${glibc:-?}"
}

# bundle: build, then $BUILD/frugal-<version>-x86_64.tar.xz; an unchanged tree is not recompressed.
bundle() {
  install_packages
  if [ -f "$BUILD/build.ninja" ]; then
    local buildtype
    buildtype=$(meson introspect --buildoptions "$BUILD" |
                python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"))')
    if [ "$buildtype" != release ]; then
      say "$BUILD is a $buildtype build; the bundle is a release build: meson configure -Dbuildtype=release"
      meson configure "$BUILD" -Dbuildtype=release
    fi
  fi
  build
  local version name out stamp
  version=$(project_version)
  name="frugal-$version"
  local flavour=x86_64
  [ "${FRUGAL_BUNDLE_CUDA_FROM_TARGET:-0}" = 1 ] && flavour=x86_64-cuda-from-target
  out="$BUILD/$name-$flavour.tar.xz"
  stamp="$BUILD/$name-$flavour.manifest"
  bundle_tree "$BUILD/bundle"
  # Everything in MANIFEST but its build date (commit, checksums) decides whether to pack again.
  if [ -f "$out" ] && [ -f "$stamp" ] && cmp -s <(grep -v '^built ' "$BUILD/bundle/$name/MANIFEST") "$stamp"; then
    say "$out is up to date"
  else
    say "packing $out (xz ${FRUGAL_BUNDLE_XZ:=-T$JOBS -3})"
    XZ_OPT="$FRUGAL_BUNDLE_XZ" tar -C "$BUILD/bundle" -cJf "$out.tmp" "$name"
    mv "$out.tmp" "$out"
    grep -v '^built ' "$BUILD/bundle/$name/MANIFEST" > "$stamp"
  fi
  say "bundle: $out ($(du -h "$out" | cut -f1)); on the target: tar xf $(basename "$out") && $name/bin/frugal --help"
}

# The demo needs the frugal program alone: the rest (tests, examples, the CUDA backend's tests, the
# Python module) is built by `build` or `test`.
demo() {
  install_packages
  build apps/frugal
  "$ROOT/apps/demo.sh" "$BUILD"
}

# The sanitizer build: its own folder, so the normal build stays as it is. CUDA is left out: nvcc's
# device code is not instrumented and the CUDA runtime does not start under ASan's default
# shadow-memory layout.
SANITIZE_BUILD=${FRUGAL_SANITIZE_BUILD_DIR:-$ROOT/build-sanitize}
sanitize_env() {
  # Every report fails its test: UBSan would otherwise print and carry on. Leak checking is off:
  # Open MPI, oneTBB and ZeroMQ keep process-lifetime allocations that LeakSanitizer reports.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
}
build_sanitize() {
  if [ ! -f "$SANITIZE_BUILD/build.ninja" ]; then
    say "configuring $SANITIZE_BUILD (meson setup -Db_sanitize=address,undefined)"
    meson setup "$SANITIZE_BUILD" "$ROOT" -Db_sanitize=address,undefined -Dbuildtype=debugoptimized -Dcuda=disabled
  fi
  say "building the sanitizer build with $JOBS jobs"
  ninja -C "$SANITIZE_BUILD" -j "$JOBS"
}

# The tests `bash apps/dev.sh test --sanitize-subset` also runs under the sanitizers, after the whole
# suite (CI does not: the sanitizer build of libfrugal alone takes ~37 minutes on 2 cores with a cold
# compiler cache, past the test suite's 20; CI's sanitizer coverage is the test `fuzz`, whose targets
# are built with -fsanitize=fuzzer,address,undefined):
# the readers of untrusted input (XMC, IDX, dictd, checkpoints: core, data), the wire (frames and
# codecs: comm_codec, comm_zmq_security) and the command line's error paths (apps-cli-options,
# distributed-config-mismatch, readme-commands). The whole suite under the sanitizers does not fit
# CI's hour on 2 cores (docs/reliability.md, "Sanitizers and fuzzing"); `test --sanitize` runs all of it.
SANITIZE_SUBSET=(core data comm_codec comm_zmq_security apps-cli-options distributed-config-mismatch readme-commands)

# ninja targets of the named tests of build folder $1: their executables and what they depend on.
test_targets() {
  local dir=$1
  shift
  meson introspect --tests --targets "$dir" | python3 -c '
import json, os, sys
info, names, build = json.load(sys.stdin), set(sys.argv[2:]), sys.argv[1]
files = {t["id"]: t["filename"] for t in info["targets"]}
out = set()
for t in info["tests"]:
    if t["name"] in names:
        out.update(f for d in t["depends"] for f in files.get(d, []))
        if t["cmd"][0].startswith(build):
            out.add(t["cmd"][0])
print("\n".join(os.path.relpath(f, build) for f in sorted(out)))' "$(cd "$dir" && pwd)" "$@"
}

run_sanitized_subset() {
  if [ ! -f "$SANITIZE_BUILD/build.ninja" ]; then
    say "configuring $SANITIZE_BUILD (meson setup -Db_sanitize=address,undefined)"
    meson setup "$SANITIZE_BUILD" "$ROOT" -Db_sanitize=address,undefined -Dbuildtype=debugoptimized -Dcuda=disabled
  fi
  local targets
  mapfile -t targets < <(test_targets "$SANITIZE_BUILD" "${SANITIZE_SUBSET[@]}")
  say "building ${#targets[@]} targets of the sanitizer build with $JOBS jobs"
  ninja -C "$SANITIZE_BUILD" -j "$JOBS" "${targets[@]}" || return 1
  say "running ${SANITIZE_SUBSET[*]} under ASan + UBSan"
  (sanitize_env && meson test -C "$SANITIZE_BUILD" --no-rebuild --num-processes "$JOBS" --print-errorlogs \
     "${SANITIZE_SUBSET[@]}")
}

run_tests() {
  install_packages
  local build_dir=$BUILD
  if [ "${1:-}" = --sanitize ]; then
    build_sanitize
    sanitize_env
    build_dir=$SANITIZE_BUILD
  else
    build
  fi
  say "running the test suite (meson test) in $build_dir"
  local rc=0
  meson test -C "$build_dir" --num-processes "$JOBS" --print-errorlogs || rc=$?
  local logs=("$build_dir/meson-logs/testlog.json")
  if [ "${1:-}" = --sanitize-subset ]; then
    cp "$build_dir/meson-logs/testlog.json" "$build_dir/meson-logs/testlog-suite.json"
    run_sanitized_subset || rc=$?
    logs=("$build_dir/meson-logs/testlog-suite.json" "$SANITIZE_BUILD/meson-logs/testlog.json")
  fi
  # No error of the suite may speak a library's words (issue 46).
  python3 tests/library_words.py "${logs[@]}" || rc=1
  # One plain summary line for tools that read the last line of a test run.
  python3 - "${logs[@]}" <<'PY' || true
import json, os, sys
results = [json.loads(line)["result"] for path in sys.argv[1:] if os.path.exists(path)
           for line in open(path) if line.strip()]
passed = sum(r == "OK" for r in results)
skipped = sum(r == "SKIP" for r in results)
print(f"{passed} passed, {len(results) - passed - skipped} failed, {skipped} skipped")
PY
  return $rc
}

case "${1:-}" in
  demo) demo ;;
  test) run_tests "${2:-}" ;;
  build) install_packages; build ;;
  bundle)
    case "${2:-}" in
      "") ;;
      --cuda-from-target) export FRUGAL_BUNDLE_CUDA_FROM_TARGET=1 ;;
      *) echo "usage: bash apps/dev.sh bundle [--cuda-from-target]" >&2; exit 2 ;;
    esac
    bundle ;;
  bundle-tree) bundle_tree "${2:?usage: bash apps/dev.sh bundle-tree DIR (needs a build)}" ;;
  *) echo "usage: bash apps/dev.sh demo|test [--sanitize|--sanitize-subset]|build|bundle" >&2; exit 2 ;;
esac
