// frugal._core: the C++ side of `import frugal` (python/frugal/__init__.py is the user's side).
// Training runs the run API (train/run/run.h), its keywords read by the run API's option
// declarations (train/run/train_options.h: `frugal train`'s names, defaults and checks), with
// scipy.sparse matrices turned into data sets here and the run's output through Python's streams;
// inference is the Predictor of
// `frugal predict` / `frugal evaluate` (train/run/predict_session.h). The GIL is released while C++
// computes; frugal::Error becomes frugal.Error with frugal's message (frugal.DataError for input
// data that is refused, frugal.CheckpointError for a checkpoint that cannot be loaded). Every data
// set given here gets the checks of the file readers (core/data/point_checks.h).
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "train/run/predict_session.h"
#include "train/run/rank_threads.h"
#include "train/run/run.h"
#include "train/run/train_options.h"
#include "core/check.h"
#include "core/data/point_checks.h"
#include "core/data/xmc_file.h"
#include "core/device.h"
#include "core/propensity.h"
#include "core/ranking_metrics.h"
#include "core/sparse_batch.h"
#include "core/output.h"
#include "core/warnings.h"
#include "train/dlrm_checkpoint.h"

namespace py = pybind11;

namespace frugal::python {

// frugal.DataError and frugal.CheckpointError (both frugal.Error): which kind of thing was refused.
struct DataError : Error {
  using Error::Error;
};
struct CheckpointError : Error {
  using Error::Error;
};

namespace {

// Sets the Python exception `type` with e's message. A message may quote input bytes that are no
// UTF-8 (a binary file given as a text file): they are written as \xNN, where a plain conversion
// failed and left the exception without any message.
void raise_as(py::handle type, const std::exception& e) {
  const std::string_view message = e.what();
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace");
  if (text == nullptr) {
    PyErr_Clear();
    text = PyUnicode_FromString("(frugal's message could not be shown)");
  }
  PyErr_SetObject(type.ptr(), text);
  Py_XDECREF(text);
}

// Runs `f`; a frugal::Error it throws becomes an error of kind `Kind` with the same message.
template <class Kind, class F>
decltype(auto) as_error_of_kind(F&& f) {
  try {
    return f();
  } catch (const Kind&) {
    throw;
  } catch (const Error& e) {
    throw Kind(e.what());
  }
}

template <class T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

// A CSR matrix as the Python side passes it: indptr, indices, data (or none: labels) and its width.
struct Csr {
  Array<int64_t> indptr;
  Array<int64_t> indices;
  std::optional<Array<float>> values;
  uint64_t columns = 0;
  std::string name;  // "X", "Y", "test X", ... for messages

  size_t rows() const { return indptr.size() > 0 ? static_cast<size_t>(indptr.size() - 1) : 0; }
};

Csr csr_from(const py::dict& d, const char* prefix, const std::string& name, bool with_values) {
  const std::string p(prefix);
  Csr c{.indptr = d[(p + "indptr").c_str()].cast<Array<int64_t>>(),
        .indices = d[(p + "indices").c_str()].cast<Array<int64_t>>(),
        .values = with_values ? std::optional(d[(p + "data").c_str()].cast<Array<float>>()) : std::nullopt,
        .columns = d[(p + "columns").c_str()].cast<uint64_t>(),
        .name = name};
  FRUGAL_CHECK(c.indptr.ndim() == 1 && c.indices.ndim() == 1 && c.indptr.size() >= 1,
               fmt::format("{}: not a CSR matrix (indptr and indices must be one-dimensional)", name));
  FRUGAL_CHECK(!c.values || c.values->size() == c.indices.size(),
               fmt::format("{}: {} values for {} column indices", name, c.values ? c.values->size() : 0,
                           c.indices.size()));
  const auto ptr = c.indptr.unchecked<1>();
  FRUGAL_CHECK(ptr(0) == 0 && ptr(c.indptr.size() - 1) == c.indices.size(),
               fmt::format("{}: indptr must start at 0 and end at the {} stored entries", name, c.indices.size()));
  FRUGAL_CHECK(c.columns <= UINT32_MAX, fmt::format("{}: {} columns, at most {} are supported", name, c.columns,
                                                    UINT32_MAX));
  // Only what the conversion to 32-bit ids needs: whether an id is below the column count is
  // check_points' check, made once for every face (core/data/point_checks.h).
  const auto idx = c.indices.unchecked<1>();
  for (py::ssize_t r = 0; r + 1 < c.indptr.size(); ++r) {
    FRUGAL_CHECK(ptr(r) <= ptr(r + 1), fmt::format("{}: indptr decreases at row {}", name, r));
    for (int64_t j = ptr(r); j < ptr(r + 1); ++j)
      FRUGAL_CHECK(idx(j) >= 0 && idx(j) <= int64_t{UINT32_MAX},
                   fmt::format("{}: row {} has column {}, outside the matrix's {} columns", name, r, idx(j),
                               c.columns));
  }
  return c;
}

// Features X and labels Y (the same rows; none: points without labels, as predict reads them) as a
// data set named `name`, in frugal's own arrays (the caller's are only read).
data::Dataset dataset_from(const Csr& x, const Csr* y, const std::string& name, uint32_t num_labels = 0) {
  FRUGAL_CHECK(y == nullptr || x.rows() == y->rows(),
               fmt::format("{} has {} rows but {} has {}: one label row per point", x.name, x.rows(), y->name,
                           y->rows()));
  data::Dataset d;
  d.num_features = static_cast<uint32_t>(x.columns);
  d.num_labels = y != nullptr ? static_cast<uint32_t>(y->columns) : num_labels;
  d.source = name;
  const auto xp = x.indptr.unchecked<1>();
  const auto xi = x.indices.unchecked<1>();
  const auto xv = x.values->unchecked<1>();
  SparseBatch& b = d.points;
  b.feature_ids.reserve(static_cast<size_t>(x.indices.size()));
  b.feature_values.reserve(static_cast<size_t>(x.indices.size()));
  b.feature_offsets.reserve(x.rows() + 1);
  b.label_offsets.reserve(x.rows() + 1);
  if (y != nullptr) b.label_ids.reserve(static_cast<size_t>(y->indices.size()));
  for (size_t r = 0; r < x.rows(); ++r) {
    for (int64_t j = xp(r); j < xp(r + 1); ++j) {
      b.feature_ids.push_back(static_cast<uint32_t>(xi(j)));
      b.feature_values.push_back(xv(j));
    }
    if (y != nullptr) {
      const auto yp = y->indptr.unchecked<1>();
      const auto yi = y->indices.unchecked<1>();
      for (int64_t j = yp(r); j < yp(r + 1); ++j) b.label_ids.push_back(static_cast<uint32_t>(yi(j)));
    }
    b.feature_offsets.push_back(b.feature_ids.size());
    b.label_offsets.push_back(b.label_ids.size());
  }
  return d;
}

// --strict for one call: the command line's flag sets it for the process, which here outlives the run.
class StrictScope {
 public:
  explicit StrictScope(bool strict) : before_(strict_warnings()) { set_strict_warnings(strict); }
  ~StrictScope() { set_strict_warnings(before_); }
  StrictScope(const StrictScope&) = delete;
  StrictScope& operator=(const StrictScope&) = delete;

 private:
  bool before_;
};

// `strict`: train(strict=True), whose --strict makes the data sets' warnings errors as the command
// line's does for its files. `quiet`: no output at all (the run's lines go nowhere; its warnings go
// to Python's logging, logger "frugal"). Otherwise the run's lines are written to sys.stdout and
// its notes to sys.stderr, as Python objects (contextlib.redirect_stdout and notebooks see them).
// `progress` returning False stops the run after that epoch. Returns the epoch whose model the
// checkpoint folder's best/ or newest checkpoint holds (run::RunResult::model_epoch).
uint64_t train(const std::vector<std::string>& args, const std::optional<py::dict>& train_data,
               const std::optional<py::dict>& test_data, const std::optional<py::function>& progress, bool strict,
               bool quiet) {
  const StrictScope strict_scope(strict);
  take_warnings();  // an earlier call's (whose run kept no metrics log) are not this run's
  // The run's in-memory data, callbacks and result.
  struct {
    std::optional<data::Dataset> train, test;
    run::RunCallbacks callbacks;
    std::optional<run::RunResult> result;
  } run;
  // Called on this thread with the GIL released: each callback takes it back (and lets Ctrl-C in).
  py::object json_loads = py::module_::import("json").attr("loads");
  py::object sys = py::module_::import("sys");
  py::object logger = py::module_::import("logging").attr("getLogger")("frugal");
  run.callbacks.on_output = [&](std::string_view text) {
    if (quiet) return;
    py::gil_scoped_acquire gil;
    sys.attr("stdout").attr("write")(py::str(text.data(), text.size()));
  };
  run.callbacks.on_notice = [&](std::string_view text) {
    constexpr std::string_view kWarning = "frugal: warning: ";
    py::gil_scoped_acquire gil;
    if (text.starts_with(kWarning)) {
      std::string_view message = text.substr(kWarning.size());
      if (message.ends_with('\n')) message.remove_suffix(1);
      logger.attr("warning")(py::str(message.data(), message.size()));
    } else if (!quiet) {
      sys.attr("stderr").attr("write")(py::str(text.data(), text.size()));
    }
  };
  // The data's own warnings (check_points) go where the run's do.
  const ScopedOutputSink sink([&run](OutputStream stream, std::string_view text) {
    (stream == OutputStream::progress ? run.callbacks.on_output : run.callbacks.on_notice)(text);
  });
  if (train_data) {
    as_error_of_kind<DataError>([&] {
      const Csr x = csr_from(*train_data, "x_", "X", true), y = csr_from(*train_data, "y_", "Y", false);
      run.train = dataset_from(x, &y, "X");
      data::check_points(*run.train, {.features_name = "X", .labels_name = "Y"});
      if (!test_data) return;
      const Csr tx = csr_from(*test_data, "x_", "test X", true), ty = csr_from(*test_data, "y_", "test Y", false);
      FRUGAL_CHECK(tx.columns == x.columns && ty.columns == y.columns,
                   fmt::format("test has {} features and {} labels, but X and Y have {} and {}", tx.columns,
                               ty.columns, x.columns, y.columns));
      run.test = dataset_from(tx, &ty, "test");
      data::check_points(*run.test, {.features_name = "test X", .labels_name = "test Y", .training = false});
    });
    if (!test_data) {
      run.test.emplace();  // no test set: no evaluation per epoch
      run.test->num_features = run.train->num_features;
      run.test->num_labels = run.train->num_labels;
      run.test->source = "test";
    }
  }
  run.callbacks.on_epoch = [&](const run::EpochRecord& record) {
    py::gil_scoped_acquire gil;
    bool go_on = true;
    if (progress) {
      const py::object said = (*progress)(json_loads(record.json));
      go_on = !(py::isinstance<py::bool_>(said) && !said.cast<bool>());
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C: stop at the epoch's end
    return go_on;
  };
  {
    py::gil_scoped_release release;
    const run::TrainConfig config = run::parse_train_options(args);
    run.result = run.train ? run::train(config, std::move(*run.train), std::move(*run.test), run.callbacks)
                           : run::train(config, run.callbacks);
  }
  return run.result ? run.result->model_epoch : 0;
}

// A trained model for inference: `frugal predict` / `frugal evaluate`'s session. The keywords are
// named as Python's (frugal.load's); python/frugal/__init__.py has checked their types.
class Model {
 public:
  Model(const std::string& dir, const std::string& device, int threads, const std::string& infer, size_t batch,
        bool accept_unchecked)
      : batch_(batch) {
    run::SessionArgs a;
    // Every value as `frugal predict` takes it, checked by the run API's declarations
    // (run::session_options); an error names the keyword, then what is wrong.
    const auto set = [&a](const char* flag, const char* keyword, const std::string& shown, const std::string& text) {
      try {
        run::set_session_option(a, flag, text);
      } catch (const Error& e) {
        std::string message = e.what();
        const std::string prefix = std::string(flag) + ": ";
        if (message.starts_with(prefix)) message.erase(0, prefix.size());
        throw Error(fmt::format("{}={}: {}", keyword, shown, message));
      }
    };
    set("--model", "path", "'" + dir + "'", dir);
    set("--infer", "infer", "'" + infer + "'", infer);
    set("--batch", "batch", std::to_string(batch), std::to_string(batch));
    set("--threads", "threads", std::to_string(threads), std::to_string(threads));
    a.accept_unchecked = accept_unchecked;
    a.device = device;
    try {  // the command line's range of --threads on this host, named as the keyword
      run::threads_for_rank(threads);
    } catch (const Error& e) {
      std::string message = e.what();
      if (message.starts_with("--threads ")) message.replace(0, 10, "threads=");
      throw Error(message);
    }
    try {
      resolve_device(device);
    } catch (const Error& e) {
      throw Error(fmt::format("device='{}': {}", device, e.what()));
    }
    as_error_of_kind<CheckpointError>([&] {
      FRUGAL_CHECK(!train::is_dlrm_checkpoint(dir),
                   fmt::format("{} holds a DLRM (click-through) checkpoint: Model.predict and Model.evaluate score "
                               "XMC models; evaluate it with `frugal evaluate --model {} --test FILE`", dir, dir));
      py::gil_scoped_release release;
      session_ = run::open_session(a, {{"command", "python"}, {"model", dir}});
    });
  }

  size_t num_features() const { return session_.predictor->num_features(); }
  size_t num_labels() const { return session_.predictor->num_labels(); }
  uint64_t epoch() const { return session_.predictor->epoch(); }
  uint64_t step() const { return session_.predictor->step(); }
  std::string infer() const { return std::string(run::to_string(session_.infer)); }

  py::tuple predict(const py::dict& x_data, size_t k) {
    FRUGAL_CHECK(k >= 1, fmt::format("k={}: expected at least 1 label per point", k));
    const data::Dataset x = checked_points(x_data, nullptr);
    const size_t n = x.size(), kk = std::min(k, num_labels());
    Array<uint32_t> labels({n, kk});
    Array<float> scores({n, kk});
    {
      py::gil_scoped_release release;
      SparseBatch batch;
      train::Predictions top;
      auto* l = labels.mutable_data();
      auto* s = scores.mutable_data();
      for (size_t first = 0; first < n; first += batch_) {
        const size_t count = std::min(batch_, n - first);
        batch.assign_points(x.points, first, count);
        session_.predictor->top_k(batch, kk, top);
        std::copy(top.labels.begin(), top.labels.end(), l + first * kk);
        std::copy(top.scores.begin(), top.scores.end(), s + first * kk);
      }
    }
    return py::make_tuple(labels, scores);
  }

  py::dict evaluate(const py::dict& data, const std::vector<size_t>& ks) {
    FRUGAL_CHECK(!ks.empty(), "k: give at least one cut-off");
    for (const size_t k : ks)
      FRUGAL_CHECK(k >= 1 && k <= num_labels(), fmt::format("k={}: cut-offs go from 1 to the model's {} labels", k,
                                                            num_labels()));
    const data::Dataset test = checked_points(data, &data);
    std::vector<std::pair<std::string, double>> named;
    {
      py::gil_scoped_release release;
      // PSP@k from the training label counts saved with the checkpoint, as `frugal evaluate`.
      const std::optional<LabelCounts>& counts = session_.predictor->label_counts();
      std::optional<Propensities> propensities;
      if (counts) propensities.emplace(*counts, PropensityOptions{});
      named = session_.predictor->evaluate(test, ks, propensities ? &*propensities : nullptr).named();
    }
    py::dict out;
    for (const auto& [key, value] : named) out[key.c_str()] = value;
    return out;
  }

 private:
  // X (and Y from `labels`, or none) as a data set, with the checks `frugal predict` / `evaluate`
  // make of a file's points (core/data/point_checks.h): a refusal is a frugal.DataError.
  data::Dataset checked_points(const py::dict& features, const py::dict* labels) const {
    return as_error_of_kind<DataError>([&] {
      const Csr x = csr_from(features, "x_", "X", true);
      FRUGAL_CHECK(x.columns <= num_features(), fmt::format("X has {} feature columns, the model has {} input "
                                                            "features", x.columns, num_features()));
      std::optional<Csr> y;
      if (labels != nullptr) {
        y = csr_from(*labels, "y_", "Y", false);
        FRUGAL_CHECK(y->columns <= num_labels(), fmt::format("Y has {} label columns, the model has {} labels",
                                                             y->columns, num_labels()));
      }
      data::Dataset d = dataset_from(x, y ? &*y : nullptr, "X", static_cast<uint32_t>(num_labels()));
      data::check_points(d, {.features_name = "X", .labels_name = "Y", .warnings = false, .training = false});
      return d;
    });
  }

  size_t batch_;
  run::Session session_;
};

// An XMC file as CSR arrays: x_indptr, x_indices, x_data, y_indptr, y_indices and the widths.
py::dict read_xmc(const std::string& path) {
  std::optional<data::Dataset> d;
  as_error_of_kind<DataError>([&] {
    py::gil_scoped_release release;
    d = data::XmcFile::open(path);
  });
  const SparseBatch& b = d->points;
  const auto as_int64 = [](const auto& v) {
    Array<int64_t> a(static_cast<py::ssize_t>(v.size()));
    std::copy(v.begin(), v.end(), a.mutable_data());
    return a;
  };
  Array<float> values(static_cast<py::ssize_t>(b.feature_values.size()));
  std::copy(b.feature_values.begin(), b.feature_values.end(), values.mutable_data());
  py::dict out;
  out["x_indptr"] = as_int64(b.feature_offsets);
  out["x_indices"] = as_int64(b.feature_ids);
  out["x_data"] = values;
  out["x_columns"] = d->num_features;
  out["y_indptr"] = as_int64(b.label_offsets);
  out["y_indices"] = as_int64(b.label_ids);
  out["y_columns"] = d->num_labels;
  return out;
}

}  // namespace
}  // namespace frugal::python

PYBIND11_MODULE(_core, m) {
  using namespace frugal::python;
  m.doc() = "frugal's C++ side; use the frugal package (python/frugal/__init__.py)";
  static py::exception<frugal::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<DataError> data_error(m, "DataError", error.ptr());
  static py::exception<CheckpointError> checkpoint_error(m, "CheckpointError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const DataError& e) {
      raise_as(data_error, e);
    } catch (const CheckpointError& e) {
      raise_as(checkpoint_error, e);
    } catch (const frugal::Error& e) {
      raise_as(error, e);
    } catch (const py::error_already_set&) {
      throw;  // a Python exception (the progress callback's, Ctrl-C) reaches the caller as it is
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const std::bad_alloc&) {
      PyErr_SetString(error.ptr(), "this machine's memory ran out: give fewer points, or a machine with more memory");
    } catch (const std::exception& e) {
      raise_as(error, e);  // none is expected: frugal::Error is what frugal throws
    }
  });
  m.def("train", &train, py::arg("args"), py::arg("train") = std::nullopt, py::arg("test") = std::nullopt,
        py::arg("progress") = std::nullopt, py::arg("strict") = false, py::arg("quiet") = false);
  m.def("train_flags", [] {
    std::vector<py::tuple> out;
    for (const auto& o : frugal::run::train_options())
      out.push_back(py::make_tuple(o.flag, o.default_text, o.type != frugal::run::OptionType::switch_));
    return out;
  });
  m.def("infer_modes", [] { return frugal::run::infer_options("")[0].choices; });  // --infer's names
  m.def("read_xmc", &read_xmc, py::arg("path"));
  py::class_<Model>(m, "Model")
      .def(py::init<const std::string&, const std::string&, int, const std::string&, size_t, bool>(), py::arg("dir"),
           py::arg("device") = "auto", py::arg("threads") = 0, py::arg("infer") = "auto", py::arg("batch") = 512,
           py::arg("accept_unchecked_checkpoint") = false)
      .def_property_readonly("num_features", &Model::num_features)
      .def_property_readonly("num_labels", &Model::num_labels)
      .def_property_readonly("epoch", &Model::epoch)
      .def_property_readonly("step", &Model::step)
      .def_property_readonly("infer", &Model::infer)
      .def("predict", &Model::predict, py::arg("x"), py::arg("k"))
      .def("evaluate", &Model::evaluate, py::arg("data"), py::arg("k"));
}
