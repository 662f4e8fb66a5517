"""What Python users of scikit-learn, PECOS and pyxclib expect of `import frugal` (issue 63): the
estimator (XMCClassifier: get_params / set_params / clone, fit returns self, predict, predict_proba
as probabilities, score), predictions as a CSR score matrix, write_xmc, output through Python's own
streams (quiet prints nothing; contextlib.redirect_stdout captures the epoch lines), a progress
callback that stops training and still returns the model, and early stopping that returns the best
epoch's model. Run by meson (test `python`) with PYTHONPATH=BUILD/python and FRUGAL=BUILD/apps/frugal."""
import contextlib
import io
import logging
import os
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import frugal

FRUGAL = os.environ["FRUGAL"]
FAST = dict(threads=1, hidden=16, seed=3)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("est")
    subprocess.run([FRUGAL, "data", "synth-xmc", "--features", "400", "--labels", "60", "--train", "600", "--test",
                    "150", "--nnz", "12", "--labels-per-point", "2", "--seed", "4", "--out", str(out)],
                   check=True, capture_output=True)
    X, Y = frugal.read_xmc(out / "train.txt")
    Xt, Yt = frugal.read_xmc(out / "test.txt")
    return dict(dir=out, X=X, Y=Y, Xt=Xt, Yt=Yt)


def test_estimator_conventions(data):
    clf = frugal.XMCClassifier(epochs=2, quiet=True, **FAST)
    assert clf.get_params() == dict(epochs=2, quiet=True, **FAST)
    assert clf.set_params(epochs=3) is clf and clf.get_params()["epochs"] == 3
    # clone as scikit-learn's does it: the class called with get_params(), the parameters the same objects.
    twin = type(clf)(**clf.get_params(deep=False))
    assert twin.get_params() == clf.get_params() and twin is not clf
    with pytest.raises(frugal.Error, match="unknown option"):
        frugal.XMCClassifier(epochz=2)
    with pytest.raises(frugal.Error, match="not fitted"):
        clf.predict(data["Xt"])
    assert clf.fit(data["X"], data["Y"]) is clf
    assert clf.n_features_in_ == data["X"].shape[1] and clf.n_labels_ == data["Y"].shape[1]
    assert [r["epoch"] for r in clf.history_] == [1, 2, 3]
    top = clf.predict(data["Xt"], k=3)
    assert top.shape == (data["Xt"].shape[0], 3)
    assert 0.0 <= clf.score(data["Xt"], data["Yt"]) <= 1.0
    assert clf.score(data["Xt"], data["Yt"]) == clf.model_.evaluate(data["Xt"], data["Yt"])["p@1"]
    try:  # scikit-learn itself, where it is installed
        from sklearn.base import clone
    except ImportError:
        return
    assert clone(clf).get_params() == clf.get_params()


def test_probabilities_and_sparse_scores(data):
    clf = frugal.XMCClassifier(epochs=1, quiet=True, **FAST).fit(data["X"], data["Y"])
    P = clf.predict_proba(data["Xt"], k=4)
    assert sp.isspmatrix_csr(P) and P.shape == (data["Xt"].shape[0], data["Y"].shape[1])
    assert np.all(P.getnnz(axis=1) == 4)
    assert np.all(P.data > 0) and np.all(P.data <= 1)
    # Probabilities over every label: all of them sum to 1 per row.
    full = clf.predict_proba(data["Xt"], k=data["Y"].shape[1])
    assert np.allclose(np.asarray(full.sum(axis=1)).ravel(), 1.0, atol=1e-4)
    # The top 4 are the model's top 4 labels, in the same order of preference.
    labels, scores = clf.model_.predict(data["Xt"], k=4)
    S = clf.model_.predict(data["Xt"], k=4, sparse=True)
    assert sp.isspmatrix_csr(S) and S.shape == P.shape
    for i in range(5):
        assert set(S[i].indices) == set(labels[i]) == set(P[i].indices)
        assert np.allclose(S[i, labels[i]].toarray().ravel(), scores[i])
        probs = P[i, labels[i]].toarray().ravel()
        assert np.all(np.diff(probs) <= 1e-7)


def test_write_xmc_round_trip(data, tmp_path):
    path = frugal.write_xmc(tmp_path / "copy.txt", data["X"], data["Y"])
    X2, Y2 = frugal.read_xmc(path)
    assert (abs(X2 - data["X"]) > 0).nnz == 0 and (Y2 != data["Y"]).nnz == 0
    # The command line reads it too.
    r = subprocess.run([FRUGAL, "data", "stats", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # Labels as lists, a row without labels and one without features.
    X = sp.csr_matrix(np.array([[0, 1.5, 0], [0, 0, 0], [2, 0, 0.25]], dtype=np.float32))
    path = frugal.write_xmc(tmp_path / "small.txt", X, [[1], [0, 2], []])
    X3, Y3 = frugal.read_xmc(path)
    assert (X3 != X).nnz == 0 and Y3.toarray().tolist() == [[0, 1, 0], [1, 0, 1], [0, 0, 0]]


def test_quiet_prints_nothing(data, capfd):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        frugal.train(data["X"], data["Y"], test=(data["Xt"], data["Yt"]), epochs=1, quiet=True, **FAST)
    captured = capfd.readouterr()
    assert out.getvalue() == "" and err.getvalue() == ""
    assert captured.out == "" and captured.err == ""


def test_redirect_stdout_captures_the_epoch_lines(data, capfd):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        frugal.train(data["X"], data["Y"], test=(data["Xt"], data["Yt"]), epochs=2, **FAST)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("epoch ")]
    assert len(lines) == 2 and "P@1" in lines[0]
    assert "epoch 1:" not in capfd.readouterr().out  # nothing went around Python's sys.stdout


def test_warnings_go_to_logging_when_quiet(data, caplog):
    X = data["X"].copy().tolil()
    X[0, 0] = 1e30  # a feature value beyond any sane scale: a warning, not an error
    with caplog.at_level(logging.WARNING, logger="frugal"):
        frugal.train(X.tocsr(), data["Y"], epochs=1, quiet=True, **FAST)
    assert any("frugal" == r.name for r in caplog.records)


def test_progress_may_stop_training(data):
    seen = []

    def progress(record):
        seen.append(record["epoch"])
        return record["epoch"] < 2  # False after epoch 2: stop there

    model = frugal.train(data["X"], data["Y"], test=(data["Xt"], data["Yt"]), epochs=5, quiet=True,
                         progress=progress, **FAST)
    assert seen == [1, 2] and model.epoch == 2
    assert model.predict(data["Xt"], k=1)[0].shape == (data["Xt"].shape[0], 1)


def test_early_stopping_returns_the_best_epoch(data, tmp_path):
    records = []
    model = frugal.train(data["X"], data["Y"], epochs=6, valid_fraction=0.3, early_stopping=1, lr=0.5,
                         checkpoint=tmp_path / "ck", quiet=True, progress=records.append, **FAST)
    valid = {r["epoch"]: r["valid_p@1"] + r["valid_p@5"] for r in records}  # the validation score
    best = max(valid, key=lambda e: (valid[e], -e))
    assert model.epoch == best
    # The folder serves its best epoch (ck/best) to frugal.load as to the returned Model.
    assert model.path == str(tmp_path / "ck")
    assert frugal.load(tmp_path / "ck").epoch == best
    assert all(r["best_epoch"] == max((e for e in valid if e <= r["epoch"]), key=lambda e: (valid[e], -e))
               for r in records)


def test_packed_files_read_as_their_text(data, tmp_path):
    # `frugal data pack` (issue 66): read_xmc and frugal.train(path) take the packed form: the text's data.
    packed = tmp_path / "train.fpk"
    subprocess.run([FRUGAL, "data", "pack", str(data["dir"] / "train.txt"), str(packed)], check=True,
                   capture_output=True)
    X, Y = frugal.read_xmc(packed)
    assert (X != data["X"]).nnz == 0 and (Y != data["Y"]).nnz == 0
    losses = []
    for train in (data["dir"] / "train.txt", packed):
        epochs = []
        frugal.train(str(train), test=str(data["dir"] / "test.txt"), epochs=1, quiet=True,
                     progress=lambda record: epochs.append(record) or True, **FAST)
        losses.append(epochs[-1]["loss"])
    assert losses[0] == losses[1], losses
