#!/usr/bin/env python3
"""P@1 of several rankers split by how many training points the test point's labels have (its
"support": the largest count among its true labels), to tell where a network loses to the label
centroids on few-shot data: on labels it saw once or twice, or on all of them.
Prediction files are `frugal predict` outputs (label:score ..., one line per test point).
usage: by_support.py TRAIN TEST NAME=PREDICTIONS [NAME=PREDICTIONS ...]"""
import sys
from collections import Counter


def labels_of(line):
    head = line.split(' ', 1)[0]
    return [int(x) for x in head.split(',')] if head and ':' not in head else []


def main():
    train, test, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
    counts = Counter()
    with open(train) as f:
        next(f)
        for line in f:
            counts.update(labels_of(line))
    truth = []
    with open(test) as f:
        next(f)
        truth = [set(labels_of(line)) for line in f]
    buckets = [(0, 0, 'unseen'), (1, 1, '1'), (2, 2, '2'), (3, 4, '3-4'), (5, 9, '5-9'), (10, 10**12, '10+')]
    def bucket(t):
        s = max((counts[l] for l in t), default=0)
        return next(name for lo, hi, name in buckets if lo <= s <= hi)
    of_point = [bucket(t) for t in truth]
    names = [r.split('=', 1)[0] for r in runs]
    tops = []
    for r in runs:
        with open(r.split('=', 1)[1]) as f:
            tops.append([int(line.split()[0].split(':')[0]) if line.strip() else -1 for line in f])
    print('| label support | test points | ' + ' | '.join(names) + ' |')
    print('|---|---:|' + '---:|' * len(names))
    for _, _, name in buckets + [(0, 0, 'all')]:
        idx = [i for i, b in enumerate(of_point) if name == 'all' or b == name]
        if not idx:
            continue
        cells = [f'{sum(top[i] in truth[i] for i in idx) / len(idx):.4f}' for top in tops]
        print(f'| {name} | {len(idx)} | ' + ' | '.join(cells) + ' |')


if __name__ == '__main__':
    main()
