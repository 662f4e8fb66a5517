#!/usr/bin/env python3
"""The layering rule, checked at every build: a folder includes only the floors below it.

    core         the ground and the contracts (Communicator, Backend)
    core/data    data sets                      -> core
    core/optim   optimizers, LR schedules       -> core
    kernels      the CPU Backend                -> core
    gpu          the CUDA Backend               -> core
    layers       layers and LSH                 -> core, core/data, core/optim
    comm         Communicator implementations and the exchanges (contracts too) -> core, core/data
    train        trainer, checkpoints, Predictor -> core, core/data, core/optim, layers, comm
    train/run    the run API (every decision of a training run) -> the floors below, kernels
                 (--bf16-dot) and train
    apps         the frugal command, examples   -> everything
    bench        benchmarks                      -> every floor of the library (not apps, python)
    python       the Python module               -> every floor of the library, not apps/ (its
                 keywords are read by the run API's option table, train/run/train_options.h)

The trainer sits above what it orchestrates: it calls layers/ and comm/ directly (comm/'s
exchanges, no registry), and neither of them may include it.

Usage: layering.py ROOT [--stamp FILE] [--graph]. Exit 1 (and the build fails) on a violation,
naming the file, the line and the rule. --graph prints the folder-to-folder include counts.
"""
import argparse
import collections
import os
import re
import sys

ALLOWED = {
    'core': {'core'},
    'core/data': {'core', 'core/data'},
    'core/optim': {'core', 'core/optim'},
    'kernels': {'core', 'kernels'},
    'gpu': {'core', 'gpu'},
    'layers': {'core', 'core/data', 'core/optim', 'layers'},
    'comm': {'core', 'core/data', 'comm'},
    'train': {'core', 'core/data', 'core/optim', 'layers', 'comm', 'train'},
    # The run API joins replicas over NCCL where every one has a GPU (gpu/nccl_communicator.h), and
    # applies the run's --bf16-dot to the CPU kernels (kernels/bf16_dot.h).
    'train/run': {'core', 'core/data', 'core/optim', 'kernels', 'layers', 'comm', 'gpu', 'train', 'train/run'},
}
LIBRARY = {'core', 'core/data', 'core/optim', 'kernels', 'gpu', 'layers', 'comm', 'train', 'train/run'}
ALLOWED['bench'] = LIBRARY | {'bench'}
ALLOWED['python'] = LIBRARY | {'python'}
# Includes allowed against the rule, each with why; a new one needs a line here.
EXCEPTIONS = {}
FOLDERS = sorted(list(ALLOWED) + ['apps'], key=len, reverse=True)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SUFFIXES = ('.h', '.cpp', '.cu', '.cuh')
# The Meson dependency each floor's library is declared as: a floor's meson.build may link only the
# floors it may include (so comm/ cannot link train/ even without including it).
DEP_FLOOR = {'core_dep': 'core', 'data_dep': 'core/data', 'optim_dep': 'core/optim', 'kernels_dep': 'kernels',
             'gpu_dep': 'gpu', 'layers_dep': 'layers', 'comm_dep': 'comm', 'train_dep': 'train',
             'run_dep': 'train/run'}
DEP_USE = re.compile(r'\b(' + '|'.join(DEP_FLOOR) + r')\b(?!\s*=[^=])')


def floor_of(path):
    """The floor a project path (relative to the root) belongs to, or None outside the floors."""
    for folder in FOLDERS:
        if path == folder or path.startswith(folder + '/'):
            return folder
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('root')
    ap.add_argument('--stamp')
    ap.add_argument('--graph', action='store_true')
    args = ap.parse_args()
    violations, graph = [], collections.Counter()
    for folder in ALLOWED:
        top = os.path.join(args.root, folder)
        for dirpath, _, names in os.walk(top):
            for name in sorted(names):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), args.root)
                if floor_of(path) != folder:
                    continue  # a subfolder that is a floor of its own (core/data under core)
                with open(os.path.join(args.root, path), encoding='utf-8') as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = floor_of(m.group(1))
                        if target is None:
                            continue  # a header next to the file, or a generated one
                        graph[(folder, target)] += 1
                        if target not in ALLOWED[folder] and (folder, m.group(1)) not in EXCEPTIONS:
                            violations.append(
                                f'{path}:{number}: includes "{m.group(1)}": {folder}/ may include only '
                                f'{", ".join(sorted(ALLOWED[folder]))}')
    for folder in ALLOWED:
        build = os.path.join(args.root, folder, 'meson.build')
        if not os.path.exists(build):
            continue
        with open(build, encoding='utf-8') as f:
            for number, line in enumerate(f, 1):
                for m in DEP_USE.finditer(line.split('#', 1)[0]):
                    target = DEP_FLOOR[m.group(1)]
                    if target not in ALLOWED[folder]:
                        violations.append(
                            f'{folder}/meson.build:{number}: links {m.group(1)} ({target}): {folder}/ may link only '
                            f'{", ".join(sorted(ALLOWED[folder]))}')
    if args.graph:
        for (a, b), n in sorted(graph.items()):
            if a != b:
                print(f'{a:12} -> {b:12} {n:4}')
    for v in violations:
        print(v, file=sys.stderr)
    if violations:
        print(f'layering: {len(violations)} include(s) or link(s) from a lower floor to a higher one '
              '(the rule is in tests/layering.py)', file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, 'w') as f:
            f.write('ok\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
