// Finite-difference gradient checks for every layer. Each layer's analytic gradient of a scalar
// loss is compared with (L(x + e) - L(x - e)) / 2e on a sample of coordinates.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "core/rng.h"
#include "core/step_profile.h"
#include "layers/dense.h"
#include "layers/softmax_output.h"
#include "layers/softmax_output_testing.h"
#include "layers/sparse_dense.h"

using namespace frugal;

namespace {

constexpr float kEps = 1e-3f;

// Central difference of f with respect to *x.
double numeric(float* x, const std::function<double()>& f) {
  const float saved = *x;
  *x = saved + kEps;
  const double up = f();
  *x = saved - kEps;
  const double down = f();
  *x = saved;
  return (up - down) / (2.0 * kEps);
}

void check_close(double analytic, double num, const std::string& what) {
  INFO(what << ": analytic " << analytic << " numeric " << num);
  REQUIRE(std::abs(analytic - num) <= 2e-2 * std::max(1.0, std::abs(num)) + 1e-3);
}

SparseBatch random_sparse_batch(size_t b, size_t features, size_t labels, Rng& rng) {
  SparseBatch batch;
  for (size_t i = 0; i < b; ++i) {
    std::vector<uint32_t> ids, ls;
    std::vector<float> vals;
    for (size_t j = 0; j < 6; ++j) {
      const auto f = static_cast<uint32_t>(rng.below(features));
      if (std::find(ids.begin(), ids.end(), f) != ids.end()) continue;
      ids.push_back(f);
      vals.push_back(rng.uniform(0.2f, 1.0f));
    }
    for (size_t j = 0; j < 1 + i % 3; ++j) {
      const auto l = static_cast<uint32_t>(rng.below(labels));
      if (std::find(ls.begin(), ls.end(), l) == ls.end()) ls.push_back(l);
    }
    batch.add_point(ids, vals, ls);
  }
  return batch;
}

Tensor random_tensor(size_t r, size_t c, Rng& rng) {
  Tensor t(r, c);
  for (size_t i = 0; i < t.size(); ++i) t.data()[i] = rng.uniform(-1.0f, 1.0f);
  return t;
}

// The row gradient of `p` for value row r, column c (0 when the row got none).
double row_grad(const Parameter& p, uint32_t r, size_t c) {
  for (size_t j = 0; j < p.grad.rows.size(); ++j)
    if (p.grad.rows[j] == r) return p.grad.values.at(j, c);
  return 0.0;
}

double dot_loss(const Tensor& out, const Tensor& r) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += double(out.data()[i]) * r.data()[i];
  return s;
}

}  // namespace

TEST_CASE("gradient: SparseDense (ReLU and linear)") {
  for (const Act act : {Act::none, Act::relu}) {
    INFO("act " << (act == Act::relu ? "relu" : "none"));
    Rng rng(11);
    layers::SparseDense layer({.in = 40, .out = 7, .act = act, .seed = 3});
    const SparseBatch x = random_sparse_batch(5, 40, 10, rng);
    const Tensor r = random_tensor(5, 7, rng);
    auto loss = [&] { return dot_loss(layer.forward(x), r); };
    loss();
    layer.backward(x, r);
    Parameter& w = *layer.parameters()[0];
    Parameter& b = *layer.parameters()[1];
    for (const uint32_t f : {x.feature_ids[0], x.feature_ids[3], x.feature_ids[9]})
      for (size_t c = 0; c < 7; c += 2) check_close(row_grad(w, f, c), numeric(&w.value.at(f, c), loss), "W");
    for (size_t c = 0; c < 7; ++c) check_close(b.grad.values.at(0, c), numeric(&b.value.at(0, c), loss), "b");
    // A feature that no point has gets no gradient row at all.
    for (uint32_t f = 0; f < 40; ++f)
      if (std::find(x.feature_ids.begin(), x.feature_ids.end(), f) == x.feature_ids.end())
        REQUIRE(std::find(w.grad.rows.begin(), w.grad.rows.end(), f) == w.grad.rows.end());
  }
}

TEST_CASE("SparseDense: the forward pass in row parts gives forward()'s bits, and backward() works after it") {
  Rng rng(12);
  layers::SparseDense whole({.in = 40, .out = 9, .act = Act::relu, .seed = 3});
  layers::SparseDense parts({.in = 40, .out = 9, .act = Act::relu, .seed = 3});
  const SparseBatch x = random_sparse_batch(7, 40, 10, rng);
  const profile::StepProfile before_whole = profile::thread_totals();
  const Tensor expected = whole.forward(x);
  profile::StepProfile whole_work = profile::thread_totals();
  whole_work -= before_whole;
  // Uneven parts, an empty one among them.
  const profile::StepProfile before_parts = profile::thread_totals();
  const Tensor* out = nullptr;
  for (const auto& [first, count] : std::vector<std::pair<size_t, size_t>>{{0, 3}, {3, 0}, {3, 1}, {4, 3}})
    out = &parts.forward_rows(x, first, count);
  profile::StepProfile parts_work = profile::thread_totals();
  parts_work -= before_parts;
  // The work counted is the whole pass's: the bias is read once, not once a part.
  CHECK(parts_work[profile::Phase::input_forward].flops == Approx(whole_work[profile::Phase::input_forward].flops));
  CHECK(parts_work[profile::Phase::input_forward].bytes == Approx(whole_work[profile::Phase::input_forward].bytes));
  REQUIRE(out->rows() == 7);
  REQUIRE(std::equal(out->data(), out->data() + out->size(), expected.data(), expected.data() + expected.size()));
  const Tensor g = random_tensor(7, 9, rng);
  whole.backward(x, g);
  parts.backward(x, g);
  const Parameter& a = *whole.parameters()[0];
  const Parameter& b = *parts.parameters()[0];
  REQUIRE(a.grad.rows == b.grad.rows);
  REQUIRE(std::equal(a.grad.values.data(), a.grad.values.data() + a.grad.values.size(), b.grad.values.data()));
  // Parts must start at row 0 of the batch they belong to; a bad id fails before any part is computed.
  const SparseBatch y = random_sparse_batch(3, 40, 10, rng);
  REQUIRE_THROWS_WITH(parts.forward_rows(y, 1, 2), Catch::Contains("parts must start at row 0"));
  SparseBatch bad = x;
  bad.feature_ids.back() = 40;
  REQUIRE_THROWS_WITH(parts.forward_rows(bad, 0, 3), Catch::Contains("feature id 40"));
}

TEST_CASE("gradient: Dense (ReLU and linear)") {
  for (const Act act : {Act::none, Act::relu}) {
    INFO("act " << (act == Act::relu ? "relu" : "none"));
    Rng rng(12);
    layers::Dense layer({.in = 9, .out = 6, .act = act, .seed = 4});
    Tensor in = random_tensor(4, 9, rng);
    const Tensor r = random_tensor(4, 6, rng);
    auto loss = [&] { return dot_loss(layer.forward(in), r); };
    loss();
    const Tensor grad_in = layer.backward(in, r);
    Parameter& w = *layer.parameters()[0];
    Parameter& b = *layer.parameters()[1];
    for (size_t i = 0; i < 4; ++i)
      for (size_t c = 0; c < 9; c += 2) check_close(grad_in.at(i, c), numeric(&in.at(i, c), loss), "input");
    for (size_t o = 0; o < 6; ++o)
      for (size_t c = 0; c < 9; c += 3) check_close(w.grad.values.at(o, c), numeric(&w.value.at(o, c), loss), "W");
    for (size_t o = 0; o < 6; ++o) check_close(b.grad.values.at(o, 0), numeric(&b.value.at(o, 0), loss), "b");
  }
}

namespace {
void check_softmax(layers::SoftmaxOutput& layer, const SparseBatch& batch, Tensor& h) {
  // The gradients of grad_scale x the loss (the trainer passes 1 / batch); not a power of two, so
  // a scale applied twice or not at all shows.
  constexpr float kScale = 1.0f / 3.0f;
  auto loss = [&] { return kScale * layer.forward_backward(h, batch, 0, nullptr, 1.0f); };
  Tensor grad_in;
  layer.forward_backward(h, batch, 0, &grad_in, kScale);
  Parameter& w = *layer.parameters()[0];
  Parameter& b = *layer.parameters()[1];
  for (size_t i = 0; i < h.rows(); ++i)
    for (size_t c = 0; c < h.cols(); c += 3) check_close(grad_in.at(i, c), numeric(&h.at(i, c), loss), "input");
  for (const uint32_t r : w.grad.rows) {
    for (size_t c = 0; c < h.cols(); c += 4) check_close(row_grad(w, r, c), numeric(&w.value.at(r, c), loss), "W");
    check_close(row_grad(b, r, 0), numeric(&b.value.at(r, 0), loss), "b");
  }
}
}  // namespace

TEST_CASE("gradient: exact softmax cross-entropy output") {
  Rng rng(13);
  layers::SoftmaxOutput layer({.in = 8, .out = 15, .sampler = layers::Sampler::exact, .seed = 5});
  SparseBatch batch = random_sparse_batch(4, 10, 15, rng);
  batch.label_offsets.back() = batch.label_offsets[batch.label_offsets.size() - 2];  // last point: no labels
  batch.label_ids.resize(batch.label_offsets.back());
  Tensor h = random_tensor(4, 8, rng);
  check_softmax(layer, batch, h);
  REQUIRE(layer.parameters()[0]->grad.rows.size() == 15);
}

TEST_CASE("gradient: LSH-sampled softmax on a fixed active set") {
  Rng rng(14);
  layers::SoftmaxOutput layer({.in = 8, .out = 30, .sampler = layers::Sampler::lsh,
                               .lsh = {.family = lsh::Dwta{.k = 2}, .tables = 4}, .seed = 6});
  const SparseBatch batch = random_sparse_batch(3, 10, 30, rng);
  ActiveSets active;
  for (size_t i = 0; i < 3; ++i) {
    std::vector<uint32_t> ids(batch.labels_of(i).begin(), batch.labels_of(i).end());
    for (uint32_t extra : {2u, 7u, 19u, 23u})
      if (std::find(ids.begin(), ids.end(), extra + i) == ids.end()) ids.push_back(extra + static_cast<uint32_t>(i));
    active.ids.insert(active.ids.end(), ids.begin(), ids.end());
    active.offsets.push_back(active.ids.size());
  }
  layers::SoftmaxOutputTesting::override_active_sets(layer, &active);
  Tensor h = random_tensor(3, 8, rng);
  check_softmax(layer, batch, h);
  // Only rows of active labels have gradients.
  for (const uint32_t r : layer.parameters()[0]->grad.rows)
    REQUIRE(std::find(active.ids.begin(), active.ids.end(), r) != active.ids.end());
}
