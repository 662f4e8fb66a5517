# Shared by bench/single_node/run.sh and sweep.sh (sourced from the repository root, after SYSTEMS,
# FRUGAL and OUT are set): messages, the malloc tunables both sides get, the build, Debian packages
# and the run's env.txt.

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }
wants() { case " $SYSTEMS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# PyTorch re-allocates ~500 MB of temporaries a step; without these glibc tunables each step page-
# faults all of it in again, which in this VM costs more than the arithmetic. torch_xmc.py sets them
# itself; exporting them here gives frugal the very same allocator settings, so neither side gains.
export GLIBC_TUNABLES=${FRUGAL_BENCH_GLIBC_TUNABLES-glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4000000000}
[ -n "$GLIBC_TUNABLES" ] || unset GLIBC_TUNABLES

# build_frugal: `apps/dev.sh build` (ninja only rebuilds what changed), or, with
# FRUGAL_BENCH_NO_BUILD=1, the binary as it is.
build_frugal() {
  if [ "${FRUGAL_BENCH_NO_BUILD:-0}" = 1 ]; then
    [ -x "$FRUGAL" ] || { echo "FRUGAL_BENCH_NO_BUILD=1 but $FRUGAL does not exist" >&2; exit 1; }
    say "using $FRUGAL as it is (FRUGAL_BENCH_NO_BUILD=1)"
  else
    say "building frugal"
    run bash apps/dev.sh build
  fi
}

# install_missing PKG...: apt-get install those of the Debian packages that are not installed.
install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  say "installing missing Debian packages: ${missing[*]}"
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  run $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive run $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# The baseline's packages: Debian's torch and OpenBLAS (without OpenBLAS torch falls back to the
# reference BLAS and runs ~10x slower: an unfair baseline).
TORCH_PACKAGES=(python3-torch libopenblas0-pthread)

# write_env: date, commit, CPU, load average and malloc tunables to $OUT/env.txt.
write_env() {
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "GLIBC_TUNABLES: ${GLIBC_TUNABLES:-unset}"
  } > "$OUT/env.txt"
}
