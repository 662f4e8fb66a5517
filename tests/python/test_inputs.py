"""`import frugal` and the caller's data (issue 62): the caller's arrays are never changed, the data
is checked as the file readers check theirs (core/data/point_checks.h), the label forms, and every
error is a frugal.Error in frugal's words, naming the keyword, with no numpy warning and no pybind11
argument dump. Run by meson (test `python`) with PYTHONPATH=BUILD/python and FRUGAL=BUILD/apps/frugal."""
import copy
import json
import os
import subprocess
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import frugal

FRUGAL = os.environ["FRUGAL"]
QUIET = dict(quiet=True, threads=1, epochs=1, hidden=8, seed=1)


@pytest.fixture(autouse=True)
def no_warnings():
    """A numpy or scipy warning raised anywhere in a test is an error: none may reach the caller."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("small")
    subprocess.run([FRUGAL, "data", "synth-xmc", "--features", "300", "--labels", "40", "--train", "400", "--test",
                    "100", "--nnz", "12", "--labels-per-point", "2", "--seed", "9", "--out", str(out)],
                   check=True, capture_output=True)
    X, Y = frugal.read_xmc(out / "train.txt")
    Xt, Yt = frugal.read_xmc(out / "test.txt")
    # Labels in id order: the list form keeps the order it is given, the matrix forms sort.
    return dict(dir=out, X=X, Y=Y.sorted_indices(), Xt=Xt, Yt=Yt.sorted_indices())


@pytest.fixture(scope="module")
def model(small):
    return frugal.train(small["X"], small["Y"], test=(small["Xt"], small["Yt"]), **QUIET)


# ---------------------------------------------------------------------------------------------
# The caller's data is only read.

def unsorted(X, seed):
    """X (CSR) with every row's entries in another order: the same matrix, not canonical."""
    rng = np.random.default_rng(seed)
    X = X.tocsr(copy=True)
    for r in range(X.shape[0]):
        a, b = X.indptr[r], X.indptr[r + 1]
        order = rng.permutation(b - a) + a
        X.indices[a:b] = X.indices[order]
        X.data[a:b] = X.data[order]
    X.has_sorted_indices = False
    return X


def with_duplicates(X):
    """X (CSR) with every row's first entry split into two halves stored apart (same sum)."""
    X = X.tocsr(copy=True)
    data, indices, indptr = [], [], [0]
    for r in range(X.shape[0]):
        a, b = X.indptr[r], X.indptr[r + 1]
        row_i, row_d = list(X.indices[a:b]), list(X.data[a:b])
        if row_i:
            row_i.append(row_i[0])
            row_d[0] = row_d[0] / 2
            row_d.append(row_d[0])
        indices += row_i
        data += row_d
        indptr.append(len(indices))
    return sp.csr_matrix((np.array(data, dtype=X.dtype), np.array(indices, dtype=X.indices.dtype),
                          np.array(indptr, dtype=X.indptr.dtype)), shape=X.shape)


def variants(X):
    """The forms a caller's features come in: float32 / float64, sorted / unsorted, duplicate
    entries, non-canonical CSR (unsorted, duplicates, explicit zeros, 64-bit indices), CSC, COO and
    what `sp.diags(w) @ X` makes (the case of issue 62)."""
    out = {}
    for dtype in (np.float32, np.float64):
        base = X.astype(dtype)
        out[f"{dtype.__name__} sorted"] = base.copy()
        out[f"{dtype.__name__} unsorted"] = unsorted(base, 1)
        out[f"{dtype.__name__} duplicates"] = with_duplicates(base)
        messy = unsorted(with_duplicates(base), 2)
        messy.data[::7] = 0  # explicit zeros stay stored
        messy.indices = messy.indices.astype(np.int64)
        messy.indptr = messy.indptr.astype(np.int64)
        out[f"{dtype.__name__} non-canonical"] = messy
        out[f"{dtype.__name__} csc"] = unsorted(base, 3).tocsc()
        out[f"{dtype.__name__} coo"] = with_duplicates(base).tocoo()
    w = np.linspace(0.5, 1.5, X.shape[0])
    out["diags @ X"] = sp.diags(w) @ unsorted(X.astype(np.float64), 4)
    return out


def label_variants(Y):
    """The forms of the labels: CSR unsorted, with a label stored twice, CSC, COO, bool, label lists
    and a dense 0/1 array."""
    doubled = with_duplicates(Y)
    doubled.data[:] = 1
    lists = [Y.indices[Y.indptr[i]:Y.indptr[i + 1]].tolist() for i in range(Y.shape[0])]
    return {"csr unsorted": unsorted(Y.astype(np.float64), 5), "csr duplicates": doubled, "csc": Y.tocsc(),
            "coo": Y.tocoo(), "bool csr": Y.astype(bool), "list": lists, "dense": Y.toarray().astype(np.int8)}


def snapshot(M):
    """Every array of M, byte for byte, with its type and shape (and a list's items)."""
    if isinstance(M, list):
        return copy.deepcopy(M)
    if isinstance(M, np.ndarray):
        return (M.dtype.str, M.shape, M.tobytes())
    names = ("data", "row", "col") if sp.isspmatrix_coo(M) else ("data", "indices", "indptr")
    return (M.format, M.shape) + tuple((getattr(M, n).dtype.str, getattr(M, n).tobytes()) for n in names)


def test_the_callers_features_are_only_read(small, model):
    """Every input array is bit-identical after train, predict and evaluate, in every form; and
    the results do not depend on the form (the issue: the second evaluate differed from the first)."""
    X, Y, Xt, Yt = small["X"], small["Y"], small["Xt"], small["Yt"]
    expected_labels, _ = model.predict(Xt, k=5)
    expected = model.evaluate(Xt, Yt)
    trained = None
    for name, M in variants(X).items():
        before = snapshot(M)
        m = frugal.train(M, Y, **QUIET)
        assert snapshot(M) == before, f"train changed the caller's {name} matrix"
        metrics = m.evaluate(Xt, Yt)
        if trained is None:
            trained = metrics
        # Summing duplicate halves or the diags scaling changes the values, not the canonical forms.
        if "duplicates" not in name and "non-canonical" not in name and "coo" not in name and "diags" not in name:
            assert metrics == trained, name
    for name, M in variants(Xt).items():
        before = snapshot(M)
        labels, _ = model.predict(M, k=5)
        assert snapshot(M) == before, f"predict changed the caller's {name} matrix"
        metrics = model.evaluate(M, Yt)
        again = model.evaluate(M, Yt)
        assert snapshot(M) == before, f"evaluate changed the caller's {name} matrix"
        assert metrics == again, name
        if "diags" not in name and "duplicates" not in name and "non-canonical" not in name and "coo" not in name:
            assert (labels == expected_labels).all() and metrics == expected, name


def test_the_callers_labels_are_only_read(small, model):
    X, Y, Xt, Yt = small["X"], small["Y"], small["Xt"], small["Yt"]
    expected = model.evaluate(Xt, Yt)
    reference = None
    for name, L in label_variants(Y).items():
        before = snapshot(L)
        m = frugal.train(X, L, **QUIET)
        assert snapshot(L) == before, f"train changed the caller's {name} labels"
        metrics = m.evaluate(Xt, Yt)
        reference = reference or metrics
        assert metrics == reference, f"{name} labels train another model"
    for name, L in label_variants(Yt).items():
        if name == "list" or name == "dense":
            continue  # evaluate's Y is as wide as the model: a dense array of that width is tested below
        before = snapshot(L)
        assert model.evaluate(Xt, L) == expected, name
        assert snapshot(L) == before, f"evaluate changed the caller's {name} labels"
    dense = np.zeros((Yt.shape[0], model.num_labels), dtype=np.float64)
    dense[:, :Yt.shape[1]] = Yt.toarray()
    before = snapshot(dense)
    assert model.evaluate(Xt, dense) == expected
    assert snapshot(dense) == before


def test_the_label_forms_train_the_same_model(small):
    """A dense 0/1 array is a label matrix (it was read as lists of the ids 0 and 1)."""
    X, Y = small["X"], small["Y"]
    losses = []
    for L in (Y, Y.toarray(), Y.toarray().astype(bool), [list(Y[r].indices) for r in range(Y.shape[0])]):
        records = []
        frugal.train(X, L, progress=records.append, **QUIET)
        losses.append(records[0]["loss"])
    assert len(set(losses)) == 1, losses


# ---------------------------------------------------------------------------------------------
# The file readers' checks, from memory.

def one_value(X, value, dtype=np.float32):
    X = X.astype(dtype)
    X.data[X.indptr[3]] = value  # row 3's first entry
    return X


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_features_are_refused_naming_the_row(small, model, value):
    X, Y = small["X"], small["Y"]
    for dtype in (np.float32, np.float64):
        bad = one_value(X, value, dtype)
        with pytest.raises(frugal.DataError, match=r"^X: row 3: non-finite value (nan|inf|-inf) of feature \d+"):
            frugal.train(bad, Y, **QUIET)
        with pytest.raises(frugal.DataError, match=r"^test X: row 3: non-finite value"):
            frugal.train(X, Y, test=(bad, Y), **QUIET)
        with pytest.raises(frugal.DataError, match=r"^X: row 3: non-finite value"):
            model.predict(bad)
        with pytest.raises(frugal.DataError, match=r"^X: row 3: non-finite value"):
            model.evaluate(bad, Y)


def test_values_beyond_float32_are_refused_not_made_inf(small):
    with pytest.raises(frugal.DataError, match=r"^X: row 3: value 1e\+39 is beyond the float32 range"):
        frugal.train(one_value(small["X"], 1e39, np.float64), small["Y"], **QUIET)


def test_large_values_warn_and_strict_refuses(small, caplog):
    X = one_value(small["X"], 3e38)
    # Valid but surely wrong: said, as for a file, through Python's logging (logger "frugal").
    with caplog.at_level("WARNING", logger="frugal"):
        frugal.train(X, small["Y"], **QUIET)
    assert "X: 1 feature value(s) beyond +-1e+06" in caplog.text
    caplog.clear()
    with pytest.raises(frugal.DataError, match=r"beyond \+-1e\+06.*--strict makes warnings errors"):
        frugal.train(X, small["Y"], strict=True, **QUIET)
    # --strict was this call's: the next one warns again instead of refusing.
    with caplog.at_level("WARNING", logger="frugal"):
        frugal.train(X, small["Y"], **QUIET)
    assert "beyond +-1e+06" in caplog.text


def test_the_same_check_as_the_file_reader(small, tmp_path):
    """A non-finite value is refused by the reader (naming file:line) and from memory (naming the row)."""
    path = tmp_path / "nan.txt"
    path.write_text("2 5 3\n0 1:0.5\n1 2:nan\n")
    with pytest.raises(frugal.DataError, match=r"nan.txt:3: non-finite value in '2:nan'"):
        frugal.read_xmc(path)
    X = sp.csr_matrix((np.array([0.5, np.nan], dtype=np.float32), [1, 2], [0, 1, 2]), shape=(2, 5))
    with pytest.raises(frugal.DataError, match=r"^X: row 1: non-finite value nan of feature 2"):
        frugal.train(X, [[0], [1]], **QUIET)


def test_no_labels_at_all_is_refused(small):
    with pytest.raises(frugal.DataError, match="training needs at least one label"):
        frugal.train(small["X"][:3], [[], [], []], **QUIET)


@pytest.mark.parametrize("Y, words", [
    ([[1], [-1], [2]], r"^Y: row 1 has label -1: label ids start at 0"),
    ([[1], [2], [0.5]], r"^Y: row 2 has label 0.5: expected a whole number"),
    ([[1], [float("nan")], [2]], r"^Y: row 1 has label nan: expected a whole number"),
    ([[1], [True], [2]], r"^Y: row 1 has label True"),
    ([[1], [None], [2]], r"^Y: row 1 has label None"),
    ([[1], [2**40], [2]], r"^Y: row 1 has label 1099511627776"),
    ([[1], 2, [2]], r"^Y: row 1 is 2, not a list of label ids"),
    (["1", "2", "3"], r"^Y: row 0 is '1', not a list of label ids"),
    ([[0, 1, 0], [1, 0, 0], [0, 0, 1]], r"^Y: every row is 3 values of 0 and 1.*a dense 0/1 label matrix given as lists"),
    (np.array([[0, 0.5], [1, 0], [0, 1]]), r"^Y: row 0 holds 0.5: a dense label array"),
    (np.array([[0, 1], [1, -1], [0, 1]]), r"^Y: row 1 holds -1: a dense label array"),
    (np.array([[3, 17], [5, 2], [1, 4]]), r"^Y: row 0 holds 3: a dense label array .*a list of label lists"),
    (np.array([[0, 1], [np.nan, 0], [1, 1]]), r"^Y: row 1 holds nan"),
    (np.array([1, 2, 3]), r"^Y: a numpy array of shape \(3,\) and type int64: expected a scipy.sparse 0/1 matrix"),
    (sp.csr_matrix(np.array([[0, 1], [2, 0], [1, 0]])), r"^Y: row 1 holds 2: a sparse label matrix"),
    (sp.csr_matrix(np.array([[0, 1], [0, -1], [1, 0]])), r"^Y: row 1 holds -1: a sparse label matrix"),
    (sp.csr_matrix(np.array([[0, 1], [0, 1], [np.nan, 0]])), r"^Y: row 2 holds nan: a sparse label matrix"),
    (sp.csr_matrix(np.array([[0, 0.5], [0, 1], [1, 0]])), r"^Y: row 0 holds 0.5: a sparse label matrix"),
    ("0 1 2", r"^Y: str: expected a scipy.sparse 0/1 matrix"),
    ({0: [1]}, r"^Y: dict: expected"),
])
def test_bad_labels_are_refused_naming_y_and_the_row(small, Y, words):
    with pytest.raises(frugal.DataError, match=words):
        frugal.train(small["X"][:3], Y, **QUIET)


def test_a_refused_form_says_which_are_accepted(small):
    for Y in (np.array([[3, 17], [5, 2], [1, 4]]), np.array([1, 2, 3]), "0 1 2", [[0, 1, 0], [1, 0, 0], [1, 0, 0]]):
        with pytest.raises(frugal.DataError) as e:
            frugal.train(small["X"][:3], Y, **QUIET)
        assert ("a scipy.sparse 0/1 matrix (points x labels), a list of label lists ([[3, 17], [5], ...]) or a "
                "dense 0/1 numpy array of shape (points, labels)") in str(e.value)


def test_evaluate_names_the_row_of_a_label_beyond_the_model(small, model):
    lists = [[1], [2], [model.num_labels + 5]]
    with pytest.raises(frugal.DataError, match=rf"^Y: row 2: label id {model.num_labels + 5} >= the label count = 40"):
        model.evaluate(small["Xt"][:3], lists)
    with pytest.raises(frugal.DataError, match=r"^Y has 50 label columns, the model has 40 labels"):
        model.evaluate(small["Xt"][:3], np.zeros((3, 50)))


def test_bad_features_are_refused(small, model):
    with pytest.raises(frugal.DataError, match=r"^X: expected a scipy.sparse matrix"):
        frugal.train(small["X"].toarray(), small["Y"], **QUIET)
    with pytest.raises(frugal.DataError, match=r"^X: feature values of type complex128"):
        model.predict(small["Xt"].astype(np.complex128))
    with pytest.raises(frugal.DataError, match=r"^X: feature values of type object"):
        model.predict(sp.csr_matrix(small["Xt"], dtype=object))
    with pytest.raises(frugal.DataError, match=r"^Y has 10 rows but the features have 400"):
        frugal.train(small["X"], small["Y"][:10], **QUIET)


# ---------------------------------------------------------------------------------------------
# Errors in frugal's words.

def test_the_error_kinds():
    assert issubclass(frugal.DataError, frugal.Error) and issubclass(frugal.CheckpointError, frugal.Error)
    assert issubclass(frugal.Error, RuntimeError)


def no_dump(e):
    text = str(e.value)
    assert "incompatible function arguments" not in text and "Invoked with" not in text, text
    assert text, "an empty message"
    return text


@pytest.mark.parametrize("options, words", [
    (dict(batch=0), r"^batch=0: 0 is not positive: expected a count from 1 up"),
    (dict(batch=-5), r"^batch=-5:"),
    (dict(batch=1e30), r"^batch=1e\+30: expected the points scored at a time, an integer"),
    (dict(batch=True), r"^batch=True:"),
    (dict(batch="512"), r"^batch='512':"),
    (dict(batch=2**70), r"^batch=1180591620717411303424:"),
    (dict(threads=-1), r"^threads=-1:"),
    (dict(threads=10**9), r"^threads=1000000000: expected 0 \(all cores\) up to"),
    (dict(threads=2**80), r"^threads=1208925819614629174706176:"),
    (dict(threads=1.5), r"^threads=1.5:"),
    (dict(device=3), r"^device=3: expected auto, cpu, cuda"),
    (dict(device="gpu"), r"^device='gpu': device 'gpu' is not one of"),
    (dict(infer="fast"), r"^infer='fast': fast not in \{auto,exact,lsh,ensemble\}"),
    (dict(infer=None), r"^infer=None:"),
    (dict(accept_unchecked_checkpoint="yes"), r"^accept_unchecked_checkpoint='yes': a switch takes True or False"),
    (dict(hidden=3), r"^frugal.load: unknown option hidden"),
])
def test_bad_load_keywords_name_the_keyword(model, tmp_path, options, words):
    saved = model.save(tmp_path / "m")
    with pytest.raises(frugal.Error, match=words) as e:
        frugal.load(saved, **options)
    no_dump(e)


def test_a_model_loaded_with_batch_1_predicts(small, model, tmp_path):
    """batch=0 hung in predict; 1 is the smallest that scores."""
    again = frugal.load(model.save(tmp_path / "m"), batch=1)
    labels, _ = again.predict(small["Xt"], k=3)
    assert (labels == model.predict(small["Xt"], k=3)[0]).all()


@pytest.mark.parametrize("k, words", [
    (0, r"^k=0:"), (-1, r"^k=-1:"), (10**30, r"^k=1000000000000000000000000000000:"), (2.5, r"^k=2.5:"),
    ("5", r"^k='5':"), (None, r"^k=None:"), (True, r"^k=True:"),
])
def test_bad_k_names_it(small, model, k, words):
    with pytest.raises(frugal.Error, match=words) as e:
        model.predict(small["Xt"], k=k)
    no_dump(e)
    with pytest.raises(frugal.Error, match=words) as e:
        model.evaluate(small["Xt"], small["Yt"], k=k)
    no_dump(e)


def test_k_in_range(small, model):
    assert model.predict(small["Xt"], k=np.int64(3))[0].shape == (100, 3)
    assert model.predict(small["Xt"], k=10**6)[0].shape == (100, model.num_labels)  # at most the label count
    assert set(model.evaluate(small["Xt"], small["Yt"], k=[1, np.int32(2)])) >= {"p@1", "p@2"}
    with pytest.raises(frugal.Error, match=r"^k=\(\): give at least one cut-off"):
        model.evaluate(small["Xt"], small["Yt"], k=[])
    with pytest.raises(frugal.Error, match=rf"^k=41: expected cut-offs up to the model's label count, from 1 to 40"):
        model.evaluate(small["Xt"], small["Yt"], k=[1, 41])


@pytest.mark.parametrize("options, words", [
    (dict(batch=0), r"^frugal.train: batch=0: --batch: 0 is not positive"),
    (dict(epochs="many"), r"^frugal.train: epochs='many': --epochs"),
    (dict(epochs=float("nan")), r"^frugal.train: epochs=nan: --epochs"),
    (dict(hidden={}), r"^frugal.train: hidden=\{\}: expected a number, a string"),
    (dict(hidden=[8, "x"]), r"^frugal.train: hidden=\[8, 'x'\]"),
    (dict(quiet="yes"), r"^frugal.train: quiet='yes': a switch takes True or False"),
    (dict(strict=1), r"^frugal.train: strict=1: a switch takes True or False"),
    (dict(checkpoint=5), r"^frugal.train: checkpoint=5: expected a path"),
    (dict(progress=3), r"^frugal.train: progress=3: expected a function"),
    (dict(no_such_option=1), r"^frugal.train: unknown option no_such_option"),
])
def test_bad_train_keywords_name_the_keyword(small, options, words):
    kwargs = dict(QUIET)
    kwargs.update(options)
    with pytest.raises(frugal.Error, match=words) as e:
        frugal.train(small["X"], small["Y"], **kwargs)
    no_dump(e)


def test_checkpoint_errors(model, tmp_path):
    with pytest.raises(frugal.CheckpointError, match="no such checkpoint folder"):
        frugal.load(tmp_path / "missing")
    broken = model.save(tmp_path / "broken")
    manifest = tmp_path / "broken" / "manifest.json"
    edited = json.loads(manifest.read_text())
    edited["epoch"] += 1  # an edit the manifest's own checksum catches
    manifest.write_text(json.dumps(edited))
    with pytest.raises(frugal.CheckpointError, match="manifest") as e:
        frugal.load(broken)
    no_dump(e)
    with pytest.raises(frugal.Error, match="already exists"):
        model.save(broken)


def test_read_xmc_errors_name_the_file(tmp_path):
    binary = tmp_path / "binary.dat"
    binary.write_bytes(bytes(range(128, 256)) * 4)  # no UTF-8: the message had no text at all
    with pytest.raises(frugal.DataError, match=r"binary.dat:1: bad header .*expected 'N F L'") as e:
        frugal.read_xmc(binary)
    no_dump(e)
    with pytest.raises(frugal.DataError, match=r"missing.txt: no such file"):
        frugal.read_xmc(tmp_path / "missing.txt")
    with pytest.raises(frugal.Error, match=r"^path=5: expected a path"):
        frugal.read_xmc(5)
