// frugal._core: the C++ side of `import frugal` (python/frugal/__init__.py is the user's side).
// Training runs `frugal train` itself (apps/train_in_process.h: the same flags, defaults and checks),
// with scipy.sparse matrices turned into data sets here; inference is the Predictor of
// `frugal predict` / `frugal evaluate` (apps/predict_session.h). The GIL is released while C++
// computes; frugal::Error becomes frugal.Error with frugal's message.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/predict_session.h"
#include "apps/train_in_process.h"
#include "core/check.h"
#include "core/data/xmc_file.h"
#include "core/propensity.h"
#include "core/ranking_metrics.h"
#include "core/sparse_batch.h"
#include "layers/dlrm/dlrm_checkpoint.h"

namespace py = pybind11;

namespace frugal::python {
namespace {

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
  const auto idx = c.indices.unchecked<1>();
  for (py::ssize_t r = 0; r + 1 < c.indptr.size(); ++r) {
    FRUGAL_CHECK(ptr(r) <= ptr(r + 1), fmt::format("{}: indptr decreases at row {}", name, r));
    for (int64_t j = ptr(r); j < ptr(r + 1); ++j)
      FRUGAL_CHECK(idx(j) >= 0 && static_cast<uint64_t>(idx(j)) < c.columns,
                   fmt::format("{}: row {} has column {}, outside the matrix's {} columns", name, r, idx(j),
                               c.columns));
  }
  return c;
}

// Features X and labels Y (the same rows) as a data set named `name`.
data::Dataset dataset_from(const Csr& x, const Csr& y, const std::string& name) {
  FRUGAL_CHECK(x.rows() == y.rows(), fmt::format("{} has {} rows but {} has {}: one label row per point", x.name,
                                                  x.rows(), y.name, y.rows()));
  data::Dataset d;
  d.num_features = static_cast<uint32_t>(x.columns);
  d.num_labels = static_cast<uint32_t>(y.columns);
  d.source = name;
  const auto xp = x.indptr.unchecked<1>();
  const auto xi = x.indices.unchecked<1>();
  const auto xv = x.values->unchecked<1>();
  const auto yp = y.indptr.unchecked<1>();
  const auto yi = y.indices.unchecked<1>();
  SparseBatch& b = d.points;
  b.feature_ids.reserve(static_cast<size_t>(x.indices.size()));
  b.feature_values.reserve(static_cast<size_t>(x.indices.size()));
  b.label_ids.reserve(static_cast<size_t>(y.indices.size()));
  b.feature_offsets.reserve(x.rows() + 1);
  b.label_offsets.reserve(x.rows() + 1);
  for (size_t r = 0; r < x.rows(); ++r) {
    for (int64_t j = xp(r); j < xp(r + 1); ++j) {
      b.feature_ids.push_back(static_cast<uint32_t>(xi(j)));
      b.feature_values.push_back(xv(j));
    }
    for (int64_t j = yp(r); j < yp(r + 1); ++j) b.label_ids.push_back(static_cast<uint32_t>(yi(j)));
    b.feature_offsets.push_back(b.feature_ids.size());
    b.label_offsets.push_back(b.label_ids.size());
  }
  return d;
}

// Rows [first, first + count) of X as a batch (no labels), feature ids checked against `features`.
void batch_of(const Csr& x, size_t first, size_t count, SparseBatch& b) {
  b.clear();
  const auto xp = x.indptr.unchecked<1>();
  const auto xi = x.indices.unchecked<1>();
  const auto xv = x.values->unchecked<1>();
  for (size_t r = first; r < first + count; ++r) {
    for (int64_t j = xp(r); j < xp(r + 1); ++j) {
      b.feature_ids.push_back(static_cast<uint32_t>(xi(j)));
      b.feature_values.push_back(xv(j));
    }
    b.feature_offsets.push_back(b.feature_ids.size());
    b.label_offsets.push_back(b.label_ids.size());
  }
}

void train(const std::vector<std::string>& args, const std::optional<py::dict>& train_data,
           const std::optional<py::dict>& test_data, const std::optional<py::function>& progress) {
  cli::InProcessTrain run;
  if (train_data) {
    const Csr x = csr_from(*train_data, "x_", "X", true), y = csr_from(*train_data, "y_", "Y", false);
    run.train = dataset_from(x, y, "X");
    if (test_data) {
      const Csr tx = csr_from(*test_data, "x_", "test X", true), ty = csr_from(*test_data, "y_", "test Y", false);
      FRUGAL_CHECK(tx.columns == x.columns && ty.columns == y.columns,
                   fmt::format("test has {} features and {} labels, but X and Y have {} and {}", tx.columns,
                               ty.columns, x.columns, y.columns));
      run.test = dataset_from(tx, ty, "test");
    } else {
      run.test.emplace();  // no test set: no evaluation per epoch
      run.test->num_features = run.train->num_features;
      run.test->num_labels = run.train->num_labels;
      run.test->source = "test";
    }
  }
  // Called on this thread with the GIL released: the callback takes it back (and lets Ctrl-C in).
  py::object json_loads = py::module_::import("json").attr("loads");
  run.on_epoch = [&](const std::string& line) {
    py::gil_scoped_acquire gil;
    if (progress) (*progress)(json_loads(line));
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C: stop at the epoch's end
  };
  py::gil_scoped_release release;
  cli::run_train_in_process(args, run);
}

// A trained model for inference: `frugal predict` / `frugal evaluate`'s session.
class Model {
 public:
  Model(const std::string& dir, const std::string& device, int threads, const std::string& infer, size_t batch,
        bool accept_unchecked)
      : batch_(batch) {
    cli::SessionArgs a;
    a.model = dir;
    a.device = device;
    a.batch = batch;
    a.threads = threads;
    a.accept_unchecked = accept_unchecked;
    if (infer == "exact") a.infer.mode = cli::InferMode::exact;
    else if (infer == "lsh") a.infer.mode = cli::InferMode::lsh;
    else if (infer == "ensemble") a.infer.mode = cli::InferMode::ensemble;
    else FRUGAL_CHECK(infer == "auto", fmt::format("infer='{}': expected auto, exact, lsh or ensemble", infer));
    FRUGAL_CHECK(!layers::is_dlrm_checkpoint(dir),
                 fmt::format("{} holds a DLRM (click-through) checkpoint: Model.predict and Model.evaluate score XMC "
                             "models; evaluate it with `frugal evaluate --model {} --test FILE`", dir, dir));
    py::gil_scoped_release release;
    session_ = cli::open_session(a, {{"command", "python"}, {"model", dir}});
  }

  size_t num_features() const { return session_.predictor->num_features(); }
  size_t num_labels() const { return session_.predictor->num_labels(); }
  uint64_t epoch() const { return session_.predictor->epoch(); }
  uint64_t step() const { return session_.predictor->step(); }
  std::string infer() const { return std::string(cli::to_string(session_.infer)); }

  py::tuple predict(const py::dict& x_data, size_t k) {
    FRUGAL_CHECK(k >= 1, fmt::format("k = {}: at least 1 label per point", k));
    const Csr x = checked_features(x_data, "X");
    const size_t n = x.rows(), kk = std::min(k, num_labels());
    Array<uint32_t> labels({n, kk});
    Array<float> scores({n, kk});
    {
      py::gil_scoped_release release;
      SparseBatch batch;
      Predictions top;
      auto* l = labels.mutable_data();
      auto* s = scores.mutable_data();
      for (size_t first = 0; first < n; first += batch_) {
        const size_t count = std::min(batch_, n - first);
        batch_of(x, first, count, batch);
        session_.predictor->top_k(batch, kk, top);
        std::copy(top.labels.begin(), top.labels.end(), l + first * kk);
        std::copy(top.scores.begin(), top.scores.end(), s + first * kk);
      }
    }
    return py::make_tuple(labels, scores);
  }

  py::dict evaluate(const py::dict& data, const std::vector<size_t>& ks) {
    const Csr x = checked_features(data, "X");
    const Csr y = csr_from(data, "y_", "Y", false);
    FRUGAL_CHECK(x.rows() == y.rows(), fmt::format("X has {} rows but Y has {}: one label row per point", x.rows(),
                                                    y.rows()));
    FRUGAL_CHECK(y.columns <= num_labels(), fmt::format("Y has {} label columns, the model has {} labels", y.columns,
                                                         num_labels()));
    FRUGAL_CHECK(!ks.empty(), "k: give at least one cut-off");
    for (const size_t k : ks)
      FRUGAL_CHECK(k >= 1 && k <= num_labels(), fmt::format("k = {}: cut-offs go from 1 to the model's {} labels", k,
                                                            num_labels()));
    std::vector<std::pair<std::string, double>> named;
    {
      py::gil_scoped_release release;
      // PSP@k from the training label counts saved with the checkpoint, as `frugal evaluate`.
      const std::optional<LabelCounts>& counts = session_.predictor->label_counts();
      std::optional<Propensities> propensities;
      if (counts) propensities.emplace(*counts, PropensityOptions{});
      named = session_.predictor->evaluate(dataset_from(x, y, "test"), ks, propensities ? &*propensities : nullptr)
                  .named();
    }
    py::dict out;
    for (const auto& [key, value] : named) out[key.c_str()] = value;
    return out;
  }

 private:
  Csr checked_features(const py::dict& data, const std::string& name) const {
    const Csr x = csr_from(data, "x_", name, true);
    FRUGAL_CHECK(x.columns <= num_features(), fmt::format("{} has {} feature columns, the model has {} input "
                                                          "features", name, x.columns, num_features()));
    return x;
  }

  size_t batch_;
  cli::Session session_;
};

// An XMC file as CSR arrays: x_indptr, x_indices, x_data, y_indptr, y_indices and the widths.
py::dict read_xmc(const std::string& path) {
  std::optional<data::Dataset> d;
  {
    py::gil_scoped_release release;
    d = data::XmcFile::open(path);
  }
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
  py::register_exception<frugal::Error>(m, "Error", PyExc_RuntimeError);
  m.def("train", &train, py::arg("args"), py::arg("train") = std::nullopt, py::arg("test") = std::nullopt,
        py::arg("progress") = std::nullopt);
  m.def("train_flags", [] {
    std::vector<py::tuple> out;
    for (const auto& f : frugal::cli::train_flags()) out.push_back(py::make_tuple(f.name, f.default_value, f.takes_value));
    return out;
  });
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
