#!/usr/bin/python3
"""Time to a P@1 target and P@1 at equal time, for runs of different systems on one data set.

  python3 bench/single_node/time_to_target.py NAME=METRICS.jsonl NAME=METRICS.jsonl [...] [--json OUT]

The first run is the one compared (frugal); every other is a baseline. Each file is a `--metrics`
log of `frugal train` or bench/baselines/torch_xmc.py (the last run in it if several were appended).
A run's clock is the time it spent training, summed epoch by epoch: `train_seconds`, plus for frugal
the scoring of its validation split within and after each epoch (`valid_seconds`: how its defaults
pick the epoch they return) and the centroid start before the first (`output_init`). File parsing
and the test set's scoring count for neither. Test P@1 is known at epoch ends only, so a run reaches
a P@1 at the end of the first epoch that scored it.

- target: the lower of the two runs' best test P@1, minus 1 point (0.01): both reach it;
- time to target: each run's clock at the end of its first epoch at or above it; the ratio is the
  compared run's time over the baseline's (below 1: sooner);
- P@1 at equal time: at T = the shorter of the two runs' total clocks, each run's P@1 after its last
  epoch ended by T (none: "-").
Standard library only.
"""
import json
import sys


def load(path):
    """[(clock_seconds, p@1, epoch)] of the last run in `path`."""
    runs, init = [[]], 0.0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            event = r.get('event')
            if event == 'start':
                runs.append([])
                init = 0.0
            elif event == 'output_init':
                init += float(r.get('seconds', 0.0))
            elif event == 'epoch' and isinstance(r.get('p@1'), (int, float)):
                clock = (runs[-1][-1][0] if runs[-1] else init) + float(r.get('train_seconds', 0.0)) \
                    + float(r.get('valid_seconds', 0.0) or 0.0)
                runs[-1].append((clock, float(r['p@1']), int(r['epoch'])))
    points = next((r for r in reversed(runs) if r), [])
    if not points:
        raise SystemExit(f'{path}: no epoch records with p@1')
    return points


def first_at(points, target):
    return next(((t, e) for t, p, e in points if p >= target), (None, None))


def at_time(points, t):
    done = [(p, e) for c, p, e in points if c <= t + 1e-9]
    return done[-1] if done else (None, None)


def compare(name_a, a, name_b, b):
    best_a, best_b = max(p for _, p, _ in a), max(p for _, p, _ in b)
    target = min(best_a, best_b) - 0.01
    (ta, ea), (tb, eb) = first_at(a, target), first_at(b, target)
    t_equal = min(a[-1][0], b[-1][0])
    (pa, qa), (pb, qb) = at_time(a, t_equal), at_time(b, t_equal)
    return {'system': name_a, 'baseline': name_b, 'best_p@1': best_a, 'baseline_best_p@1': best_b,
            'target_p@1': target, 'seconds_to_target': ta, 'epoch_at_target': ea,
            'baseline_seconds_to_target': tb, 'baseline_epoch_at_target': eb,
            'time_ratio': ta / tb if ta and tb else None, 'equal_time_seconds': t_equal,
            'p@1_at_equal_time': pa, 'baseline_p@1_at_equal_time': pb}


def fmt(x, spec):
    return '-' if x is None else format(x, spec)


def main(argv):
    out = None
    if '--json' in argv:
        i = argv.index('--json')
        out = argv[i + 1] if i + 1 < len(argv) else None
        argv = argv[:i] + argv[i + 2:]
    runs = []
    for arg in argv:
        name, sep, path = arg.partition('=')
        if not sep or not name or not path:
            raise SystemExit(__doc__)
        runs.append((name, load(path)))
    if len(runs) < 2:
        raise SystemExit(__doc__)
    rows = [compare(runs[0][0], runs[0][1], n, p) for n, p in runs[1:]]
    print('| system | baseline | best P@1 (baseline) | target P@1 | time to target s (epoch) | baseline s (epoch) '
          '| time ratio | P@1 at equal time (s) | baseline P@1 then |')
    print('|---|---|---|---|---|---|---|---|---|')
    for r in rows:
        print(f"| {r['system']} | {r['baseline']} | {r['best_p@1']:.4f} ({r['baseline_best_p@1']:.4f}) "
              f"| {r['target_p@1']:.4f} | {fmt(r['seconds_to_target'], '.1f')} ({fmt(r['epoch_at_target'], 'd')}) "
              f"| {fmt(r['baseline_seconds_to_target'], '.1f')} ({fmt(r['baseline_epoch_at_target'], 'd')}) "
              f"| {fmt(r['time_ratio'], '.2f')} | {fmt(r['p@1_at_equal_time'], '.4f')} ({r['equal_time_seconds']:.1f}) "
              f"| {fmt(r['baseline_p@1_at_equal_time'], '.4f')} |")
    if out:
        with open(out, 'w') as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
