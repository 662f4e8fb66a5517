#!/usr/bin/python3
"""The default step's thread scaling, phase by phase, and a prediction for bigger nodes.

  python3 bench/single_node/thread_model.py OUT [--node-bandwidth-cores B] [--cores 4,8,16]

Reads OUT/t1.jsonl and OUT/t2.jsonl (frugal train --metrics at --threads 1 and 2; the last epoch's
`profile` is the measured one) and OUT/machine-t1.json, OUT/machine-t2.json (`frugal bench roofline
--json` at 1 and 2 threads). Per phase p, from its seconds per sample at 1 and 2 threads:

  speed-up   s_p = t_p(1) / t_p(2)
  serial     f_p = 2 t_p(2) / t_p(1) - 1, clamped to [0, 1] (Amdahl's law through the two points)
  at c cores t_p(c) = max(t_p(1) (f_p + (1 - f_p) / c),  bytes_p / BW(c))

where bytes_p is the phase's compulsory traffic per sample (the profile's `bytes`) and BW(c) the
memory bandwidth c cores reach: c times the measured 1-thread streaming rate, up to B times it (the
node's memory system saturates; B = --node-bandwidth-cores, default 8: an assumption, not measured
here, where a 2-core VM cannot show it). The whole step's prediction is the sum over phases; beside
it, the one-number Amdahl fit of the whole step that `frugal plan` uses (ThreadScaling::fit).
Standard library only.
"""
import json
import os
import sys


def last_epoch(path):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    eps = [r for r in recs if r.get('event') == 'epoch' and r.get('profile')]
    if not eps:
        raise SystemExit(f'{path}: no epoch record with a profile')
    return eps[-1]


def main(argv):
    args = list(argv)
    node_cores, cores = 8.0, [4, 8, 16]
    if '--node-bandwidth-cores' in args:
        i = args.index('--node-bandwidth-cores')
        node_cores = float(args[i + 1])
        del args[i:i + 2]
    if '--cores' in args:
        i = args.index('--cores')
        cores = [int(c) for c in args[i + 1].split(',')]
        del args[i:i + 2]
    if len(args) != 1:
        raise SystemExit(__doc__)
    out = args[0]
    e1, e2 = last_epoch(os.path.join(out, 't1.jsonl')), last_epoch(os.path.join(out, 't2.jsonl'))
    m1 = json.load(open(os.path.join(out, 'machine-t1.json')))
    m2 = json.load(open(os.path.join(out, 'machine-t2.json')))
    n1, n2 = e1['profile']['samples'], e2['profile']['samples']
    bw1 = m1['stream_bytes_per_s']
    phases = []
    for name, p1 in e1['profile']['phases'].items():
        p2 = e2['profile']['phases'].get(name, {})
        t1, t2 = p1['seconds'] / n1, p2.get('seconds', 0.0) / n2
        if t1 <= 0:
            continue
        f = min(1.0, max(0.0, 2.0 * t2 / t1 - 1.0))
        phases.append({'phase': name, 't1': t1, 't2': t2, 'speedup': t1 / t2 if t2 > 0 else None, 'serial': f,
                       'bytes': p1.get('bytes', 0.0) / n1})
    total1 = sum(p['t1'] for p in phases)
    total2 = sum(p['t2'] for p in phases)

    def bandwidth(c):
        return min(c, node_cores) * bw1

    def phase_at(p, c):
        return max(p['t1'] * (p['serial'] + (1.0 - p['serial']) / c), p['bytes'] / bandwidth(c))

    print(f'## Thread scaling of the default step ({out})\n')
    print(f'- samples/s: 1 thread {e1["train_samples_per_s"]:.0f}, 2 threads {e2["train_samples_per_s"]:.0f} '
          f'({e2["train_samples_per_s"] / e1["train_samples_per_s"]:.2f}x; profiled phases {total1 / total2:.2f}x)')
    print(f'- streaming bandwidth: 1 thread {bw1 / 1e9:.1f} GB/s, 2 threads {m2["stream_bytes_per_s"] / 1e9:.1f} GB/s '
          f'({m2["stream_bytes_per_s"] / bw1:.2f}x); gather 1 thread {m1["gather_bytes_per_s"] / 1e9:.1f} GB/s, '
          f'2 threads {m2["gather_bytes_per_s"] / 1e9:.1f} GB/s')
    print(f'- assumed: a node\'s memory bandwidth saturates at {node_cores:g} cores\' streaming rate '
          f'({bandwidth(1e9) / 1e9:.0f} GB/s); each phase follows Amdahl\'s law through its two measured points\n')
    print('| phase | µs/sample 1 thread | 2 threads | speed-up | serial fraction | bytes/sample | '
          + ' | '.join(f'µs at {c}' for c in cores) + ' |')
    print('|---|---:|---:|---:|---:|---:|' + '---:|' * len(cores))
    for p in sorted(phases, key=lambda p: -p['t1']):
        print(f"| {p['phase']} | {1e6 * p['t1']:.1f} | {1e6 * p['t2']:.1f} | "
              f"{'-' if p['speedup'] is None else format(p['speedup'], '.2f')} | {p['serial']:.2f} | "
              f"{p['bytes'] / 1e3:.0f} kB | " + ' | '.join(f'{1e6 * phase_at(p, c):.1f}' for c in cores) + ' |')
    predicted = {c: sum(phase_at(p, c) for p in phases) for c in cores}
    whole_f = min(1.0, max(0.0, 2.0 * total2 / total1 - 1.0))
    print(f"| **step** | {1e6 * total1:.1f} | {1e6 * total2:.1f} | {total1 / total2:.2f} | {whole_f:.2f} | "
          f"{sum(p['bytes'] for p in phases) / 1e3:.0f} kB | " + ' | '.join(f'{1e6 * predicted[c]:.1f}' for c in cores) + ' |')
    print()
    for c in cores:
        amdahl = 1.0 / (whole_f + (1.0 - whole_f) / c)
        print(f'- {c} cores: {total1 / predicted[c]:.1f}x one thread by phase '
              f'({e1["train_samples_per_s"] * total1 / predicted[c]:.0f} samples/s); '
              f'the whole-step Amdahl fit (frugal plan) {amdahl:.1f}x')
    worst = max(phases, key=lambda p: p['t1'] * p['serial'])
    print(f"- the most serial time: {worst['phase']} ({worst['serial']:.2f} of its "
          f"{1e6 * worst['t1']:.0f} µs a sample does not shrink with threads)")
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
