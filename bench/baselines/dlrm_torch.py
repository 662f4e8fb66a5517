#!/usr/bin/python3
"""PyTorch DLRM baseline for `frugal train --model dlrm` on Criteo-format click logs.

The same model, data handling, optimizer and metrics as frugal (layers/dlrm/, train/run/dlrm_run.cpp):
  dense   x = log(1 + max(I, 0)) per integer feature (missing: 0)
  ids     --ids full: per field, every id seen >= --min-id-count times in the training data gets a row
          (most frequent first, ties by id), row 0 is shared by the rest, unseen and missing ids
  bottom  13 -> --bottom widths (ReLU) -> --embedding-dim (ReLU)
  tables  one per field, --embedding-dim wide, rows U(-1/sqrt(rows), 1/sqrt(rows))
  interact the bottom vector, then the dot products of every pair of the 1 + 26 vectors (lower triangle)
  top     -> --top widths (ReLU) -> 1 (the click logit); loss: logistic, averaged over the batch
  Adam    lazy for the tables, as frugal's lazy Adam (train/adam.cpp): a row is updated only in
          steps that use it, with the bias corrections of its own update count t,
          w -= lr / (1 - b1^t) * m / (sqrt(v / (1 - b2^t)) + eps) (RowAdam below; torch's SparseAdam
          corrects by the table's step count instead, --sparse-adam); torch.optim.Adam for the MLPs
  AUC     exact (average ranks for ties); logloss with probabilities clamped to [1e-7, 1 - 1e-7]
Each epoch visits the training samples in a seeded random order, batches of --batch.

Usage (Debian's python3-torch, CPU):
  /usr/bin/python3 bench/baselines/dlrm_torch.py --train DIR/train.tsv --test DIR/test.tsv --epochs 2 \
      --threads 2 --metrics out.jsonl
Only the Python standard library and torch are used.
"""
import argparse
import gzip
import json
import math
import sys
import time


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--train', required=True)
    ap.add_argument('--test', required=True)
    ap.add_argument('--epochs', type=int, default=3)
    ap.add_argument('--batch', type=int, default=128)
    ap.add_argument('--lr', type=float, default=1e-3)
    ap.add_argument('--embedding-dim', type=int, default=16)
    ap.add_argument('--bottom', default='64')
    ap.add_argument('--top', default='64,32')
    ap.add_argument('--min-id-count', type=int, default=2)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--eval-batch', type=int, default=4096)
    ap.add_argument('--metrics', help='JSON-lines file: one line per epoch')
    ap.add_argument('--sparse-adam', action='store_true',
                    help="the tables with torch.optim.SparseAdam (bias corrections by the table's step count) "
                         "instead of RowAdam (by each row's own update count, as frugal)")
    return ap.parse_args(argv)


def widths(text):
    return [] if text in ('', 'none') else [int(w) for w in text.split(',')]


def read_criteo(path):
    """labels, dense rows (13 floats), ids rows (26 ints, -1 missing), validated like frugal's reader."""
    opener = gzip.open if path.endswith('.gz') else open
    labels, dense, ids = [], [], []
    with opener(path, 'rt') as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip('\n').rstrip('\r').split('\t')
            if len(parts) != 40:
                sys.exit(f'{path}:{n}: {len(parts)} fields, not 40')
            labels.append(float(parts[0]))
            dense.append([math.log1p(max(int(v), 0)) if v else 0.0 for v in parts[1:14]])
            ids.append([int(v, 16) if v else -1 for v in parts[14:]])
    return labels, dense, ids


def vocabularies(ids, min_count):
    """Per field: id -> row (>= 1), most frequent first, ties by id; row 0 for the rest."""
    vocab = []
    for f in range(26):
        counts = {}
        for row in ids:
            v = row[f]
            if v >= 0:
                counts[v] = counts.get(v, 0) + 1
        kept = sorted((v for v, c in counts.items() if c >= min_count), key=lambda v: (-counts[v], v))
        vocab.append({v: r + 1 for r, v in enumerate(kept)})
    return vocab


def auc(scores, labels):
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum, i, n = 0.0, 0, len(order)
    pos = sum(1 for y in labels if y > 0.5)
    neg = n - pos
    if pos == 0 or neg == 0:
        return float('nan')
    while i < n:
        j = i
        while j < n and scores[order[j]] == scores[order[i]]:
            j += 1
        avg = 0.5 * (i + 1 + j)
        rank_sum += avg * sum(1 for k in range(i, j) if labels[order[k]] > 0.5)
        i = j
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def logloss(probs, labels):
    total = 0.0
    for p, y in zip(probs, labels):
        p = min(max(p, 1e-7), 1 - 1e-7)
        total -= math.log(p) if y > 0.5 else math.log1p(-p)
    return total / max(len(labels), 1)


class RowAdam:
    """Lazy Adam over the rows of sparse-gradient embedding tables, per-row bias corrections."""

    def __init__(self, weights, lr, b1=0.9, b2=0.999, eps=1e-8):
        import torch
        self.torch, self.lr, self.b1, self.b2, self.eps = torch, lr, b1, b2, eps
        self.state = [(w, torch.zeros_like(w), torch.zeros_like(w), torch.zeros(w.shape[0], dtype=torch.float64))
                      for w in weights]

    def zero_grad(self):
        for w, _, _, _ in self.state:
            w.grad = None

    def step(self):
        torch = self.torch
        with torch.no_grad():
            for w, m, v, count in self.state:
                if w.grad is None:
                    continue
                g = w.grad.coalesce()
                rows, vals = g.indices()[0], g.values()
                count[rows] += 1
                t = count[rows]
                c1 = (1.0 / (1.0 - self.b1 ** t)).float().unsqueeze(1)
                c2 = (1.0 / (1.0 - self.b2 ** t)).float().unsqueeze(1)
                mr = self.b1 * m[rows] + (1 - self.b1) * vals
                vr = self.b2 * v[rows] + (1 - self.b2) * vals * vals
                m[rows], v[rows] = mr, vr
                w[rows] -= self.lr * c1 * mr / (torch.sqrt(vr * c2) + self.eps)


def main(argv):
    a = parse_args(argv)
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t0 = time.time()
    tr_y, tr_x, tr_ids = read_criteo(a.train)
    te_y, te_x, te_ids = read_criteo(a.test)
    vocab = vocabularies(tr_ids, a.min_id_count)
    rows = [len(v) + 1 for v in vocab]

    def map_ids(ids):
        return torch.tensor([[vocab[f].get(v, 0) for f, v in enumerate(row)] for row in ids], dtype=torch.long)

    Xtr, Itr, Ytr = torch.tensor(tr_x), map_ids(tr_ids), torch.tensor(tr_y)
    Xte, Ite, Yte = torch.tensor(te_x), map_ids(te_ids), torch.tensor(te_y)
    print(f'read {len(tr_y)} train and {len(te_y)} test samples in {time.time() - t0:.1f} s', flush=True)
    dim = a.embedding_dim

    def mlp(sizes, last_relu):
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes) or last_relu:
                layers.append(torch.nn.ReLU())
        return torch.nn.Sequential(*layers)

    bottom = mlp([13] + widths(a.bottom) + [dim], True)
    tables = torch.nn.ModuleList(torch.nn.Embedding(r, dim, sparse=True) for r in rows)
    for t, r in zip(tables, rows):
        torch.nn.init.uniform_(t.weight, -1 / math.sqrt(r), 1 / math.sqrt(r))
    t_vec = 27
    li, lj = torch.tril_indices(t_vec, t_vec, offset=-1)
    top = mlp([dim + t_vec * (t_vec - 1) // 2] + widths(a.top) + [1], False)

    def forward(x, ids):
        b = bottom(x)
        emb = [b] + [tables[f](ids[:, f]) for f in range(26)]
        z = torch.stack(emb, dim=1)
        dots = torch.bmm(z, z.transpose(1, 2))[:, li, lj]
        return top(torch.cat([b, dots], dim=1)).squeeze(1)

    dense_params = list(bottom.parameters()) + list(top.parameters())
    opt_dense = torch.optim.Adam(dense_params, lr=a.lr)
    opt_sparse = (torch.optim.SparseAdam(list(tables.parameters()), lr=a.lr) if a.sparse_adam
                  else RowAdam(list(tables.parameters()), lr=a.lr))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(a.seed)
    out = open(a.metrics, 'a') if a.metrics else None
    for epoch in range(1, a.epochs + 1):
        order = torch.randperm(len(tr_y), generator=gen)
        t1 = time.time()
        total, seen = 0.0, 0
        for s in range(0, len(order), a.batch):
            idx = order[s:s + a.batch]
            logits = forward(Xtr[idx], Itr[idx])
            loss = loss_fn(logits, Ytr[idx])
            opt_dense.zero_grad()
            opt_sparse.zero_grad()
            loss.backward()
            opt_dense.step()
            opt_sparse.step()
            total += loss.item() * len(idx)
            seen += len(idx)
        seconds = time.time() - t1
        with torch.no_grad():
            probs = torch.cat([torch.sigmoid(forward(Xte[s:s + a.eval_batch], Ite[s:s + a.eval_batch]))
                               for s in range(0, len(te_y), a.eval_batch)]).tolist()
        rec = {'event': 'epoch', 'epoch': epoch, 'loss': total / seen, 'train_samples_per_s': seen / seconds,
               'train_seconds': seconds, 'auc': auc(probs, te_y), 'logloss': logloss(probs, te_y),
               'embedding_parameters': sum(rows) * dim, 'threads': a.threads, 'torch': torch.__version__}
        print(f"epoch {epoch}: loss {rec['loss']:.4f}, {rec['train_samples_per_s']:.0f} train samples/s, "
              f"AUC {rec['auc']:.4f}, logloss {rec['logloss']:.4f}", flush=True)
        if out:
            out.write(json.dumps(rec) + '\n')
            out.flush()


if __name__ == '__main__':
    main(sys.argv[1:])
