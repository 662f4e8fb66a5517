#!/usr/bin/env python3
"""The --infer ensemble blend over a grid of weights and temperatures, from two prediction files
of one checkpoint, without retraining or re-scoring:
  NET:  frugal predict --model CKPT --input TEST --infer exact --top-k 100
        (each line: label:logit ..., the network's 100 best)
  CENT: frugal predict --model CKPT --input TEST --infer ensemble --ensemble-weight 1
        --ensemble-temperature 1 --top-k 100
        (label:p with p = softmax(cosine) over the centroids' 100 best; labels after them score 0)
The blend is train/ensemble_ranker.h's: (1 - w) softmax(logits) + w softmax(cosine / T), each over
its own candidates, the network alone where the centroids have none. Prints P@1 and P@5 per cell.
usage: ensemble_grid.py TEST NET CENT [--weights 0,0.1,..] [--temperatures 0.01,..]"""
import argparse
import math


def read_truth(path):
    truth = []
    with open(path) as f:
        next(f)
        for line in f:
            head = line.split(' ', 1)[0]
            truth.append(set(int(x) for x in head.split(',')) if head and ':' not in head else set())
    return truth


def read_predictions(path):
    rows = []
    with open(path) as f:
        for line in f:
            rows.append([(int(a), float(b)) for a, b in (t.split(':') for t in line.split())])
    return rows


def blend(net, cent, w, temp):
    # cent's scores are softmax(cosine) at T = 1: log p differs from cosine by a constant per point.
    c = [(l, math.log(p)) for l, p in cent if p > 0.0]
    scores = {}
    cw = w if c else 0.0
    if c:
        top = c[0][1]
        e = [(l, math.exp((x - top) / temp)) for l, x in c]
        z = sum(v for _, v in e)
        for l, v in e:
            scores[l] = scores.get(l, 0.0) + cw * v / z
    top = net[0][1]
    e = [(l, math.exp(x - top)) for l, x in net]
    z = sum(v for _, v in e)
    for l, v in e:
        scores[l] = scores.get(l, 0.0) + (1.0 - cw) * v / z
    return [l for l, _ in sorted(scores.items(), key=lambda t: (-t[1], t[0]))[:5]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('test')
    ap.add_argument('net')
    ap.add_argument('cent')
    ap.add_argument('--weights', default='0,0.2,0.3,0.4,0.5,0.6,0.7,0.8,1')
    ap.add_argument('--temperatures', default='0.01,0.02,0.05,0.1,0.2')
    a = ap.parse_args()
    truth = read_truth(a.test)
    net = read_predictions(a.net)
    cent = read_predictions(a.cent)
    assert len(truth) == len(net) == len(cent)
    print('weight temperature P@1 P@5')
    for temp in (float(x) for x in a.temperatures.split(',')):
        for w in (float(x) for x in a.weights.split(',')):
            p1 = p5 = 0.0
            for t, n, c in zip(truth, net, cent):
                top = blend(n, c, w, temp)
                p1 += (top[0] in t) if top else 0
                p5 += sum(1 for l in top if l in t) / 5.0
            print(f'{w:g} {temp:g} {p1 / len(truth):.4f} {p5 / len(truth):.4f}')


if __name__ == '__main__':
    main()
