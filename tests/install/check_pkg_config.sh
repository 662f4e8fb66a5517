#!/usr/bin/env bash
# Installs frugal into a scratch directory and builds the API example the way a user would:
# with nothing but `pkg-config --cflags --libs frugal`. Then runs it on a tiny generated data set, and
# the Predictor example on a checkpoint of `frugal train`.
set -euo pipefail
BUILD=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
meson install -C "$BUILD" --no-rebuild --destdir "$TMP/root" --quiet >/dev/null
PREFIX=$(meson introspect "$BUILD" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
PC_DIR=$(dirname "$(find "$TMP/root" -name frugal.pc | head -1)")
export PKG_CONFIG_PATH="$PC_DIR"
FLAGS=$(pkg-config --define-variable=prefix="$TMP/root$PREFIX" --cflags --libs frugal)
echo "pkg-config --cflags --libs frugal -> $FLAGS"
# The umbrella header reaches only public headers: every one it includes is installed (it compiles
# from the installed folder alone) and none is internal or a dependency's.
CFLAGS=$(pkg-config --define-variable=prefix="$TMP/root$PREFIX" --cflags frugal)
printf '#include <frugal/frugal.h>\nint main() { return 0; }\n' > "$TMP/umbrella.cpp"
g++ -std=c++20 -M $CFLAGS "$TMP/umbrella.cpp" | tr ' \\' '\n\n' | grep -v '^$' > "$TMP/umbrella.deps"
FORBIDDEN='nlohmann/|/fmt/|core/backend\.h|core/backend_ops\.h|comm/codec\.h|comm/dct/|comm/frame\.h|comm/transport|kernels/|/mpi\.h|/zmq\.h|dnnl|oneapi/|/tbb/|cuda|cereal/'
if grep -E "$FORBIDDEN" "$TMP/umbrella.deps"; then
  echo "FAIL: <frugal/frugal.h> reaches the internal or third-party headers above"; exit 1
fi
if grep -E "^$SRC/" "$TMP/umbrella.deps"; then
  echo "FAIL: <frugal/frugal.h> reached the source tree instead of the installed headers"; exit 1
fi
# The backend's ops and the structs they take are not installed: the API shows handles only.
if find "$TMP/root" -path '*include/frugal/core/backend*.h' | grep .; then
  echo "FAIL: the backend's op interface is installed"; exit 1
fi
echo "ok: <frugal/frugal.h> compiles from the installed headers alone ($(grep -c "$TMP/root" "$TMP/umbrella.deps") of them) and reaches no internal or third-party header"
# A sanitizer build's libfrugal needs its programs linked with the same runtime (ASan must come
# first in the library list): a user of such a build passes the same -fsanitize.
SANITIZE=$(meson introspect "$BUILD" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="b_sanitize"][0])')
[ "$SANITIZE" = none ] || FLAGS="-fsanitize=$SANITIZE $FLAGS"
g++ -std=c++20 -O1 "$SRC/apps/examples/train_xmc.cpp" -o "$TMP/train_xmc" $FLAGS
g++ -std=c++20 -O1 "$SRC/apps/examples/predict_xmc.cpp" -o "$TMP/predict_xmc" $FLAGS
g++ -std=c++20 -O1 "$SRC/apps/examples/train_dlrm.cpp" -o "$TMP/train_dlrm" $FLAGS
LIBDIR=$(dirname "$(find "$TMP/root" -name 'libfrugal.so' | head -1)")
"$BUILD/apps/frugal" data synth-xmc --features 500 --labels 50 --train 400 --test 100 --nnz 10 \
  --labels-per-point 2 --seed 3 --out "$TMP/data" >/dev/null
(cd "$TMP" && LD_LIBRARY_PATH="$LIBDIR" ./train_xmc data/train.txt data/test.txt)
test -f "$TMP/train_xmc.ckpt/manifest.json"
# The Predictor on a checkpoint of `frugal train`: one line of top-3 labels per test point.
"$BUILD/apps/frugal" train --train "$TMP/data/train.txt" --test "$TMP/data/test.txt" --epochs 1 --hidden 16 \
  --threads 1 --quiet --checkpoint "$TMP/ckpt" >/dev/null
LD_LIBRARY_PATH="$LIBDIR" "$TMP/predict_xmc" "$TMP/ckpt" "$TMP/data/test.txt" 3 > "$TMP/predictions.txt"
test "$(wc -l < "$TMP/predictions.txt")" = 100
# DLRM through the API; its checkpoint read back by `frugal evaluate`.
"$BUILD/apps/frugal" data synth-ctr --train 3000 --test 500 --seed 2 --out "$TMP/ctr" >/dev/null
(cd "$TMP" && LD_LIBRARY_PATH="$LIBDIR" ./train_dlrm ctr/train.tsv ctr/test.tsv)
"$BUILD/apps/frugal" evaluate --model "$TMP/train_dlrm.ckpt" --test "$TMP/ctr/test.tsv" | grep -c "^samples 500$" > /dev/null
echo "OK: programs built from the installed headers and pkg-config train, checkpoint and predict"
