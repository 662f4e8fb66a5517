#!/usr/bin/env python3
"""A generated hostile-input campaign over the newer faces (issue 62): `frugal plot`, `frugal plan`,
the pipeline trainer, the files beside a checkpoint, divergence, outputs that cannot be written, and
random flag combinations of every command, the flags taken from `frugal --list-flags` (so a new flag
is in the campaign without anyone writing a case). Cases are drawn from a seeded generator: another
--seed gives other cases (a held-out campaign), the same seed the same ones.

Each case runs with a time limit and is classified as bench/hostile/run.py classifies:
  refused / warned / ran     fine
  CRASH (a signal), HANG (over the limit), LIBRARY (a library's words in the output),
  SILENT (a wrong result without a word: the case's own oracle says what is wrong), INJECTED (a
  command hidden in a name ran)
Usage: python3 bench/hostile/newer.py FRUGAL [OUT_DIR] [--seed N] [--cases N]
Prints the cases that are not fine, the totals per kind and per face; exit 1 on any bad kind."""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outcome import kind_of, said  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("frugal")
ap.add_argument("out", nargs="?", default="/tmp/frugal-hostile-newer")
ap.add_argument("--seed", type=int, default=62)
ap.add_argument("--cases", type=int, default=1000, help="about how many cases in all")
ap.add_argument("--show", action="store_true", help="print every case, not only the bad ones")
args = ap.parse_args()
F = os.path.abspath(args.frugal)
OUT = os.path.abspath(args.out)
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
os.chdir(OUT)
rng = random.Random(args.seed)
SCALE = max(1, args.cases) / 1000.0
results = []  # (face, name, kind, last line)
MARK = os.path.join(OUT, "INJECTED")


def n(count):
    return max(1, int(round(count * SCALE)))


def run(argv, timeout=60, stdout=None):
    try:
        p = subprocess.run([F, *argv], capture_output=stdout is None, stdout=stdout, stderr=subprocess.PIPE if stdout else None,
                           text=True, errors="replace", timeout=timeout)
        return p.returncode, (p.stdout or "") + (p.stderr or "")
    except subprocess.TimeoutExpired:
        return None, ""


def case(face, name, argv, oracle=None, timeout=60, stdout=None):
    """Runs `frugal ARGV`; `oracle(rc, out)` returns a text when the result is silently wrong."""
    rc, out = run(argv, timeout, stdout)
    injected = os.path.exists(MARK)
    if injected:
        os.remove(MARK)
    kind = kind_of(rc, out)
    wrong = oracle(rc, out) if oracle and kind in ("refused", "warned", "ran") else None
    if injected:
        kind = "INJECTED"
    elif wrong:
        kind, out = "SILENT", wrong
    results.append((face, name, kind, said(out)))
    return rc, out


# ---- Data and runs the cases start from ------------------------------------------------------
def must(argv):
    rc, out = run(argv, timeout=300)
    if rc != 0:
        sys.exit(f"set-up failed: frugal {' '.join(argv)}\n{out}")


T = ["--threads", "1", "--quiet", "--hidden", "16"]
must(["data", "synth-xmc", "--features", "300", "--labels", "30", "--train", "600", "--test", "100", "--seed", "1",
      "--out", "d"])
must(["data", "synth-xmc", "--features", "300", "--labels", "30", "--train", "600", "--test", "100", "--seed", "2",
      "--out", "e"])
must(["train", "--train", "d/train.txt", "--test", "d/test.txt", "--epochs", "2", *T, "--metrics", "m.jsonl",
      "--checkpoint", "ck", "--infer", "ensemble"])
must(["train", "--train", "e/train.txt", "--test", "e/test.txt", "--epochs", "1", *T, "--checkpoint", "other",
      "--infer", "ensemble"])
must(["data", "synth-ctr", "--train", "600", "--test", "100", "--out", "c"])
TRAIN = ["train", "--train", "d/train.txt", "--test", "d/test.txt", "--epochs", "1", *T]

# Hostile text: what a name or value may hold.
PIECES = ["\n", "\r", "\t", "\"", "'", "\\", "$(touch " + MARK + ")", "`touch " + MARK + "`", "!touch " + MARK,
          "\nsystem \"touch " + MARK + "\"\n", "@x", ";", "|", "&", "-", "--", " ", "é", "\u202e", "%s%n", "..",
          "*", "?", "#", "{}", "\x01", "\x7f"]


def hostile_text(max_pieces=4):
    s = "".join(rng.choice(PIECES + ["a", "run", "b1"]) for _ in range(rng.randint(1, max_pieces)))
    return s.replace("/", "_").replace("\0", "_") or "x"


def no_nan(rc, out):
    return "a NaN or inf in the output of a run that succeeded" if rc == 0 and re.search(r"\b(-?nan|-?inf)\b", out) else None


def no_nan_but_given(argv):
    """no_nan, where a value given on the command line (a file named "nan") may be echoed back."""
    given = [a for a in argv if re.fullmatch(r"-?(nan|inf)", a, re.I)]

    def oracle(rc, out):
        for g in given:
            out = re.sub(r"(?<![\w.])" + re.escape(g) + r"(?![\w])", "", out)
        return no_nan(rc, out)
    return oracle


# ---- frugal plot: names and metrics files ----------------------------------------------------
def pngs_written(folder):
    def oracle(rc, out):
        if rc != 0:
            return None
        for chart in ("loss", "quality"):
            p = os.path.join(folder, chart + ".png")
            if not os.path.isfile(p) or os.path.getsize(p) < 1000:
                return f"exit 0 but {p} is missing or empty"
        return None
    return oracle


for i in range(n(150)):
    name, folder = hostile_text(), hostile_text()
    src = f"./{name}.jsonl"
    shutil.copy("m.jsonl", src)
    out_dir = f"./plots{i} {folder}"
    case("plot", f"names {name!r} / {folder!r}", ["plot", src, "--out", out_dir], pngs_written(out_dir))
epoch_lines = [l for l in open("m.jsonl") if '"event":"epoch"' in l]
VALUES = [None, True, "1", "x", -1, 0, 1e308, -1e308, 2 ** 64, [], {}, "NaN", 1.5, "\n"]
for i in range(n(120)):
    lines = list(open("m.jsonl"))
    for _ in range(rng.randint(1, 3)):
        j = rng.randrange(len(lines))
        how = rng.randrange(5)
        if how == 0:
            lines[j] = lines[j][: rng.randrange(len(lines[j]))] + "\n"
        elif how == 1:
            try:
                obj = json.loads(lines[j])
                key = rng.choice(list(obj.keys()) + ["epoch", "rank", "event", "loss", "p@1"])
                obj[key] = rng.choice(VALUES)
                lines[j] = json.dumps(obj) + "\n"
            except ValueError:
                pass
        elif how == 2:
            lines[j] = "[" * rng.choice([1, 10, 100000]) + "\n"
        elif how == 3:
            lines.insert(j, rng.choice(epoch_lines).replace('"epoch":', '"epoch":1e300,"x":'))
        else:
            lines[j] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))).decode("latin-1") + "\n"
    path = f"metrics{i}.jsonl"
    open(path, "w", encoding="latin-1").write("".join(lines))
    case("plot", f"mutated metrics {i}", ["plot", path, "--out", f"mp{i}"])

# ---- Flags of every command, drawn from --list-flags ------------------------------------------
flags = [json.loads(l) for l in subprocess.run([F, "--list-flags"], capture_output=True, text=True).stdout.splitlines()
         if l.strip()]
if not flags:
    sys.exit("frugal --list-flags printed nothing")
BAD = ["0", "-1", "nan", "inf", "-inf", "1e300", "18446744073709551616", "1e-320", "", "garbage", "1e39", "0x10",
       "3.5", "-0", "1,2,3", "9" * 40, "\n", "$(touch " + MARK + ")", "/dev/full", "/dev/zero"]
BASE = {  # what each command needs to get as far as its flags
    "train": ["--train", "d/train.txt", "--test", "d/test.txt", "--epochs", "1", "--threads", "1", "--quiet"],
    "predict": ["--model", "ck", "--input", "d/test.txt"],
    "evaluate": ["--model", "ck", "--test", "d/test.txt"],
    "plan": [],
    "plot": ["m.jsonl", "--out", "planplots"],
    "data synth-xmc": ["--out", "gen", "--train", "100", "--test", "10"],
    "data shuffle": ["d/test.txt", "shuffled.txt"],
    "data stats": ["d/test.txt"],
}
by_command = {}
for f in flags:
    if f["command"] and not f["positional"]:
        by_command.setdefault(f["command"], []).append(f)
commands = sorted(by_command)
for i in range(n(450)):
    command = rng.choice(commands)
    chosen = rng.sample(by_command[command], min(len(by_command[command]), rng.randint(1, 3)))
    argv = command.split() + list(BASE.get(command, []))
    for f in chosen:
        argv.append(f["flag"])
        if f["takes_value"]:
            argv.append(rng.choice(BAD + [f["default"] or "1"]))
    if command == "launch":
        argv += ["--", "true"]
    name = " ".join(a if len(a) < 30 else a[:27] + "..." for a in argv)
    case("flags", name, argv, no_nan_but_given(argv), timeout=60)

# ---- The pipeline trainer --------------------------------------------------------------------
for i in range(n(100)):
    stages = rng.choice(["1", "2", "3", "1", "2", "3", "0", "-1", "64", "1e9", "x"])
    extra = ["--pipeline", stages]
    if rng.random() < 0.6:
        extra += ["--micro-batches", rng.choice(["1", "2", "7", "0", "1000", "1e30", "-3"])]
    if rng.random() < 0.4:
        extra += ["--stage-split", rng.choice(["auto", "1,1", "2,1", "0,3", "1,1,1", "a,b", "", ",", "9999999999,1"])]
    if rng.random() < 0.3:
        extra += rng.choice([["--grid", "1x1x2"], ["--grid", "2x1x1"], ["--grid", "0x1x1"], ["--dropout", "0.1"],
                             ["--infer", "ensemble"], ["--clip-norm", "1"], ["--output-init", "centroid"],
                             ["--lr", "1e30"], ["--memory-limit", "1"], ["--on-divergence", "skip-batch"],
                             ["--valid-fraction", "0.1"], ["--layers", "16,16"]])
    case("pipeline", " ".join(extra), [*TRAIN, *extra], no_nan, timeout=90)

# ---- Files beside a checkpoint ---------------------------------------------------------------
MEMBERS = ["label_counts.bin", "label_centroids.bin", "nearest_points.bin"]
for i in range(n(90)):
    d = f"mem{i}"
    shutil.copytree("ck", d)
    member = rng.choice(MEMBERS)
    how = rng.randrange(5)
    swapped = False
    if how == 0:
        shutil.copy(f"other/{member}", f"{d}/{member}")
        swapped = True
    elif how == 1:
        data = bytearray(open(f"{d}/{member}", "rb").read())
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        open(f"{d}/{member}", "wb").write(data)
        swapped = True
    elif how == 2:
        os.remove(f"{d}/{member}")
        os.symlink(rng.choice(["/dev/zero", "/dev/null", "/nonexistent", "."]), f"{d}/{member}")
    elif how == 3:
        open(f"{d}/{member}", "r+b").truncate(rng.randrange(40))
        swapped = True
    else:
        os.remove(f"{d}/{member}")
    infer = rng.choice(["auto", "ensemble", "exact"])
    unchecked = rng.random() < 0.3

    def oracle(rc, out, swapped=swapped, unchecked=unchecked, member=member):
        if rc == 0 and swapped and not unchecked and "warning" not in out:
            # Only counts are read with --infer exact; ensemble reads all three.
            return f"a changed {member} was used without a word"
        return no_nan(rc, out)
    argv = ["evaluate", "--model", d, "--test", "d/test.txt", "--infer", infer]
    if unchecked:
        argv.append("--accept-unchecked-checkpoint")
    # exact inference reads no ensemble member: a changed centroid file then matters to nobody
    case("members", f"{member} #{how} infer {infer}{' unchecked' if unchecked else ''}", argv,
         oracle if (member == "label_counts.bin" or infer != "exact") else no_nan)

# ---- Divergence and values -------------------------------------------------------------------
lines = open("d/train.txt").read().split("\n")
for i in range(n(60)):
    extra = ["--lr", rng.choice(["1e30", "1e10", "3", "1e-3", "1e38"])]
    if rng.random() < 0.5:
        extra += ["--optimizer", rng.choice(["sgd", "adam", "adagrad", "rowwise-adagrad"])]
    if rng.random() < 0.3:
        extra += ["--on-divergence", rng.choice(["stop", "skip-batch"])]
    if rng.random() < 0.3:
        extra += ["--clip-norm", rng.choice(["1", "1e30"])]
    path = "d/train.txt"
    if rng.random() < 0.4:
        mutated = list(lines)
        j = rng.randrange(1, len(mutated) - 1)
        mutated[j] = mutated[j] + f" 7:{rng.choice(['1e37', '3e38', '1e20', '-1e30'])}"
        path = f"div{i}.txt"
        open(path, "w").write("\n".join(mutated))
    metrics = f"div{i}.jsonl"

    def diverged(rc, out, metrics=metrics):
        if rc == 0 and os.path.exists(metrics):
            for l in open(metrics):
                e = json.loads(l)
                if e.get("event") == "epoch" and not (isinstance(e.get("loss"), (int, float)) and abs(e["loss"]) < 1e300):
                    return f"exit 0 with an epoch loss of {e.get('loss')}"
        return no_nan(rc, out)
    case("divergence", " ".join(extra) + f" on {path}",
         ["train", "--train", path, "--test", "d/test.txt", "--epochs", "2", *T, "--metrics", metrics,
          "--checkpoint", f"divck{i}", *extra], diverged)

# ---- Outputs that cannot be written ----------------------------------------------------------
def must_fail(rc, out):
    return "exit 0 although its output could not be written" if rc == 0 else None


full = open("/dev/full", "w")
outputs = [
    (["predict", "--model", "ck", "--input", "d/test.txt"], True),
    (["evaluate", "--model", "ck", "--test", "d/test.txt", "--json"], True),
    (["predict", "--model", "ck", "--input", "d/test.txt", "--out", "/dev/full"], False),
    (["data", "shuffle", "d/test.txt", "/dev/full"], False),
    (["data", "synth-xmc", "--train", "50", "--test", "5", "--out", "/dev/full"], False),
    ([*TRAIN, "--metrics", "/dev/full"], False),
    (["plan", "--json", "/dev/full"], False),
    (["bench", "roofline", "--json", "/dev/full"], False),
    (["data", "stats", "d/test.txt"], True),
]
for i in range(n(30)):
    argv, to_stdout = outputs[i % len(outputs)]
    case("outputs", " ".join(argv) + (" > /dev/full" if to_stdout else ""), argv, must_fail,
         stdout=full if to_stdout else None)

# ---- Totals ----------------------------------------------------------------------------------
BAD_KINDS = ("CRASH", "HANG", "LIBRARY", "SILENT", "INJECTED")
kinds, faces = {}, {}
for face, name, kind, last in results:
    kinds[kind] = kinds.get(kind, 0) + 1
    faces.setdefault(face, {}).setdefault(kind, 0)
    faces[face][kind] += 1
    if kind in BAD_KINDS or args.show:
        print(f"{kind:8} {face:10} {name[:80]!r:82} {last}")
for face, k in faces.items():
    print(f"{face:10} " + ", ".join(f"{kind}: {c}" for kind, c in sorted(k.items())))
print("\n" + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) + f" ({len(results)} cases, seed {args.seed})")
sys.exit(1 if any(kinds.get(k, 0) for k in BAD_KINDS) else 0)
