#!/usr/bin/env bash
# The bundle (`bash apps/dev.sh bundle`) runs on a machine without Debian packages:
#  1. the tree (`apps/dev.sh bundle-tree`, the bundle without compression) is packed with tar and
#     unpacked into an empty directory;
#  2. ldd, in a clean environment, resolves every library of every executable and library of the
#     tree inside the tree's lib/ or to glibc (nothing from /usr/lib/x86_64-linux-gnu, /usr/local);
#  3. `frugal data synth-xmc` and `frugal train` run from the tree with `env -i PATH=/usr/bin:/bin`,
#     and, where a mount namespace can be made (root), once more with every library directory but
#     glibc's hidden (what a machine without the packages looks like);
#  4. the check is checked: with one library deleted from lib/, steps 2 and 3 must fail; restored,
#     they pass again;
#  5. in a CUDA build, the --cuda-from-target tree (FRUGAL_BUNDLE_CUDA_FROM_TARGET=1) has no CUDA
#     runtime or cuBLAS, says so in MANIFEST, fails to start without them and starts with them.
# Usage: test_bundle.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
SRC=$1
BUILD=$2
command -v patchelf > /dev/null || { echo "SKIP: patchelf is not installed (bash apps/dev.sh build installs it)"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
say() { printf '==> %s\n' "$*"; }

# glibc's libraries and the kernel's vdso (and the GPU driver's libcuda, skipped in check_libs): the
# only ones allowed outside the bundle. Written out here rather than taken from apps/dev.sh, so
# that the test checks dev.sh instead of repeating it.
GLIBC=" linux-vdso.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2 librt.so.1 
  libresolv.so.2 libutil.so.1 libanl.so.1 libnsl.so.1 libthread_db.so.1 "

say "bundle tree from $BUILD"
FRUGAL_BUILD_DIR=$BUILD bash "$SRC/apps/dev.sh" bundle-tree "$TMP/stage"
(cd "$TMP/stage" && tar -cf "$TMP/bundle.tar" frugal-*)
rm -rf "$TMP/stage"
mkdir "$TMP/unpacked"
tar -C "$TMP/unpacked" -xf "$TMP/bundle.tar"
B=$(echo "$TMP"/unpacked/frugal-*)
[ -x "$B/bin/frugal" ] && [ -f "$B/lib/libfrugal.so" ] || { echo "bin/frugal or lib/libfrugal.so missing in $B"; exit 1; }
for t in test_kernels test_core test_layers; do
  [ -x "$B/bin/$t" ] || { echo "bin/$t missing in the bundle"; exit 1; }
done
for f in bench/gpu/run.sh bench/baselines/torch_xmc.py MANIFEST; do
  [ -f "$B/$f" ] || { echo "$f missing in the bundle"; exit 1; }
done
ls "$B/lib" | grep -c '^libstdc++\.so' > /dev/null || { echo "libstdc++ is not in the bundle's lib/"; exit 1; }

# check_libs: every ELF file of the tree resolves each library inside $B/lib or to glibc.
check_libs() {
  local f out bad=0 n=0
  for f in "$B"/bin/* "$B"/lib/*; do
    [ "$(head -c 4 "$f" | tail -c 3)" = ELF ] || continue
    n=$((n + 1))
    out=$(env -i PATH=/usr/bin:/bin ldd "$f" 2>&1) || { echo "ldd $f failed: $out"; bad=1; continue; }
    while read -r name arrow path _; do
      case "$name" in libcuda.so*|libnvidia-*) continue ;; esac   # the GPU driver's: the target's own
      if [ "$arrow" = "=>" ]; then
        [ "$path" = "not" ] || path=$(realpath -m "$path")   # "$B/bin/../lib/x" -> "$B/lib/x"
        case "$path" in
          "$B"/lib/*) ;;
          *) case "$GLIBC" in *" $name "*) ;; *) echo "${f#"$B"/}: $name => $path (outside the bundle)"; bad=1 ;; esac ;;
        esac
      else
        case "$GLIBC" in *" $(basename "$name") "*) ;; *) echo "${f#"$B"/}: unexpected ldd line: $name $arrow $path"; bad=1 ;; esac
      fi
    done < <(sed 's/^[[:space:]]*//' <<<"$out" | grep -v 'statically linked')
  done
  [ $bad -eq 0 ] && echo "ldd: all libraries of $n ELF files resolve inside the bundle or to glibc"
  return $bad
}

# isolated CMD...: CMD in a mount namespace where /usr/lib/x86_64-linux-gnu holds only glibc and
# /usr/local and the loader cache are empty. Returns 2 when no namespace can be made here.
ISOLATION=no
if [ "$(id -u)" -eq 0 ] && unshare -m --propagation private true 2> /dev/null; then ISOLATION=yes; fi
isolated() {
  [ $ISOLATION = yes ] || return 2
  mkdir -p "$TMP/glibc" "$TMP/empty"
  : > "$TMP/empty-cache"
  local l
  for l in $GLIBC; do [ -e "/usr/lib/x86_64-linux-gnu/$l" ] && cp -L "/usr/lib/x86_64-linux-gnu/$l" "$TMP/glibc/"; done
  unshare -m --propagation private /bin/bash -c '
    set -e
    mount --bind "$1" /usr/local
    mount --bind "$2" /etc/ld.so.cache
    mount --bind "$3" /usr/lib/x86_64-linux-gnu
    shift 3
    exec /usr/bin/env -i PATH=/usr/bin:/bin "$@"' _ "$TMP/empty" "$TMP/empty-cache" "$TMP/glibc" "$@"
}

# run_bundle: synth-xmc and train from the unpacked tree, clean environment, then the same isolated.
run_bundle() {
  local data=$TMP/data
  rm -rf "$data" "$TMP/m.jsonl"
  env -i PATH=/usr/bin:/bin "$B/bin/frugal" data synth-xmc --features 300 --labels 40 --train 300 --test 60 \
    --nnz 10 --labels-per-point 2 --seed 1 --out "$data" > "$TMP/run.log" 2>&1 || { cat "$TMP/run.log"; return 1; }
  env -i PATH=/usr/bin:/bin "$B/bin/frugal" train --train "$data/train.txt" --test "$data/test.txt" --epochs 1 \
    --hidden 8 --tables 4 --threads 1 --quiet --metrics "$TMP/m.jsonl" > "$TMP/run.log" 2>&1 \
    || { cat "$TMP/run.log"; return 1; }
  grep -q '"p@1"' "$TMP/m.jsonl" || { echo "frugal train wrote no epoch record"; return 1; }
  echo "clean environment: synth-xmc and train ran, $(grep -o '"p@1":[0-9.e-]*' "$TMP/m.jsonl")"
  local rc=0
  isolated "$B/bin/frugal" train --train "$data/train.txt" --test "$data/test.txt" --epochs 1 --hidden 8 \
    --tables 4 --threads 1 --quiet > "$TMP/iso.log" 2>&1 || rc=$?
  case $rc in
    0) echo "isolated (only glibc on the system): train ran" ;;
    2) [ $ISOLATION = no ] && echo "isolated run skipped: no mount namespace here (needs root)" || { cat "$TMP/iso.log"; return 1; } ;;
    *) cat "$TMP/iso.log"; return 1 ;;
  esac
}

say "checking the unpacked bundle $B"
check_libs
run_bundle
say "the bundle's parity harness (bin/test_kernels), clean environment"
env -i PATH=/usr/bin:/bin "$B/bin/test_kernels" > "$TMP/kernels.log" 2>&1 || { cat "$TMP/kernels.log"; exit 1; }
grep '^parity:' "$TMP/kernels.log" || true

# The check is checked: one library removed, both halves must fail.
victim=$(ls "$B/lib" | grep -E '^libtbb\.so' | head -1)
victim=${victim:-$(ls "$B/lib" | grep -v '^libfrugal' | head -1)}
say "deliberate failure: removing lib/$victim"
mv "$B/lib/$victim" "$TMP/$victim"
if check_libs > "$TMP/neg.log" 2>&1; then cat "$TMP/neg.log"; echo "FAIL: ldd check passed without lib/$victim"; exit 1; fi
grep -F "$victim" "$TMP/neg.log" | head -3
echo "ldd check failed as it must"
if [ $ISOLATION = yes ]; then
  rc=0; isolated "$B/bin/frugal" --help > "$TMP/neg.log" 2>&1 || rc=$?
  [ $rc -ne 0 ] || { echo "FAIL: isolated frugal started without lib/$victim"; exit 1; }
  grep -F "$victim" "$TMP/neg.log" | head -1
  echo "isolated run failed as it must"
fi
mv "$TMP/$victim" "$B/lib/$victim"
say "restored lib/$victim"
check_libs

# A --cuda-from-target bundle (CUDA builds only): no CUDA runtime or cuBLAS in lib/, MANIFEST names
# them, and frugal runs once the target's folder is on LD_LIBRARY_PATH (as bench/gpu/run.sh sets it).
if ls "$B/lib" | grep -c '^libcudart' > /dev/null; then
  say "bundle tree with FRUGAL_BUNDLE_CUDA_FROM_TARGET=1"
  full_size=$(du -sh "$B" | cut -f1)
  rm -rf "$TMP/unpacked"
  FRUGAL_BUILD_DIR=$BUILD FRUGAL_BUNDLE_CUDA_FROM_TARGET=1 bash "$SRC/apps/dev.sh" bundle-tree "$TMP/slim"
  S=$(echo "$TMP"/slim/frugal-*)
  if ls "$S/lib" | grep -cE '^lib(cudart|cublas)' > /dev/null; then ls "$S/lib"; echo "FAIL: CUDA libraries in the slim bundle"; exit 1; fi
  grep -q '^from the target: libcublas.so.13 libcublasLt.so.13 libcudart.so.13$' "$S/MANIFEST" ||
    { grep -v '^[0-9a-f]\{64\}' "$S/MANIFEST"; echo "FAIL: MANIFEST does not name the libraries from the target"; exit 1; }
  cuda_dir=$(dirname "$(ldd "$BUILD/libfrugal.so" | awk '$1 ~ /^libcublas\.so/ { print $3 }')")
  # Without them (only where a mount namespace hides /usr/local and the loader cache): no start.
  if [ $ISOLATION = yes ]; then
    if isolated "$S/bin/frugal" --help > "$TMP/slim.log" 2>&1; then
      echo "FAIL: the slim frugal started without the target's CUDA libraries"; exit 1
    fi
    grep -q "libcu.*: cannot open shared object file" "$TMP/slim.log" || { cat "$TMP/slim.log"; exit 1; }
    echo "isolated, without the CUDA libraries: the slim frugal does not start, as it must"
  fi
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$cuda_dir" "$S/bin/frugal" --help > "$TMP/slim.log" 2>&1 ||
    { cat "$TMP/slim.log"; echo "FAIL: the slim frugal does not start with $cuda_dir"; exit 1; }
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$cuda_dir" ldd "$S/lib/libfrugal.so" | grep -c "libcublas.so.13 => $cuda_dir/" > /dev/null ||
    { echo "FAIL: libcublas does not come from LD_LIBRARY_PATH=$cuda_dir"; exit 1; }
  echo "slim bundle: $(du -sh "$S" | cut -f1) unpacked (the full one: $full_size), runs with LD_LIBRARY_PATH=$cuda_dir"
fi
echo "bundle OK"
