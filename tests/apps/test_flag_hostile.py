#!/usr/bin/env python3
"""Generated hostile cases for every flag of every command (issue 62, item 9).

The flags are not listed here: `frugal --list-flags` (hidden) prints every option of every command
as CLI11 declares it, with its type and the range of frugal's own checks. For each one this test
derives the values a hostile or careless user gives: just outside its range, 0, -1, nan, inf,
1e300, 2^64, 1e39 and 1e-50 (a float's overflow and underflow), 1e30, empty, garbage text; a flag
without a value is given bare and as --flag=garbage. Each case runs the command on tiny data (made
once here) with a timeout, and must:
  - end (no hang: a timeout is a failure) and not by a signal (exit code < 128);
  - exit 0 (the value is legitimately accepted and the command ran), 1 or 2 (an error);
  - on an error, name the flag as typed (a file or text value may be named by its value instead:
    "d/none.txt: no such file"), unless the command fails the same way without the value (e.g.
    `bench comm` outside mpirun);
  - print no library words (tests/library_words.py's list).
A new flag is covered without anyone writing a case; the test fails when a declared flag gets none.
Usage: test_flag_hostile.py FRUGAL SOURCE_ROOT [--jobs N] [--only COMMAND]"""
import ast
import concurrent.futures
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

FRUGAL = os.path.realpath(sys.argv[1])
SRC = os.path.realpath(sys.argv[2])
JOBS = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 2
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
CASE_TIMEOUT_S = 20
# Bare flags that act beyond this test's scratch folder: given only with a bad value.
NOT_BARE = {("launch", "--cleanup-stale")}


def library_words():
    """The patterns of tests/library_words.py (one list, read from its source)."""
    tree = ast.parse(open(os.path.join(SRC, "tests", "library_words.py")).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PATTERNS" for t in node.targets):
            return re.compile("|".join(ast.literal_eval(node.value)))
    raise SystemExit("tests/library_words.py: no PATTERNS")


LIBRARY = library_words()


def run(args, cwd, timeout=CASE_TIMEOUT_S):
    """(exit code, output); a signal is 128 + its number, a timeout 124."""
    try:
        for attempt in range(5):
            try:
                r = subprocess.run([FRUGAL, *args], cwd=cwd, capture_output=True, timeout=timeout,
                                   stdin=subprocess.DEVNULL)
                break
            except OSError:  # the binary relinked under us (a build beside the test): once more
                if attempt == 4:
                    raise
                time.sleep(2)
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    rc = r.returncode if r.returncode >= 0 else 128 - r.returncode
    return rc, r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def drain(fifo):
    """Reads whatever is written into `fifo`, writer after writer, until the test ends."""
    while True:
        with open(fifo, "rb") as f:
            while f.read(1 << 16):
                pass


def must(args, cwd):
    rc, out = run(args, cwd, timeout=300)
    if rc != 0:
        raise SystemExit(f"fixture: frugal {' '.join(args)} failed ({rc}):\n{out}")


def fixtures(tmp):
    """Tiny inputs every command can run on: an XMC set, a checkpoint, a calibration run's metrics,
    an IDX set, the GCIDE fixture."""
    d = os.path.join(tmp, "d")
    must(["data", "synth-xmc", "--features", "60", "--labels", "12", "--train", "60", "--test", "12", "--nnz", "5",
          "--labels-per-point", "2", "--seed", "1", "--out", d], tmp)
    train, test = os.path.join(d, "train.txt"), os.path.join(d, "test.txt")
    ck, metrics = os.path.join(tmp, "ck"), os.path.join(tmp, "m.jsonl")
    must(["train", "--train", train, "--test", test, "--epochs", "1", "--hidden", "8", "--tables", "2", "--threads", "1",
          "--quiet", "--checkpoint", ck, "--metrics", metrics], tmp)
    idx = os.path.join(tmp, "idx")
    os.makedirs(idx)
    for kind, n in (("train", 20), ("t10k", 10)):
        with open(os.path.join(idx, f"{kind}-images-idx3-ubyte"), "wb") as f:
            f.write(struct.pack(">IIII", 0x803, n, 2, 2) + bytes((7 * i) % 256 for i in range(n * 4)))
        with open(os.path.join(idx, f"{kind}-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
    g = os.path.join(SRC, "tests", "data", "fixtures", "gcide")
    base = {
        "": ["data", "stats", train],  # the top-level flags go before it
        "train": ["--train", train, "--test", test, "--epochs", "1", "--max-steps", "2", "--hidden", "8", "--tables",
                  "2", "--threads", "1", "--quiet"],
        "predict": ["--model", ck, "--input", test, "--out", "p.txt", "--threads", "1"],
        "evaluate": ["--model", ck, "--test", test, "--threads", "1"],
        "plan": ["--metrics", metrics, "--nodes", "2", "--cores", "2", "--link", "1gbit"],
        "launch": ["--ranks", "1", "--", "true"],
        "keygen": ["--output", "key"],
        "bench comm": [],
        "bench roofline": ["--threads", "1", "--array-mib", "1", "--table-mib", "1", "--repeats", "1", "--metrics",
                           metrics],
        "data stats": [train],
        "data pack": [train, "out.fpk"],
        "bench read": [train],
        "data shuffle": [train, "out.txt"],
        "data split": [train, "--out", "split"],
        "data fashion-mnist": ["--source", idx, "--out", "fm"],
        "data references": [train, test],
        "data gcide": ["--dict", os.path.join(g, "gcide.dict"), "--index", os.path.join(g, "gcide.index"), "--out",
                       "g", "--no-references"],
        "data synth-ctr": ["--train", "20", "--test", "5", "--vocab-scale", "0.01", "--out", "c"],
        "data synth-xmc": ["--features", "50", "--labels", "10", "--train", "20", "--test", "5", "--nnz", "5", "--out",
                           "x"],
        "plot": [metrics, "--out", "plots"],
    }
    return base


def just_outside(flag):
    """The values just below and above a flag's checked range."""
    out = []
    integral = flag["type"] in ("UINT", "INT")
    if "min" in flag:
        lo = flag["min"]
        if flag.get("min_open"):
            out.append(str(int(lo)) if integral else repr(lo))
        else:
            out.append(str(int(lo) - 1) if integral else repr(lo - max(abs(lo) * 1e-6, 1e-9)))
    if "max" in flag:
        hi = flag["max"]
        if flag.get("max_open"):
            out.append(str(int(hi)) if integral else repr(hi))
        else:
            out.append(str(int(hi) + 1) if integral else repr(hi + max(abs(hi) * 1e-6, 1e-9)))
    if "above" in flag:
        out.append("0" if integral else "-1e-30")
    return out


NUMBERS = ["0", "-1", "nan", "inf", "-inf", "1e300", "18446744073709551616", "1e39", "1e-50", "1e30", "", "garbage"]
TEXTS = ["", "garbage\x01text", "-1", "nan", "0", "18446744073709551616"]
# Special files where a file is read or written (made by fixtures()): none may block a reader or a
# writer, or feed one forever.
SPECIAL = {"fifo": "a FIFO", "zero": "a symlink to /dev/zero", "folder": "a directory"}


def values_of(flag):
    if not flag["takes_value"]:
        return [None, "=garbage"]
    if flag["type"] in ("UINT", "INT", "FLOAT"):
        return just_outside(flag) + NUMBERS
    return TEXTS + [os.path.join(SCRATCH, name) for name in SPECIAL]


def with_value(base, flag, value):
    """The base arguments with `flag` set to `value` (replacing the base's own value of it)."""
    name = flag["flag"]
    if flag["positional"]:
        # The base's positionals in declaration order: the tokens that are neither flags nor their values.
        positions = [k for k, t in enumerate(base) if not t.startswith("-") and (k == 0 or not base[k - 1].startswith("-")
                                                                              or base[k - 1] == "--")]
        which = POSITIONAL_ORDER.get((flag["command"], name), 0)
        target = positions[which] if which < len(positions) else None
        return [value if k == target else t for k, t in enumerate(base)] if target is not None else base + [value]
    args = list(base)
    if name in args and flag["takes_value"]:
        k = args.index(name)
        args[k + 1] = value
        return args
    given = [name] if value is None else [name + value] if value.startswith("=") else [name, value]
    if "--" in args:  # launch: flags before the command
        k = args.index("--")
        return args[:k] + given + args[k:]
    return args + given


POSITIONAL_ORDER = {}
SCRATCH = tempfile.mkdtemp(prefix="frugal-flag-hostile-")


def main():
    listing = subprocess.run([FRUGAL, "--list-flags"], capture_output=True, text=True)
    if listing.returncode != 0 or not listing.stdout.strip():
        raise SystemExit(f"frugal --list-flags failed:\n{listing.stdout}{listing.stderr}")
    flags = [json.loads(line) for line in listing.stdout.splitlines() if line.strip()]
    seen_positionals = {}
    for f in flags:
        if f["positional"]:
            POSITIONAL_ORDER[(f["command"], f["flag"])] = seen_positionals.get(f["command"], 0)
            seen_positionals[f["command"]] = seen_positionals.get(f["command"], 0) + 1
    if ONLY is not None:
        flags = [f for f in flags if f["command"] == ONLY]
    tmp = SCRATCH
    try:
        os.mkfifo(os.path.join(tmp, "fifo"))
        # A FIFO given for an output is written as a pipe (core/staged_file.h): a reader drains it, so
        # that only a reader's FIFO (refused by type before it is opened) could block.
        threading.Thread(target=drain, args=(os.path.join(tmp, "fifo"),), daemon=True).start()
        os.symlink("/dev/zero", os.path.join(tmp, "zero"))
        os.mkdir(os.path.join(tmp, "folder"))
        base = fixtures(tmp)
        missing = sorted({f["command"] for f in flags} - set(base))
        if missing:
            raise SystemExit(f"no base arguments for the command(s) {missing}: add them to fixtures()")
        # What each command does without a hostile value: a case that fails exactly the same way
        # accepted the value (bench comm outside mpirun).
        baseline = {}
        for command, args in base.items():
            cwd = os.path.join(tmp, "baseline-" + command.replace(" ", "-"))
            os.makedirs(cwd)
            prefix = [] if command == "" else command.split()
            baseline[command] = run(prefix + args, cwd)
        cases = []
        for f in flags:
            for value in values_of(f):
                if value is None and (f["command"], f["flag"]) in NOT_BARE:
                    continue
                prefix = [] if f["command"] == "" else f["command"].split()
                args = with_value(base[f["command"]], f, value)
                if f["command"] == "":
                    args = ([f["flag"]] if value is None else [f["flag"] + value] if value.startswith("=")
                            else [f["flag"], value]) + base[""]
                    prefix = []
                cases.append((f, value, prefix + args))
        t0 = time.time()

        def one(i_case):
            i, (f, value, args) = i_case
            cwd = os.path.join(tmp, "case", str(i))
            os.makedirs(cwd)
            started = time.time()
            rc, out = run(args, cwd)
            shutil.rmtree(cwd, ignore_errors=True)
            return f, value, args, rc, out, time.time() - started

        failures, covered, slowest = [], set(), []
        with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
            for f, value, args, rc, out, seconds in pool.map(one, enumerate(cases)):
                covered.add((f["command"], f["flag"]))
                slowest.append((seconds, f["command"], f["flag"], value))
                shown = "frugal " + " ".join(repr(a) if (not a or not a.isprintable() or " " in a) else a for a in args)
                problem = None
                if rc == 124:
                    problem = f"no answer within {CASE_TIMEOUT_S} s (a hang)"
                elif rc >= 128:
                    problem = f"killed by signal {rc - 128}"
                elif rc not in (0, 1, 2):
                    problem = f"exit code {rc} (expected 0, 1 or 2)"
                elif LIBRARY.search(out):
                    problem = "library words: " + LIBRARY.search(out).group(0)
                elif rc != 0 and (rc, out) != baseline[f["command"]]:
                    typed = f["flag"]
                    names = typed in out
                    if not names and (f["positional"] or f["type"] not in ("UINT", "INT", "FLOAT")) and value:
                        names = value in out  # a path or text named by its value
                    if not names:
                        problem = "the error does not name " + typed
                if problem:
                    tail = "\n      ".join(out.strip().splitlines()[-4:])
                    failures.append(f"{shown}\n    {problem}; exit {rc}; output:\n      {tail}")
        declared = {(f["command"], f["flag"]) for f in flags}
        commands = {f["command"] for f in flags}
        print(f"{len(cases)} cases in {time.time() - t0:.0f} s ({JOBS} at a time); slowest:")
        for seconds, command, flag, value in sorted(slowest, reverse=True)[:5]:
            print(f"  {seconds:5.1f} s  frugal {command} {flag} {value!r}")
        print(f"covered {len(covered & declared)} of {len(declared)} declared flags across {len(commands)} commands")
        for f in sorted(declared - covered):
            failures.append(f"no case for frugal {f[0]} {f[1]}")
        for text in failures[:300]:
            print("FAIL: " + text)
        if failures:
            print(f"{len(failures)} failing case(s)")
            return 1
        print("OK: every flag of every command refuses hostile values in frugal's words, or accepts them and runs")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
