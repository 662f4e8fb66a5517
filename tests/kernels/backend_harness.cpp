// The backend parity harness (in the style of ggml's test-backend-ops): every op of every
// registered Backend runs on random inputs of a few shapes (odd sizes, empty batches, a sample with
// no active ids) and is compared with a plain scalar reference written here (simple loops, double
// accumulation). Floating outputs are compared by their normalized mean squared error against a
// bound per op; discrete outputs (rows, labels, codes) and non-finite values must match exactly.
// One line per (backend, op, shape): OK, FAIL or SKIP (the backend does not support the op; never
// counted as a pass). A second test breaks every reference on purpose and requires the harness to
// fail each case: a harness that cannot fail checks nothing.
// Tensor inputs go up to the backend's memory with set (to_backend, copy_from_host), the op runs on
// the backend's own buffers, and tensor outputs come back with get (to_host) before the comparison;
// arguments the interface still takes as host memory (spans, ActiveSets, the optimizers' row
// lists) are passed as they are, and a device backend stages them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/distinct_rows.h"
#include "core/propensity.h"
#include "core/ranking_counts.h"
#include "core/ranking_metrics.h"
#include "core/rng.h"
#include "tests/kernels/backend_harness.h"

namespace frugal::harness {
namespace {

Tensor random_tensor(Rng& rng, size_t rows, size_t cols, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(rows, cols);
  for (size_t i = 0; i < t.size(); ++i) t.data()[i] = rng.uniform(lo, hi);
  return t;
}

std::vector<double> to_double(const Tensor& t) { return {t.data(), t.data() + t.size()}; }

// `count` distinct ids below n, in random order.
std::vector<uint32_t> distinct(Rng& rng, size_t n, size_t count) {
  std::vector<uint32_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = static_cast<uint32_t>(i);
  count = std::min(count, n);
  for (size_t i = 0; i < count; ++i) std::swap(all[i], all[i + rng.below(n - i)]);
  all.resize(count);
  return all;
}

// A sparse batch of b points over `features` features with up to max_nnz each; point b / 2 has no
// features when empty_point is set.
SparseBatch random_batch(Rng& rng, size_t b, size_t features, size_t max_nnz, bool empty_point) {
  SparseBatch x;
  for (size_t i = 0; i < b; ++i) {
    const size_t nnz = (empty_point && i == b / 2) ? 0 : 1 + rng.below(std::min(max_nnz, features));
    const std::vector<uint32_t> ids = distinct(rng, features, nnz);
    std::vector<float> vals(ids.size());
    for (float& v : vals) v = rng.uniform(0.1f, 2.0f);
    const std::vector<uint32_t> labels = distinct(rng, 10, rng.below(3));
    x.add_point(ids, vals, labels);
  }
  return x;
}

// Active sets of b samples over n rows, up to max_per distinct ids each; sample b / 2 has none when
// empty_sample is set; with offsets, logit offsets (0 for some entries).
ActiveSets random_active(Rng& rng, size_t b, size_t n, size_t max_per, bool empty_sample, bool offsets) {
  ActiveSets a;
  for (size_t i = 0; i < b; ++i) {
    const size_t count = (empty_sample && i == b / 2) ? 0 : 1 + rng.below(std::min(max_per, n));
    for (const uint32_t id : distinct(rng, n, count)) a.ids.push_back(id);
    a.offsets.push_back(a.ids.size());
  }
  if (offsets)
    for (size_t e = 0; e < a.ids.size(); ++e) a.logit_offsets.push_back(e % 3 == 0 ? 0.0f : rng.uniform(-3.0f, 1.0f));
  return a;
}

// rows x cols floats of host memory in a tensor in be's memory (one set).
Tensor on(Backend& be, const std::vector<float>& v, size_t rows, size_t cols) {
  Tensor t(rows, cols, Dtype::f32, be);
  copy_from_host(t, v.data());
  return t;
}

// --- dense --------------------------------------------------------------------------------------

Case matmul_case(int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool acc) {
  return {fmt::format("m={} n={} k={} ta={} tb={} acc={}", m, n, k, ta, tb, acc), [=](Backend& be, Compare& cmp) {
            Rng rng(static_cast<uint64_t>(m * 1000003 + n * 1009 + k) ^ (ta * 4u + tb * 2u + acc));
            std::vector<float> a(m * k), b(k * n), c(m * n);
            for (float& v : a) v = rng.uniform(-1, 1);
            for (float& v : b) v = rng.uniform(-1, 1);
            for (float& v : c) v = rng.uniform(-1, 1);
            const std::vector<float> c0 = c;
            // The operands go up to the backend's memory, the product comes down (set / get).
            const Tensor da = on(be, a, ta ? k : m, ta ? m : k), db = on(be, b, tb ? n : k, tb ? k : n);
            Tensor dc = on(be, c, m, n);
            be.matmul(da, ta, db, tb, dc, acc);
            be.synchronize();
            copy_to_host(dc, c.data());
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double s = acc ? c0[i * n + j] : 0.0;
                for (int64_t p = 0; p < k; ++p) {
                  const double x = ta ? a[p * m + i] : a[i * k + p];
                  const double y = tb ? b[j * k + p] : b[p * n + j];
                  s += x * y;
                }
                cmp.add(c[i * n + j], s);
              }
          }};
}

Case bias_act_forward_case(size_t rows, size_t cols, Act act) {
  return {fmt::format("rows={} cols={} act={}", rows, cols, act == Act::relu ? "relu" : "none"),
          [=](Backend& be, Compare& cmp) {
            Rng rng(rows * 31 + cols);
            Tensor y = random_tensor(rng, rows, cols);
            const Tensor bias = random_tensor(rng, cols, 1);  // a column, as Dense keeps it
            const Tensor y0 = y;
            Tensor dy = to_backend(y, &be);
            be.bias_act_forward(dy, to_backend(bias, &be), act);
            be.synchronize();
            y = to_host(dy);
            std::vector<double> want(rows * cols);
            for (size_t i = 0; i < rows; ++i)
              for (size_t c = 0; c < cols; ++c) {
                const double v = static_cast<double>(y0.at(i, c)) + bias.data()[c];
                want[i * cols + c] = act == Act::relu ? std::max(0.0, v) : v;
              }
            cmp.tensor(y, want);
          }};
}

Case bias_act_backward_case(size_t rows, size_t cols, Act act) {
  return {fmt::format("rows={} cols={} act={}", rows, cols, act == Act::relu ? "relu" : "none"),
          [=](Backend& be, Compare& cmp) {
            Rng rng(rows * 37 + cols);
            Tensor grad = random_tensor(rng, rows, cols);
            Tensor y = random_tensor(rng, rows, cols);
            for (size_t i = 0; i < y.size(); ++i) y.data()[i] = std::max(0.0f, y.data()[i]);  // a ReLU's output
            const Tensor g0 = grad;
            Tensor dgrad = to_backend(grad, &be), dbias(1, cols, Dtype::f32, be);
            be.bias_act_backward(dgrad, to_backend(y, &be), act, dbias);
            be.synchronize();
            grad = to_host(dgrad);
            const Tensor bias_grad = to_host(dbias);
            std::vector<double> want(rows * cols), bias(cols, 0.0);
            for (size_t i = 0; i < rows; ++i)
              for (size_t c = 0; c < cols; ++c) {
                const double g = (act == Act::relu && y.at(i, c) <= 0.0f) ? 0.0 : g0.at(i, c);
                want[i * cols + c] = g;
                bias[c] += g;
              }
            cmp.tensor(grad, want);
            cmp.tensor(bias_grad, bias);
          }};
}

// --- sparse input layer -------------------------------------------------------------------------

Case sparse_forward_case(size_t b, size_t features, size_t h, Act act, bool empty_point) {
  return {fmt::format("B={} F={} H={} act={}{}", b, features, h, act == Act::relu ? "relu" : "none",
                      empty_point ? " (a point without features)" : ""),
          [=](Backend& be, Compare& cmp) {
            Rng rng(b * 41 + features * 7 + h);
            const SparseBatch x = random_batch(rng, b, features, 12, empty_point);
            const Tensor w = random_tensor(rng, features, h);
            const Tensor bias = random_tensor(rng, 1, h);
            SparseFeatures xd;
            xd.assign(x, be);
            Tensor result(0, 0, Dtype::f32, be);
            be.sparse_input_forward(xd, to_backend(w, &be), to_backend(bias, &be), act, result);
            be.synchronize();
            const Tensor out = to_host(result);
            std::vector<double> want(b * h);
            for (size_t i = 0; i < b; ++i)
              for (size_t c = 0; c < h; ++c) {
                double s = bias.data()[c];
                const auto ids = x.features_of(i);
                const auto vals = x.values_of(i);
                for (size_t j = 0; j < ids.size(); ++j) s += static_cast<double>(vals[j]) * w.at(ids[j], c);
                want[i * h + c] = act == Act::relu ? std::max(0.0, s) : s;
              }
            cmp.same_size(out.rows(), b);
            cmp.tensor(out, want);
          }};
}

// The row gradients that entries (ids, coefs per sample) give: rows sorted, sums in double.
void reference_rows(std::span<const uint64_t> offsets, const uint32_t* ids, const float* coefs, const Tensor& vecs,
                    std::map<uint32_t, std::vector<double>>& rows, std::map<uint32_t, double>& bias) {
  for (size_t i = 0; i + 1 < offsets.size(); ++i)
    for (uint64_t e = offsets[i]; e < offsets[i + 1]; ++e) {
      auto& row = rows[ids[e]];
      row.resize(vecs.cols(), 0.0);
      for (size_t c = 0; c < vecs.cols(); ++c) row[c] += static_cast<double>(coefs[e]) * vecs.at(i, c);
      bias[ids[e]] += coefs[e];
    }
}

void compare_rows(Compare& cmp, const RowGrad& got, const std::map<uint32_t, std::vector<double>>& want) {
  cmp.same_size(got.rows.size(), want.size());
  size_t j = 0;
  for (const auto& [row, values] : want) {
    if (j >= got.rows.size()) break;
    cmp.exact(got.rows[j], row);
    for (size_t c = 0; c < values.size(); ++c) cmp.add(got.values.at(j, c), values[c]);
    ++j;
  }
}

// A device backend keeps the row list it found (RowGrad::device_rows): the host's, on the device.
void check_device_rows(Compare& cmp, Backend& be, const RowGrad& grad) {
  if (be.device().is_host()) return;
  const Tensor* on_device = grad.device_rows(&be);
  cmp.exact(on_device != nullptr ? 1 : 0, 1);
  if (on_device == nullptr) return;
  const Tensor listed = to_host(*on_device);
  cmp.same_size(listed.size(), grad.rows.size());
  for (size_t j = 0; j < std::min(listed.size(), grad.rows.size()); ++j) cmp.exact(listed.u32()[j], grad.rows[j]);
}

Case sparse_backward_case(size_t b, size_t features, size_t h, bool empty_point) {
  return {fmt::format("B={} F={} H={}{}, workspace reused", b, features, h,
                      empty_point ? " (a point without features)" : ""),
          [=](Backend& be, Compare& cmp) {
            std::unique_ptr<RowWorkspace> ws = be.make_row_workspace(features);
            for (int round = 0; round < 2; ++round) {  // the second call reuses the workspace
              Rng rng(b * 43 + features * 5 + h + round);
              const SparseBatch x = random_batch(rng, b, features, 9, empty_point);
              const Tensor grad_pre = random_tensor(rng, b, h);
              RowGrad grad;
              SparseFeatures xd;
              xd.assign(x, be);
              // A device backend takes the rows listed by the host (core/backend.h).
              if (!be.device().is_host()) DistinctRows(features).list(x.feature_ids, grad.rows);
              be.sparse_input_backward(*ws, xd, to_backend(grad_pre, &be), grad);
              check_device_rows(cmp, be, grad);
              be.synchronize();
              grad.values = to_host(grad.values);
              std::map<uint32_t, std::vector<double>> rows;
              std::map<uint32_t, double> bias;
              reference_rows(x.feature_offsets, x.feature_ids.data(), x.feature_values.data(), grad_pre, rows, bias);
              compare_rows(cmp, grad, rows);
            }
          }};
}

// --- active sets --------------------------------------------------------------------------------

Case active_logits_case(size_t b, size_t n, size_t d, bool empty_sample, bool offsets) {
  return {fmt::format("B={} N={} D={}{}{}", b, n, d, empty_sample ? " (a sample without ids)" : "",
                      offsets ? " logit offsets" : ""),
          [=](Backend& be, Compare& cmp) {
            Rng rng(b * 47 + n * 3 + d + offsets);
            const ActiveSets active = random_active(rng, b, n, 20, empty_sample, offsets);
            const Tensor h = random_tensor(rng, b, d), w = random_tensor(rng, n, d), bias = random_tensor(rng, n, 1);
            Tensor out(0, 0, Dtype::f32, be);
            ActiveTensors sets;
            sets.assign(active, be);
            be.active_logits(to_backend(h, &be), sets, to_backend(w, &be), to_backend(bias, &be), out);
            be.synchronize();
            const Tensor logits = to_host(out);
            cmp.same_size(logits.size(), active.total());
            for (size_t i = 0; i < b; ++i)
              for (uint64_t e = active.offsets[i]; e < std::min<uint64_t>(active.offsets[i + 1], logits.size()); ++e) {
                double s = bias.data()[active.ids[e]];
                for (size_t c = 0; c < d; ++c) s += static_cast<double>(h.at(i, c)) * w.at(active.ids[e], c);
                if (offsets) s += active.logit_offsets[e];
                cmp.add(logits.data()[e], s);
              }
          }};
}

Case active_backward_case(size_t b, size_t n, size_t d, bool empty_sample) {
  return {fmt::format("B={} N={} D={}{}", b, n, d, empty_sample ? " (a sample without ids)" : ""),
          [=](Backend& be, Compare& cmp) {
            Rng rng(b * 53 + n * 3 + d);
            const ActiveSets active = random_active(rng, b, n, 20, empty_sample, false);
            std::vector<float> dlogits(active.total());
            for (size_t e = 0; e < dlogits.size(); ++e) dlogits[e] = e % 4 == 1 ? 0.0f : rng.uniform(-1, 1);
            const Tensor w = random_tensor(rng, n, d);
            Tensor out(0, 0, Dtype::f32, be);
            const Tensor ddlogits = to_backend(Tensor::wrap(dlogits.data(), 1, dlogits.size(), Dtype::f32), &be);
            ActiveTensors sets;
            sets.assign(active, be);
            be.active_backward_input(sets, ddlogits, to_backend(w, &be), out);
            be.synchronize();
            const Tensor grad_h = to_host(out);
            std::vector<double> want(b * d, 0.0);
            for (size_t i = 0; i < b; ++i)
              for (uint64_t e = active.offsets[i]; e < active.offsets[i + 1]; ++e)
                for (size_t c = 0; c < d; ++c) want[i * d + c] += static_cast<double>(dlogits[e]) * w.at(active.ids[e], c);
            cmp.same_size(grad_h.rows(), b);
            cmp.tensor(grad_h, want);
          }};
}

Case row_accumulate_case(size_t b, size_t n, size_t d, bool empty_sample, bool with_bias) {
  return {fmt::format("B={} N={} D={}{}{}, workspace reused", b, n, d, empty_sample ? " (a sample without ids)" : "",
                      with_bias ? " bias" : ""),
          [=](Backend& be, Compare& cmp) {
            std::unique_ptr<RowWorkspace> ws = be.make_row_workspace(n);
            for (int round = 0; round < 2; ++round) {
              Rng rng(b * 59 + n * 3 + d + round);
              const ActiveSets active = random_active(rng, b, n, 15, empty_sample, false);
              std::vector<float> coefs(active.total());
              for (float& c : coefs) c = rng.uniform(-1, 1);
              const Tensor vecs = random_tensor(rng, b, d);
              RowGrad grad, bias_grad;
              ActiveTensors entries;
              entries.assign(active, be);
              // A device backend takes the rows listed by the host (core/backend.h).
              if (!be.device().is_host()) DistinctRows(n).list(active.ids, grad.rows);
              be.row_accumulate(*ws, entries, to_backend(Tensor::wrap(coefs.data(), 1, coefs.size(), Dtype::f32), &be),
                                to_backend(vecs, &be), grad, with_bias ? &bias_grad : nullptr);
              check_device_rows(cmp, be, grad);
              if (with_bias) check_device_rows(cmp, be, bias_grad);
              grad.values = to_host(grad.values);
              bias_grad.values = to_host(bias_grad.values);
              be.synchronize();
              std::map<uint32_t, std::vector<double>> rows;
              std::map<uint32_t, double> bias;
              reference_rows(active.offsets, active.ids.data(), coefs.data(), vecs, rows, bias);
              compare_rows(cmp, grad, rows);
              if (!with_bias) continue;
              cmp.same_size(bias_grad.rows.size(), bias.size());
              size_t j = 0;
              for (const auto& [row, sum] : bias) {
                if (j >= bias_grad.rows.size()) break;
                cmp.exact(bias_grad.rows[j], row);
                cmp.add(bias_grad.values.data()[j], sum);
                ++j;
              }
            }
          }};
}

// --- softmax cross-entropy ----------------------------------------------------------------------

// Logits of b samples in CSR form, up to max_per each (sample b / 2 has none when empty_sample),
// with the positions of their labels owned here and their label counts over the group: sample 1
// has no labels, sample 2 has labels but none owned here.
// A host vector in a 1 x n tensor of be's memory (one set), and back.
template <class T>
Tensor vector_on(Backend& be, const std::vector<T>& v, Dtype dtype) {
  Tensor t(0, 0, dtype, be);
  assign_values(t, std::span<const T>(v));
  return t;
}
template <class T>
std::vector<T> vector_of(const Tensor& t) {
  std::vector<T> v(t.size());
  copy_to_host(t, v.data());
  return v;
}

struct XentInput {
  std::vector<float> z;
  std::vector<uint64_t> offsets{0}, pos_offsets{0}, label_offsets{0};
  std::vector<uint32_t> positions;
  // The logits and the batch's arrays in be's memory, as the ops take them.
  struct OnBackend {
    Tensor z, offsets, pos_offsets, positions, label_offsets;
    XentTensors batch(float grad_scale = 1.0f) const {
      return {.offsets = &offsets, .pos_offsets = &pos_offsets, .positions = &positions,
              .label_offsets = &label_offsets, .grad_scale = grad_scale};
    }
  };
  OnBackend on(Backend& be) const {
    return {vector_on(be, z, Dtype::f32), vector_on(be, offsets, Dtype::u64), vector_on(be, pos_offsets, Dtype::u64),
            vector_on(be, positions, Dtype::u32), vector_on(be, label_offsets, Dtype::u64)};
  }
};

XentInput random_xent(Rng& rng, size_t b, size_t max_per, bool empty_sample) {
  XentInput in;
  for (size_t i = 0; i < b; ++i) {
    const size_t n = (empty_sample && i == b / 2) ? 0 : 1 + rng.below(max_per);
    for (size_t j = 0; j < n; ++j) in.z.push_back(rng.uniform(-5, 5));
    in.offsets.push_back(in.z.size());
    const size_t labels = i == 1 ? 0 : 1 + rng.below(3);
    const size_t owned = (i == 1 || i == 2) ? 0 : std::min(labels, n);
    for (const uint32_t p : distinct(rng, n, owned)) in.positions.push_back(p);
    in.pos_offsets.push_back(in.positions.size());
    in.label_offsets.push_back(in.label_offsets.back() + labels);
  }
  return in;
}

double reference_max(const XentInput& in, size_t i) {
  double m = -INFINITY;
  for (uint64_t e = in.offsets[i]; e < in.offsets[i + 1]; ++e) m = std::max<double>(m, in.z[e]);
  return m;
}

std::string xent_shape(size_t b, size_t max_per, bool empty_sample) {
  return fmt::format("B={} logits<={}{}", b, max_per, empty_sample ? " (a sample without ids)" : "");
}

Case xent_max_case(size_t b, size_t max_per, bool empty_sample) {
  return {xent_shape(b, max_per, empty_sample), [=](Backend& be, Compare& cmp) {
            Rng rng(b * 61 + max_per);
            const XentInput in = random_xent(rng, b, max_per, empty_sample);
            const XentInput::OnBackend d = in.on(be);
            Tensor out(0, 0, Dtype::f32, be);
            be.xent_max(d.z, d.batch(), out);
            be.synchronize();
            const std::vector<float> max = vector_of<float>(out);
            cmp.same_size(max.size(), b);
            for (size_t i = 0; i < std::min(b, max.size()); ++i) cmp.add(max[i], reference_max(in, i));
          }};
}

Case xent_sums_case(size_t b, size_t max_per, bool empty_sample) {
  return {xent_shape(b, max_per, empty_sample), [=](Backend& be, Compare& cmp) {
            Rng rng(b * 67 + max_per);
            const XentInput in = random_xent(rng, b, max_per, empty_sample);
            std::vector<float> max(b);
            for (size_t i = 0; i < b; ++i) {  // the group's maximum: at least the local one
              const double m = reference_max(in, i);
              max[i] = static_cast<float>(std::isfinite(m) ? m + rng.uniform(0, 1) : rng.uniform(-1, 1));
            }
            const XentInput::OnBackend d = in.on(be);
            Tensor out(0, 0, Dtype::f32, be);
            be.xent_sums(d.z, d.batch(), vector_on(be, max, Dtype::f32), out);
            be.synchronize();
            std::vector<float> sums = vector_of<float>(out);
            cmp.same_size(sums.size(), 2 * b);
            sums.resize(2 * b);
            for (size_t i = 0; i < b; ++i) {
              double s = 0, y = 0;
              for (uint64_t e = in.offsets[i]; e < in.offsets[i + 1]; ++e) s += std::exp(double{in.z[e]} - max[i]);
              for (uint64_t p = in.pos_offsets[i]; p < in.pos_offsets[i + 1]; ++p)
                y += in.z[in.offsets[i] + in.positions[p]];
              cmp.add(sums[i], s);
              cmp.add(sums[b + i], y);
            }
          }};
}

// grad_scale: the trainer's 1 / batch folded into dLoss/dz (XentBatch::grad_scale).
Case xent_loss_grad_case(size_t b, size_t max_per, bool empty_sample, float grad_scale = 1.0f) {
  const std::string scaled = grad_scale != 1.0f ? fmt::format(", gradient x {:g}", grad_scale) : "";
  return {xent_shape(b, max_per, empty_sample) + scaled, [=](Backend& be, Compare& cmp) {
            Rng rng(b * 71 + max_per);
            XentInput in = random_xent(rng, b, max_per, empty_sample);
            // The group's max and sums: the local parts plus what other ranks add.
            std::vector<float> max(b), sums(2 * b);
            for (size_t i = 0; i < b; ++i) {
              const double m = reference_max(in, i);
              max[i] = static_cast<float>(std::isfinite(m) ? m + rng.uniform(0, 1) : rng.uniform(-1, 1));
              double s = 0;
              for (uint64_t e = in.offsets[i]; e < in.offsets[i + 1]; ++e) s += std::exp(double{in.z[e]} - max[i]);
              sums[i] = static_cast<float>(s + rng.uniform(0.5f, 3.0f));
              sums[b + i] = rng.uniform(-3, 3);
            }
            const std::vector<float> z0 = in.z;
            XentInput::OnBackend d = in.on(be);
            Tensor out(0, 0, Dtype::f64, be);
            be.xent_loss_grad(d.z, d.batch(grad_scale), vector_on(be, max, Dtype::f32), vector_on(be, sums, Dtype::f32),
                              out);
            be.synchronize();
            std::vector<double> losses = vector_of<double>(out);
            cmp.same_size(losses.size(), b);
            losses.resize(b);
            in.z = vector_of<float>(d.z);
            for (size_t i = 0; i < b; ++i) {
              const uint64_t labels = in.label_offsets[i + 1] - in.label_offsets[i];
              std::vector<double> g(in.offsets[i + 1] - in.offsets[i], 0.0);
              double loss = 0;
              if (labels > 0) {
                const double w = 1.0 / static_cast<double>(labels);
                loss = std::log(double{sums[i]}) + max[i] - w * sums[b + i];
                for (size_t j = 0; j < g.size(); ++j) g[j] = std::exp(double{z0[in.offsets[i] + j]} - max[i]) / sums[i];
                for (uint64_t p = in.pos_offsets[i]; p < in.pos_offsets[i + 1]; ++p) g[in.positions[p]] -= w;
                for (double& gj : g) gj *= grad_scale;
              }
              cmp.add(losses[i], loss);
              for (size_t j = 0; j < g.size(); ++j) cmp.add(in.z[in.offsets[i] + j], g[j]);
            }
          }};
}

// --- ranking ------------------------------------------------------------------------------------

// rows of candidates: dense (width each, labels = positions) or CSR (ids below n, some rows with
// fewer than k, one with none). Scores on a coarse grid when ties is set, so the order of equal
// scores (lower label first) is checked.
Case top_k_case(size_t rows, size_t width, size_t k, bool csr, bool ties, bool with_bias = false) {
  return {fmt::format("rows={} {}={} k={}{}{}", rows, csr ? "N" : "width", width, k, ties ? " ties" : "",
                      with_bias ? " bias" : ""),
          [=](Backend& be, Compare& cmp) {
            Rng rng(rows * 73 + width * 3 + k + csr + with_bias);
            std::vector<float> bias(width);
            for (float& b : bias) b = ties ? std::round(rng.uniform(-1, 1) * 2.0f) / 2.0f : rng.uniform(-1, 1);
            std::vector<float> scores;
            std::vector<uint64_t> offsets{0};
            std::vector<uint32_t> ids;
            for (size_t i = 0; i < rows; ++i) {
              const size_t n = !csr ? width : (i == rows / 2 ? 0 : rng.below(std::min(width, 2 * k + 2) + 1));
              if (csr)
                for (const uint32_t id : distinct(rng, width, n)) ids.push_back(id);
              for (size_t j = 0; j < n; ++j)
                scores.push_back(ties ? std::round(rng.uniform(-2, 2) * 2.0f) / 2.0f : rng.uniform(-2, 2));
              offsets.push_back(scores.size());
            }
            const uint32_t base = csr ? 100 : 7;
            // The candidates go up (set), the k best come back (get).
            const Tensor dscores = vector_on(be, scores, Dtype::f32), doffsets = vector_on(be, offsets, Dtype::u64),
                         dids = vector_on(be, ids, Dtype::u32), dbias = vector_on(be, bias, Dtype::f32);
            TopKInput in{.rows = rows, .scores = &dscores, .offsets = csr ? &doffsets : nullptr, .width = width,
                         .ids = csr ? &dids : nullptr, .label_base = base, .bias = with_bias ? &dbias : nullptr};
            Tensor dlabels(0, 0, Dtype::u32, be), dbest(0, 0, Dtype::f32, be);
            be.top_k(in, k, dlabels, dbest);
            be.synchronize();
            std::vector<uint32_t> labels = vector_of<uint32_t>(dlabels);
            std::vector<float> best = vector_of<float>(dbest);
            cmp.same_size(labels.size(), rows * k);
            labels.resize(rows * k);
            best.resize(rows * k);
            for (size_t i = 0; i < rows; ++i) {
              std::vector<std::pair<float, uint32_t>> cand;
              for (uint64_t e = offsets[i]; e < offsets[i + 1]; ++e) {
                const uint32_t label = csr ? ids[e] : static_cast<uint32_t>(e - offsets[i]);
                // A float sum, as the op's contract says: the order of near-equal scores is exact.
                cand.emplace_back(with_bias ? scores[e] + bias[label] : scores[e], label);
              }
              std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& c) {
                return a.first != c.first ? a.first > c.first : a.second < c.second;
              });
              std::set<uint32_t> listed;
              for (const auto& c : cand) listed.insert(c.second);
              if (cand.size() > k) cand.resize(k);
              for (uint32_t j = 0; cand.size() < k; ++j)
                if (!listed.contains(j)) cand.emplace_back(-INFINITY, j);
              for (size_t j = 0; j < k; ++j) {
                cmp.exact(labels[i * k + j], cand[j].second + base);
                cmp.add(best[i * k + j], cand[j].first);
              }
            }
          }};
}

// --- optimizers ---------------------------------------------------------------------------------

// A row update over `listed` of `rows` rows: gradients (unless catch_up_only), catch-up plans for
// about half the rows (none when no_plans), update counts 1..5.
struct OptimInput {
  Tensor w, m, v, grad;
  std::vector<uint32_t> rows;
  std::vector<std::vector<float>> terms;
  std::vector<CatchUpPlan> plan_store;
  std::vector<const CatchUpPlan*> plans;
  std::vector<uint32_t> counts;
  std::vector<float> c1, c2;
};

OptimInput random_optim(Rng& rng, size_t rows, size_t cols, size_t listed, bool catch_up_only, bool no_plans) {
  OptimInput in;
  in.w = random_tensor(rng, rows, cols);
  in.m = random_tensor(rng, rows, cols, -0.1f, 0.1f);
  in.v = random_tensor(rng, rows, cols, 0.0f, 0.01f);
  in.rows = distinct(rng, rows, listed);
  std::sort(in.rows.begin(), in.rows.end());
  if (!catch_up_only) in.grad = random_tensor(rng, in.rows.size(), cols, -0.5f, 0.5f);
  in.terms.resize(in.rows.size());
  in.plan_store.resize(in.rows.size());
  for (size_t j = 0; j < in.rows.size(); ++j) {
    in.counts.push_back(static_cast<uint32_t>(1 + rng.below(5)));
    if (no_plans) continue;
    if (!catch_up_only && rng.below(2) == 0) {
      in.plans.push_back(nullptr);
      continue;
    }
    const size_t steps = rng.below(5);
    for (size_t s = 0; s < steps; ++s) {
      in.terms[j].push_back(rng.uniform(1e-4f, 1e-3f));
      in.terms[j].push_back(rng.uniform(0.5f, 1.5f));
    }
    CatchUpPlan& p = in.plan_store[j];
    p.decay = rng.uniform(0.99f, 1.0f);
    p.move = rng.uniform(0.0f, 0.01f);
    p.m_decay = rng.uniform(0.5f, 1.0f);
    p.v_decay = rng.uniform(0.5f, 1.0f);
    p.terms = in.terms[j].data();
    p.terms_count = static_cast<uint32_t>(steps);
    in.plans.push_back(&p);
  }
  const double b1 = 0.9, b2 = 0.999;
  in.c1.push_back(0.0f);
  in.c2.push_back(0.0f);
  for (int t = 1; t <= 5; ++t) {
    in.c1.push_back(static_cast<float>(1.0 / (1.0 - std::pow(b1, t))));
    in.c2.push_back(static_cast<float>(1.0 / (1.0 - std::pow(b2, t))));
  }
  return in;
}

// What every optimizer case's update holds: the weights and m (in the backend's memory), the rows
// with their gradient (none when catch_up_only) and catch-up plans, and keep.
RowUpdate base_update(Tensor& dw, Tensor& dm, Tensor& dg, const OptimInput& in, bool catch_up_only, float keep) {
  RowUpdate u;
  u.w = &dw;
  u.m = &dm;
  u.rows = in.rows;
  u.grad = catch_up_only ? nullptr : &dg;
  u.plans = in.plans;
  u.keep = keep;
  return u;
}

std::string optim_shape(size_t rows, size_t cols, size_t listed, bool catch_up_only, bool no_plans, float keep) {
  return fmt::format("rows={} cols={} listed={}{}{}{}", rows, cols, listed, catch_up_only ? " catch-up only" : "",
                     no_plans ? " no plans" : "", keep != 1.0f ? " weight decay" : "");
}

// The Adam family's cases: lr, betas and eps, and one run of the op on be (the state and the
// gradient set in the backend's memory, the bias corrections where it computes, the op, w, m and v
// read back into `in`).
constexpr float kAdamLr = 1e-2f, kAdamBeta1 = 0.9f, kAdamBeta2 = 0.999f, kAdamEps = 1e-8f;
void run_adam_op(Backend& be, void (Backend::*op)(const RowUpdate&), OptimInput& in, bool catch_up_only, float keep) {
  Tensor dw = to_backend(in.w, &be), dm = to_backend(in.m, &be), dv = to_backend(in.v, &be),
         dg = to_backend(in.grad, &be);
  RowUpdate u = base_update(dw, dm, dg, in, catch_up_only, keep);
  u.v = &dv;
  u.counts = in.counts;
  // The bias corrections (row t = c1[t], c2[t]) where the backend computes.
  std::vector<float> table;
  for (size_t t = 0; t < in.c1.size(); ++t) table.insert(table.end(), {in.c1[t], in.c2[t]});
  const Tensor corrections = on(be, table, in.c1.size(), 2);
  u.corrections = &corrections;
  u.lr = kAdamLr;
  u.beta1 = kAdamBeta1;
  u.beta2 = kAdamBeta2;
  u.eps = kAdamEps;
  (be.*op)(u);
  be.synchronize();
  in.w = to_host(dw);
  in.m = to_host(dm);
  in.v = to_host(dv);
}

Case adam_case(size_t rows, size_t cols, size_t listed, bool catch_up_only, bool no_plans, float keep) {
  return {optim_shape(rows, cols, listed, catch_up_only, no_plans, keep), [=](Backend& be, Compare& cmp) {
            Rng rng(rows * 79 + cols * 3 + listed + catch_up_only);
            OptimInput in = random_optim(rng, rows, cols, listed, catch_up_only, no_plans);
            const Tensor w0 = in.w, m0 = in.m, v0 = in.v;
            run_adam_op(be, &Backend::adam_rows, in, catch_up_only, keep);
            std::vector<double> w = to_double(w0), m = to_double(m0), v = to_double(v0);
            for (size_t j = 0; j < in.rows.size(); ++j) {
              const size_t r = in.rows[j];
              const CatchUpPlan* plan = in.plans.empty() ? nullptr : in.plans[j];
              for (size_t c = 0; c < cols; ++c) {
                double& W = w[r * cols + c];
                double& M = m[r * cols + c];
                double& V = v[r * cols + c];
                if (plan != nullptr) {
                  double sum = 0;
                  for (uint32_t s = 0; s < plan->terms_count; ++s)
                    sum += plan->terms[2 * s] / (plan->terms[2 * s + 1] * std::sqrt(V) + kAdamEps);
                  W = plan->decay * W - sum * M;
                  M *= plan->m_decay;
                  V *= plan->v_decay;
                }
                if (catch_up_only) continue;
                const double g = in.grad.at(j, c), b1 = kAdamBeta1, b2 = kAdamBeta2;
                M = b1 * M + (1 - b1) * g;
                V = b2 * V + (1 - b2) * g * g;
                const double step = double{kAdamLr} * in.c1[in.counts[j]];
                W = keep * W - step * M / (std::sqrt(V * in.c2[in.counts[j]]) + kAdamEps);
              }
            }
            cmp.tensor(in.w, w);
            cmp.tensor(in.m, m);
            cmp.tensor(in.v, v);
          }};
}

// Row-wise Adam: v one f32 per row (the moving average of the row's mean square), m per element or
// none (momentum off: the step is lr g / (sqrt(v c2) + eps), no first-moment correction).
Case rowwise_adam_case(size_t rows, size_t cols, size_t listed, bool catch_up_only, bool no_plans, float keep,
                       bool momentum) {
  return {optim_shape(rows, cols, listed, catch_up_only, no_plans, keep) + (momentum ? "" : " no momentum"),
          [=](Backend& be, Compare& cmp) {
            Rng rng(rows * 101 + cols * 3 + listed + catch_up_only + momentum);
            OptimInput in = random_optim(rng, rows, cols, listed, catch_up_only, no_plans);
            in.v = random_tensor(rng, rows, 1, 0.0f, 0.01f);
            in.v.at(0, 0) = 0.0f;  // where every run starts
            if (!momentum) in.m = Tensor(0, 0);
            const Tensor w0 = in.w, m0 = in.m, v0 = in.v;
            run_adam_op(be, &Backend::rowwise_adam_rows, in, catch_up_only, keep);
            std::vector<double> w = to_double(w0), m = to_double(m0), v = to_double(v0);
            for (size_t j = 0; j < in.rows.size(); ++j) {
              const size_t r = in.rows[j];
              const CatchUpPlan* plan = in.plans.empty() ? nullptr : in.plans[j];
              if (plan != nullptr) {
                double move = 0;
                for (uint32_t s = 0; s < plan->terms_count; ++s)
                  move += plan->terms[2 * s] / (plan->terms[2 * s + 1] * std::sqrt(v[r]) + kAdamEps);
                for (size_t c = 0; c < cols; ++c) {
                  double& W = w[r * cols + c];
                  if (!momentum) {
                    W *= plan->decay;
                    continue;
                  }
                  W = plan->decay * W - move * m[r * cols + c];
                  m[r * cols + c] *= plan->m_decay;
                }
                v[r] *= plan->v_decay;
              }
              if (catch_up_only) continue;
              const double b1 = kAdamBeta1, b2 = kAdamBeta2;
              double squares = 0;
              for (size_t c = 0; c < cols; ++c) squares += double{in.grad.at(j, c)} * in.grad.at(j, c);
              v[r] = b2 * v[r] + (1 - b2) * squares / static_cast<double>(cols);
              const double rate = double{kAdamLr} * (momentum ? in.c1[in.counts[j]] : 1.0);
              const double step = rate / (std::sqrt(v[r] * in.c2[in.counts[j]]) + kAdamEps);
              for (size_t c = 0; c < cols; ++c) {
                const double g = in.grad.at(j, c);
                double& W = w[r * cols + c];
                if (!momentum) {
                  W = keep * W - step * g;
                  continue;
                }
                double& M = m[r * cols + c];
                M = b1 * M + (1 - b1) * g;
                W = keep * W - step * M;
              }
            }
            cmp.tensor(in.w, w);
            if (momentum) cmp.tensor(in.m, m);
            cmp.tensor(in.v, v);
          }};
}

Case sgd_case(size_t rows, size_t cols, size_t listed, bool catch_up_only, bool no_plans, float keep) {
  return {optim_shape(rows, cols, listed, catch_up_only, no_plans, keep), [=](Backend& be, Compare& cmp) {
            Rng rng(rows * 83 + cols * 3 + listed + catch_up_only);
            OptimInput in = random_optim(rng, rows, cols, listed, catch_up_only, no_plans);
            const Tensor w0 = in.w, m0 = in.m;
            // The state and the gradient in the backend's memory (set), read back after the op (get).
            Tensor dw = to_backend(in.w, &be), dm = to_backend(in.m, &be), dv = to_backend(in.v, &be),
                   dg = to_backend(in.grad, &be);
            RowUpdate u = base_update(dw, dm, dg, in, catch_up_only, keep);
            u.lr = 0.1f;
            u.momentum = 0.9f;
            be.sgd_rows(u);
            be.synchronize();
            in.w = to_host(dw);
            in.m = to_host(dm);
            in.v = to_host(dv);
            std::vector<double> w = to_double(w0), m = to_double(m0);
            for (size_t j = 0; j < in.rows.size(); ++j) {
              const size_t r = in.rows[j];
              const CatchUpPlan* plan = in.plans.empty() ? nullptr : in.plans[j];
              for (size_t c = 0; c < cols; ++c) {
                double& W = w[r * cols + c];
                double& M = m[r * cols + c];
                if (plan != nullptr) {
                  W = plan->decay * W - double{plan->move} * M;
                  M *= plan->m_decay;
                }
                if (u.grad == nullptr) continue;
                M = double{u.momentum} * M + in.grad.at(j, c);
                W = keep * W - double{u.lr} * M;
              }
            }
            cmp.tensor(in.w, w);
            cmp.tensor(in.m, m);
          }};
}

// The Adagrad family's cases: lr and eps, and one run of the op on be (the state and the gradient
// set in the backend's memory, the op, w and m read back into `in`).
constexpr float kAdagradLr = 0.05f, kAdagradEps = 1e-10f;
void run_adagrad_op(Backend& be, void (Backend::*op)(const RowUpdate&), OptimInput& in, bool catch_up_only,
                    float keep) {
  Tensor dw = to_backend(in.w, &be), dm = to_backend(in.m, &be), dg = to_backend(in.grad, &be);
  RowUpdate u = base_update(dw, dm, dg, in, catch_up_only, keep);
  u.lr = kAdagradLr;
  u.eps = kAdagradEps;
  (be.*op)(u);
  be.synchronize();
  in.w = to_host(dw);
  in.m = to_host(dm);
}

Case adagrad_case(size_t rows, size_t cols, size_t listed, bool catch_up_only, bool no_plans, float keep) {
  return {optim_shape(rows, cols, listed, catch_up_only, no_plans, keep), [=](Backend& be, Compare& cmp) {
            Rng rng(rows * 89 + cols * 3 + listed + catch_up_only);
            OptimInput in = random_optim(rng, rows, cols, listed, catch_up_only, no_plans);
            // An accumulator is a sum of squares: never negative (row 0 at 0, where every run starts).
            in.m = random_tensor(rng, rows, cols, 0.0f, 0.2f);
            for (size_t c = 0; c < cols; ++c) in.m.at(0, c) = 0.0f;
            const Tensor w0 = in.w, m0 = in.m;
            run_adagrad_op(be, &Backend::adagrad_rows, in, catch_up_only, keep);
            std::vector<double> w = to_double(w0), m = to_double(m0);
            for (size_t j = 0; j < in.rows.size(); ++j) {
              const size_t r = in.rows[j];
              const CatchUpPlan* plan = in.plans.empty() ? nullptr : in.plans[j];
              for (size_t c = 0; c < cols; ++c) {
                double& W = w[r * cols + c];
                double& M = m[r * cols + c];
                if (plan != nullptr) W *= plan->decay;  // the plan's move and decays are SGD's and Adam's
                if (catch_up_only) continue;
                const double g = in.grad.at(j, c);
                M += g * g;
                W = keep * W - double{kAdagradLr} * g / (std::sqrt(M) + kAdagradEps);
              }
            }
            cmp.tensor(in.w, w);
            cmp.tensor(in.m, m);
          }};
}

// Row-wise Adagrad: one accumulator per row (rows x 1 f32), raised by the mean of the row's squared
// gradient; the step lr / (sqrt(acc) + eps) for the whole row.
Case rowwise_adagrad_case(size_t rows, size_t cols, size_t listed, bool catch_up_only, bool no_plans, float keep) {
  return {optim_shape(rows, cols, listed, catch_up_only, no_plans, keep), [=](Backend& be, Compare& cmp) {
            Rng rng(rows * 97 + cols * 3 + listed + catch_up_only);
            OptimInput in = random_optim(rng, rows, cols, listed, catch_up_only, no_plans);
            in.m = random_tensor(rng, rows, 1, 0.0f, 0.2f);
            in.m.at(0, 0) = 0.0f;  // where every run starts
            const Tensor w0 = in.w, m0 = in.m;
            run_adagrad_op(be, &Backend::rowwise_adagrad_rows, in, catch_up_only, keep);
            std::vector<double> w = to_double(w0), m = to_double(m0);
            for (size_t j = 0; j < in.rows.size(); ++j) {
              const size_t r = in.rows[j];
              const CatchUpPlan* plan = in.plans.empty() ? nullptr : in.plans[j];
              if (plan != nullptr)
                for (size_t c = 0; c < cols; ++c) w[r * cols + c] *= plan->decay;
              if (catch_up_only) continue;
              double squares = 0;
              for (size_t c = 0; c < cols; ++c) squares += double{in.grad.at(j, c)} * in.grad.at(j, c);
              m[r] += squares / static_cast<double>(cols);
              const double step = double{kAdagradLr} / (std::sqrt(m[r]) + kAdagradEps);
              for (size_t c = 0; c < cols; ++c) w[r * cols + c] = keep * w[r * cols + c] - step * in.grad.at(j, c);
            }
            cmp.tensor(in.w, w);
            cmp.tensor(in.m, m);
          }};
}

// --- LSH ----------------------------------------------------------------------------------------

Case simhash_case(size_t tables, int k, size_t dim, size_t rows, size_t listed) {
  return {fmt::format("tables={} k={} dim={} rows={}{}", tables, k, dim, rows,
                      listed > 0 ? fmt::format(" listed={}", listed) : std::string()),
          [=](Backend& be, Compare& cmp) {
            Rng rng(tables * 89 + k * 7 + dim + rows);
            const Tensor planes = random_tensor(rng, tables * k, dim);
            const Tensor x = random_tensor(rng, rows, dim);
            std::vector<uint32_t> list = distinct(rng, rows, listed);
            const size_t n = listed > 0 ? list.size() : rows;
            // Where the backend computes (the sampler's), or host memory (a table build's) when listed.
            std::vector<uint32_t> host_codes(n * tables, 0xdeadbeef);
            Tensor out = listed > 0 ? Tensor::wrap(host_codes.data(), n, tables, Dtype::u32) : Tensor(0, 0, Dtype::u32, be);
            const Tensor dplanes = to_backend(planes, &be);
            be.simhash_codes({.planes = &dplanes, .k = k, .tables = tables}, to_backend(x, &be), list, out);
            be.synchronize();
            cmp.same_size(out.size(), n * tables);
            const std::vector<uint32_t> codes = listed > 0 ? host_codes : vector_of<uint32_t>(out);
            for (size_t j = 0; j < n; ++j) {
              const size_t r = listed > 0 ? list[j] : j;
              for (size_t t = 0; t < tables; ++t) {
                uint32_t want = 0, unsure = 0;  // bits whose projection is too close to 0 to call
                for (int b = 0; b < k; ++b) {
                  double dot = 0, norm = 0;
                  for (size_t c = 0; c < dim; ++c) {
                    const double p = planes.at(t * k + b, c), v = x.at(r, c);
                    dot += p * v;
                    norm += std::abs(p * v);
                  }
                  want = (want << 1) | (dot > 0 ? 1u : 0u);
                  unsure = (unsure << 1) | (std::abs(dot) <= 1e-5 * norm ? 1u : 0u);
                }
                cmp.exact(codes[j * tables + t] & ~unsure, want & ~unsure);
              }
            }
          }};
}

uint32_t ref_mix32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

Case dwta_case(size_t tables, int k, int bin_size, size_t dim, size_t rows, size_t listed) {
  return {fmt::format("tables={} k={} bin={} dim={} rows={}{}", tables, k, bin_size, dim, rows,
                      listed > 0 ? fmt::format(" listed={}", listed) : std::string()),
          [=](Backend& be, Compare& cmp) {
            Rng rng(tables * 97 + k * 7 + bin_size + dim + rows);
            int bin_bits = 0;
            while ((1 << bin_bits) < bin_size) ++bin_bits;
            const int max_bits = 18, bucket_bits = std::min(k * bin_bits, max_bits);
            const size_t bins = tables * k;
            std::vector<uint32_t> coords(bins * bin_size);
            for (uint32_t& c : coords) c = static_cast<uint32_t>(rng.below(dim));
            // Rows like ReLU outputs: mostly zeros; row 0 has no positive value at all.
            Tensor x(rows, dim);
            for (size_t r = 0; r < rows; ++r)
              for (size_t c = 0; c < dim; ++c)
                x.at(r, c) = r == 0 ? -rng.uniform(0, 1) : (rng.below(3) == 0 ? rng.uniform(0, 1) : 0.0f);
            const uint64_t seed = rng.next_u64();
            // The coordinates also where the backend computes (as the hash family keeps them), but for
            // the listed cases, which send them.
            const Tensor placed = vector_on(be, coords, Dtype::u32);
            const DwtaSpec spec{.coords = coords, .placed_coords = listed > 0 ? nullptr : &placed, .k = k,
                                .bin_size = bin_size, .bin_bits = bin_bits, .bucket_bits = bucket_bits,
                                .max_bucket_bits = max_bits, .tables = tables, .seed = seed};
            std::vector<uint32_t> list = distinct(rng, rows, listed);
            const size_t n = listed > 0 ? list.size() : rows;
            std::vector<uint32_t> host_codes(n * tables, 0xdeadbeef);
            Tensor out = listed > 0 ? Tensor::wrap(host_codes.data(), n, tables, Dtype::u32) : Tensor(0, 0, Dtype::u32, be);
            be.dwta_codes(spec, to_backend(x, &be), list, out);
            be.synchronize();
            cmp.same_size(out.size(), n * tables);
            const std::vector<uint32_t> codes = listed > 0 ? host_codes : vector_of<uint32_t>(out);
            for (size_t j = 0; j < n; ++j) {
              const size_t r = listed > 0 ? list[j] : j;
              std::vector<int> winners(bins, -1);
              for (size_t b = 0; b < bins; ++b) {
                float best = 0;
                for (int i = 0; i < bin_size; ++i) {
                  const float v = x.at(r, coords[b * bin_size + i]);
                  if (v > best) {
                    best = v;
                    winners[b] = i;
                  }
                }
              }
              for (size_t t = 0; t < tables; ++t) {
                uint64_t code = 0;
                for (int i = 0; i < k; ++i) {
                  const size_t b = t * k + i;
                  int w = winners[b];
                  for (uint64_t attempt = 1; w < 0 && attempt <= 64; ++attempt)
                    w = winners[ref_mix32(seed ^ (b * 0x9e3779b97f4a7c15ULL) ^ attempt) % bins];
                  code = (code << bin_bits) | static_cast<uint64_t>(w < 0 ? 0 : w);
                }
                const uint32_t want = k * bin_bits <= max_bits
                                          ? static_cast<uint32_t>(code)
                                          : ref_mix32(code * 0x9e3779b97f4a7c15ULL + t) & ((1u << bucket_bits) - 1);
                cmp.exact(codes[j * tables + t], want);
              }
            }
          }};
}

Case bucket_union_case(size_t samples, size_t tables, uint32_t buckets, size_t neurons, size_t capacity,
                       size_t max_labels, size_t cap) {
  return {fmt::format("samples={} tables={} buckets={} neurons={} capacity={} cap={}", samples, tables, buckets,
                      neurons, capacity, cap),
          [=](Backend& be, Compare& cmp) {
            const BucketFixture f =
                random_buckets(samples * 131 + tables * 7 + neurons + cap, samples, tables, buckets, neurons, capacity,
                               max_labels);
            // The query and the result where the backend computes; out holds something to replace.
            ActiveTensors out;
            out.ids = vector_on(be, std::vector<uint32_t>(3, 0xdeadbeef), Dtype::u32);
            out.offsets = vector_on(be, std::vector<uint64_t>{0, 3}, Dtype::u64);
            const Tensor codes = vector_on(be, f.codes, Dtype::u32), labels = vector_on(be, f.labels, Dtype::u32);
            const Tensor label_offsets = vector_on(be, f.label_offsets, Dtype::u64);
            Tensor scanned_out(0, 0, Dtype::u64, be);
            be.bucket_union(f.view(),
                            {.samples = samples, .codes = &codes, .label_offsets = &label_offsets, .labels = &labels,
                             .cap = cap, .scanned = &scanned_out},
                            out);
            be.synchronize();
            ActiveSets got;
            got.offsets = vector_of<uint64_t>(out.offsets);
            got.ids = vector_of<uint32_t>(out.ids);
            got.logit_offsets = vector_of<float>(out.logit_offsets);
            const std::vector<uint64_t> scanned = vector_of<uint64_t>(scanned_out);
            cmp.same_size(scanned.size(), samples);
            const ActiveSets want = reference_union(f, cap);
            cmp.same_size(got.offsets.size(), want.offsets.size());
            for (size_t i = 0; i < std::min(got.offsets.size(), want.offsets.size()); ++i)
              cmp.same_size(got.offsets[i], want.offsets[i]);
            for (size_t e = 0; e < std::min(got.ids.size(), want.ids.size()); ++e) cmp.exact(got.ids[e], want.ids[e]);
            cmp.same_size(got.logit_offsets.size(), 0);
            for (size_t i = 0; i < samples; ++i) {
              uint64_t entries = 0;
              for (size_t t = 0; t < tables; ++t) {
                const uint32_t c = f.codes[i * tables + t];
                entries += f.offsets[t][c + 1] - f.offsets[t][c];
              }
              if (i < scanned.size()) cmp.exact(scanned[i], entries);
            }
          }};
}

}  // namespace

ExtensionTables random_extension_tables(Rng& rng, size_t neurons, size_t draws) {
  ExtensionTables x{std::vector<float>(neurons), std::vector<uint32_t>(neurons), std::vector<double>(neurons),
                    std::vector<double>(draws + 1, 0.0)};
  for (size_t j = 0; j < neurons; ++j) {
    x.threshold[j] = j % 3 == 0 ? 0.1f : rng.uniform(0.5f, 1.0f);
    x.alias[j] = static_cast<uint32_t>(rng.below(neurons));
    x.log_prob[j] = std::log((j % 3 == 0 ? 0.2 : 1.0) / static_cast<double>(neurons));
  }
  for (size_t c = 1; c <= draws; ++c) x.log_count[c] = std::log(static_cast<double>(c));
  return x;
}

ActiveSets reference_extension(const ActiveSets& in, const ActiveExtension& e, const std::vector<float>& threshold,
                               const std::vector<uint32_t>& alias, const std::vector<double>& log_prob) {
  ActiveSets out;
  const Rng step = [&] {
    Rng r;
    r.set_state(e.rng_state);
    return r;
  }();
  for (size_t i = 0; i < in.num_samples(); ++i) {
    std::vector<uint32_t> set(in.ids.begin() + static_cast<std::ptrdiff_t>(in.offsets[i]),
                              in.ids.begin() + static_cast<std::ptrdiff_t>(in.offsets[i + 1]));
    std::set<uint32_t> members(set.begin(), set.end());
    const size_t target = std::min(e.min_active, e.neurons);
    Rng top_up = step.split(i);
    for (size_t tries = 0; set.size() < target && tries < 8 * target; ++tries) {
      const auto id = static_cast<uint32_t>(top_up.below(e.neurons));
      if (members.insert(id).second) set.push_back(id);
    }
    std::vector<float> offsets(set.size(), 0.0f);
    if (e.draws > 0) {
      const size_t room = e.cap == 0 ? e.draws : (set.size() < e.cap ? e.cap - set.size() : 0);
      const size_t m = std::min(e.draws, room);
      Rng rng = step.split(0x4e47).split(i);
      std::map<uint32_t, size_t> drawn;
      for (size_t d = 0; d < m; ++d) {
        const auto j = static_cast<uint32_t>(rng.below(e.neurons));
        ++drawn[rng.uniform() < threshold[j] ? j : alias[j]];
      }
      for (const auto& [id, c] : drawn) {
        if (members.count(id) != 0) continue;
        set.push_back(id);
        offsets.push_back(e.logq ? static_cast<float>(std::log(static_cast<double>(c)) -
                                                      std::log(static_cast<double>(m)) - log_prob[id])
                                 : 0.0f);
      }
    }
    out.ids.insert(out.ids.end(), set.begin(), set.end());
    if (e.draws > 0) out.logit_offsets.insert(out.logit_offsets.end(), offsets.begin(), offsets.end());
    out.offsets.push_back(out.ids.size());
  }
  return out;
}

namespace {

// bucket_build by its definition (core/backend.h) with core/rng.h's Rng: neurons x tables codes below
// `buckets` (skewed: a few buckets take most neurons, so some overflow the capacity).
Case bucket_build_case(size_t neurons, size_t tables, uint32_t buckets, size_t capacity) {
  return {fmt::format("neurons={} tables={} buckets={} capacity={}", neurons, tables, buckets, capacity),
          [=](Backend& be, Compare& cmp) {
            Rng rng(neurons * 13 + tables * 5 + buckets + capacity);
            std::vector<uint32_t> codes(neurons * tables);
            for (uint32_t& c : codes)
              c = static_cast<uint32_t>(rng.below(2) == 0 ? rng.below(std::min<uint32_t>(buckets, 3)) : rng.below(buckets));
            const uint64_t seed = rng.next_u64();
            Tensor t_codes = vector_on(be, codes, Dtype::u32);
            t_codes.resize(neurons, tables);  // neurons x tables, as the hash ops leave them
            Tensor offsets(0, 0, Dtype::u32, be), ids(0, 0, Dtype::u32, be);
            be.bucket_build({.codes = &t_codes, .buckets = buckets, .capacity = capacity, .seed = seed}, offsets, ids);
            be.synchronize();
            cmp.same_size(offsets.rows(), tables);
            cmp.same_size(offsets.cols(), size_t{buckets} + 1);
            cmp.same_size(ids.rows(), tables);
            cmp.same_size(ids.cols(), neurons);
            const std::vector<uint32_t> got_offsets = vector_of<uint32_t>(offsets), got_ids = vector_of<uint32_t>(ids);
            if (got_offsets.size() != tables * (size_t{buckets} + 1) || got_ids.size() != tables * neurons) return;
            for (size_t t = 0; t < tables; ++t) {
              uint32_t kept = 0;
              for (uint32_t b = 0; b < buckets; ++b) {
                std::vector<uint32_t> rows;
                for (size_t i = 0; i < neurons; ++i)
                  if (codes[i * tables + t] == b) rows.push_back(static_cast<uint32_t>(i));
                if (rows.size() > capacity) {
                  Rng r = Rng(seed).split(t).split(b);
                  for (size_t j = 0; j < capacity; ++j) std::swap(rows[j], rows[j + r.below(rows.size() - j)]);
                  rows.resize(capacity);
                }
                const uint32_t* o = got_offsets.data() + t * (size_t{buckets} + 1);
                cmp.same_size(o[b], kept);
                cmp.same_size(o[b + 1] - o[b], rows.size());
                for (size_t j = 0; j < std::min<size_t>(rows.size(), o[b + 1] - o[b]); ++j)
                  cmp.exact(got_ids[t * neurons + o[b] + j], rows[j]);
                kept += static_cast<uint32_t>(rows.size());
              }
              cmp.same_size(got_offsets[t * (size_t{buckets} + 1) + buckets], kept);
            }
          }};
}

// sum_squares in its chunk order (core/backend.h), and scale: n values, some large, some tiny.
Case sum_squares_case(size_t n) {
  return {fmt::format("n={}", n), [=](Backend& be, Compare& cmp) {
            Rng rng(n * 17 + 3);
            std::vector<float> x(n);
            for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(rng.normal()) * (i % 7 == 0 ? 1e3f : 1e-3f);
            const double got = be.sum_squares(vector_on(be, x, Dtype::f32));
            double want = 0.0;
            for (size_t c = 0; c < n; c += kSquaresChunk) {
              double s = 0.0;
              for (size_t i = c; i < std::min(n, c + kSquaresChunk); ++i) s += double{x[i]} * x[i];
              want += s;
            }
            cmp.exact(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want));
          }};
}

Case scale_case(size_t n, float factor) {
  return {fmt::format("n={} factor={}", n, factor), [=](Backend& be, Compare& cmp) {
            Rng rng(n * 19 + 5);
            std::vector<float> x(n);
            for (float& v : x) v = static_cast<float>(rng.normal());
            Tensor t = vector_on(be, x, Dtype::f32);
            be.scale(t, factor);
            be.synchronize();
            const std::vector<float> got = vector_of<float>(t);
            cmp.same_size(got.size(), n);
            for (size_t i = 0; i < std::min(n, got.size()); ++i)
              cmp.exact(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(x[i] * factor));
          }};
}

// ranking_add against the host's RankingMetrics: rows points with up to `most` labels each below
// `labels` (duplicates, some points without), top k of `width` (hits, misses, UINT32_MAX), added in
// two calls (the second from first_row = rows / 2); with propensities from skewed counts.
Case ranking_add_case(size_t rows, size_t width, size_t labels, size_t most, std::vector<size_t> ks, bool psp) {
  return {fmt::format("rows={} width={} labels={} most={} ks={}{}", rows, width, labels, most, fmt::join(ks, ","),
                      psp ? " psp" : ""),
          [=](Backend& be, Compare& cmp) {
            Rng rng(rows * 13 + width * 7 + labels + most + (psp ? 1 : 0));
            SparseBatch batch;
            std::vector<uint32_t> top(rows * width);
            for (size_t i = 0; i < rows; ++i) {
              const size_t n = i % 5 == 3 ? 0 : rng.below(most + 1);
              for (size_t e = 0; e < n; ++e) batch.label_ids.push_back(static_cast<uint32_t>(rng.below(labels)));
              if (n > 1 && i % 3 == 0) batch.label_ids.push_back(batch.label_ids.back());  // a duplicate
              batch.label_offsets.push_back(batch.label_ids.size());
              batch.feature_offsets.push_back(0);  // a point (RankingMetrics counts them by their features)
              const std::span<const uint32_t> truth = batch.labels_of(i);
              for (size_t j = 0; j < width; ++j) {
                const uint64_t r = rng.below(10);
                top[i * width + j] = r < 4 && !truth.empty() ? truth[rng.below(truth.size())]
                                   : r == 9 ? UINT32_MAX : static_cast<uint32_t>(rng.below(labels));
              }
            }
            LabelCounts counts;
            counts.points = 1000;
            counts.per_label.resize(labels / 2);  // labels beyond: unseen
            for (uint64_t& c : counts.per_label) c = rng.below(4) == 0 ? rng.below(500) : rng.below(3);
            const Propensities propensities(counts);
            const Propensities* p = psp ? &propensities : nullptr;
            RankingMetrics want(ks, p);
            want.add(batch, top);

            const size_t num_ks = ks.size();
            const size_t max_k = *std::max_element(ks.begin(), ks.end());
            const std::vector<uint64_t> ks64(ks.begin(), ks.end());
            const Tensor ks_t = vector_on(be, ks64, Dtype::u64);
            const Tensor discounts = vector_on(be, ranking_discounts(max_k), Dtype::f64);
            const Tensor inverse = vector_on(be, propensities.inverse_by_label(), Dtype::f64);
            const Tensor offsets = vector_on(be, batch.label_offsets, Dtype::u64);
            const Tensor label_ids = vector_on(be, batch.label_ids, Dtype::u32);
            RankingState state{Tensor(num_ks, ranking::kSums, Dtype::f64, be),
                               Tensor(num_ks, ranking_flag_words(labels), Dtype::u32, be),
                               Tensor(1, ranking_flag_words(labels), Dtype::u32, be),
                               Tensor(1, num_ks + 1, Dtype::u64, be)};
            for (const auto& [first, count] : {std::pair{size_t{0}, rows / 2}, std::pair{rows / 2, rows - rows / 2}}) {
              Tensor t(count, width, Dtype::u32, be);
              if (t.bytes() > 0) copy_from_host(t, top.data() + first * width);
              be.ranking_add({.top = &t, .label_offsets = &offsets, .labels = &label_ids, .first_row = first,
                              .ks = &ks_t, .discounts = &discounts, .inverse = psp ? &inverse : nullptr,
                              .unseen = propensities.unseen_inverse()},
                             state);
            }
            be.synchronize();
            const std::vector<double> sums = vector_of<double>(state.sums);
            const std::vector<uint64_t> got_counts = vector_of<uint64_t>(state.counts);
            const RankingScores got = ranking_scores(ks, sums, std::span<const uint64_t>(got_counts).first(num_ks),
                                                     got_counts.back(), rows, psp);
            const auto got_named = got.named(), want_named = want.values().named();
            cmp.same_size(got_named.size(), want_named.size());
            for (size_t m = 0; m < std::min(got_named.size(), want_named.size()); ++m)
              cmp.exact(std::bit_cast<uint64_t>(got_named[m].second), std::bit_cast<uint64_t>(want_named[m].second));
          }};
}

// samples sets of up to `members` distinct ids below `neurons` (some empty, one full when neurons
// allows), extended by min_active / draws / cap; a skewed alias table (every third label rare).
Case active_extend_case(size_t samples, size_t neurons, size_t members, size_t min_active, size_t draws, size_t cap,
                        bool logq = true) {
  return {fmt::format("samples={} neurons={} members<={} min={} draws={} cap={}{}", samples, neurons, members,
                      min_active, draws, cap, logq ? "" : " no logq"),
          [=](Backend& be, Compare& cmp) {
            Rng rng(samples * 31 + neurons * 7 + members + min_active * 3 + draws + cap);
            ActiveSets in;
            for (size_t i = 0; i < samples; ++i) {
              const size_t n = i % 4 == 1 ? 0 : (i == 2 ? std::min(members, neurons) : rng.below(members + 1));
              for (const uint32_t id : distinct(rng, neurons, std::min(n, neurons))) in.ids.push_back(id);
              in.offsets.push_back(in.ids.size());
            }
            const ExtensionTables x = random_extension_tables(rng, neurons, draws);
            const Tensor t_threshold = vector_on(be, x.threshold, Dtype::f32), t_alias = vector_on(be, x.alias, Dtype::u32);
            const Tensor t_log_prob = vector_on(be, x.log_prob, Dtype::f64);
            const Tensor t_log_count = vector_on(be, x.log_count, Dtype::f64);
            const ActiveExtension e{.rng_state = rng.next_u64(), .neurons = neurons, .min_active = min_active,
                                    .cap = cap, .draws = draws, .logq = logq, .threshold = &t_threshold,
                                    .alias = &t_alias, .log_prob = &t_log_prob, .log_count = &t_log_count};
            ActiveTensors sets, out;
            sets.offsets = vector_on(be, in.offsets, Dtype::u64);
            sets.ids = vector_on(be, in.ids, Dtype::u32);
            sets.logit_offsets = Tensor(0, 0, Dtype::f32, be);
            out.ids = vector_on(be, std::vector<uint32_t>(5, 0xdeadbeef), Dtype::u32);  // replaced
            be.active_extend(e, sets, out);
            be.synchronize();
            const ActiveSets want = reference_extension(in, e, x.threshold, x.alias, x.log_prob);
            const std::vector<uint64_t> offsets = vector_of<uint64_t>(out.offsets);
            const std::vector<uint32_t> ids = vector_of<uint32_t>(out.ids);
            const std::vector<float> logit_offsets = vector_of<float>(out.logit_offsets);
            cmp.same_size(offsets.size(), want.offsets.size());
            for (size_t i = 0; i < std::min(offsets.size(), want.offsets.size()); ++i)
              cmp.same_size(offsets[i], want.offsets[i]);
            cmp.same_size(ids.size(), want.ids.size());
            for (size_t k = 0; k < std::min(ids.size(), want.ids.size()); ++k) cmp.exact(ids[k], want.ids[k]);
            cmp.same_size(logit_offsets.size(), want.logit_offsets.size());
            for (size_t k = 0; k < std::min(logit_offsets.size(), want.logit_offsets.size()); ++k)
              cmp.exact(std::bit_cast<uint32_t>(logit_offsets[k]), std::bit_cast<uint32_t>(want.logit_offsets[k]));
          }};
}

}  // namespace

BucketTables BucketFixture::view() const {
  return {.owner = this, .generation = generation, .buckets = buckets, .neurons = neurons, .offsets = offset_spans,
          .ids = id_spans};
}

BucketQuery BucketFixture::query(size_t cap) const {
  return {.samples = samples, .codes = codes.data(), .label_offsets = label_offsets, .labels = labels, .cap = cap};
}

BucketFixture random_buckets(uint64_t seed, size_t samples, size_t tables, uint32_t buckets, size_t neurons,
                             size_t capacity, size_t max_labels) {
  Rng rng(seed);
  BucketFixture f;
  f.buckets = buckets;
  f.generation = new_bucket_generation();
  f.neurons = neurons;
  f.samples = samples;
  // Neurons skewed towards low buckets, so some buckets are full and many are empty.
  const auto skewed = [&](uint32_t n) {
    const uint32_t a = static_cast<uint32_t>(rng.below(n)), b = static_cast<uint32_t>(rng.below(n));
    return std::min(a, b);
  };
  for (size_t t = 0; t < tables; ++t) {
    std::vector<std::vector<uint32_t>> in(buckets);
    for (size_t n = 0; n < neurons; ++n) in[skewed(buckets)].push_back(static_cast<uint32_t>(n));
    std::vector<uint32_t> offsets{0}, ids;
    for (auto& bucket : in) {
      for (size_t j = 0; j < bucket.size(); ++j) std::swap(bucket[j], bucket[j + rng.below(bucket.size() - j)]);
      bucket.resize(std::min(bucket.size(), capacity));
      ids.insert(ids.end(), bucket.begin(), bucket.end());
      offsets.push_back(static_cast<uint32_t>(ids.size()));
    }
    f.offsets.push_back(std::move(offsets));
    f.ids.push_back(std::move(ids));
  }
  for (size_t t = 0; t < tables; ++t) {
    f.offset_spans.emplace_back(f.offsets[t]);
    f.id_spans.emplace_back(f.ids[t]);
  }
  f.label_offsets.push_back(0);
  for (size_t i = 0; i < samples; ++i) {
    for (size_t t = 0; t < tables; ++t) f.codes.push_back(skewed(buckets));
    // A label is often a neuron of the sample's first bucket (so the union must skip it).
    std::vector<uint32_t> labels = distinct(rng, neurons, rng.below(max_labels + 1));
    const uint32_t c = tables > 0 ? f.codes[i * tables] : 0;
    if (tables > 0 && !labels.empty() && f.offsets[0][c + 1] > f.offsets[0][c]) {
      const uint32_t hit = f.ids[0][f.offsets[0][c]];
      if (std::find(labels.begin(), labels.end(), hit) == labels.end()) labels[0] = hit;
    }
    f.labels.insert(f.labels.end(), labels.begin(), labels.end());
    f.label_offsets.push_back(f.labels.size());
  }
  return f;
}

ActiveSets reference_union(const BucketFixture& f, size_t cap) {
  ActiveSets out;
  const size_t nt = f.offsets.size();
  for (size_t i = 0; i < f.samples; ++i) {
    const std::vector<uint32_t> labels(f.labels.begin() + static_cast<std::ptrdiff_t>(f.label_offsets[i]),
                                       f.labels.begin() + static_cast<std::ptrdiff_t>(f.label_offsets[i + 1]));
    std::map<uint32_t, std::pair<uint64_t, uint32_t>> seen;  // id -> (first position, hits)
    uint64_t position = 0;
    for (size_t t = 0; t < nt; ++t) {
      const uint32_t c = f.codes[i * nt + t];
      for (uint32_t e = f.offsets[t][c]; e < f.offsets[t][c + 1]; ++e, ++position) {
        const uint32_t id = f.ids[t][e];
        if (std::find(labels.begin(), labels.end(), id) != labels.end()) continue;
        auto [it, fresh] = seen.try_emplace(id, position, 0);
        ++it->second.second;
      }
    }
    std::vector<std::tuple<uint64_t, uint32_t, uint32_t>> found;  // (order, id)
    const bool capped = cap > 0 && labels.size() + seen.size() > cap;
    for (const auto& [id, info] : seen)
      found.emplace_back(capped ? std::numeric_limits<uint32_t>::max() - info.second : info.first, id, info.second);
    std::sort(found.begin(), found.end());
    if (capped) found.resize(cap > labels.size() ? cap - labels.size() : 0);
    out.ids.insert(out.ids.end(), labels.begin(), labels.end());
    for (const auto& entry : found) out.ids.push_back(std::get<1>(entry));
    out.offsets.push_back(out.ids.size());
  }
  return out;
}

// Every op with its cases.
std::vector<OpCases> all_cases() {
  return {
      {Op::matmul, kGemm,
       {matmul_case(0, 5, 3, false, false, false), matmul_case(1, 1, 1, false, false, false),
        // k = 0: an empty sum (a rank left out holds no columns of the inner dimension)
        matmul_case(4, 6, 0, false, false, false), matmul_case(4, 6, 0, true, true, true),
        matmul_case(7, 13, 5, false, true, false), matmul_case(33, 17, 65, true, false, true),
        matmul_case(16, 130, 64, false, true, false), matmul_case(9, 11, 3, true, true, true)}},
      {Op::sparse_input_forward, kExact,
       {sparse_forward_case(0, 10, 8, Act::relu, false), sparse_forward_case(1, 1, 1, Act::none, false),
        sparse_forward_case(7, 37, 17, Act::relu, true), sparse_forward_case(9, 100, 130, Act::none, false)}},
      {Op::sparse_input_backward, kExact,
       {sparse_backward_case(0, 10, 8, false), sparse_backward_case(1, 1, 1, false),
        sparse_backward_case(7, 37, 17, true), sparse_backward_case(12, 50, 130, false)}},
      {Op::active_logits, kExact,
       {active_logits_case(0, 10, 8, false, false), active_logits_case(1, 1, 1, false, false),
        active_logits_case(6, 50, 17, true, true), active_logits_case(9, 300, 130, false, false),
        // The widths the CPU backend's dot_rows specializes.
        active_logits_case(5, 200, 128, false, true), active_logits_case(4, 90, 32, true, false),
        active_logits_case(3, 70, 64, false, false)}},
      {Op::active_backward_input, kExact,
       {active_backward_case(0, 10, 8, false), active_backward_case(1, 1, 1, false),
        active_backward_case(6, 50, 17, true), active_backward_case(9, 300, 130, false),
        active_backward_case(5, 200, 128, false)}},
      {Op::row_accumulate, kExact,
       {row_accumulate_case(0, 10, 8, false, true), row_accumulate_case(1, 1, 1, false, true),
        row_accumulate_case(6, 20, 17, true, true), row_accumulate_case(9, 300, 130, false, false),
        // Few touched rows of many: the CPU backend sorts them rather than scanning every row.
        row_accumulate_case(4, 20000, 9, false, true), row_accumulate_case(40, 30, 128, false, true)}},
      {Op::bias_act_forward, kExact,
       {bias_act_forward_case(0, 5, Act::relu), bias_act_forward_case(1, 1, Act::none),
        bias_act_forward_case(7, 300, Act::relu), bias_act_forward_case(33, 17, Act::none)}},
      {Op::bias_act_backward, kExact,
       {bias_act_backward_case(0, 5, Act::relu), bias_act_backward_case(1, 1, Act::none),
        bias_act_backward_case(7, 300, Act::relu), bias_act_backward_case(33, 17, Act::none)}},
      {Op::xent_max, kExact,
       {xent_max_case(0, 4, false), xent_max_case(1, 1, false), xent_max_case(7, 40, true),
        xent_max_case(5, 1000, false)}},
      {Op::xent_sums, kExact,
       {xent_sums_case(0, 4, false), xent_sums_case(1, 1, false), xent_sums_case(7, 40, true),
        xent_sums_case(5, 1000, false)}},
      {Op::xent_loss_grad, kExact,
       {xent_loss_grad_case(0, 4, false), xent_loss_grad_case(1, 1, false), xent_loss_grad_case(7, 40, true),
        xent_loss_grad_case(5, 1000, false), xent_loss_grad_case(7, 40, true, 1.0f / 24.0f)}},
      {Op::top_k, kExact,
       {top_k_case(0, 5, 3, false, false), top_k_case(1, 1, 1, false, false), top_k_case(6, 37, 5, false, true),
        top_k_case(3, 1000, 10, false, false), top_k_case(7, 50, 4, true, true), top_k_case(2, 5, 0, false, false),
        top_k_case(4, 300, 7, false, false, true), top_k_case(5, 40, 6, true, true, true),
        // Dense rows longer than a few blocks of 16 (the CPU skips blocks with no score above the
        // k-th best), ties among them, a tail shorter than a block.
        top_k_case(3, 1999, 5, false, true, true), top_k_case(2, 515, 1, false, true)}},
      {Op::adam_rows, kExact,
       {adam_case(4, 3, 0, false, false, 1.0f), adam_case(1, 1, 1, false, true, 1.0f),
        adam_case(20, 33, 7, false, false, 1.0f), adam_case(10, 130, 10, true, false, 1.0f),
        adam_case(5, 17, 3, false, false, 0.999f),
        // One column (a bias): the CPU backend's loop over rows of one float, over two tasks' worth of
        // rows; with catch-up plans, the general path.
        adam_case(10000, 1, 6000, false, true, 1.0f), adam_case(30, 1, 20, false, true, 0.999f),
        adam_case(20, 1, 9, false, false, 1.0f)}},
      {Op::sgd_rows, kExact,
       {sgd_case(4, 3, 0, false, false, 1.0f), sgd_case(1, 1, 1, false, true, 1.0f),
        sgd_case(20, 33, 7, false, false, 1.0f), sgd_case(10, 130, 10, true, false, 1.0f),
        sgd_case(5, 17, 3, false, false, 0.999f)}},
      {Op::adagrad_rows, kExact,
       {adagrad_case(4, 3, 0, false, false, 1.0f), adagrad_case(1, 1, 1, false, true, 1.0f),
        adagrad_case(20, 33, 7, false, false, 1.0f), adagrad_case(10, 130, 10, true, false, 0.99f),
        adagrad_case(5, 17, 3, false, false, 0.999f), adagrad_case(6, 9, 6, false, false, 0.98f)}},
      {Op::rowwise_adagrad_rows, kExact,
       {rowwise_adagrad_case(4, 3, 0, false, false, 1.0f), rowwise_adagrad_case(1, 1, 1, false, true, 1.0f),
        rowwise_adagrad_case(20, 33, 7, false, false, 1.0f), rowwise_adagrad_case(10, 130, 10, true, false, 0.99f),
        rowwise_adagrad_case(5, 17, 3, false, false, 0.999f), rowwise_adagrad_case(300, 128, 200, false, true, 1.0f)}},
      {Op::rowwise_adam_rows, kExact,
       {rowwise_adam_case(4, 3, 0, false, false, 1.0f, true), rowwise_adam_case(1, 1, 1, false, true, 1.0f, true),
        rowwise_adam_case(20, 33, 7, false, false, 1.0f, true), rowwise_adam_case(10, 130, 10, true, false, 0.99f, true),
        rowwise_adam_case(5, 17, 3, false, false, 0.999f, true), rowwise_adam_case(300, 128, 200, false, true, 1.0f, true),
        rowwise_adam_case(20, 33, 7, false, false, 0.999f, false), rowwise_adam_case(10, 130, 10, true, false, 0.99f, false),
        rowwise_adam_case(300, 64, 200, false, true, 1.0f, false)}},
      {Op::simhash_codes, kExact,
       {simhash_case(3, 4, 8, 0, 0), simhash_case(1, 1, 1, 1, 0), simhash_case(5, 8, 17, 9, 0),
        simhash_case(3, 24, 130, 20, 6)}},
      {Op::dwta_codes, kExact,
       {dwta_case(2, 3, 8, 10, 0, 0), dwta_case(1, 1, 2, 3, 1, 0), dwta_case(5, 3, 8, 40, 12, 0),
        dwta_case(200, 6, 8, 64, 5, 0), dwta_case(7, 8, 16, 50, 9, 4)}},
      {Op::bucket_union, kExact,
       {bucket_union_case(0, 3, 4, 10, 4, 2, 0), bucket_union_case(1, 1, 1, 1, 1, 0, 0),
        bucket_union_case(9, 5, 8, 60, 6, 3, 0), bucket_union_case(9, 5, 8, 60, 6, 3, 7),
        bucket_union_case(7, 12, 16, 300, 20, 4, 25), bucket_union_case(4, 50, 64, 2000, 128, 30, 0),
        bucket_union_case(4, 50, 64, 2000, 128, 30, 40), bucket_union_case(5, 4, 8, 40, 10, 6, 3),
        // 100 tables with a full bucket of 128 (LSH's defaults): 12,800 entries, the CUDA kernel's
        // largest block (16,384 key slots, 32 per thread, shared memory beyond the default 48 KB)
        bucket_union_case(3, 100, 16, 2000, 128, 5, 0), bucket_union_case(3, 100, 16, 2000, 128, 5, 300),
        // 140 full buckets of 128: more entries than a CUDA block's shared memory holds (its host path)
        bucket_union_case(3, 140, 16, 2000, 128, 5, 0)}},
      {Op::sum_squares, kExact,
       {sum_squares_case(0), sum_squares_case(1), sum_squares_case(4095), sum_squares_case(4097),
        sum_squares_case(50000)}},
      {Op::scale, kExact, {scale_case(0, 0.5f), scale_case(3, -2.0f), scale_case(70000, 0.37f)}},
      {Op::ranking_add, kExact,
       {ranking_add_case(0, 5, 10, 3, {1, 3, 5}, false), ranking_add_case(1, 1, 1, 1, {1}, false),
        ranking_add_case(40, 5, 30, 4, {1, 3, 5}, false), ranking_add_case(40, 5, 30, 4, {1, 3, 5}, true),
        ranking_add_case(300, 3, 100, 8, {5, 1}, true), ranking_add_case(257, 10, 1000, 40, {1, 5, 10}, true),
        // fewer predictions than the largest k (a layer with fewer labels than k)
        ranking_add_case(30, 2, 2, 2, {1, 3, 5}, true)}},
      {Op::bucket_build, kExact,
       {bucket_build_case(0, 2, 4, 3), bucket_build_case(1, 1, 1, 1), bucket_build_case(40, 3, 8, 100),
        bucket_build_case(200, 5, 16, 6), bucket_build_case(3000, 4, 64, 20), bucket_build_case(500, 2, 1, 7)}},
      {Op::active_extend, kExact,
       {active_extend_case(0, 10, 3, 2, 4, 0), active_extend_case(1, 1, 1, 1, 1, 0),
        active_extend_case(9, 50, 12, 20, 0, 0), active_extend_case(9, 50, 12, 0, 16, 0),
        active_extend_case(9, 50, 12, 20, 16, 0), active_extend_case(9, 50, 12, 20, 16, 25),
        active_extend_case(6, 30, 40, 25, 64, 0), active_extend_case(5, 2000, 300, 256, 64, 512),
        active_extend_case(5, 2000, 300, 256, 64, 128), active_extend_case(4, 100, 20, 10, 200, 0, false),
        // more draws than labels: every label drawn, counts above 1
        active_extend_case(3, 7, 3, 5, 40, 0)}},
  };
}

// Runs every case of every op on `be`, printing one line each. With perturb, the references are
// wrong on purpose and every case that compares something must FAIL.
Tally run_all(Backend& be, bool perturb) {
  Tally tally;
  const std::vector<OpCases> ops = all_cases();
  std::set<Op> covered;
  for (const OpCases& oc : ops) {
    covered.insert(oc.op);
    for (const Case& c : oc.cases) {
      const std::string head =
          fmt::format("{}{:>6}  {:<22} {:<58}", perturb ? "[self-test] " : "", be.name(), op_name(oc.op), c.shape);
      if (!be.supports(oc.op)) {
        std::printf("%s SKIP (not supported)\n", head.c_str());
        ++tally.skip;
        continue;
      }
      Compare cmp;
      cmp.perturb = perturb;
      std::string error;
      try {
        c.run(be, cmp);
      } catch (const std::exception& e) {
        error = e.what();
      }
      const bool ok = error.empty() && cmp.mismatches == 0 && cmp.nmse() <= oc.bound;
      std::printf("%s %s  nmse=%.2e (bound %.0e) mismatches=%zu/%zu%s%s\n", head.c_str(), ok ? "OK  " : "FAIL",
                  cmp.nmse(), oc.bound, cmp.mismatches, cmp.count, error.empty() ? "" : " error: ", error.c_str());
      if (perturb) {
        // Nothing compared (an empty batch) cannot fail; everything else must.
        INFO(be.name() << " " << op_name(oc.op) << " " << c.shape << ": a wrong reference went unnoticed");
        if (cmp.perturbed > 0) CHECK_FALSE(ok);
      } else {
        INFO(be.name() << " " << op_name(oc.op) << " " << c.shape << ": nmse " << cmp.nmse() << " mismatches "
                       << cmp.mismatches << " " << error);
        CHECK(ok);
      }
      ++(ok ? tally.ok : tally.fail);
    }
  }
  INFO("the harness must have cases for every op");
  CHECK(covered.size() == kNumOps);
  for (const Op op : all_ops()) CHECK(covered.contains(op));
  return tally;
}


}  // namespace frugal::harness
