#!/usr/bin/env python3
"""A hostile-input campaign (issue 46): many malformed, damaged and absurd inputs to the `frugal`
command, each run with a time limit, classified as
  refused   exit status 1 with a `frugal: error:` (or flag) message and no library words
  warned    it ran, with a `frugal: warning:` (suspicious but valid input)
  ran       it ran (valid input)
  CRASH     killed by a signal          HANG   over the time limit
  LIBRARY   a library's words in the output (json.exception, bad_alloc, basic_filebuf, ...)
A case may also say what it must not do (`silent`: a damaged file that ran without a word is SILENT).
Usage: python3 bench/hostile/run.py FRUGAL [OUT_DIR]   (prints a table and the totals; exit 1 on any
CRASH, HANG, LIBRARY or SILENT)."""
import os
import random
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outcome import kind_of, said  # noqa: E402

F = os.path.abspath(sys.argv[1])
OUT = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "/tmp/frugal-hostile")
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
os.chdir(OUT)
rng = random.Random(46)


def sh(*args, timeout=120):
    try:
        p = subprocess.run([F, *args], capture_output=True, text=True, errors="replace", timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")


def flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x10]))


def sub(path, a, b):
    text = open(path).read()
    open(path, "w").write(text.replace(a, b, 1))


results = []


def case(name, args, silent_is_wrong=False, timeout=60):
    rc, out = sh(*args, timeout=timeout)
    ran_silently = rc == 0 and "frugal: warning:" not in out
    kind = kind_of(rc, out, "ran without a word" if silent_is_wrong and ran_silently else None)
    results.append((name, kind, said(out, 160)))


sh("data", "synth-xmc", "--features", "400", "--labels", "40", "--train", "1500", "--test", "200", "--out", "d")
sh("train", "--train", "d/train.txt", "--test", "d/test.txt", "--epochs", "2", "--checkpoint", "ck",
   "--keep-checkpoints", "2", "--quiet")
sh("data", "synth-ctr", "--train", "1500", "--test", "200", "--out", "c")
sh("train", "--model", "dlrm", "--train", "c/train.tsv", "--test", "c/test.tsv", "--epochs", "1", "--checkpoint", "dk",
   "--quiet")
train = open("d/train.txt").read().split("\n")
T = ["--test", "d/test.txt", "--epochs", "1", "--quiet", "--threads", "1"]

# Mutated XMC training files: one line changed each.
mutations = {
    "bad token": lambda l: l + " x:y",
    "negative feature id": lambda l: l + " -3:1",
    "feature id = F": lambda l: l + " 400:1",
    "feature id 2^32": lambda l: l + " 4294967296:1",
    "label id = L": lambda l: "40," + l,
    "label 2^40": lambda l: "1099511627776," + l,
    "nan value": lambda l: l + " 5:nan",
    "inf value": lambda l: l + " 5:inf",
    "value 3e38": lambda l: l + " 5:3e38",
    "value 1e39": lambda l: l + " 5:1e39",
    "empty label list": lambda l: " " + l.split(" ", 1)[1],
    "duplicate feature": lambda l: l + " " + l.split(" ")[1],
    "tab separators": lambda l: l.replace(" ", "\t"),
    "CRLF": lambda l: l + "\r",
    "NUL byte": lambda l: l + " 5:1\0",
    "very long line": lambda l: l + "".join(f" {i % 400}:1" for i in range(200000)),
}
for name, mutate in mutations.items():
    lines = list(train)
    i = rng.randrange(2, len(lines) - 2)
    lines[i] = mutate(lines[i])
    path = "m_" + re.sub(r"\W+", "_", name) + ".txt"
    open(path, "w", errors="surrogateescape").write("\n".join(lines))
    case(f"xmc: {name}", ["train", "--train", path, *T])
headers = {"header N too large": "99999 400 40", "header N too small": "3 400 40", "header F 0": "1500 0 40",
           "header L 2^32-1": "1500 400 4294967295", "header 2 fields": "1500 400", "header negative": "-1 400 40",
           "no header": None}
for name, h in headers.items():
    lines = list(train)
    if h is None:
        lines = lines[1:]
    else:
        lines[0] = h
    path = "h_" + re.sub(r"\W+", "_", name) + ".txt"
    open(path, "w").write("\n".join(lines))
    case(f"xmc: {name}", ["train", "--train", path, *T])
open("truncated.txt", "w").write("\n".join(train)[: len("\n".join(train)) // 2])
case("xmc: truncated mid-line", ["train", "--train", "truncated.txt", *T])
shutil.copy("d/train.txt", "same_size.txt")
b = bytearray(open("same_size.txt", "rb").read())
i = len(b) // 2
while not (chr(b[i]).isdigit() and b[i - 1] == ord(":")):  # the first digit of a feature value
    i += 1
b[i] = ord("7") if b[i] != ord("7") else ord("3")
open("same_size.txt", "wb").write(b)

# Damaged checkpoints: evaluate each (a damaged file must never score silently).
E = ["evaluate", "--test", "d/test.txt"]
newest = sorted(d for d in os.listdir("ck") if d.startswith("epoch-"))[-1]
for name, damage in {
    "slice truncated": lambda d: open(f"{d}/{newest}/slice0.ckpt", "r+b").truncate(100),
    "slice byte flipped": lambda d: flip(f"{d}/{newest}/slice0.ckpt", 5000),
    "slice removed": lambda d: os.remove(f"{d}/{newest}/slice0.ckpt"),
    "slice a directory": lambda d: (os.remove(f"{d}/{newest}/slice0.ckpt"), os.mkdir(f"{d}/{newest}/slice0.ckpt")),
    "slice -> /dev/urandom": lambda d: (os.remove(f"{d}/{newest}/slice0.ckpt"),
                                         os.symlink("/dev/urandom", f"{d}/{newest}/slice0.ckpt")),
    "manifest byte flipped": lambda d: flip(f"{d}/manifest.json", 300),
    "manifest truncated": lambda d: open(f"{d}/manifest.json", "r+b").truncate(200),
    "manifest empty": lambda d: open(f"{d}/manifest.json", "w").close(),
    "manifest epoch edited": lambda d: sub(f"{d}/manifest.json", '"epoch": 2', '"epoch": 1'),
    "manifest slice bound edited": lambda d: sub(f"{d}/manifest.json", '"slice_bounds": [\n        0,', '"slice_bounds": [\n        1,'),
    "manifest of epoch 1 put in place": lambda d: shutil.copy(
        f"{d}/{sorted(x for x in os.listdir(d) if x.startswith('epoch-'))[0]}/manifest.json", f"{d}/manifest.json"),
    "label counts flipped": lambda d: flip(f"{d}/label_counts.bin", 40),
    "label counts truncated": lambda d: open(f"{d}/label_counts.bin", "r+b").truncate(20),
    "label counts -> /dev/zero": lambda d: (os.remove(f"{d}/label_counts.bin"), os.symlink("/dev/zero", f"{d}/label_counts.bin")),
}.items():
    d = "ck_" + re.sub(r"\W+", "_", name)
    shutil.copytree("ck", d, symlinks=True)
    damage(d)
    case(f"checkpoint: {name}", [*E, "--model", d], silent_is_wrong=True)
for name, damage in {
    "DLRM manifest epoch edited": lambda d: sub(f"{d}/manifest.json", '"epoch": 1', '"epoch": 7'),
    "DLRM rank file flipped": lambda d: flip(f"{d}/dlrm-epoch-1/rank0.bin", 100),
    "DLRM ids truncated": lambda d: open(f"{d}/dlrm-epoch-1/ids.bin", "r+b").truncate(10),
}.items():
    d = "dk_" + re.sub(r"\W+", "_", name)
    shutil.copytree("dk", d)
    damage(d)
    case(f"checkpoint: {name}", ["evaluate", "--model", d, "--test", "c/test.tsv"], silent_is_wrong=True)


# A manifest from another run of the same configuration (same folder names) put in place.
sh("train", "--train", "d/train.txt", "--test", "d/test.txt", "--epochs", "2", "--checkpoint", "ck_other_run",
   "--keep-checkpoints", "2", "--quiet", "--seed", "2")
shutil.copytree("ck", "ck_swapped")
shutil.copy("ck_other_run/manifest.json", "ck_swapped/manifest.json")
case("checkpoint: another run's manifest put in place", [*E, "--model", "ck_swapped"], silent_is_wrong=True)

# Ranks that disagree: rank 1 gets other flags or data (frugal launch -n 2, a wrapper picks per rank).
def two_ranks(name, rank1_extra, rank1_train="d/train.txt", rank0_extra=("--epochs", "1")):
    case(f"ranks: {name}", ["launch", "-n", "2", "--", "bash", "-c",
                            'f=$1; x=$2; shift 2; [ "$FRUGAL_RANK" = 1 ] && x=$R1X && f=$R1F;'
                            ' exec "$0" train --train "$f" "$@" $x'
                            .replace("$R1X", "'" + " ".join(rank1_extra) + "'").replace("$R1F", rank1_train),
                            F, "d/train.txt", " ".join(rank0_extra), "--test", "d/test.txt", "--threads", "1",
                            "--quiet"], timeout=120)
two_ranks("--epochs differs", ["--epochs", "3"])
two_ranks("--sampler differs", ["--epochs", "1", "--sampler", "exact"])
two_ranks("--max-message-bytes differs", ["--epochs", "1", "--max-message-bytes", "1000000"])
two_ranks("--checkpoint differs", ["--epochs", "1", "--checkpoint", "elsewhere"])
two_ranks("training file with one digit changed", ["--epochs", "1"], "same_size.txt")

# Absurd flags.
X = ["train", "--train", "d/train.txt", *T]
for flags in (["--hidden", "1e9"], ["--hidden", "-1"], ["--layers", "99999999,99999999"], ["--batch", "0"],
              ["--batch", "99999999999"], ["--tables", "0"], ["--tables", "5000"], ["--bucket-capacity", "0"],
              ["--k", "64"], ["--bin-size", "3"], ["--lr", "inf"], ["--lr", "-0.1"], ["--dropout", "2"],
              ["--warmup-steps", "-1"], ["--seed", "-1"], ["--threads", "-4"], ["--threads", "1000000"],
              ["--epochs", "99999999999999999999"], ["--memory-limit", "-5"], ["--max-active", "-1"],
              ["--grid", "0x1"], ["--grid", "axb"], ["--slice-weights", "1,nan"], ["--mp-keep", "1.5"],
              ["--eval-batch", "0"], ["--max-steps", "-2"], ["--keep-checkpoints", "0"], ["--active-target", "-5"]):
    case("flag: " + " ".join(flags), [*X, *flags])
for flags in (["--k", "0"], ["--k", "1000000000000"], ["--batch", "0"], ["--propensity-a", "nan"], ["--threads", "99999"]):
    case("evaluate flag: " + " ".join(flags), [*E, "--model", "ck", *flags])
case("dlrm: --embedding-dim 1e9", ["train", "--model", "dlrm", "--train", "c/train.tsv", "--test", "c/test.tsv",
                                   "--embedding-dim", "1000000000", "--quiet"])
case("dlrm: --hash-rows 2^40", ["train", "--model", "dlrm", "--ids", "hash", "--hash-rows", "1099511627776",
                                "--train", "c/train.tsv", "--test", "c/test.tsv", "--quiet"])
case("data stats: label 2^32-2", ["data", "stats", "h_header_L_2_32_1.txt"])

# Special files as inputs.
os.mkfifo("fifo.txt")
os.mkdir("dir.txt")
for name, path in {"a FIFO": "fifo.txt", "a directory": "dir.txt", "/dev/zero": "/dev/zero", "/dev/null": "/dev/null"}.items():
    case(f"special file: train on {name}", ["train", "--train", path, *T])
case("special file: hostfile /dev/zero", ["launch", "--hostfile", "/dev/zero", "-n", "2", "--", F, "data", "stats",
                                          "d/test.txt"])

kinds = {}
for name, kind, last in results:
    kinds[kind] = kinds.get(kind, 0) + 1
    print(f"{kind:8} {name:45} {last}")
print("\n" + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) + f" ({len(results)} cases)")
bad = sum(kinds.get(k, 0) for k in ("CRASH", "HANG", "LIBRARY", "SILENT"))
sys.exit(1 if bad else 0)
