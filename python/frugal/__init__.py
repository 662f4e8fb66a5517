"""frugal from Python: train on scipy.sparse matrices (or XMC / Criteo files), predict, evaluate.

    import frugal
    X, Y = frugal.read_xmc("train.txt")                   # CSR features, CSR 0/1 labels
    model = frugal.train(X, Y, test=(Xt, Yt), epochs=2)   # every `frugal train` flag, - as _
    labels, scores = model.predict(Xt, k=5)               # numpy arrays, shape (n, 5)
    model.evaluate(Xt, Yt)["p@1"]                         # keys as in the metrics log
    model.save("ckpt"); frugal.load("ckpt")               # the CLI's checkpoints

Training runs `frugal train` itself in this process: the same options with the same defaults and
checks, the same output on stdout and the same checkpoints (docs/python.md).
"""
import os
import shutil
import tempfile
import weakref

import numpy as np
import scipy.sparse as sp

from . import _core
from ._core import Error

__all__ = ["train", "load", "read_xmc", "Model", "Error", "train_options"]


def train_options():
    """{option name: default as `frugal train --help` shows it} of every keyword train() takes."""
    return {name[2:].replace("-", "_"): default for name, default, _ in _core.train_flags()}


def _features(X, name):
    if not sp.issparse(X):
        raise Error(f"{name}: expected a scipy.sparse matrix (CSR), got {type(X).__name__}")
    X = sp.csr_matrix(X, dtype=np.float32)
    X.sum_duplicates()
    return {"x_indptr": X.indptr, "x_indices": X.indices, "x_data": X.data, "x_columns": X.shape[1]}, X.shape[0]


def _labels(Y, rows, name, columns=None):
    """Y as CSR arrays: a 0/1 CSR matrix, or a list of label lists (columns: the widest id + 1)."""
    if sp.issparse(Y):
        Y = sp.csr_matrix(Y)
        Y.sum_duplicates()
        Y.eliminate_zeros()
        width = Y.shape[1]
        indptr, indices = Y.indptr, Y.indices
    else:
        try:
            lists = [list(map(int, row)) for row in Y]
        except TypeError:
            raise Error(f"{name}: expected a CSR 0/1 label matrix or a list of label lists") from None
        indptr = np.zeros(len(lists) + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([len(row) for row in lists])
        indices = np.fromiter((label for row in lists for label in row), dtype=np.int64, count=int(indptr[-1]))
        if indices.size and indices.min() < 0:
            raise Error(f"{name}: label ids start at 0, found {int(indices.min())}")
        width = int(indices.max()) + 1 if indices.size else 0
        if columns is not None:
            width = max(width, columns)
    if len(indptr) - 1 != rows:
        raise Error(f"{name} has {len(indptr) - 1} rows but the features have {rows}: one label row per point")
    return {"y_indptr": indptr, "y_indices": indices, "y_columns": width}


def _data(X, Y, name, labels=None):
    x, rows = _features(X, f"{name}X" if name else "X")
    y = _labels(Y, rows, f"{name}Y" if name else "Y", labels)
    return {**x, **y}


def _flag_args(options):
    """Keyword arguments as `frugal train` flags: hidden=64 -> --hidden 64; quiet=True -> --quiet;
    logq=False -> --logq off; layers=[1024, 1024] -> --layers 1024,1024; dp_keep_param=[..] repeats."""
    flags = {name: takes_value for name, _, takes_value in _core.train_flags()}
    args = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if flag not in flags or flag in ("--train", "--test"):
            raise Error(f"frugal.train: unknown option {key} (frugal train has no {flag}; see frugal.train_options() "
                        "or docs/cli.md)")
        if value is None:
            continue
        if not flags[flag]:  # a switch
            if value is True:
                args.append(flag)
            elif value is not False:
                raise Error(f"frugal.train: {key}={value!r}: a switch takes True or False")
            continue
        if value is True or value is False:
            args += [flag, "on" if value else "off"]
        elif isinstance(value, (list, tuple)) and key == "dp_keep_param":
            for item in value:
                args += [flag, str(item)]
        elif isinstance(value, (list, tuple)):
            args += [flag, ",".join(str(v) for v in value)]
        else:
            args += [flag, str(value)]
    return args


def train(X, Y=None, test=None, progress=None, **options):
    """Trains with `frugal train`'s options (keyword arguments, `_` for `-`, the same defaults) and
    returns the Model of the last epoch.

    X, Y: scipy.sparse CSR features and a CSR 0/1 label matrix or a list of label lists; or X a
    path to an XMC (or, with model="dlrm", Criteo) training file and Y None.
    test: (X_test, Y_test), a file path like X, or None (no evaluation per epoch).
    progress: called after every epoch with that epoch's record of the metrics log (a dict:
    epoch, loss, p@1, ...); an exception it raises stops training.
    checkpoint: where the model is saved (default: a temporary folder, removed with the Model).
    """
    keep = options.pop("keep_checkpoints", None)
    checkpoint = options.pop("checkpoint", None)
    owned = checkpoint is None
    if owned:
        checkpoint = tempfile.mkdtemp(prefix="frugal-model-")
        keep = 1 if keep is None else keep
    args = ["--checkpoint", str(checkpoint)] + _flag_args(dict(options, keep_checkpoints=keep))
    try:
        if isinstance(X, (str, os.PathLike)):
            if Y is not None:
                raise Error("frugal.train: with X a training file, the labels are in the file: leave Y out")
            if not isinstance(test, (str, os.PathLike)):
                raise Error("frugal.train: with X a training file, give test as a file path too")
            _core.train(["--train", str(X), "--test", str(test)] + args, progress=progress)
        else:
            if Y is None:
                raise Error("frugal.train: give the labels Y (a CSR 0/1 matrix or a list of label lists)")
            data = _data(X, Y, "")
            test_data = None
            if test is not None:
                if not isinstance(test, (tuple, list)) or len(test) != 2:
                    raise Error("frugal.train: test is (X_test, Y_test) when X is a matrix")
                test_data = _data(test[0], test[1], "test ", data["y_columns"])
                # Label ids of the test set beyond the training set's widen both (the CLI's files declare L).
                data["y_columns"] = test_data["y_columns"] = max(data["y_columns"], test_data["y_columns"])
            _core.train(["--train", "X", "--test", "test"] + args, data, test_data, progress)
    except BaseException:
        if owned:
            shutil.rmtree(checkpoint, ignore_errors=True)
        raise
    return Model(checkpoint, _owned=owned)


class Model:
    """A trained model: a `frugal train` checkpoint folder loaded for inference, as `frugal predict`
    and `frugal evaluate` load it (--infer auto: as the run was trained to infer)."""

    def __init__(self, path, device="auto", threads=0, infer="auto", batch=512,
                 accept_unchecked_checkpoint=False, _owned=False):
        self.path = str(path)
        self._options = dict(device=device, threads=threads, infer=infer, batch=batch,
                             accept_unchecked_checkpoint=accept_unchecked_checkpoint)
        self._core = None
        if _owned:  # the temporary folder of train() goes with its Model
            self._cleanup = weakref.finalize(self, shutil.rmtree, self.path, True)

    def _loaded(self):
        if self._core is None:
            self._core = _core.Model(self.path, **self._options)
        return self._core

    @property
    def num_features(self):
        return self._loaded().num_features

    @property
    def num_labels(self):
        return self._loaded().num_labels

    @property
    def epoch(self):
        return self._loaded().epoch

    def predict(self, X, k=5):
        """The k best labels of every row of X, best first: (labels, scores), numpy arrays of shape
        (n, k) (k at most the label count; scores: the logits, or with --infer ensemble the blended
        probabilities)."""
        x, _ = _features(X, "X")
        return self._loaded().predict(x, int(k))

    def evaluate(self, X, Y, k=(1, 3, 5)):
        """P@k, nDCG@k, PSP@k, PSnDCG@k, recall@k and coverage@k on (X, Y) as a dict with the metrics
        log's keys ("p@1", "ndcg@5", ...), as `frugal evaluate --json` computes them."""
        ks = [int(k)] if np.isscalar(k) else [int(v) for v in k]
        return self._loaded().evaluate(_data(X, Y, ""), ks)

    def save(self, path):
        """Copies the checkpoint folder to `path` (which must not exist): `frugal predict --model
        PATH`, `frugal evaluate` and frugal.load read it."""
        shutil.copytree(self.path, str(path))
        return str(path)

    def __repr__(self):
        return f"frugal.Model({self.path!r})"


def load(path, **options):
    """The Model in a checkpoint folder (of `frugal train --checkpoint`, or Model.save). Options:
    device, threads, infer (auto, exact, lsh, ensemble), batch, accept_unchecked_checkpoint."""
    if not os.path.isdir(str(path)):
        raise Error(f"{path}: no such checkpoint folder")
    model = Model(path, **options)
    model._loaded()  # a damaged or missing checkpoint fails here, not at the first predict
    return model


def read_xmc(path):
    """An XMC text file as (X, Y): CSR features (float32) and a CSR 0/1 label matrix."""
    d = _core.read_xmc(str(path))
    rows = len(d["x_indptr"]) - 1
    X = sp.csr_matrix((d["x_data"], d["x_indices"], d["x_indptr"]), shape=(rows, d["x_columns"]))
    Y = sp.csr_matrix((np.ones(len(d["y_indices"]), dtype=np.float32), d["y_indices"], d["y_indptr"]),
                      shape=(rows, d["y_columns"]))
    return X, Y
