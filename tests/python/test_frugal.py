"""`import frugal`: training from scipy.sparse and from files, predict, evaluate, checkpoints shared
with the command line, errors, the progress callback and the GIL (test_inputs.py: the caller's
data, the input checks and the errors' words). Run by meson (test `python`) with
PYTHONPATH=BUILD/python and FRUGAL=BUILD/apps/frugal."""
import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

import frugal

FRUGAL = os.environ["FRUGAL"]
QUIET = dict(quiet=True, threads=1)


def run(*args):
    return subprocess.run([FRUGAL, *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("xmc")
    run("data", "synth-xmc", "--features", "1000", "--labels", "100", "--train", "2000", "--test", "300",
        "--nnz", "20", "--labels-per-point", "2", "--seed", "5", "--out", str(out))
    X, Y = frugal.read_xmc(out / "train.txt")
    Xt, Yt = frugal.read_xmc(out / "test.txt")
    return dict(dir=out, X=X, Y=Y, Xt=Xt, Yt=Yt)


@pytest.fixture(scope="session")
def model(data):
    return frugal.train(data["X"], data["Y"], test=(data["Xt"], data["Yt"]), epochs=2, hidden=32, seed=2, **QUIET)


def epochs_of(path):
    return [json.loads(line) for line in open(path) if '"event":"epoch"' in line.replace(" ", "")]


def test_read_xmc(data):
    X, Y = data["X"], data["Y"]
    assert sp.isspmatrix_csr(X) and sp.isspmatrix_csr(Y)
    assert X.shape == (2000, 1000) and Y.shape == (2000, 100) and X.dtype == np.float32
    assert set(np.unique(Y.data)) == {1.0}
    with open(data["dir"] / "train.txt") as f:
        f.readline()
        first = f.readline().split()
    labels = sorted(int(v) for v in first[0].split(","))
    assert sorted(Y[0].indices.tolist()) == labels


def test_predict_shapes_and_order(model, data):
    labels, scores = model.predict(data["Xt"], k=5)
    assert labels.shape == (300, 5) and scores.shape == (300, 5)
    assert labels.dtype == np.uint32 and scores.dtype == np.float32
    assert (labels < 100).all()
    assert (np.diff(scores, axis=1) <= 0).all()  # best first
    big, _ = model.predict(data["Xt"], k=1000)  # at most the label count, as frugal predict
    assert big.shape == (300, 100)


def test_evaluate_equals_command_line(model, data, tmp_path):
    metrics = model.evaluate(data["Xt"], data["Yt"])
    assert {"p@1", "p@3", "p@5", "ndcg@5", "psp@5", "recall@5", "coverage@5"} <= set(metrics)
    assert 0.0 < metrics["p@1"] <= 1.0
    saved = model.save(tmp_path / "m")
    cli = json.loads(run("evaluate", "--model", saved, "--test", str(data["dir"] / "test.txt"), "--json").stdout)
    assert metrics == cli


def test_same_run_as_the_command_line(data, tmp_path):
    """frugal.train on matrices read from the files trains bit for bit as `frugal train` on the files."""
    log = tmp_path / "py.jsonl"
    frugal.train(data["X"], data["Y"], test=(data["Xt"], data["Yt"]), epochs=2, hidden=32, seed=7,
                 metrics=str(log), **QUIET)
    run("train", "--train", str(data["dir"] / "train.txt"), "--test", str(data["dir"] / "test.txt"), "--epochs", "2",
        "--hidden", "32", "--seed", "7", "--threads", "1", "--quiet", "--metrics", str(tmp_path / "cli.jsonl"))
    py, cli = epochs_of(log), epochs_of(tmp_path / "cli.jsonl")
    assert len(py) == len(cli) == 2
    for a, b in zip(py, cli):
        assert (a["loss"], a["p@1"], a["p@5"], a["steps"]) == (b["loss"], b["p@1"], b["p@5"], b["steps"])


def test_label_lists_equal_csr_labels(data, tmp_path):
    Y = data["Y"]
    lists = [Y.indices[Y.indptr[i]:Y.indptr[i + 1]].tolist() for i in range(Y.shape[0])]
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    frugal.train(data["X"], Y, epochs=1, hidden=16, seed=3, metrics=str(a), **QUIET)
    frugal.train(data["X"], lists, epochs=1, hidden=16, seed=3, metrics=str(b), **QUIET)
    assert epochs_of(a)[0]["loss"] == epochs_of(b)[0]["loss"]
    # No test set: the epoch is trained and its test metrics are null, not zeros.
    assert epochs_of(a)[0]["p@1"] is None


def test_train_from_files(data):
    m = frugal.train(str(data["dir"] / "train.txt"), test=str(data["dir"] / "test.txt"), epochs=1, hidden=16, **QUIET)
    assert m.epoch == 1 and m.num_labels == 100 and m.num_features == 1000


def test_save_load_and_command_line_predict(model, data, tmp_path):
    saved = model.save(tmp_path / "model")
    again = frugal.load(saved)
    assert again.epoch == model.epoch == 2
    l1, s1 = model.predict(data["Xt"], k=3)
    l2, s2 = again.predict(data["Xt"], k=3)
    assert (l1 == l2).all() and (s1 == s2).all()
    out = run("predict", "--model", saved, "--input", str(data["dir"] / "test.txt"), "--top-k", "3").stdout.splitlines()
    assert [int(p.split(":")[0]) for p in out[0].split()] == l1[0].tolist()


def test_checkpoint_and_resume_with_the_command_line(data, tmp_path):
    ckpt = tmp_path / "ckpt"
    files = dict(train=str(data["dir"] / "train.txt"), test=str(data["dir"] / "test.txt"))
    run("train", "--train", files["train"], "--test", files["test"], "--epochs", "1", "--hidden", "16", "--threads",
        "1", "--quiet", "--checkpoint", str(ckpt))
    m = frugal.train(data["X"], data["Y"], test=(data["Xt"], data["Yt"]), epochs=2, hidden=16, resume=str(ckpt),
                     checkpoint=str(ckpt), **QUIET)
    assert m.path == str(ckpt) and m.epoch == 2
    assert os.path.isdir(ckpt)  # a checkpoint the caller named stays


def test_progress_callback(data):
    seen = []
    frugal.train(data["X"], data["Y"], test=(data["Xt"], data["Yt"]), epochs=3, hidden=16, progress=seen.append,
                 **QUIET)
    assert [r["epoch"] for r in seen] == [1, 2, 3]
    assert all(r["event"] == "epoch" and "loss" in r and "p@1" in r for r in seen)


def test_an_exception_in_the_callback_stops_training(data):
    class Stop(Exception):
        pass

    def stop(record):
        raise Stop(record["epoch"])

    with pytest.raises(Stop) as e:
        frugal.train(data["X"], data["Y"], epochs=5, hidden=16, progress=stop, **QUIET)
    assert e.value.args == (1,)


def test_the_gil_is_released_while_training(data):
    """Another Python thread runs while C++ trains: the main thread ticks between the epochs."""
    ticks, marks = [0], []
    done = threading.Event()

    def train():
        try:
            frugal.train(data["X"], data["Y"], epochs=3, hidden=128, batch=32, progress=lambda r: marks.append(ticks[0]),
                         **QUIET)
        finally:
            done.set()

    t = threading.Thread(target=train)
    t.start()
    while not done.is_set():
        time.sleep(0.001)
        ticks[0] += 1
    t.join()
    assert len(marks) == 3
    # Had the C++ side kept the GIL, this thread could not tick during epochs 2 and 3.
    assert marks[2] - marks[0] >= 5, marks


def test_options_are_the_command_lines(data):
    options = frugal.train_options()
    help_text = run("train", "--help").stdout
    for name in options:
        assert "--" + name.replace("_", "-") in help_text
    assert options["batch"] == "128" and options["epochs"] == "auto" and options["hidden"] == "auto"


@pytest.mark.parametrize("kwargs, words", [
    (dict(batch=0), "--batch: 0 is not positive"),
    (dict(optimizer="adamw"), "--optimizer: adamw not in"),
    (dict(no_such_option=1), "unknown option no_such_option"),
    (dict(quiet="yes"), "a switch takes True or False"),
    (dict(stream="on"), "--stream on: the training set is given in memory"),
])
def test_bad_options(data, kwargs, words):
    with pytest.raises(frugal.Error, match=words):
        frugal.train(data["X"], data["Y"], epochs=1, **kwargs)


def test_bad_data(data, model, tmp_path):
    X, Y = data["X"], data["Y"]
    with pytest.raises(frugal.DataError, match="Y has 10 rows but the features have 2000"):
        frugal.train(X, Y[:10], epochs=1, **QUIET)
    with pytest.raises(frugal.DataError, match="expected a scipy.sparse matrix"):
        frugal.train(X.toarray(), Y, epochs=1, **QUIET)
    with pytest.raises(frugal.DataError, match="label ids start at 0"):
        frugal.train(X[:2], [[1], [-3]], epochs=1, **QUIET)
    wide = sp.csr_matrix((np.ones(1, dtype=np.float32), ([0], [1500])), shape=(1, 2000))
    with pytest.raises(frugal.DataError, match="X has 2000 feature columns, the model has 1000"):
        model.predict(wide, k=1)
    with pytest.raises(frugal.CheckpointError, match="no such checkpoint folder"):
        frugal.load(tmp_path / "missing")
    broken = tmp_path / "broken"
    model.save(broken)
    manifest = broken / "manifest.json"
    edited = json.loads(manifest.read_text())
    edited["epoch"] += 1  # an edit the manifest's own checksum catches
    manifest.write_text(json.dumps(edited))
    with pytest.raises(frugal.CheckpointError, match="manifest"):
        frugal.load(broken)
