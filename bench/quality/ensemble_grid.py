#!/usr/bin/env python3
"""The --infer ensemble blend over a grid of weights and temperatures, from prediction files of one
checkpoint, without retraining or re-scoring:
  NET:  frugal predict --model CKPT --input TEST --infer exact --top-k 100
        (each line: label:logit ..., the network's 100 best)
  CENT: frugal predict --model CKPT --input TEST --train TRAIN --infer ensemble --ensemble-weight 1
        --ensemble-knn-weight 0 --ensemble-temperature 1 --top-k 100
        (label:p with p = softmax(cosine) over the centroids' 100 best; labels after them score 0)
  KNN:  (optional) the same with --ensemble-weight 0 --ensemble-knn-weight 1: softmax of the nearest
        training points' votes
The blend is train/ensemble_ranker.h's: (1 - wc - wk) softmax(logits) + wc softmax(cosine / T)
+ wk softmax(votes / T), each over its own candidates, a member without candidates giving its share
to the others. Prints P@1 and P@5 per cell.
usage: ensemble_grid.py TEST NET CENT [KNN] [--weights 0,0.2,..] [--knn-weights 0,0.1,..]
                        [--temperatures 0.01,..]"""
import argparse
import math


def read_truth(path):
    with open(path) as f:
        next(f)
        truth = []
        for line in f:
            head = line.split(' ', 1)[0]
            truth.append(set(int(x) for x in head.split(',')) if head and ':' not in head else set())
    return truth


def read_predictions(path):
    with open(path) as f:
        return [[(int(a), float(b)) for a, b in (t.split(':') for t in line.split())] for line in f]


def logs(rows):
    """A member's softmax at T = 1 back to its scores (up to a constant per point), best first."""
    return [[(l, math.log(p)) for l, p in row if p > 0.0] for row in rows]


def add_softmax(members, share, temp, scores):
    if not members or share <= 0.0:
        return
    top = members[0][1]
    e = [(l, math.exp((x - top) / temp)) for l, x in members]
    z = sum(v for _, v in e)
    for l, v in e:
        scores[l] = scores.get(l, 0.0) + share * v / z


def blend(net, cent, knn, wc, wk, temp):
    a = wc if cent else 0.0
    b = wk if knn else 0.0
    wn = 1.0 - wc - wk
    total = a + b + wn
    scores = {}
    add_softmax(cent, a / total if total > 0 else 0.0, temp, scores)
    add_softmax(knn, b / total if total > 0 else 0.0, temp, scores)
    add_softmax(net, wn / total if total > 0 else 1.0, 1.0, scores)
    return [l for l, _ in sorted(scores.items(), key=lambda t: (-t[1], t[0]))[:5]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('test')
    ap.add_argument('net')
    ap.add_argument('cent')
    ap.add_argument('knn', nargs='?')
    ap.add_argument('--weights', default='0,0.2,0.3,0.4,0.5,0.6,0.7,0.8,1')
    ap.add_argument('--knn-weights', default='0')
    ap.add_argument('--temperatures', default='0.01,0.02,0.05,0.1,0.2')
    a = ap.parse_args()
    truth = read_truth(a.test)
    net = read_predictions(a.net)
    cent = logs(read_predictions(a.cent))
    knn = logs(read_predictions(a.knn)) if a.knn else [[] for _ in truth]
    assert len(truth) == len(net) == len(cent) == len(knn)
    print('weight knn_weight temperature P@1 P@5')
    for temp in (float(x) for x in a.temperatures.split(',')):
        for wk in (float(x) for x in a.knn_weights.split(',')):
            for wc in (float(x) for x in a.weights.split(',')):
                if wc + wk > 1.0 + 1e-9:
                    continue
                p1 = p5 = 0.0
                for t, n, c, k in zip(truth, net, cent, knn):
                    top = blend(n, c, k, wc, wk, temp)
                    p1 += (top[0] in t) if top else 0
                    p5 += sum(1 for l in top if l in t) / 5.0
                print(f'{wc:g} {wk:g} {temp:g} {p1 / len(truth):.4f} {p5 / len(truth):.4f}')


if __name__ == '__main__':
    main()
