#!/usr/bin/env python3
"""README and the command line must not drift apart.

Walks README.md (and comm/README.md) and collects every `frugal ...` command: the lines of code
blocks (fenced or indented; synopsis lines continued by `[...]` or a trailing backslash), the inline
code spans that start with `frugal `, and the commands after `frugal launch ... --`, `mpirun ...`
or a bundle's `bin/frugal`. For each it runs `frugal SUBCOMMAND --help` (which must succeed: the
subcommand exists) and requires every flag the README gives it to be one that --help lists. The
flag tables of the `frugal train`, `predict` and `evaluate` sections are checked the same way, and
the table of FRUGAL_* variables must give, for every variable of comm/environment.h, a flag that
`frugal train --help` lists. (`--help` with the README's own arguments would prove nothing: CLI11
prints help before it complains about unknown flags.)

Usage: readme_commands.py FRUGAL SOURCE_ROOT
"""
import os
import re
import subprocess
import sys

FRUGAL, ROOT = sys.argv[1], sys.argv[2]
DOCS = ["README.md", os.path.join("comm", "README.md")]
# Sections whose flag tables belong to a command without naming it in their heading.
TRAIN_SECTIONS = ("Training on several ranks", "Dynamic Communication Thresholding", "Optimizers and regularization")

failures = []
help_cache = {}


def help_of(path):
    """`frugal PATH... --help`, or None when that is not a command."""
    key = tuple(path)
    if key not in help_cache:
        r = subprocess.run([FRUGAL, *path, "--help"], capture_output=True, text=True)
        help_cache[key] = r.stdout if r.returncode == 0 else None
    return help_cache[key]


def subcommands(path):
    """The subcommands `frugal PATH... --help` lists."""
    text = help_of(path) or ""
    listed = text.split("Subcommands:", 1)[1] if "Subcommands:" in text else ""
    return {line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line.split()}


def lists_flag(help_text, flag):
    return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", help_text) is not None


def clean(token):
    return token.strip("[]()`,;")


def command_path(tokens):
    """The subcommand path after `frugal` (["train"], ["data", "stats"], ["bench", "roofline"]) and where its
    arguments start."""
    if len(tokens) < 2 or tokens[1].startswith("-") or not re.fullmatch(r"[a-z][a-z0-9-]*", tokens[1]):
        return None, 0
    if tokens[1] in ("data", "bench") and len(tokens) > 2 and re.fullmatch(r"[a-z][a-z0-9-]*", tokens[2]):
        return [tokens[1], tokens[2]], 3
    return [tokens[1]], 2


def check_command(where, tokens):
    """tokens[0] is the frugal program."""
    path, start = command_path(tokens)
    if path is None:
        return
    text = help_of(path)
    # CLI11 prints the parent's help for `frugal data statz --help`: ask the parent for its subcommands.
    if text is None or path[-1] not in subcommands(path[:-1]):
        failures.append(f"{where}: `frugal {' '.join(path)}` is not a command")
        return
    for i in range(start, len(tokens)):
        token = clean(tokens[i])
        if token == "--":  # frugal launch ... -- CMD ARGS
            rest = [clean(t) for t in tokens[i + 1:]]
            if rest and is_frugal(rest[0]):
                check_command(where, rest)
            return
        if token.startswith("-") and len(token) > 1 and not re.fullmatch(r"-[\d.]+", token):
            flag = token.split("=", 1)[0]
            if not lists_flag(text, flag):
                failures.append(f"{where}: `frugal {' '.join(path)}` has no flag {flag} (not in its --help)")


def is_frugal(token):
    return token == "frugal" or token.endswith("/frugal")


def commands_in(line):
    """Every frugal command a shell line holds (after mpirun, timeouts, env and the like)."""
    line = re.sub(r"\s#\s.*$", "", line)  # a trailing comment
    tokens = line.split()
    for i, t in enumerate(tokens):
        if is_frugal(clean(t)) and (i == 0 or clean(tokens[i - 1]) != "--"):
            yield [clean(t)] + tokens[i + 1:]
            return  # a command after `--` is checked with its launcher


def code_lines(lines):
    """(line number, text) of each command line of the code blocks, continuations joined."""
    out, fenced, lang, joinable = [], False, "", False
    for n, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if stripped.startswith("```"):
            fenced, lang, joinable = (not fenced), stripped[3:].strip(), False
            continue
        backslash = joinable and out[-1][1].endswith("\\")
        in_code = backslash or (fenced and lang in ("", "sh", "bash", "console", "shell")) or (
            not fenced and raw.startswith("    ") and not raw.lstrip().startswith(("-", "|", "*")))
        if not in_code or not stripped:
            joinable = False
            continue
        if joinable and (backslash or stripped.startswith("[")):
            out[-1] = (out[-1][0], out[-1][1].rstrip("\\") + " " + stripped)
        else:
            out.append((n, stripped))
        joinable = True
    return out


def check_doc(name):
    path = os.path.join(ROOT, name)
    lines = open(path, encoding="utf-8").read().splitlines()
    count = 0
    for n, text in code_lines(lines):
        for tokens in commands_in(text):
            check_command(f"{name}:{n}", tokens)
            count += 1
    fenced = False
    section = ""
    for n, raw in enumerate(lines, 1):
        if raw.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if raw.startswith("#"):
            section = raw
        for span in re.findall(r"`([^`]+)`", raw):
            if span.startswith("frugal "):
                for tokens in commands_in(span):
                    check_command(f"{name}:{n}", tokens)
                    count += 1
        check_table_row(f"{name}:{n}", section, raw)
    return count


def section_command(section):
    m = re.search(r"`frugal (train|predict|evaluate)`", section)
    if m and "`frugal launch`" not in section:
        return [m.group(1)]
    if any(s in section for s in TRAIN_SECTIONS):
        return ["train"]
    return None


variables_with_flags = set()
# Variables `frugal launch` sets for the ranks it starts (information for the rank, not a setting a
# user makes): they must be in the table, whose flag cell says "(set by `frugal launch`)", but need
# no flag. Anything else in comm/environment.h is a setting and needs one.
LAUNCHER_SET = {"FRUGAL_RESTART_COUNT", "FRUGAL_LOCAL_SIZE"}
launcher_set_documented = set()
table_header = []  # the cells of the header row of the table being read


def check_table_row(where, section, raw):
    global table_header
    if not raw.startswith("|"):
        table_header = []
        return
    if raw.startswith("|---"):
        return
    cells = [c.strip() for c in raw.strip().strip("|").split("|")]
    if not table_header:
        table_header = cells
        return
    if table_header[:2] == ["variable", "flag of `frugal train`"]:
        var = re.fullmatch(r"`(FRUGAL_[A-Z_]+)`", cells[0])
        if var and var.group(1) in LAUNCHER_SET and "(set by `frugal launch`)" in cells[1]:
            launcher_set_documented.add(var.group(1))
        for flag in re.findall(r"`(--[a-z0-9-]+)", cells[1]):
            if lists_flag(help_of(["train"]) or "", flag):
                variables_with_flags.add(var.group(1) if var else cells[0])
            else:
                failures.append(f"{where}: {cells[0]}'s flag {flag} is not a flag of `frugal train`")
        return
    command = section_command(section)
    if command is None or table_header[0] != "flag":
        return
    text = help_of(command) or ""
    for flag in re.findall(r"`(--[a-z0-9-]+)", cells[0]):
        if not lists_flag(text, flag):
            failures.append(f"{where}: the table of `frugal {command[0]}` lists {flag}, which its --help does not")


counts = {name: check_doc(name) for name in DOCS}
environment = open(os.path.join(ROOT, "comm", "environment.h"), encoding="utf-8").read()
for var in re.findall(r'"(FRUGAL_[A-Z_]+)"', environment):
    if var in LAUNCHER_SET:
        if var not in launcher_set_documented:
            failures.append(f"README.md: {var} (set by frugal launch) is not in the variables table")
        continue
    if var not in variables_with_flags:
        failures.append(f"README.md: {var} (comm/environment.h) has no `frugal train` flag in the variables table")
    elif not lists_flag(help_of(["train"]) or "", var):
        failures.append(f"`frugal train --help` does not name {var}")
if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"OK: {sum(counts.values())} frugal commands ({counts}), "
      f"{len(variables_with_flags)} FRUGAL_* variables with flags, {len(help_cache)} --help texts")
