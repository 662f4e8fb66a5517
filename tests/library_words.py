#!/usr/bin/env python3
"""Fails when any test of the suite printed an error in a library's words (issue 46): nlohmann's
"[json.exception...", std::bad_alloc, basic_filebuf, cereal's "Failed to read", map::at, oneDNN's
"could not create a primitive". frugal's errors name the flag, the file and line in the user's terms.
Usage: python3 tests/library_words.py build/meson-logs/testlog.json [...] (apps/dev.sh test runs it
after the suite; the fuzz targets check their own errors, tests/fuzz/library_words.h)."""
import json
import os
import re
import sys

PATTERNS = [r"\[json\.exception\.", r"\bbad_alloc\b", r"basic_filebuf", r"basic_string::", r"Failed to read \d+ bytes",
            r"\bmap::at\b", r"vector::_M_", r"could not create a primitive", r"terminate called after",
            r"what\(\):  std::", r"stoul\b|stoull\b"]
LIBRARY = re.compile("|".join(PATTERNS))

found = 0
for path in sys.argv[1:]:
    if not os.path.exists(path):
        continue
    for line in open(path):
        if not line.strip():
            continue
        test = json.loads(line)
        for stream in ("stdout", "stderr"):
            for text in (test.get(stream) or "").splitlines():
                if LIBRARY.search(text):
                    found += 1
                    if found <= 20:
                        print(f"library words in the output of test '{test['name']}': {text.strip()[:300]}")
if found:
    print(f"tests/library_words.py: {found} line(s) of the suite's output speak a library's words, not frugal's")
    sys.exit(1)
print("tests/library_words.py: no library words in the suite's output")
