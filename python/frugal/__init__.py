"""frugal from Python: train on scipy.sparse matrices (or XMC / Criteo files), predict, evaluate.

    import frugal
    X, Y = frugal.read_xmc("train.txt")                   # CSR features, CSR 0/1 labels
    model = frugal.train(X, Y, test=(Xt, Yt), epochs=2)   # every `frugal train` flag, - as _
    labels, scores = model.predict(Xt, k=5)               # numpy arrays, shape (n, 5)
    S = model.predict(Xt, k=5, sparse=True)               # CSR (n, labels): each row's top 5 scores
    model.evaluate(Xt, Yt)["p@1"]                         # keys as in the metrics log
    model.save("ckpt"); frugal.load("ckpt")               # the CLI's checkpoints
    clf = frugal.XMCClassifier(epochs=2).fit(X, Y)        # scikit-learn's estimator conventions
    clf.predict_proba(Xt, k=5)                            # CSR: each row's top 5 probabilities
    frugal.write_xmc("out.txt", X, Y)                     # the XMC text format frugal train reads

Training runs the library's run API (train/run/run.h: what `frugal train` runs) in this process: the
same options with the same defaults and checks, the same output (through sys.stdout) and the same
checkpoints (docs/python.md).
"""
import contextlib
import numbers
import os
import shutil
import tempfile
import warnings
import weakref

import numpy as np
import scipy.sparse as sp

from . import _core
from ._core import CheckpointError, DataError, Error

__all__ = ["train", "load", "read_xmc", "write_xmc", "Model", "XMCClassifier", "Error", "DataError", "CheckpointError",
           "train_options"]

# frugal.Error: every error the module raises. Its kinds: frugal.DataError (input data refused: the
# checks of the file readers, core/data/point_checks.h, and those of the forms below) and
# frugal.CheckpointError (a checkpoint that cannot be loaded).

_LABEL_FORMS = ("a scipy.sparse 0/1 matrix (points x labels), a list of label lists ([[3, 17], [5], ...]) or a "
                "dense 0/1 numpy array of shape (points, labels)")
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_LARGEST_LABEL = 2**32 - 2  # the label count, largest id + 1, is a 32-bit count


def train_options():
    """{option name: default as `frugal train --help` shows it} of every keyword train() takes."""
    return {name[2:].replace("-", "_"): default for name, default, _ in _core.train_flags()}


def _shown(value):
    """A value as a message quotes it: its repr, cut short (an array's can be megabytes)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _integer(value, keyword, low, high, what):
    """`value` as an int in [low, high]; else frugal.Error naming the keyword."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise Error(f"{keyword}={_shown(value)}: expected {what}, an integer from {low} to {high}")
    if not low <= int(value) <= high:
        raise Error(f"{keyword}={int(value)}: expected {what}, from {low} to {high}")
    return int(value)


def _switch(value, keyword):
    if not isinstance(value, (bool, np.bool_)):
        raise Error(f"{keyword}={_shown(value)}: a switch takes True or False")
    return bool(value)


def _text(value, keyword, expected):
    if not isinstance(value, str):
        raise Error(f"{keyword}={_shown(value)}: expected {expected}")
    return value


def _path(value, keyword):
    if not isinstance(value, (str, os.PathLike)):
        raise Error(f"{keyword}={_shown(value)}: expected a path (a str or os.PathLike)")
    path = os.fsdecode(value)
    if not path:  # the messages about a path start with it: an empty one would name nothing
        raise Error(f"{keyword}='': an empty path: expected a file or folder name")
    return path


@contextlib.contextmanager
def _quiet():
    """No numpy or scipy warning reaches the caller: what is wrong is refused in frugal's words."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _row_of(indptr, position):
    """The row of CSR entry `position`."""
    return int(np.searchsorted(indptr, position, side="right")) - 1


def _real_dtype(dtype):
    return dtype == np.bool_ or np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)


def _features(X, name):
    """X as CSR arrays of frugal's own (float32 values, duplicate entries summed, column ids sorted);
    the caller's matrix is only read. Non-finite values, and ids out of range, are refused by the C++
    side's check_points, as the file readers refuse them; here what the conversion itself needs."""
    if not sp.issparse(X):
        raise DataError(f"{name}: expected a scipy.sparse matrix (CSR, CSC or COO) of feature values, got "
                        f"{type(X).__name__} (scipy.sparse.csr_matrix({name}) makes one)")
    if not _real_dtype(X.dtype):
        raise DataError(f"{name}: feature values of type {X.dtype}: expected real numbers (float32, float64, "
                        "integers or bool)")
    with _quiet():
        X = sp.csr_matrix(X, copy=True)  # a copy even where the format and type are already right
        if X.dtype.kind == "f" and X.dtype.itemsize > 4:
            # A finite value float32 cannot hold would become inf, and say so with the wrong number.
            big = np.flatnonzero(np.isfinite(X.data) & (np.abs(X.data) > _FLOAT32_MAX))
            if big.size:
                raise DataError(f"{name}: row {_row_of(X.indptr, big[0])}: value {X.data[big[0]]!r} is beyond the "
                                f"float32 range (+-{_FLOAT32_MAX:.4g}): expected feature values of a sane scale "
                                "(e.g. in [0, 1] or of unit norm)")
        X = X.astype(np.float32)
        X.sum_duplicates()
    return {"x_indptr": X.indptr, "x_indices": X.indices, "x_data": X.data, "x_columns": X.shape[1]}, X.shape[0]


def _zero_one(values, indptr, name, form):
    """Refuses a label matrix entry other than 0 or 1 (NaN, -1, 0.5, 2), naming the row."""
    bad = np.flatnonzero(~((values == 0) | (values == 1)))
    if bad.size:
        raise DataError(f"{name}: row {_row_of(indptr, bad[0])} holds {values[bad[0]]!r}: {form} holds 0 (no label) "
                        f"or 1 (a label); the label forms are {_LABEL_FORMS}")


def _sparse_labels(Y, name):
    if not _real_dtype(Y.dtype):
        raise DataError(f"{name}: label matrix of type {Y.dtype}: expected 0/1 values")
    Y = sp.csr_matrix(Y, copy=True)
    _zero_one(Y.data, Y.indptr, name, "a sparse label matrix")
    Y.data = (Y.data == 1).astype(np.int8)  # duplicate entries of a label count once
    Y.eliminate_zeros()
    Y.sum_duplicates()
    return Y.indptr, Y.indices, Y.shape[1]


def _dense_labels(Y, name):
    if Y.ndim != 2 or not _real_dtype(Y.dtype):
        raise DataError(f"{name}: a numpy array of shape {Y.shape} and type {Y.dtype}: expected {_LABEL_FORMS}")
    indptr = np.arange(Y.shape[0] + 1, dtype=np.int64) * Y.shape[1]
    _zero_one(Y.reshape(-1), indptr, name, "a dense label array (read as points x labels)")
    rows, columns = np.nonzero(Y)
    indptr = np.zeros(Y.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=Y.shape[0]), out=indptr[1:])
    return indptr, columns.astype(np.int64), Y.shape[1]


def _listed_labels(Y, name):
    lengths, flat = [], []
    for r, row in enumerate(Y):
        if isinstance(row, (str, bytes, dict)) or not hasattr(row, "__iter__") or \
                (isinstance(row, np.ndarray) and row.ndim != 1):
            raise DataError(f"{name}: row {r} is {_shown(row)}, not a list of label ids (for one label per point "
                            f"write [[3], [5], ...]); the label forms are {_LABEL_FORMS}")
        items = list(row)
        lengths.append(len(items))
        flat.extend(items)
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    try:
        indices = np.array(flat)
    except (TypeError, ValueError, OverflowError):  # nested lists of other lengths: refused below
        indices = np.array(flat, dtype=object)
    # True and False are no ids (numpy reads [True, 3] as [1, 3]): the loop below refuses them.
    fits = indices.ndim == 1 and indices.dtype.kind in "iu" and \
        (not indices.size or (indices.min() >= 0 and indices.max() <= _LARGEST_LABEL)) and \
        not any(isinstance(label, (bool, np.bool_)) for label in flat)
    if not fits:
        for position, label in enumerate(flat):  # the first that is no id, named with its row
            whole = isinstance(label, numbers.Integral) or \
                (isinstance(label, numbers.Real) and float(label).is_integer())
            if isinstance(label, (bool, np.bool_)) or not whole or not 0 <= label <= _LARGEST_LABEL:
                why = "label ids start at 0" if whole and label < 0 else "expected a whole number"
                raise DataError(f"{name}: row {_row_of(indptr, position)} has label {_shown(label)}: {why} (label "
                                f"ids are integers from 0 to {_LARGEST_LABEL})")
    indices = indices.astype(np.int64) if indices.size else np.zeros(0, dtype=np.int64)
    # Rows of 0s and 1s of one length, some holding an id twice: a dense 0/1 matrix as lists
    # (Y.tolist()), which read as ids would give every point labels 0 and 1.
    width = lengths[0] if lengths else 0
    if width >= 2 and all(n == width for n in lengths) and indices.max() <= 1:
        sums = indices.reshape(-1, width).sum(axis=1)
        doubled = np.flatnonzero(sums != 1) if width == 2 else np.arange(1)
        if doubled.size:
            raise DataError(f"{name}: every row is {width} values of 0 and 1, and row {int(doubled[0])} lists the same "
                            f"label id twice: a dense 0/1 label matrix given as lists? np.array({name}) is read as "
                            f"one; the label forms are {_LABEL_FORMS}")
    return indptr, indices, int(indices.max()) + 1 if indices.size else 0


def _labels(Y, rows, name, columns=None, fixed=False):
    """Y as CSR arrays of frugal's own: a 0/1 sparse matrix, a dense 0/1 array of shape (points,
    labels), or a list of label lists (then the width is the largest id + 1, or `columns` when wider
    or `fixed`: a model's label count, which an id beyond is refused against, naming its row)."""
    with _quiet():
        if sp.issparse(Y):
            indptr, indices, width = _sparse_labels(Y, name)
        elif isinstance(Y, np.ndarray) and Y.dtype != object:
            indptr, indices, width = _dense_labels(Y, name)
        elif isinstance(Y, (list, tuple, np.ndarray)):
            indptr, indices, width = _listed_labels(Y, name)
            if columns is not None:
                width = columns if fixed else max(width, columns)
        else:
            raise DataError(f"{name}: {type(Y).__name__}: expected {_LABEL_FORMS}")
    if len(indptr) - 1 != rows:
        raise DataError(f"{name} has {len(indptr) - 1} rows but the features have {rows}: one label row per point")
    return {"y_indptr": indptr, "y_indices": indices, "y_columns": width}


def _data(X, Y, name, labels=None, fixed=False):
    x, rows = _features(X, f"{name}X" if name else "X")
    y = _labels(Y, rows, f"{name}Y" if name else "Y", labels, fixed)
    return {**x, **y}


def _flag_args(options):
    """Keyword arguments as `frugal train` flags: hidden=64 -> --hidden 64; quiet=True -> --quiet;
    logq=False -> --logq off; layers=[1024, 1024] -> --layers 1024,1024; dp_keep_param=[..] repeats.
    Returns the arguments and {flag: (keyword, value, words)}: the command line's messages name the
    flag, or start with the value as it got it (a path: "1,2: no checkpoint here")."""
    flags = {name: takes_value for name, _, takes_value in _core.train_flags()}
    args, given = [], {}

    # One value as the command line writes it; the ranges and names it must be within are the run API's
    # option table's (train/run/train_options.h), which reads these words.
    def word(key, value):
        if isinstance(value, (bool, np.bool_)):
            return "on" if value else "off"
        if isinstance(value, (str, numbers.Integral, numbers.Real)):
            return str(value)
        if isinstance(value, os.PathLike):
            return str(os.fspath(value))
        raise Error(f"frugal.train: {key}={_shown(value)}: expected a number, a string, True or False (or, for a "
                    "list option, a list of them)")

    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if flag in ("--train", "--test"):
            raise Error(f"frugal.train: {key}={_shown(value)}: frugal.train takes the {key}ing data as "
                        f"{'X and Y' if key == 'train' else 'test=(X_test, Y_test)'} (or file paths: X=TRAIN_FILE, "
                        "test=TEST_FILE), not as an option")
        if flag not in flags:
            raise Error(f"frugal.train: unknown option {key} (frugal train has no {flag}; see frugal.train_options() "
                        "or docs/cli.md)")
        if value is None:
            continue
        if not flags[flag]:  # a switch
            given[flag] = (key, value, ())
            if _switch(value, f"frugal.train: {key}"):
                args.append(flag)
            continue
        if isinstance(value, (list, tuple)) and key == "dp_keep_param":
            words = [word(key, item) for item in value]
        elif isinstance(value, (list, tuple)):
            words = [",".join(word(key, v) for v in value)]
        else:
            words = [word(key, value)]
        given[flag] = (key, value, tuple(words))
        for w in words:
            args += [flag, w]
    return args, given


def _keyword_named(error, given):
    """The command line's message about a flag, with the keyword it came from named first:
    "frugal.train: batch=0: --batch: 0 is not positive: expected a count from 1 up"."""
    message = str(error)
    if message.startswith("frugal.train: "):
        return error
    for flag, (key, value, _) in given.items():
        if message.startswith((flag + ":", flag + " ")):
            return type(error)(f"frugal.train: {key}={_shown(value)}: {message}")
    # A message about a file or folder a flag names starts with it ("0: no checkpoint here"); the data's
    # start with X, Y, test X: those name the data, not a flag's value that happens to read the same.
    named = [f"{key}={_shown(value)}" for key, value, words in given.values()
             if not isinstance(error, DataError) and any(w and message.startswith(w + ":") for w in words)]
    if named:
        return type(error)(f"frugal.train: {', '.join(named)}: {message}")
    return error


def train(X, Y=None, test=None, progress=None, **options):
    """Trains with `frugal train`'s options (keyword arguments, `_` for `-`, the same defaults) and
    returns the Model of the best epoch on the validation set (a label-stratified share of X held
    back by default, valid_fraction; none for fewer than 5,000 points: then the last epoch's), as
    the checkpoint folder serves it.

    X, Y: scipy.sparse features (any format: a copy is converted to CSR float32) and the labels: a
    0/1 sparse matrix, a list of label lists or a dense 0/1 array of shape (points, labels); or X a
    path to an XMC (or, with model="dlrm", Criteo) training file, text or packed, and Y None. The caller's arrays are
    only read. Data the file readers would refuse (non-finite values, ids out of range) raises
    frugal.DataError naming the row; strict=True makes the readers' warnings errors too.
    test: (X_test, Y_test), a file path like X, or None (no evaluation per epoch).
    progress: called after every epoch with that epoch's record of the metrics log (a dict:
    epoch, loss, p@1, ...); returning False stops training after that epoch (the model trained so
    far is returned); an exception it raises stops training and is raised.
    quiet=True: nothing is printed (warnings go to the "frugal" logger); otherwise the epoch lines
    go to sys.stdout and notes to sys.stderr (contextlib.redirect_stdout captures them).
    checkpoint: where the model is saved (default: a temporary folder, removed with the Model).
    """
    if progress is not None and not callable(progress):
        raise Error(f"frugal.train: progress={_shown(progress)}: expected a function of one argument (the epoch's "
                    "record) or None")
    keep = options.pop("keep_checkpoints", None)
    checkpoint = options.pop("checkpoint", None)
    owned = checkpoint is None
    checkpoint = None if owned else _path(checkpoint, "frugal.train: checkpoint")
    args, given = _flag_args(dict(options, keep_checkpoints=1 if owned and keep is None else keep))
    if not owned:
        given["--checkpoint"] = ("checkpoint", checkpoint, (checkpoint,))
    strict = bool(options.get("strict"))  # a switch: True or False once _flag_args has passed it
    quiet = bool(options.get("quiet"))
    if owned:
        checkpoint = tempfile.mkdtemp(prefix="frugal-model-")
    args = ["--checkpoint", checkpoint] + args
    try:
        if isinstance(X, (str, os.PathLike)):
            if Y is not None:
                raise Error("frugal.train: with X a training file, the labels are in the file: leave Y out")
            if not isinstance(test, (str, os.PathLike)):
                raise Error("frugal.train: with X a training file, give test as a file path too")
            model_epoch = _core.train(["--train", _path(X, "X"), "--test", _path(test, "test")] + args,
                                      progress=progress, strict=strict, quiet=quiet)
        else:
            if Y is None:
                raise Error(f"frugal.train: give the labels Y: {_LABEL_FORMS}")
            data = _data(X, Y, "")
            test_data = None
            if test is not None:
                if not isinstance(test, (tuple, list)) or len(test) != 2:
                    raise Error("frugal.train: test is (X_test, Y_test) when X is a matrix")
                test_data = _data(test[0], test[1], "test ", data["y_columns"])
                # Label ids of the test set beyond the training set's widen both (the CLI's files declare L).
                data["y_columns"] = test_data["y_columns"] = max(data["y_columns"], test_data["y_columns"])
            model_epoch = _core.train(["--train", "X", "--test", "test"] + args, data, test_data, progress, strict,
                                      quiet)
        if not os.path.exists(os.path.join(checkpoint, "manifest.json")):
            # A run of no epoch (epochs=0, or resumed at its last epoch into another folder) saved no model.
            epochs = options.get("epochs")
            raise Error(f"frugal.train: epochs={_shown(epochs if epochs is not None else train_options()['epochs'])}: "
                        "no epoch was trained, so there is no model to return: give epochs from 1 (with resume, more "
                        "than the resumed run's)")
    except Error as e:
        if owned:
            shutil.rmtree(checkpoint, ignore_errors=True)
        named = _keyword_named(e, given)
        if named is e:
            raise
        raise named from None
    except BaseException:
        if owned:
            shutil.rmtree(checkpoint, ignore_errors=True)
        raise
    # The folder serves the run's best epoch on validation (checkpoint/best), as frugal.load does.
    return Model(checkpoint, _owned_folder=checkpoint if owned else None)


_INFER = tuple(_core.infer_modes())  # --infer's names, as the run API declares them


class Model:
    """A trained model: a `frugal train` checkpoint folder loaded for inference, as `frugal predict`
    and `frugal evaluate` load it (--infer auto: as the run was trained to infer)."""

    def __init__(self, path, device="auto", threads=0, infer="auto", batch=512,
                 accept_unchecked_checkpoint=False, _owned_folder=None):
        self.path = _path(path, "path")
        if _owned_folder is not None:  # the temporary folder of train() goes with its Model
            self._cleanup = weakref.finalize(self, shutil.rmtree, _owned_folder, True)
        # The values themselves are checked by the run API's declarations (frugal predict's options).
        infer = _text(infer, "infer", "an inference mode: " + ", ".join(_INFER))
        self._options = dict(
            device=_text(device, "device", "auto, cpu, cuda or cuda:N"),
            threads=_integer(threads, "threads", 0, 2**31 - 1, "compute threads (0: all cores)"),
            infer=infer,
            batch=_integer(batch, "batch", 0, 2**31 - 1, "the points scored at a time"),
            accept_unchecked_checkpoint=_switch(accept_unchecked_checkpoint, "accept_unchecked_checkpoint"))
        self._core = None

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

    def predict(self, X, k=5, sparse=False):
        """The k best labels of every row of X, best first: (labels, scores), numpy arrays of shape
        (n, k) (k at most the label count; scores: the logits, or with --infer ensemble the blended
        probabilities). sparse=True: one scipy.sparse CSR matrix of shape (n, labels) holding each
        row's k scores at its labels' columns instead (PECOS' and pyxclib's form). X is only read."""
        k = _integer(k, "k", 1, 2**63 - 1, "the labels per point")
        sparse = _switch(sparse, "sparse")
        model = self._loaded()
        x, _ = _features(X, "X")
        labels, scores = model.predict(x, min(k, model.num_labels))
        return _top_k_matrix(labels, scores, model.num_labels) if sparse else (labels, scores)

    def predict_proba(self, X, k=5):
        """Each row's k most probable labels and their probabilities under the model, as a CSR
        matrix of shape (n, labels). With exact or LSH inference, the softmax over every label
        (each row is scored against all labels, a block of rows at a time); with --infer ensemble,
        the blend's probabilities. X is only read."""
        k = _integer(k, "k", 1, 2**63 - 1, "the labels per point")
        model = self._loaded()
        x, rows = _features(X, "X")
        k = min(k, model.num_labels)
        if model.infer == "ensemble":
            labels, scores = model.predict(x, k)
            return _top_k_matrix(labels, scores, model.num_labels)
        block = max(1, (1 << 22) // model.num_labels)  # rows scored against every label at once
        parts = []
        indptr = x["x_indptr"]
        for first in range(0, rows, block):
            last = min(rows, first + block)  # rows [first, last) of the converted X, not converted again
            begin, end = indptr[first], indptr[last]
            part = dict(x, x_indptr=indptr[first:last + 1] - begin, x_indices=x["x_indices"][begin:end],
                        x_data=x["x_data"][begin:end])
            labels, logits = model.predict(part, model.num_labels)  # every label, best first
            logits = logits.astype(np.float64)
            top = logits[:, :1]
            log_z = top + np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
            parts.append(_top_k_matrix(labels[:, :k], np.exp(logits[:, :k] - log_z).astype(np.float32),
                                       model.num_labels))
        return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, model.num_labels), dtype=np.float32)

    def evaluate(self, X, Y, k=(1, 3, 5)):
        """P@k, nDCG@k, PSP@k, PSnDCG@k, recall@k and coverage@k on (X, Y) as a dict with the metrics
        log's keys ("p@1", "ndcg@5", ...), as `frugal evaluate --json` computes them. X and Y are
        only read (Y: any of train()'s label forms)."""
        model = self._loaded()
        if isinstance(k, (list, tuple)) or isinstance(k, np.ndarray) and k.ndim > 0:
            if len(k) == 0:
                raise Error("k=(): give at least one cut-off")
            ks = [_integer(v, "k", 1, model.num_labels, "cut-offs up to the model's label count") for v in k]
        else:
            ks = [_integer(k, "k", 1, model.num_labels, "a cut-off up to the model's label count")]
        return model.evaluate(_data(X, Y, "", model.num_labels, fixed=True), ks)

    def save(self, path):
        """Copies the checkpoint folder to `path` (which must not exist): `frugal predict --model
        PATH`, `frugal evaluate` and frugal.load read it."""
        path = _path(path, "path")
        if os.path.lexists(path):
            raise Error(f"{path}: already exists: Model.save copies the checkpoint into a new folder")
        try:
            shutil.copytree(self.path, path)
        except (OSError, shutil.Error) as e:
            shutil.rmtree(path, ignore_errors=True)  # no partial copy that frugal.load would read
            raise Error(f"{path}: cannot save the model there: {getattr(e, 'strerror', None) or e}") from None
        return path

    def __repr__(self):
        return f"frugal.Model({self.path!r})"


def _top_k_matrix(labels, scores, num_labels):
    """(n, k) labels and scores as a CSR matrix of shape (n, num_labels), columns sorted per row."""
    n, k = labels.shape
    m = sp.csr_matrix((scores.ravel(), labels.ravel().astype(np.int64), np.arange(0, n * k + 1, k)),
                      shape=(n, num_labels))
    m.sort_indices()
    return m


_LOAD_OPTIONS = ("device", "threads", "infer", "batch", "accept_unchecked_checkpoint")


def load(path, **options):
    """The Model in a checkpoint folder (of `frugal train --checkpoint`, or Model.save). Options:
    device, threads, infer (auto, exact, lsh, ensemble), batch, accept_unchecked_checkpoint."""
    unknown = sorted(set(options) - set(_LOAD_OPTIONS))
    if unknown:
        raise Error(f"frugal.load: unknown option {unknown[0]} (the options are {', '.join(_LOAD_OPTIONS)})")
    path = _path(path, "path")
    if not os.path.isdir(path):
        raise CheckpointError(f"{path}: no such checkpoint folder")
    model = Model(path, **options)
    model._loaded()  # a damaged or missing checkpoint fails here, not at the first predict
    return model


def read_xmc(path):
    """An XMC text file (or its packed form, `frugal data pack`) as (X, Y): CSR features (float32) and a CSR 0/1 label matrix. A file the
    reader refuses raises frugal.DataError naming it (and the line)."""
    d = _core.read_xmc(_path(path, "path"))
    rows = len(d["x_indptr"]) - 1
    X = sp.csr_matrix((d["x_data"], d["x_indices"], d["x_indptr"]), shape=(rows, d["x_columns"]))
    Y = sp.csr_matrix((np.ones(len(d["y_indices"]), dtype=np.float32), d["y_indices"], d["y_indptr"]),
                      shape=(rows, d["y_columns"]))
    return X, Y


def write_xmc(path, X, Y):
    """Writes (X, Y) as an XMC text file (docs/data.md: a header `N F L`, then a line per row,
    `l1,l2 f:v f:v ...`), which `frugal train --train` and frugal.read_xmc read back. X: scipy.sparse
    features; Y: any of train()'s label forms. The arrays are only read; the file is written whole
    or not at all (a temporary file renamed into place)."""
    path = _path(path, "path")
    if os.path.lexists(path) and not os.path.isfile(path):
        raise Error(f"{path}: not a regular file: write_xmc writes a new file or replaces one")
    d = _data(X, Y, "")
    x_ptr, x_ids, x_val = d["x_indptr"], d["x_indices"], d["x_data"]
    y_ptr, y_ids = d["y_indptr"], d["y_indices"]
    rows = len(x_ptr) - 1
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".frugal-xmc-", dir=folder)
    except OSError as e:
        raise Error(f"{path}: cannot write there: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(f"{rows} {d['x_columns']} {d['y_columns']}\n")
            for i in range(rows):
                labels = ",".join(map(str, y_ids[y_ptr[i]:y_ptr[i + 1]].tolist()))
                features = " ".join(f"{j}:{v:.9g}" for j, v in zip(x_ids[x_ptr[i]:x_ptr[i + 1]].tolist(),
                                                                    x_val[x_ptr[i]:x_ptr[i + 1]].tolist()))
                f.write(f"{labels} {features}\n" if labels and features else f"{labels or features}\n")
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise Error(f"{path}: cannot write there: {e.strerror}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


class XMCClassifier:
    """frugal.train as a scikit-learn style estimator: XMCClassifier(**options) takes train()'s
    keyword options (`frugal train`'s flags, - as _, the same defaults); fit(X, Y) trains and returns
    the estimator; predict(X, k) gives each row's k best labels, predict_proba(X, k) their
    probabilities (CSR), score(X, Y) the P@1. get_params / set_params / clone work as scikit-learn's
    (the options are the parameters). After fit: model_ (the frugal.Model), history_ (the epochs'
    records), n_features_in_ and n_labels_."""

    def __init__(self, **options):
        self._check_names(options)
        self._params = dict(options)

    @staticmethod
    def _check_names(options):
        known = set(train_options()) | {"checkpoint", "strict", "quiet"}
        for name in options:
            if name not in known or name in ("train", "test"):
                raise Error(f"XMCClassifier: unknown option {name} (frugal.train_options() lists them)")

    def get_params(self, deep=True):  # noqa: ARG002 (scikit-learn's signature)
        return dict(self._params)

    def set_params(self, **params):
        self._check_names(params)
        self._params.update(params)
        return self

    def fit(self, X, Y, test=None, progress=None):
        """Trains on (X, Y) (train()'s forms; test and progress as train()'s) and returns self."""
        if progress is not None and not callable(progress):
            raise Error(f"XMCClassifier.fit: progress={_shown(progress)}: expected a function of one argument (the "
                        "epoch's record) or None")
        history = []

        def record(epoch):
            history.append(epoch)
            return progress(epoch) if progress is not None else None

        self.model_ = train(X, Y, test=test, progress=record, **self._params)
        self.history_ = history
        self.n_features_in_ = self.model_.num_features
        self.n_labels_ = self.model_.num_labels
        return self

    def _model(self):
        model = getattr(self, "model_", None)
        if model is None:
            raise Error("XMCClassifier: not fitted yet: call fit(X, Y) first")
        return model

    def predict(self, X, k=1):
        """Each row's k best labels, best first: an int array of shape (n, k)."""
        return self._model().predict(X, k)[0]

    def predict_proba(self, X, k=5):
        """Each row's k most probable labels with their probabilities: CSR of shape (n, labels)."""
        return self._model().predict_proba(X, k)

    def decision_function(self, X, k=5):
        """Each row's k best labels' scores (logits, or the ensemble's blend): CSR (n, labels)."""
        return self._model().predict(X, k, sparse=True)

    def score(self, X, Y):
        """P@1 on (X, Y) (scikit-learn's score: higher is better)."""
        return self._model().evaluate(X, Y, k=1)["p@1"]

    def __repr__(self):
        options = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"XMCClassifier({options})"
