#!/usr/bin/env python3
"""The layering rule, checked at every build: a folder includes only the floors below it.

    core         the ground and the contracts (Communicator, Backend, exchanges)
    core/data    data sets                      -> core
    core/train   trainer, optimizers, checkpoints -> core, core/data
    kernels      the CPU Backend                -> core
    gpu          the CUDA Backend               -> core
    layers       layers and LSH                 -> core, core/data, core/train
    comm         Communicator implementations   -> core, core/data, core/train
    apps         the frugal command, examples   -> everything

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
    'core/train': {'core', 'core/data', 'core/train'},
    'kernels': {'core', 'kernels'},
    'gpu': {'core', 'gpu'},
    'layers': {'core', 'core/data', 'core/train', 'layers'},
    'comm': {'core', 'core/data', 'core/train', 'comm'},
}
FOLDERS = sorted(list(ALLOWED) + ['apps'], key=len, reverse=True)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SUFFIXES = ('.h', '.cpp', '.cu', '.cuh')


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
                        if target not in ALLOWED[folder]:
                            violations.append(
                                f'{path}:{number}: includes "{m.group(1)}": {folder}/ may include only '
                                f'{", ".join(sorted(ALLOWED[folder]))}')
    if args.graph:
        for (a, b), n in sorted(graph.items()):
            if a != b:
                print(f'{a:12} -> {b:12} {n:4}')
    for v in violations:
        print(v, file=sys.stderr)
    if violations:
        print(f'layering: {len(violations)} include(s) from a lower floor to a higher one '
              '(the rule is in tests/layering.py)', file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, 'w') as f:
            f.write('ok\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
