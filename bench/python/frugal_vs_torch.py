#!/usr/bin/python3
"""frugal and PyTorch trained from Python on the same scipy.sparse matrices, side by side.

Both train the network of bench/baselines/torch_xmc.py (sparse input -> hidden ReLU -> softmax over
the labels, loss: cross-entropy against the point's labels weighted 1/|labels|, batch 128): frugal
through `frugal.train` with its defaults (LSH-sampled softmax, row-wise Adam), PyTorch with the exact
softmax, dense Adam at lr 1e-3 and the same thread count (OpenBLAS, the allocator tunables and the
re-exec of torch_xmc.py's fairness fixes). Each epoch: training time and samples/s, then P@1 / P@5
on the test matrices (PyTorch: torch_xmc's evaluate; frugal: its epoch record, the same definition).

Usage (after the test command; Debian's python3-torch and libopenblas0-pthread: without OpenBLAS torch
runs on the reference BLAS, ~10x slower, and the script says so):
  /usr/bin/python3 bench/python/frugal_vs_torch.py --out .bench/python [--seeds 1,2,3] [--epochs 3]
      [--data DIR with train.txt and test.txt | synthetic: --features 50000 --labels 20000 ...]
Writes OUT/results.json and prints one table; PYTHONPATH is set to build/python by the script.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "baselines"))
import torch_xmc  # noqa: E402  (the PyTorch baseline's model, batching and metrics)

REEXEC_MARK = "FRUGAL_VS_TORCH_ENV"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", help="folder with train.txt and test.txt (XMC); default: synth-xmc with the sizes below")
    ap.add_argument("--features", type=int, default=50000)
    ap.add_argument("--labels", type=int, default=20000)
    ap.add_argument("--train", type=int, default=40000)
    ap.add_argument("--test", type=int, default=4000)
    # Noisy points (80% noise features, 40 per point): still learning after 3 epochs (frugal P@1 ~0.89,
    # P@5 ~0.40), where the default generator's set saturates at P@1 0.99 and hides differences.
    ap.add_argument("--noise", type=float, default=0.8)
    ap.add_argument("--nnz", type=int, default=40)
    ap.add_argument("--data-seed", type=int, default=11)
    ap.add_argument("--seeds", default="1", help="training seeds, e.g. 1,2,3 (the spread is reported)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-lr", type=float, default=1e-3)
    ap.add_argument("--skip-torch", action="store_true", help="frugal only (no python3-torch)")
    return ap.parse_args()


def fair_env(args):
    """torch_xmc's fixes need the loader's environment: re-exec once with them (and PYTHONPATH)."""
    if os.environ.get(REEXEC_MARK) == "1":
        return
    env = dict(os.environ, **{REEXEC_MARK: "1", "OPENBLAS_NUM_THREADS": str(args.threads),
                              "OMP_NUM_THREADS": str(args.threads)})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(args.build, "python"), env.get("PYTHONPATH")) if p)
    if "glibc.malloc." not in env.get("GLIBC_TUNABLES", ""):
        env["GLIBC_TUNABLES"] = ":".join(t for t in (env.get("GLIBC_TUNABLES", ""), torch_xmc.MALLOC_TUNABLES) if t)
    blas = next((d for d in torch_xmc.OPENBLAS_DIRS if os.path.exists(os.path.join(d, "libblas.so.3"))), None)
    if blas:
        env["LD_LIBRARY_PATH"] = ":".join([blas] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)


class TorchData:
    """scipy CSR features and labels as the tensors torch_xmc's helpers read (XmcData's fields)."""

    def __init__(self, torch, X, Y):
        self.n, self.num_features = X.shape
        self.num_labels = Y.shape[1]
        self.indptr = torch.from_numpy(X.indptr.astype("int64"))
        self.indices = torch.from_numpy(X.indices.astype("int64"))
        self.values = torch.from_numpy(X.data.astype("float32"))
        self.lptr = torch.from_numpy(Y.indptr.astype("int64"))
        self.labels = torch.from_numpy(Y.indices.astype("int64"))


def train_torch(args, seed, X, Y, Xt, Yt):
    import torch
    import torch.nn as nn
    torch.set_num_threads(args.threads)
    blas = torch_xmc.mapped_blas()
    if not any("openblas" in p or "mkl" in p for p in blas):
        print("WARNING: torch runs on the reference BLAS (~10x slower than OpenBLAS): install libopenblas0-pthread "
              "for a fair baseline", file=sys.stderr, flush=True)
    train, test = TorchData(torch, X, Y), TorchData(torch, Xt, Yt)
    torch.manual_seed(seed)
    model = torch_xmc.make_model(torch, nn, train.num_features, args.hidden, train.num_labels, False)
    opt = torch.optim.Adam(model.parameters(), lr=args.torch_lr)
    shuffle = torch.Generator().manual_seed(seed)
    steps = (train.n + args.batch - 1) // args.batch
    epochs = []
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(train.n, generator=shuffle)
        loss_sum, start = 0.0, time.perf_counter()
        for step in range(steps):
            idx = perm[step * args.batch:(step + 1) * args.batch]
            b = idx.numel()
            offs, pos, _ = torch_xmc.gather_rows(train.indptr, idx)
            _, lpos, llen = torch_xmc.gather_rows(train.lptr, idx)
            lrows = torch.repeat_interleave(torch.arange(b), llen)
            lw = 1.0 / llen.clamp(min=1).to(torch.float32)[lrows]
            logp = torch.log_softmax(model(train.indices[pos], offs, train.values[pos]), dim=1)
            loss = -(logp[lrows, train.labels[lpos]] * lw).sum() / b
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += float(loss) * b
        seconds = time.perf_counter() - start
        p1, p5 = torch_xmc.evaluate(torch, model, test, "cpu", 512)
        epochs.append({"epoch": epoch, "loss": loss_sum / train.n, "train_seconds": seconds,
                       "train_samples_per_s": train.n / seconds, "p@1": p1, "p@5": p5})
        print(f"  torch  seed {seed} epoch {epoch}: {seconds:.1f} s, {train.n / seconds:.0f} samples/s, "
              f"P@1 {p1:.4f}, P@5 {p5:.4f}", flush=True)
    return {"version": torch.__version__, "blas": blas, "epochs": epochs}


def train_frugal(args, seed, X, Y, Xt, Yt):
    import frugal
    epochs = []

    def progress(r):
        epochs.append({k: r[k] for k in ("epoch", "loss", "train_seconds", "train_samples_per_s", "p@1", "p@5")})
        print(f"  frugal seed {seed} epoch {r['epoch']}: {r['train_seconds']:.1f} s, {r['train_samples_per_s']:.0f} "
              f"samples/s, P@1 {r['p@1']:.4f}, P@5 {r['p@5']:.4f}", flush=True)

    frugal.train(X, Y, test=(Xt, Yt), epochs=args.epochs, hidden=args.hidden, batch=args.batch,
                 threads=args.threads, seed=seed, quiet=True, progress=progress)
    return {"epochs": epochs}


def spread(values):
    return {"mean": statistics.mean(values), "min": min(values), "max": max(values), "values": values}


def main():
    args = parse_args()
    fair_env(args)
    import frugal
    os.makedirs(args.out, exist_ok=True)
    data = args.data
    if data is None:
        data = os.path.join(args.out, "data")
        if not os.path.exists(os.path.join(data, "test.txt")):
            subprocess.run([os.path.join(args.build, "apps", "frugal"), "data", "synth-xmc", "--features",
                            str(args.features), "--labels", str(args.labels), "--train", str(args.train), "--test",
                            str(args.test), "--noise", str(args.noise), "--nnz", str(args.nnz), "--seed",
                            str(args.data_seed), "--out", data], check=True,
                           stdout=subprocess.DEVNULL)
    X, Y = frugal.read_xmc(os.path.join(data, "train.txt"))
    Xt, Yt = frugal.read_xmc(os.path.join(data, "test.txt"))
    load_start = os.getloadavg()
    print(f"data {data}: {X.shape[0]} train / {Xt.shape[0]} test points, {X.shape[1]} features, {Y.shape[1]} labels; "
          f"{args.threads} threads; load average {load_start[0]:.2f}", flush=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = []
    for seed in seeds:
        run = {"seed": seed, "frugal": train_frugal(args, seed, X, Y, Xt, Yt)}
        if not args.skip_torch:
            run["torch"] = train_torch(args, seed, X, Y, Xt, Yt)
        runs.append(run)
    load_end = os.getloadavg()
    systems = ["frugal"] + ([] if args.skip_torch else ["torch"])
    summary = {}
    for system in systems:
        last = [r[system]["epochs"][-1] for r in runs]
        summary[system] = {
            "p@1": spread([e["p@1"] for e in last]), "p@5": spread([e["p@5"] for e in last]),
            # Epochs after the first: the first carries one-time costs (page faults, table builds).
            "train_samples_per_s": spread([statistics.mean(e["train_samples_per_s"] for e in r[system]["epochs"][1:] or
                                                           r[system]["epochs"]) for r in runs])}
    result = {"data": data, "shape": {"train": X.shape[0], "test": Xt.shape[0], "features": X.shape[1],
                                      "labels": Y.shape[1]},
              "args": vars(args), "load_average": {"start": load_start, "end": load_end},
              "cpu": os.cpu_count(), "runs": runs, "summary": summary}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nafter {args.epochs} epochs, {len(seeds)} seed(s) {seeds} (mean [min, max]); load average "
          f"{load_start[0]:.2f} -> {load_end[0]:.2f}")
    print("| system | P@1 | P@5 | train samples/s |")
    print("|---|---|---|---|")
    for system in systems:
        s = summary[system]
        cell = lambda m, f: f"{m['mean']:{f}} [{m['min']:{f}}, {m['max']:{f}}]"  # noqa: E731
        print(f"| {system} | {cell(s['p@1'], '.4f')} | {cell(s['p@5'], '.4f')} | "
              f"{cell(s['train_samples_per_s'], '.0f')} |")
    if not args.skip_torch:
        ratio = summary["frugal"]["train_samples_per_s"]["mean"] / summary["torch"]["train_samples_per_s"]["mean"]
        print(f"frugal / torch training speed: {ratio:.2f}x")


if __name__ == "__main__":
    main()
