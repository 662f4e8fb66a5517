# Helpers the shell tests source (after setting TMP, their scratch folder):
#   run CMD...               run CMD quietly; on failure print its output and exit 1
#   fails_with TEXT CMD...   CMD must fail and its output contain TEXT (a literal string)
run() { echo "+ $*"; "$@" > "$TMP/last.log" 2>&1 || { cat "$TMP/last.log"; exit 1; }; }
fails_with() {
  local text=$1; shift
  echo "+ $* (must fail: $text)"
  if "$@" > "$TMP/fail.log" 2>&1; then cat "$TMP/fail.log"; echo "succeeded, expected a failure"; exit 1; fi
  grep -qF -- "$text" "$TMP/fail.log" || { cat "$TMP/fail.log"; echo "the error does not say '$text'"; exit 1; }
}
