"""How a hostile-input case ended, for bench/hostile/run.py and bench/hostile/newer.py:
  refused   a non-zero exit with frugal's words     warned   it ran, with a `frugal: warning:`
  ran       it ran (valid input)
  CRASH     killed by a signal                      HANG     over the time limit
  LIBRARY   a library's words in the output (json.exception, bad_alloc, basic_filebuf, ...)
  SILENT    a wrong result without a word (the case's own oracle says what)"""
import re

LIBRARY = re.compile(r"\[json\.exception|bad_alloc|basic_filebuf|basic_string::|Failed to read \d+ bytes|map::at|"
                     r"vector::_M_|could not create a primitive|terminate called|stoul|Segmentation|"
                     r"filesystem error|what\(\)")


def kind_of(rc, out, wrong=None):
    """rc: the exit status (None: timed out); out: what it printed; wrong: the oracle's text when the
    result is silently wrong (checked only for a run that did not crash, hang or speak a library)."""
    if rc is None:
        return "HANG"
    if rc < 0 or rc > 128:
        return "CRASH"
    if LIBRARY.search(out):
        return "LIBRARY"
    if wrong:
        return "SILENT"
    if rc != 0:
        return "refused"
    return "warned" if "warning" in out else "ran"


def said(out, width=200):
    """The line of `out` that says most: the last error or warning, else a flag's message, else the last."""
    lines = [l for l in out.strip().splitlines() if l.strip()]
    pick = [l for l in lines if "error" in l or "warning" in l] or [l for l in lines if l.startswith("--")][:1]
    return (pick[-1] if pick else lines[-1] if lines else "")[:width]
