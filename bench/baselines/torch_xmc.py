#!/usr/bin/python3
"""PyTorch baselines for frugal's extreme-classification network: dense (full softmax) and sampled softmax.

The network, loss and metrics are the ones `frugal train` uses, so the two can be compared:
  sparse input x (F features) -> hidden h = relu(x W1 + b1) (H units) -> logits = h W2 + b2 (L labels)
  loss  = softmax cross-entropy against the point's labels, each label weighted 1/|labels|
          (the target distribution is uniform over the point's labels; a point without labels adds 0),
          averaged over the points of the batch
  P@k   = |top-k predictions ∩ true labels| / k, averaged over ALL test points (a point without labels
          still counts in the denominator)
  Adam  = torch.optim.Adam, default betas/eps, dense gradients over every parameter (what a user of a
          dense framework gets); --sparse-adam switches the first layer to sparse gradients + SparseAdam.

--loss sampled (bench/single_node's `torch_sampled`): what a practitioner writes instead of a full
softmax over 10^5-10^6 labels on a CPU. Each step scores the union of the batch's true labels and
--negatives labels drawn (with replacement) from the training label frequencies raised to --alpha,
shared by the batch; every candidate's logit is corrected by -log(expected draws of it) (logQ; a
candidate is drawn S*q(c) times in expectation), a point's own labels are its targets and every
other candidate is its negative (other points' labels too: in-batch negatives). The output layer is
an nn.Embedding pair (weights, bias) with sparse gradients, so SparseAdam updates only the gathered
rows; the first layer is sparse as well (SparseAdam), the hidden bias dense Adam. Inference and
P@k score every label (exact), as frugal's --infer exact does.

Usage (Debian's python3-torch, CPU):
  /usr/bin/python3 bench/baselines/torch_xmc.py --train train.txt --test test.txt \
      --hidden 128 --batch 128 --epochs 3 --lr 1e-3 --threads 2 --seed 1 --device cpu --metrics out.jsonl
  (on a GPU: --device cuda [--amp bf16]; --max-steps N ends each epoch after N steps)

Fairness: Debian's torch links the generic libblas.so.3. If that resolves to the reference BLAS the
output layer's matmuls run ~10x slower than they should, so the script re-executes itself with
OpenBLAS's directory first on LD_LIBRARY_PATH (and OpenBLAS's thread count = --threads), then prints
which BLAS library is really mapped into the process. The same re-exec sets glibc malloc tunables
so that PyTorch's per-step allocations reuse memory instead of page-faulting it in again each step
(see ensure_fair_env); --no-env-fix turns all of this off.
Only the Python standard library and torch are used.
"""
import argparse
import json
import math
import os
import resource
import sys
import time
from array import array

OPENBLAS_DIRS = ('/usr/lib/x86_64-linux-gnu/openblas-pthread', '/usr/lib/x86_64-linux-gnu/openblas-openmp')
REEXEC_MARK = 'FRUGAL_TORCH_XMC_ENV'
MALLOC_TUNABLES = 'glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4000000000'


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--train', required=True, help='XMC training file')
    ap.add_argument('--test', required=True, help='XMC test file')
    ap.add_argument('--hidden', type=int, default=128)
    ap.add_argument('--batch', type=int, default=128)
    ap.add_argument('--epochs', type=int, default=3)
    ap.add_argument('--lr', type=float, default=1e-3)
    ap.add_argument('--threads', type=int, default=2, help='torch intra-op threads and OpenBLAS threads')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--device', choices=('cpu', 'cuda'), default='cpu')
    ap.add_argument('--metrics', help='JSON-lines file: one line is appended per epoch')
    ap.add_argument('--loss', choices=('full', 'sampled'), default='full',
                    help='full: softmax over every label (the dense baseline); sampled: shared negatives from '
                         'label frequency^alpha with logQ correction, sparse Adam on the gathered rows')
    ap.add_argument('--negatives', type=int, default=4096,
                    help='--loss sampled: negatives drawn per batch (shared by its points)')
    ap.add_argument('--alpha', type=float, default=0.75,
                    help='--loss sampled: proposal q(label) proportional to (training count + 1)^alpha '
                         '(0: uniform, 1: frequency)')
    ap.add_argument('--sparse-adam', action='store_true',
                    help='first layer with sparse gradients + torch.optim.SparseAdam (lazy, like frugal); '
                         'default: dense gradients + Adam, as a typical dense user would run it')
    ap.add_argument('--eval-batch', type=int, default=512, help='test points per evaluation batch')
    ap.add_argument('--amp', choices=('none', 'bf16'), default='none',
                    help='bf16: forward and loss under torch.autocast(bfloat16) (weights, gradients and Adam '
                         'stay fp32; log_softmax runs in fp32 as autocast does); default none: fp32 throughout')
    ap.add_argument('--max-steps', type=int, default=0,
                    help='end each epoch after N steps, as frugal train --max-steps (throughput runs); 0: whole epochs')
    ap.add_argument('--progress-every', type=float, default=10.0, help='seconds between progress lines')
    ap.add_argument('--no-env-fix', action='store_true',
                    help='do not re-execute with OpenBLAS on LD_LIBRARY_PATH, OpenBLAS threads = --threads and the '
                         'malloc tunables (to measure the setup a user gets without them)')
    a = ap.parse_args(argv)
    if a.max_steps < 0:
        ap.error('--max-steps must be >= 0')
    for name in ('hidden', 'batch', 'epochs', 'threads', 'eval_batch'):
        if getattr(a, name) < 1:
            ap.error(f'--{name.replace("_", "-")} must be >= 1')
    if not (a.lr > 0 and math.isfinite(a.lr)):
        ap.error('--lr must be a positive number')
    if a.negatives < 1:
        ap.error('--negatives must be >= 1')
    if not (0.0 <= a.alpha <= 2.0):
        ap.error('--alpha must be in [0, 2]')
    return a


def ensure_fair_env(args):
    """Re-exec once so the dynamic loader sees the environment before torch is loaded.

    LD_LIBRARY_PATH is read only at process start, so setting it from Python after start is useless;
    OPENBLAS_NUM_THREADS is read when libopenblas is loaded (at `import torch`). torch.set_num_threads
    does not reach OpenBLAS's own pthread pool, which would otherwise use every core of the machine.
    """
    if args.no_env_fix or os.environ.get(REEXEC_MARK) == '1':
        return
    env = dict(os.environ)
    env[REEXEC_MARK] = '1'
    env['OPENBLAS_NUM_THREADS'] = str(args.threads)
    env['OMP_NUM_THREADS'] = str(args.threads)
    # PyTorch allocates fresh temporaries every step (dense F x H gradients, B x L logits: ~500 MB a
    # step here). glibc serves blocks that large with mmap and unmaps them on free, so each step
    # page-faults all of it in again: 135k faults and ~1 s a step in this VM, 4-8x the compute. These
    # glibc tunables keep freed memory in the heap for reuse and back it with transparent huge pages,
    # so the baseline pays for its arithmetic, not for the VM's page faults (faults/step 135k -> ~10).
    if 'glibc.malloc.' not in env.get('GLIBC_TUNABLES', ''):
        env['GLIBC_TUNABLES'] = ':'.join(t for t in (env.get('GLIBC_TUNABLES', ''), MALLOC_TUNABLES) if t)
    blas_dir = next((d for d in OPENBLAS_DIRS if os.path.exists(os.path.join(d, 'libblas.so.3'))), None)
    if blas_dir:
        paths = [p for p in env.get('LD_LIBRARY_PATH', '').split(':') if p]
        if blas_dir not in paths:
            env['LD_LIBRARY_PATH'] = ':'.join([blas_dir] + paths)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)


def mapped_blas():
    """The BLAS/LAPACK shared objects actually mapped into this process (what torch really calls)."""
    libs = set()
    try:
        with open('/proc/self/maps') as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ''
                base = os.path.basename(path)
                if any(s in base for s in ('blas', 'lapack', 'mkl_')):
                    libs.add(path)
    except OSError:
        pass
    return sorted(libs)


class XmcData:
    """One XMC file as CSR arrays: features (indptr, indices, values) and labels (lptr, labels)."""

    def __init__(self, path):
        import torch
        self.path = path
        ind = array('q')
        val = array('f')
        ptr = array('q', [0])
        lab = array('q')
        lptr = array('q', [0])
        with open(path, 'r') as f:
            header = f.readline().split()
            if len(header) != 3 or not all(t.isdigit() for t in header):
                raise SystemExit(f'{path}:1: expected header "N F L" (three non-negative integers), '
                                 f'got {" ".join(header)!r}')
            self.n, self.num_features, self.num_labels = map(int, header)
            count = 0
            for lineno, line in enumerate(f, start=2):
                count += 1
                if count > self.n:
                    raise SystemExit(f'{path}:{lineno}: more points than the header says ({self.n})')
                toks = line.split()
                # The label list is the first token unless it is a feature (has ':'), i.e. the line
                # starts with a space or is only features: then the point has no labels.
                if toks and ':' not in toks[0]:
                    try:
                        ls = sorted({int(t) for t in toks[0].split(',')})   # duplicates collapse
                    except ValueError:
                        raise SystemExit(f'{path}:{lineno}: bad label list {toks[0]!r} '
                                         f'(expected comma-separated label ids)')
                    if ls and (ls[0] < 0 or ls[-1] >= self.num_labels):
                        raise SystemExit(f'{path}:{lineno}: label id out of range [0, {self.num_labels}) '
                                         f'in {toks[0]!r}')
                    lab.extend(ls)
                    toks = toks[1:]
                lptr.append(len(lab))
                if toks:
                    # One split over the whole line is ~3x faster than a Python loop per token.
                    flat = ' '.join(toks).replace(':', ' ').split()
                    if len(flat) != 2 * len(toks):
                        raise SystemExit(f'{path}:{lineno}: bad feature token (expected id:value)')
                    try:
                        ids = [int(t) for t in flat[0::2]]
                        vs = [float(t) for t in flat[1::2]]
                    except ValueError as e:
                        raise SystemExit(f'{path}:{lineno}: bad feature token: {e}')
                    if min(ids) < 0 or max(ids) >= self.num_features:
                        raise SystemExit(f'{path}:{lineno}: feature id out of range [0, {self.num_features})')
                    if not all(math.isfinite(v) for v in vs):
                        raise SystemExit(f'{path}:{lineno}: non-finite feature value')
                    ind.extend(ids)
                    val.extend(vs)
                ptr.append(len(ind))
            if count != self.n:
                raise SystemExit(f'{path}: header says {self.n} points but the file has {count}')
        self.indptr = torch.frombuffer(ptr, dtype=torch.int64).clone()
        self.indices = torch.frombuffer(ind, dtype=torch.int64).clone() if len(ind) else torch.zeros(0, dtype=torch.int64)
        self.values = torch.frombuffer(val, dtype=torch.float32).clone() if len(val) else torch.zeros(0)
        self.lptr = torch.frombuffer(lptr, dtype=torch.int64).clone()
        self.labels = torch.frombuffer(lab, dtype=torch.int64).clone() if len(lab) else torch.zeros(0, dtype=torch.int64)

    def to(self, device):
        for name in ('indptr', 'indices', 'values', 'lptr', 'labels'):
            setattr(self, name, getattr(self, name).to(device))
        return self


def gather_rows(ptr, idx):
    """For CSR row pointers `ptr` and row ids `idx`: (offsets[B+1], flat positions) of those rows'
    entries, vectorized so batch assembly stays out of the Python interpreter."""
    import torch
    starts = ptr[idx]
    lens = ptr[idx + 1] - starts
    offsets = torch.zeros(idx.numel() + 1, dtype=torch.int64, device=idx.device)
    torch.cumsum(lens, 0, out=offsets[1:])
    total = int(offsets[-1])
    pos = torch.repeat_interleave(starts - offsets[:-1], lens, output_size=total) \
        + torch.arange(total, device=idx.device)
    return offsets, pos, lens


def make_model(torch, nn, F, H, L, sparse):
    class XmcNet(nn.Module):
        """sparse x -> relu(x W1 + b1) -> h W2 + b2.

        First layer: nn.EmbeddingBag(mode='sum', per_sample_weights=values) computes x W1 for CSR
        input directly. Measured on this CPU (F=100k, H=128, B=128, 75 nnz, 2 threads), forward +
        backward of the first layer: EmbeddingBag 105 ms, torch.sparse.mm with COO 212 ms, CSR @ W
        223 ms — the sparse-matrix routes build and reduce an extra dense F x H product on backward.
        (With dense gradients most of the 105 ms is allocating the dense F x H gradient itself.)
        EmbeddingBag is also the idiomatic PyTorch layer for this and runs unchanged on CUDA.
        """

        def __init__(self):
            super().__init__()
            self.w1 = nn.EmbeddingBag(F, H, mode='sum', sparse=sparse)
            self.b1 = nn.Parameter(torch.empty(H))
            self.out = nn.Linear(H, L)
            # EmbeddingBag's default init is N(0, 1), which would make the first layer 1/sqrt(F)
            # times larger than the nn.Linear(F, H) it stands for; use nn.Linear's default init
            # (uniform in +-1/sqrt(fan_in) for weights and bias) so it is the layer a user would write.
            bound = 1.0 / math.sqrt(F)
            nn.init.uniform_(self.w1.weight, -bound, bound)
            nn.init.uniform_(self.b1, -bound, bound)

        def forward(self, indices, offsets, values):
            h = torch.relu(self.w1(indices, offsets[:-1], per_sample_weights=values) + self.b1)
            return self.out(h)

    return XmcNet()


def make_sampled_model(torch, nn, F, H, L):
    class SampledXmcNet(nn.Module):
        """The same network with the output layer as sparse embeddings: W2 (L x H) and b2 (L x 1),
        gathered per step for the candidate labels only, so their gradients are row-sparse."""

        def __init__(self):
            super().__init__()
            self.w1 = nn.EmbeddingBag(F, H, mode='sum', sparse=True)
            self.b1 = nn.Parameter(torch.empty(H))
            self.out_w = nn.Embedding(L, H, sparse=True)
            self.out_b = nn.Embedding(L, 1, sparse=True)
            # nn.Linear's default init for both layers (uniform in +-1/sqrt(fan_in)), as the dense model.
            for t, fan_in in ((self.w1.weight, F), (self.b1, F), (self.out_w.weight, H), (self.out_b.weight, H)):
                bound = 1.0 / math.sqrt(fan_in)
                nn.init.uniform_(t, -bound, bound)

        def hidden(self, indices, offsets, values):
            return torch.relu(self.w1(indices, offsets[:-1], per_sample_weights=values) + self.b1)

        def candidate_logits(self, h, candidates):
            return h @ self.out_w(candidates).t() + self.out_b(candidates).squeeze(1)

        def forward(self, indices, offsets, values):   # every label: evaluation
            return self.hidden(indices, offsets, values) @ self.out_w.weight.t() + self.out_b.weight.squeeze(1)

    return SampledXmcNet()


class NegativeSampler:
    """Shared negatives from q(label) ~ (training count + 1)^alpha: the inverse CDF searched for
    uniform draws (O(S log L) a step, not a pass over every label as torch.multinomial makes)."""

    def __init__(self, torch, data, alpha, draws, seed, device):
        counts = torch.bincount(data.labels.cpu(), minlength=data.num_labels).double()
        q = (counts + 1.0).pow(alpha)
        q /= q.sum()
        self.cdf = torch.cumsum(q, 0).to(device)
        self.cdf[-1] = 1.0
        self.log_expected = torch.log(q * draws).float().to(device)   # log of the draws of a label expected
        self.draws = draws
        self.torch = torch
        self.gen = torch.Generator(device=device).manual_seed(seed + 0x5a3)

    def sample(self):
        torch = self.torch
        u = torch.rand(self.draws, generator=self.gen, device=self.cdf.device, dtype=torch.float64)
        return torch.searchsorted(self.cdf, u).clamp_(max=self.cdf.numel() - 1)


def evaluate(torch, model, data, device, eval_batch):
    """P@1 and P@5 over every test point (points without labels count in the denominator)."""
    hits1 = 0
    hits5 = 0
    model.eval()
    with torch.no_grad():
        for s in range(0, data.n, eval_batch):
            idx = torch.arange(s, min(s + eval_batch, data.n), device=device)
            offs, pos, _ = gather_rows(data.indptr, idx)
            logits = model(data.indices[pos], offs, data.values[pos])
            top = torch.topk(logits, min(5, logits.shape[1]), dim=1).indices   # [b, 5], best first
            _, lpos, llen = gather_rows(data.lptr, idx)
            rows = torch.repeat_interleave(torch.arange(idx.numel(), device=device), llen)
            match = top[rows] == data.labels[lpos].unsqueeze(1)         # [labels, 5]; labels unique per point
            hits1 += int(match[:, 0].sum())
            hits5 += int(match.sum())
    model.train()
    return hits1 / data.n, hits5 / (5.0 * data.n)


def main():
    args = parse_args(sys.argv[1:])
    ensure_fair_env(args)

    import torch
    import torch.nn as nn

    torch.set_num_threads(args.threads)
    blas = mapped_blas()
    print(f'torch {torch.__version__}, device {args.device}, threads {torch.get_num_threads()}, '
          f'OPENBLAS_NUM_THREADS={os.environ.get("OPENBLAS_NUM_THREADS", "unset")}', flush=True)
    print(f'GLIBC_TUNABLES={os.environ.get("GLIBC_TUNABLES", "unset")}', flush=True)
    print('BLAS mapped: ' + (', '.join(blas) if blas else 'none found in /proc/self/maps'), flush=True)
    if args.device == 'cpu' and not any('openblas' in p or 'mkl' in p for p in blas):
        print('WARNING: no optimized BLAS is loaded (reference BLAS is ~10x slower); install '
              'libopenblas0-pthread for a fair baseline', file=sys.stderr, flush=True)
    if args.device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit('--device cuda: this torch build has no usable CUDA device')
    device = torch.device(args.device)

    t0 = time.perf_counter()
    train = XmcData(args.train)
    test = XmcData(args.test)
    if (test.num_features, test.num_labels) != (train.num_features, train.num_labels):
        raise SystemExit(f'{args.test}: header F/L ({test.num_features} {test.num_labels}) differ from '
                         f'{args.train} ({train.num_features} {train.num_labels})')
    print(f'read {train.n} train / {test.n} test points, {train.num_features} features, '
          f'{train.num_labels} labels in {time.perf_counter() - t0:.1f} s', flush=True)
    train.to(device)
    test.to(device)

    torch.manual_seed(args.seed)
    F, L, H = train.num_features, train.num_labels, args.hidden
    sampler = None
    if args.loss == 'sampled':
        model = make_sampled_model(torch, nn, F, H, L).to(device)
        sampler = NegativeSampler(torch, train, args.alpha, args.negatives, args.seed, device)
        sparse = [model.w1.weight, model.out_w.weight, model.out_b.weight]
        optims = [torch.optim.SparseAdam(sparse, lr=args.lr), torch.optim.Adam([model.b1], lr=args.lr)]
    elif args.sparse_adam:
        model = make_model(torch, nn, F, H, L, True).to(device)
        dense = [p for n, p in model.named_parameters() if not n.startswith('w1.')]
        optims = [torch.optim.SparseAdam(list(model.w1.parameters()), lr=args.lr),
                  torch.optim.Adam(dense, lr=args.lr)]
    else:
        model = make_model(torch, nn, F, H, L, False).to(device)
        optims = [torch.optim.Adam(model.parameters(), lr=args.lr)]
    # Shuffling has its own generator so the order depends only on --seed, not on the init draws.
    shuffle_gen = torch.Generator().manual_seed(args.seed)

    if args.metrics:
        os.makedirs(os.path.dirname(os.path.abspath(args.metrics)), exist_ok=True)
        with open(args.metrics, 'a') as f:
            f.write(json.dumps({'event': 'start', 'system': 'torch', 'torch': torch.__version__, 'loss': args.loss,
                                **({'negatives': args.negatives, 'alpha': args.alpha} if sampler else {}),
                                'device': args.device, 'threads': args.threads, 'blas': blas,
                                'glibc_tunables': os.environ.get('GLIBC_TUNABLES', ''),
                                'optimizer': 'adam+sparse_adam' if args.sparse_adam or sampler else 'adam',
                                'amp': args.amp, 'max_steps': args.max_steps,
                                'hidden': H, 'batch': args.batch, 'lr': args.lr, 'seed': args.seed,
                                'train': args.train, 'test': args.test}) + '\n')

    sync = torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)
    steps = (train.n + args.batch - 1) // args.batch
    if args.max_steps:
        steps = min(steps, args.max_steps)
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp == 'bf16')
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(train.n, generator=shuffle_gen).to(device)
        loss_sum = torch.zeros((), device=device)
        samples = 0
        sync()
        start = time.perf_counter()
        last_print = start
        for step in range(steps):
            idx = perm[step * args.batch:(step + 1) * args.batch]
            b = idx.numel()
            offs, pos, _ = gather_rows(train.indptr, idx)
            _, lpos, llen = gather_rows(train.lptr, idx)
            lrows = torch.repeat_interleave(torch.arange(b, device=device), llen)
            # weight 1/|labels| per label: the target distribution is uniform over the point's labels
            lw = 1.0 / llen.clamp(min=1).to(torch.float32)[lrows]

            with amp:
                if sampler is None:
                    logits = model(train.indices[pos], offs, train.values[pos])
                    logp = torch.log_softmax(logits, dim=1)
                    loss = -(logp[lrows, train.labels[lpos]].float() * lw).sum() / b
                else:
                    # Candidates: the batch's labels and the shared draws, once each; a label's
                    # column is where unique put it.
                    batch_labels = train.labels[lpos]
                    cand, where = torch.unique(torch.cat([batch_labels, sampler.sample()]), return_inverse=True)
                    h = model.hidden(train.indices[pos], offs, train.values[pos])
                    logits = model.candidate_logits(h, cand) - sampler.log_expected[cand]
                    logp = torch.log_softmax(logits, dim=1)
                    loss = -(logp[lrows, where[:batch_labels.numel()]].float() * lw).sum() / b

            for o in optims:
                # set_to_none: the fresh gradient tensor is adopted instead of being added into a
                # zeroed one, saving a full pass over both 12.8M-float weight matrices per step.
                o.zero_grad(set_to_none=True)
            loss.backward()
            for o in optims:
                o.step()
            loss_sum += loss.detach() * b
            samples += b

            now = time.perf_counter()
            if now - last_print >= args.progress_every or step + 1 == steps:
                last_print = now
                print(f'epoch {epoch} step {step + 1}/{steps} samples {samples}/{train.n} '
                      f'loss {float(loss):.4f} {samples / (now - start):.1f} samples/s', flush=True)
        sync()
        train_seconds = time.perf_counter() - start
        epoch_loss = float(loss_sum) / samples

        t_eval = time.perf_counter()
        p1, p5 = evaluate(torch, model, test, device, args.eval_batch)
        eval_seconds = time.perf_counter() - t_eval
        rec = {'event': 'epoch', 'epoch': epoch, 'loss': epoch_loss,
               'train_samples_per_s': samples / train_seconds, 'train_seconds': train_seconds,
               'steps': steps, 'samples': samples,
               'p@1': p1, 'p@5': p5,
               'peak_rss_bytes': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        print(f'epoch {epoch}: loss {epoch_loss:.4f}  {rec["train_samples_per_s"]:.1f} samples/s '
              f'({train_seconds:.1f} s)  P@1 {p1:.4f}  P@5 {p5:.4f}  (eval {eval_seconds:.1f} s)  '
              f'peak RSS {rec["peak_rss_bytes"] / 2**20:.0f} MiB', flush=True)
        if args.metrics:
            with open(args.metrics, 'a') as f:
                f.write(json.dumps(rec) + '\n')


if __name__ == '__main__':
    main()
