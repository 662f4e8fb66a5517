#!/usr/bin/python3
"""Summarize a single-node benchmark run (bench/single_node/run.sh) as a markdown table + targets.

  /usr/bin/python3 bench/single_node/summarize.py [DIR] [--strict]

Reads DIR/lsh.jsonl, DIR/exact.jsonl, DIR/torch_cpu.jsonl, DIR/torch_sampled.jsonl, ... (DIR defaults to .bench/single_node),
the lines `{"event":"epoch","epoch":E,"loss":..,"train_samples_per_s":..,"train_seconds":..,
"p@1":..,"p@5":..,"peak_rss_bytes":..}` that `frugal train --metrics` and torch_xmc.py write; other
events are ignored. If a file holds several runs (epoch numbers start again), the last run is used.
Prints PASS/MISS/N/A for each of issue 2's targets with the measured number. --strict: exit 1 unless
every target passes. Standard library only.
"""
import json
import os
import sys

SYSTEMS = (('lsh', 'frugal LSH'), ('lsh_bf16', 'frugal LSH bf16'),
           ('lsh_rowwise', 'frugal LSH, row-wise Adagrad'), ('lsh_rowwise_bf16', 'frugal LSH, row-wise Adagrad, bf16'),
           ('lsh_rowwise_adam', 'frugal LSH, row-wise Adam'), ('lsh_rowwise_adam_bf16', 'frugal LSH, row-wise Adam, bf16'),
           ('lsh_threshold', 'frugal LSH, row-wise Adam, --update-threshold'), ('lsh_default', 'frugal defaults'),
           ('lsh_default_bf16', 'frugal defaults, bf16'),
           ('exact', 'frugal exact'), ('torch_cpu', 'PyTorch CPU (dense)'),
           ('torch_sampled', 'PyTorch CPU, sampled softmax'))
RSS_LIMIT = 2e9          # "peak RSS <= 2 GB", read as 2*10^9 bytes (the stricter reading of GB)
TARGET_EPOCH = 3         # "P@1 >= 0.8 after 3 epochs", and the epoch the table reports last


def load(path, problems):
    """The last run's epoch records keyed by epoch, or (None, why); skipped lines go to problems."""
    if not os.path.exists(path):
        return None, f'missing: {path}'
    runs = [{}]
    prev = 0
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                problems.append(f'warning: {path}:{n}: not JSON, skipped')
                continue
            if not isinstance(rec, dict) or rec.get('event') != 'epoch':
                continue
            keys = ('epoch', 'train_samples_per_s', 'p@1', 'p@5', 'peak_rss_bytes')
            if not all(isinstance(rec.get(k), (int, float)) for k in keys):
                problems.append(f'warning: {path}:{n}: epoch record without all of {", ".join(keys)}, skipped')
                continue
            if rec['epoch'] <= prev:      # epoch numbers restart: a new run was appended
                runs.append({})
            runs[-1][int(rec['epoch'])] = rec
            prev = rec['epoch']
    if not runs[-1]:
        return None, f'no epoch records in {path}'
    return runs[-1], None


def fmt(x, spec, unit=''):
    return '—' if x is None else format(x, spec) + unit


def main(argv):
    strict = '--strict' in argv
    args = [a for a in argv if a != '--strict']
    if len(args) > 1 or any(a.startswith('-') for a in args):
        print(__doc__, file=sys.stderr)
        return 2
    out = args[0] if args else '.bench/single_node'

    print(f'## Single-node benchmark ({out})\n')
    env = os.path.join(out, 'env.txt')
    if os.path.exists(env):
        with open(env) as f:
            for line in f:
                print(f'- {line.strip()}')
        print()
    data, errors = {}, []
    for key, _ in SYSTEMS:
        data[key], err = load(os.path.join(out, key + '.jsonl'), errors)
        if err:
            errors.append(err)
    for e in errors:
        print(f'> {e}')
    if errors:
        print()

    def mean_sps(k):
        recs = data[k]
        return None if not recs else sum(r['train_samples_per_s'] for r in recs.values()) / len(recs)

    def at(k, epoch, field):
        recs = data[k]
        return recs[epoch][field] if recs and epoch in recs else None

    def last(k):
        return max(data[k]) if data[k] else None

    print('| system | epochs | train samples/s (mean over epochs) | P@1 ep1 | P@5 ep1 '
          f'| P@1 ep{TARGET_EPOCH} | P@5 ep{TARGET_EPOCH} | peak RSS |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|')
    for key, name in SYSTEMS:
        if not data[key]:
            print(f'| {name} | — | — | — | — | — | — | — |')
            continue
        rss = max(r['peak_rss_bytes'] for r in data[key].values())
        print(f'| {name} | {len(data[key])} | {fmt(mean_sps(key), ".1f")} '
              f'| {fmt(at(key, 1, "p@1"), ".4f")} | {fmt(at(key, 1, "p@5"), ".4f")} '
              f'| {fmt(at(key, TARGET_EPOCH, "p@1"), ".4f")} | {fmt(at(key, TARGET_EPOCH, "p@5"), ".4f")} '
              f'| {rss / 2**20:.0f} MiB |')
    print()

    def ratio(a, b):
        x, y = mean_sps(a), mean_sps(b)
        return x / y if x is not None and y else None

    # P@1 gap at the last epoch both frugal runs reached (the issue: "after the same epochs").
    common = sorted(set(data['lsh'] or ()) & set(data['exact'] or ()))
    gap_epoch = common[-1] if common else None
    gap = (at('lsh', gap_epoch, 'p@1') - at('exact', gap_epoch, 'p@1')) * 100 if gap_epoch else None
    r_exact, r_torch = ratio('lsh', 'exact'), ratio('lsh', 'torch_cpu')
    print(f'- LSH / exact train samples/s: {fmt(r_exact, ".2f", "x")}')
    print(f'- LSH / PyTorch CPU train samples/s: {fmt(r_torch, ".2f", "x")}')
    print(f'- P@1 LSH − exact: {fmt(gap, "+.2f", " points")}' + (f' (epoch {gap_epoch})' if gap_epoch else ''))
    # --precision bf16 against f32 (the same LSH run otherwise).
    both = sorted(set(data['lsh'] or ()) & set(data['lsh_bf16'] or ()))
    bf16_epoch = both[-1] if both else None
    bf16_gap = (at('lsh_bf16', bf16_epoch, 'p@1') - at('lsh', bf16_epoch, 'p@1')) * 100 if bf16_epoch else None
    r_bf16 = ratio('lsh_bf16', 'lsh')

    def state(k):
        recs = data[k]
        if not recs or 'model_state_bytes' not in recs[max(recs)]:
            return None
        return recs[max(recs)]['model_state_bytes']['per_parameter']
    print(f'- LSH bf16 / LSH f32 train samples/s: {fmt(r_bf16, ".2f", "x")}; '
          f'P@1 bf16 − f32: {fmt(bf16_gap, "+.2f", " points")}' + (f' (epoch {bf16_epoch})' if bf16_epoch else ''))
    print(f'- model state per parameter: LSH f32 {fmt(state("lsh"), ".2f", " B")}, '
          f'LSH bf16 {fmt(state("lsh_bf16"), ".2f", " B")}, row-wise Adagrad f32 {fmt(state("lsh_rowwise"), ".2f", " B")}, '
          f'row-wise Adagrad bf16 {fmt(state("lsh_rowwise_bf16"), ".2f", " B")}')
    # Row-wise Adagrad (issue 44) against LSH with Adam, the exact softmax and PyTorch.
    for k in ('lsh_rowwise', 'lsh_rowwise_bf16', 'lsh_rowwise_adam', 'lsh_rowwise_adam_bf16', 'lsh_threshold',
              'lsh_default', 'lsh_default_bf16'):
        if not data[k]:
            continue
        e = last(k)
        d_lsh = (at(k, e, 'p@1') - at('lsh', e, 'p@1')) * 100 if at('lsh', e, 'p@1') is not None else None
        d_exact = (at(k, e, 'p@1') - at('exact', e, 'p@1')) * 100 if at('exact', e, 'p@1') is not None else None
        print(f'- {k}: / PyTorch CPU {fmt(ratio(k, "torch_cpu"), ".2f", "x")}, '
              f'/ PyTorch sampled {fmt(ratio(k, "torch_sampled"), ".2f", "x")}, / LSH (Adam) '
              f'{fmt(ratio(k, "lsh"), ".2f", "x")}, / exact {fmt(ratio(k, "exact"), ".2f", "x")} samples/s; P@1 − LSH '
              f'{fmt(d_lsh, "+.2f", " points")}, − exact {fmt(d_exact, "+.2f", " points")} (epoch {e})')
    print()

    def missing(*keys):
        gone = [k + '.jsonl' for k in keys if not data[k]]
        return 'N/A (no data: ' + ', '.join(gone) + ')' if gone else None

    results = []

    def target(name, status, measured):
        results.append(status)
        print(f'| {name} | {status} | {measured} |')

    print('| target | result | measured |')
    print('|---|---|---|')
    target('LSH >= 10x exact samples/s', missing('lsh', 'exact') or ('PASS' if r_exact >= 10 else 'MISS'),
           f'{fmt(r_exact, ".2f", "x")}')
    target('LSH >= 20x PyTorch CPU samples/s',
           missing('lsh', 'torch_cpu') or ('PASS' if r_torch >= 20 else 'MISS'), f'{fmt(r_torch, ".2f", "x")}')
    # "within 2 points": LSH may be better than exact by any amount, worse by at most 2 points.
    target('P@1 of LSH within 2 points of exact',
           missing('lsh', 'exact') or ('N/A (no common epoch)' if gap is None else
                                       'PASS' if gap >= -2.0 - 1e-9 else 'MISS'),
           fmt(gap, "+.2f", " points") + (f' at epoch {gap_epoch}' if gap_epoch else ''))
    p1 = at('lsh', TARGET_EPOCH, 'p@1')
    target(f'LSH P@1 >= 0.8 after {TARGET_EPOCH} epochs',
           missing('lsh') or (f'N/A (run has {last("lsh")} epochs)' if p1 is None else
                              'PASS' if p1 >= 0.8 else 'MISS'), fmt(p1, '.4f'))
    rss = max(r['peak_rss_bytes'] for r in data['lsh'].values()) if data['lsh'] else None
    target('LSH peak RSS <= 2 GB', missing('lsh') or ('PASS' if rss <= RSS_LIMIT else 'MISS'),
           '—' if rss is None else f'{rss / 1e9:.2f} GB ({rss / 2**20:.0f} MiB)')

    target('P@1 of LSH bf16 within 0.5 points of LSH f32',
           missing('lsh', 'lsh_bf16') or ('N/A (no common epoch)' if bf16_gap is None else
                                          'PASS' if bf16_gap >= -0.5 - 1e-9 else 'MISS'),
           fmt(bf16_gap, "+.2f", " points") + (f' at epoch {bf16_epoch}' if bf16_epoch else ''))
    s16 = state('lsh_bf16')
    target('LSH bf16 model state <= 8 bytes per parameter',
           missing('lsh_bf16') or ('N/A (no model_state_bytes)' if s16 is None else 'PASS' if s16 <= 8 else 'MISS'),
           fmt(s16, '.2f', ' B'))

    # Against the practitioner's baseline, by time to a P@1 target (bench/single_node/time_to_target.py).
    if data['lsh_default'] and data['torch_sampled']:
        import subprocess
        print('\nfrugal defaults against PyTorch sampled softmax, by time to P@1:\n', flush=True)
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'time_to_target.py'),
                        'lsh_default=' + os.path.join(out, 'lsh_default.jsonl'),
                        'torch_sampled=' + os.path.join(out, 'torch_sampled.jsonl')], check=False)

    cmds = os.path.join(out, 'commands.txt')
    if os.path.exists(cmds):
        with open(cmds) as f:
            lines = [l.rstrip('\n') for l in f if l.strip()]
        if lines:
            print('\nCommands:\n```')
            print('\n'.join(lines))
            print('```')
    if strict and any(r != 'PASS' for r in results):
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
