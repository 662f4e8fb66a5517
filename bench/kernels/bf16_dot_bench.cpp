// The CPU ops on bf16 weights with the bf16 dot-product kernels (kernels/bf16_dot.h, `auto`) and
// without them (`off`: rows widened to f32), side by side in one run: an output layer's active
// logits and dLoss/dh, and a sparse input layer's forward, on one thread, over random rows of a
// large bf16 matrix (as a step reads them: scattered, mostly from memory or L3). Each timed pass
// reads --rows rows; the two modes alternate pass by pass, and the median pass is reported.
//
//   build/bench/kernels/bf16_dot_bench [--matrix-rows 100000] [--rows 2000] [--per-point 200]
//                                      [--widths 64,128,256] [--reps 301]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <tbb/global_control.h>

#include "core/active_sets.h"
#include "core/rng.h"
#include "core/sparse_batch.h"
#include "core/tensor.h"
#include "bench/kernels/load_average.h"
#include "kernels/bf16_dot.h"
#include "kernels/sparse_ops.h"

using namespace frugal;
using frugal::bench::load_average;

namespace {

// Median nanoseconds per row of `pass` under each mode, the modes alternating (which goes first
// alternates too), after one untimed pass of each.
std::pair<double, double> time_modes(size_t reps, size_t rows, const std::function<void(size_t)>& pass) {
  std::vector<double> ns[2];
  const kernels::Bf16Dot modes[2] = {kernels::Bf16Dot::off, kernels::Bf16Dot::auto_};
  for (size_t r = 0; r <= reps; ++r)
    for (size_t k = 0; k < 2; ++k) {
      const size_t m = (r + k) % 2;
      kernels::set_bf16_dot(modes[m]);
      const auto start = std::chrono::steady_clock::now();
      pass(r);
      const double t = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
      if (r > 0) ns[m].push_back(t / static_cast<double>(rows));
    }
  for (auto& v : ns) std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return {ns[0][ns[0].size() / 2], ns[1][ns[1].size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("bf16 weight rows: vdpbf16ps kernels (auto) against the widened f32 path (off)");
  size_t matrix_rows = 100000, rows = 2000, per_point = 200, reps = 301;
  std::vector<size_t> widths{64, 128, 256};
  app.add_option("--matrix-rows", matrix_rows, "rows of the bf16 matrix (labels, or input features)")
      ->check(CLI::PositiveNumber);
  app.add_option("--rows", rows, "rows read by one timed pass")->check(CLI::PositiveNumber);
  app.add_option("--per-point", per_point, "rows per point (active labels, or features)")->check(CLI::PositiveNumber);
  app.add_option("--widths", widths, "row widths (the hidden width)")->delimiter(',');
  app.add_option("--reps", reps, "timed passes of each mode")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
  fmt::print("load average before: {}\n", load_average());
  if (!kernels::bf16_dot_available()) {
    fmt::print("this CPU has no AVX512-BF16: auto is off, nothing to compare\n");
    return 0;
  }
  const size_t points = std::max<size_t>(1, rows / per_point);
  rows = points * per_point;
  fmt::print("{} x width bf16 matrix, {} passes of {} points x {} rows, 1 thread, median ns per row\n",
             matrix_rows, reps, points, per_point);
  fmt::print("{:<22} {:>6} {:>10} {:>10} {:>8}\n", "op", "width", "off", "auto", "off/auto");
  Rng rng(1);
  for (const size_t d : widths) {
    Tensor wide(matrix_rows, d);
    for (size_t i = 0; i < wide.size(); ++i) wide.data()[i] = 0.1f * static_cast<float>(rng.normal());
    const Tensor w = converted(wide, Dtype::bf16);
    wide = Tensor();
    // Passes cycle through 16 sets of random rows, so that a pass finds few of its rows in cache.
    constexpr size_t kSets = 16;
    std::vector<ActiveSets> active(kSets);
    std::vector<SparseBatch> inputs(kSets);
    for (size_t s = 0; s < kSets; ++s)
      for (size_t p = 0; p < points; ++p) {
        std::vector<uint32_t> ids(per_point);
        std::vector<float> vals(per_point);
        for (size_t e = 0; e < per_point; ++e) {
          ids[e] = static_cast<uint32_t>(rng.below(matrix_rows));
          vals[e] = static_cast<float>(rng.uniform(-1.0, 1.0));
        }
        active[s].ids.insert(active[s].ids.end(), ids.begin(), ids.end());
        active[s].offsets.push_back(active[s].ids.size());
        const uint32_t label = 0;
        inputs[s].add_point(ids, vals, {&label, 1});
      }
    Tensor h(points, d), lbias(matrix_rows, 1), bias(1, d), grad_h, out;
    for (size_t i = 0; i < h.size(); ++i) h.data()[i] = static_cast<float>(rng.normal());
    std::vector<float> logits(rows), dlogits(rows);
    for (float& g : dlogits) g = 0.01f * static_cast<float>(rng.normal());
    const auto report = [&](const char* op, std::pair<double, double> ns) {
      fmt::print("{:<22} {:>6} {:>10.1f} {:>10.1f} {:>7.2f}x\n", op, d, ns.first, ns.second, ns.first / ns.second);
    };
    report("active logits", time_modes(reps, rows, [&](size_t r) {
             kernels::active_logits(h, active[r % kSets].view(), w, lbias, logits);
           }));
    report("dLoss/dh", time_modes(reps, rows, [&](size_t r) {
             kernels::active_backward_input(active[r % kSets].view(), dlogits, w, grad_h);
           }));
    report("sparse input forward", time_modes(reps, rows, [&](size_t r) {
             const SparseBatch& x = inputs[r % kSets];
             kernels::sparse_input_forward({x.feature_offsets, x.feature_ids, x.feature_values}, w, bias, true, out);
           }));
  }
  kernels::set_bf16_dot(kernels::Bf16Dot::auto_);
  fmt::print("load average after: {}\n", load_average());
}
