#!/usr/bin/env python3
"""README, the manual in docs/ and the command line must not drift apart.

Walks README.md, every docs/*.md and comm/README.md and collects every `frugal ...` command: the
lines of code blocks (fenced or indented; synopsis lines continued by `[...]` or a trailing
backslash), the inline code spans that start with `frugal `, and the commands after
`frugal launch ... --`, `mpirun ...` or a bundle's `bin/frugal`. For each it runs
`frugal SUBCOMMAND --help` (which must succeed: the subcommand exists) and requires every flag the
text gives it to be one that --help lists. The flag tables of the sections of `frugal train`,
`predict` and `evaluate` (a heading naming the command, or one of TRAIN_SECTIONS) are checked the
same way, and the table of FRUGAL_* variables must give, for every variable of comm/environment.h, a
flag that `frugal train --help` lists. (`--help` with the text's own arguments would prove nothing:
CLI11 prints help before it complains about unknown flags.)

Also:
- README.md has at most README_MAX_LINES lines (it is the entry page; the manual is docs/).
- Every relative link of README.md and docs/*.md names a file that exists, and its #anchor a
  heading of that file (GitHub's slugs).
- The quick starts run by copy and paste: each fenced block of README.md after a line
  `<!-- readme-run: NAME -->` is run with bash (a ```python block with python3) in a scratch folder
  whose entries link to the source tree's, with `build` (as in `build/apps/frugal`, `-C build`)
  replaced by BUILD_ROOT and `/tmp` by a scratch folder, under `set -eo pipefail`. `meson install`
  runs with --no-rebuild (this test does not build) and with DESTDIR, PKG_CONFIG_SYSROOT_DIR,
  PKG_CONFIG_PATH and LD_LIBRARY_PATH pointing into a scratch root, so that it installs nothing
  into the system while the block's text stays what a user types. A failing block fails the test,
  naming it and showing its output. The python start runs only when BUILD_ROOT/python/frugal
  exists (a build folder configured with -Dpython=disabled has none), with the python3 the module
  was built for first on PATH (FRUGAL_PYTHON).

Usage: readme_commands.py FRUGAL SOURCE_ROOT [BUILD_ROOT]
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

FRUGAL, ROOT = sys.argv[1], sys.argv[2]
BUILD = sys.argv[3] if len(sys.argv) > 3 else None
DOCS = (["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
        + [os.path.join("comm", "README.md")])
# Sections whose flag tables belong to `frugal train` without naming it in their heading.
TRAIN_SECTIONS = ("Training on several ranks", "Dynamic Communication Thresholding", "Optimizers and regularization")
# Files whose flag tables must be found (a renamed heading must not silently turn their checks off).
FLAG_TABLES_IN = ("docs/training.md", "docs/optimizers.md", "docs/distributed.md", "docs/recsys.md")
README_MAX_LINES = 300
QUICK_STARTS = ("cli", "cpp", "python", "ranks")
LINKS_PENDING = set()  # links to files not written yet (a note, not a failure): none
BLOCK_TIMEOUT_S = 180

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
    m = re.search(r"`frugal (train|predict|evaluate)[` ]", section)
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
flags_in_tables = {}  # file -> flags of its flag tables checked against a command's --help


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
        doc = where.rsplit(":", 1)[0]
        flags_in_tables[doc] = flags_in_tables.get(doc, 0) + 1
        if not lists_flag(text, flag):
            failures.append(f"{where}: the table of `frugal {command[0]}` lists {flag}, which its --help does not")


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    text = re.sub(r"^#+\s*", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors_of(path):
    out, fenced = set(), False
    for raw in open(path, encoding="utf-8").read().splitlines():
        if raw.strip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#+ ", raw):
            out.add(slug(raw))
    return out


def check_links(name):
    """Relative links and images of a markdown file: the file exists, the anchor is a heading of it."""
    path = os.path.join(ROOT, name)
    fenced = False
    for n, raw in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
        if raw.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        line = re.sub(r"`[^`]*`", "", raw)  # code spans are not links
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            shown = os.path.relpath(linked, ROOT)
            if not os.path.exists(linked):
                if shown in LINKS_PENDING:
                    notes.add(f"{shown}: linked, not written yet")
                else:
                    failures.append(f"{name}:{n}: the link ({target}) names {shown}, which does not exist")
                continue
            if anchor and (not linked.endswith(".md") or anchor not in anchors_of(linked)):
                failures.append(f"{name}:{n}: the link ({target}): {shown} has no heading with the anchor #{anchor}")


def quick_starts():
    """(name, language, text, line) of each README block marked `<!-- readme-run: NAME -->`."""
    lines = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()
    out = []
    for i, raw in enumerate(lines):
        m = re.fullmatch(r"<!--\s*readme-run:\s*([\w-]+)\s*-->", raw.strip())
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            failures.append(f"README.md:{i + 1}: `readme-run: {m.group(1)}` is not followed by a fenced block")
            continue
        body, j = [], i + 2
        while j < len(lines) and not lines[j].startswith("```"):
            body.append(lines[j])
            j += 1
        out.append((m.group(1), lines[i + 1][3:].strip(), "\n".join(body) + "\n", i + 2))
    return out


def install_dirs():
    """meson's prefix and libdir of the build folder."""
    r = subprocess.run(["meson", "introspect", "--buildoptions", BUILD], capture_output=True, text=True)
    options = {o["name"]: o["value"] for o in json.loads(r.stdout)} if r.returncode == 0 else {}
    return options.get("prefix", "/usr/local"), options.get("libdir", "lib")


# The interpreter the build made the module for (meson passes FRUGAL_PYTHON: the python3 on PATH when
# it has numpy and scipy, else Debian's /usr/bin/python3). The blocks' `python3` is that one: a
# pyenv or virtualenv python3 first on PATH may lack numpy (README says which python3 to use).
PYTHON = os.environ.get("FRUGAL_PYTHON") or shutil.which("python3") or "python3"


def python_path_dir(scratch):
    """A folder whose python3 is PYTHON, to put first on the blocks' PATH."""
    folder = os.path.join(scratch, "python-bin")
    if not os.path.isdir(folder):
        os.makedirs(folder)
        os.symlink(PYTHON, os.path.join(folder, "python3"))
    return folder


def rewrite_paths(text, build, tmp):
    """The block's `build` (a word of its own: `build/apps/frugal`, `-C build`) as BUILD and its `/tmp`
    as TMP, in one pass over the block's own text: a replacement is never read again, so a build
    folder under /tmp (or under the system's temporary directory, whatever it is) stays as it is."""
    def one(m):
        return build if m.group(1) else tmp
    return re.sub(r"(?<![\w./-])(?:(build)(?=/|\s|$)|/tmp(?=[/\s\"')]|$))", one, text)


def run_quick_start(name, lang, text, line, scratch):
    home = os.path.join(scratch, name)
    work, tmp, root = (os.path.join(home, d) for d in ("work", "tmp", "root"))
    for d in (work, tmp, root):
        os.makedirs(d)
    # The block's working folder: the source tree's entries as links (paths relative to the source
    # root work), files the block writes there stay in the scratch folder.
    for entry in os.listdir(ROOT):
        if entry not in ("build", ".git"):
            os.symlink(os.path.join(os.path.abspath(ROOT), entry), os.path.join(work, entry))
    build = os.path.abspath(BUILD)
    script = rewrite_paths(text, build, tmp)
    script = re.sub(r"\bmeson install\b", "meson install --no-rebuild", script)
    prefix, libdir = install_dirs()
    libdir = libdir if os.path.isabs(libdir) else os.path.join(prefix, libdir)
    env = dict(os.environ, DESTDIR=root, PKG_CONFIG_SYSROOT_DIR=root,
               PKG_CONFIG_PATH=root + os.path.join(libdir, "pkgconfig"), LD_LIBRARY_PATH=root + libdir,
               PYTHONPATH=os.path.join(build, "python"), TMPDIR=tmp,
               PATH=python_path_dir(scratch) + os.pathsep + os.environ.get("PATH", ""))
    if lang == "python":
        command = [PYTHON, "-c", script]
    else:
        command = ["bash", "-c", "set -eo pipefail\n" + script]
    try:
        r = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
        code, output = r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        code = f"timed out after {BLOCK_TIMEOUT_S} s"
        output = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    if code != 0:
        tail = "\n".join(output.splitlines()[-40:])
        failures.append(f"README.md:{line}: the {name} quick start failed (exit {code}); run as\n{script}"
                        f"its output (last 40 lines):\n{tail}")
        return False
    if name == "cpp":
        check_cpp_p1(line, tmp, env)
    return True


# The C++ quick start must reach `frugal train`'s P@1 with the defaults (within CPP_P1_TOLERANCE), on
# the README's data and on a second generator setting that is still learning after 3 epochs
# (`frugal train` P@1 ~0.9 there: a saturated set would hide a lesser default).
CPP_SECOND_SET = ["--features", "5000", "--labels", "5000", "--train", "3000", "--test", "1000", "--noise", "0.6",
                  "--seed", "7"]
CPP_P1_TOLERANCE = 0.01


def last_p1(text):
    found = re.findall(r"^(?:\[0\] )?epoch \d+:.*?P@1 ([0-9.]+)", text, re.M)
    return float(found[-1]) if found else None


def check_cpp_p1(line, tmp, env):
    exe = os.path.join(tmp, "train_xmc")
    second = os.path.join(tmp, "xmc-learning")
    r = subprocess.run([FRUGAL, "data", "synth-xmc", *CPP_SECOND_SET, "--out", second], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"README.md:{line}: frugal data synth-xmc {' '.join(CPP_SECOND_SET)} failed: {r.stderr}")
        return
    for folder in (os.path.join(tmp, "xmc"), second):
        api = subprocess.run([exe, "train.txt", "test.txt"], cwd=folder, env=env, capture_output=True, text=True,
                             timeout=BLOCK_TIMEOUT_S)
        cli = subprocess.run([FRUGAL, "train", "--train", "train.txt", "--test", "test.txt", "--quiet"], cwd=folder,
                             capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
        p_api, p_cli = last_p1(api.stdout), last_p1(cli.stdout)
        if api.returncode != 0 or cli.returncode != 0 or p_api is None or p_cli is None:
            failures.append(f"README.md:{line}: the C++ quick start or frugal train did not finish on {folder} "
                            f"(exit {api.returncode} / {cli.returncode}):\n{api.stdout[-800:]}{api.stderr[-800:]}"
                            f"{cli.stderr[-800:]}")
        elif abs(p_api - p_cli) > CPP_P1_TOLERANCE:
            failures.append(f"README.md:{line}: the C++ quick start reached P@1 {p_api:.4f} on {folder}, "
                            f"frugal train {p_cli:.4f}: more than {CPP_P1_TOLERANCE} apart")
        else:
            print(f"cpp quick start on {os.path.basename(folder)}: P@1 {p_api:.4f}, frugal train {p_cli:.4f}")


notes = set()
counts = {name: check_doc(name) for name in DOCS}
for name in DOCS:
    if name != os.path.join("comm", "README.md"):
        check_links(name)
for name in FLAG_TABLES_IN:
    if not flags_in_tables.get(name):
        failures.append(f"{name}: no flag table checked (its section headings no longer name the command?)")
readme_lines = len(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines())
if readme_lines > README_MAX_LINES:
    failures.append(f"README.md has {readme_lines} lines, more than {README_MAX_LINES}: move the details into docs/")
environment = open(os.path.join(ROOT, "comm", "environment.h"), encoding="utf-8").read()
for var in re.findall(r'"(FRUGAL_[A-Z_]+)"', environment):
    if var in LAUNCHER_SET:
        if var not in launcher_set_documented:
            failures.append(f"docs/distributed.md: {var} (set by frugal launch) is not in the variables table")
        continue
    if var not in variables_with_flags:
        failures.append(f"docs/distributed.md: {var} (comm/environment.h) has no `frugal train` flag in the variables table")
    elif not lists_flag(help_of(["train"]) or "", var):
        failures.append(f"`frugal train --help` does not name {var}")

ran = []
blocks = quick_starts()
for missing in sorted(set(QUICK_STARTS) - {b[0] for b in blocks}):
    failures.append(f"README.md: no block is marked `<!-- readme-run: {missing} -->`")
if BUILD is None:
    notes.add("quick starts: not run (no build folder given)")
else:
    scratch = tempfile.mkdtemp(prefix="readme-run-")
    try:
        for name, lang, text, line in blocks:
            # A build folder configured without the module (-Dpython=disabled, or auto without
            # pybind11) has no python/frugal: the start cannot run there. The two README commands
            # configure with -Dpython=enabled, so in CI it always runs.
            if name == "python" and not os.path.isdir(os.path.join(BUILD, "python", "frugal")):
                print("python start: not run: this build folder has no Python module (-Dpython=disabled)")
                continue
            if run_quick_start(name, lang, text, line, scratch):
                ran.append(name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
for note in sorted(notes):
    print(f"note: {note}")
if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"OK: {sum(counts.values())} frugal commands ({counts}), "
      f"{sum(flags_in_tables.values())} flags of flag tables, "
      f"{len(variables_with_flags)} FRUGAL_* variables with flags, {len(help_cache)} --help texts; "
      f"README.md {readme_lines} lines; quick starts run: {', '.join(ran) or 'none'}")
