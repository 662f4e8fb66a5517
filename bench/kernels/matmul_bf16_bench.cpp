// The CPU backend's dense products in f32 (kernels::matmul) and in bf16 (kernels::matmul_bf16:
// operands rounded to bf16, oneDNN's bf16 matmul, f32 sums; what `--precision bf16` runs where the
// CPU has AVX512-BF16), side by side in one run, for the shapes frugal's dense products take at
// batch 128: Fashion-MNIST's MLP layer (784 -> 256), DLRM's MLP layers (512 -> 256 -> 64) and the
// exact softmax's full logits over --classes labels (hidden 128), each forward and its two gradient
// products with the trans flags the layers use (layers/dense.cpp, layers/softmax_output.cpp). The
// two alternate pass by pass (which goes first alternates too) after one untimed pass of each; the
// median pass is reported, with the nmse of the bf16 result against the f32 one.
//
//   build/bench/kernels/matmul_bf16_bench [--threads 2] [--reps 21] [--classes 100000] [--only softmax]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/rng.h"
#include "bench/kernels/load_average.h"
#include "kernels/bf16_dot.h"
#include "kernels/matmul.h"

using namespace frugal;
using frugal::bench::load_average;

namespace {

struct Shape {
  const char* what;
  int64_t m, n, k;
  bool ta, tb;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("dense products: f32 (oneDNN) against bf16 operands with f32 sums (oneDNN bf16)");
  int threads = 2;
  size_t reps = 21;
  int64_t classes = 100000;
  std::string only;
  app.add_option("--threads", threads, "oneDNN's threads")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed passes of each")->check(CLI::PositiveNumber);
  app.add_option("--classes", classes, "the exact softmax's labels")->check(CLI::PositiveNumber);
  app.add_option("--only", only, "only the products whose name holds this text (fmnist, dlrm, softmax, dW, ...)");
  CLI11_PARSE(app, argc, argv);
  kernels::set_num_threads(threads);
  fmt::print("load average before: {}\n", load_average());
  if (!kernels::bf16_dot_available())
    fmt::print("this CPU has no AVX512-BF16: the CPU backend keeps f32 products; timing bf16 anyway\n");
  const int64_t b = 128;
  const std::vector<Shape> shapes{
      {"fmnist 784->256 fwd", b, 256, 784, false, true},
      {"fmnist 784->256 dW", 256, 784, b, true, false},
      {"fmnist 784->256 dx", b, 784, 256, false, false},
      {"dlrm 512->256 fwd", b, 256, 512, false, true},
      {"dlrm 512->256 dW", 256, 512, b, true, false},
      {"dlrm 512->256 dx", b, 512, 256, false, false},
      {"dlrm 256->64 fwd", b, 64, 256, false, true},
      {"dlrm 256->64 dW", 64, 256, b, true, false},
      {"dlrm 256->64 dx", b, 256, 64, false, false},
      {"softmax logits", b, classes, 128, false, true},
      {"softmax dh", b, 128, classes, false, false},
      {"softmax dW", classes, 128, b, true, false},
  };
  fmt::print("batch {}, {} threads, median of {} passes\n", b, threads, reps);
  fmt::print("{:<22} {:>7} {:>7} {:>7} {:>3}{:>3} {:>10} {:>10} {:>8} {:>9}\n", "product", "m", "n", "k", "tA", "tB",
             "f32 ms", "bf16 ms", "speedup", "nmse");
  Rng rng(1);
  for (const Shape& s : shapes) {
    if (std::string(s.what).find(only) == std::string::npos) continue;
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), w(static_cast<size_t>(s.k * s.n));
    for (float& x : a) x = static_cast<float>(rng.uniform(-1.0, 1.0));
    for (float& x : w) x = static_cast<float>(rng.uniform(-1.0, 1.0));
    std::vector<float> c[2];
    for (auto& v : c) v.assign(static_cast<size_t>(s.m * s.n), 0.0f);
    std::vector<double> ms[2];
    for (size_t r = 0; r <= reps; ++r)
      for (size_t i = 0; i < 2; ++i) {
        const size_t bf16 = (r + i) % 2;
        const auto product = bf16 != 0 ? kernels::matmul_bf16 : kernels::matmul;
        const auto start = std::chrono::steady_clock::now();
        product(a.data(), s.ta, w.data(), s.tb, c[bf16].data(), s.m, s.n, s.k, false);
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (r > 0) ms[bf16].push_back(t);
      }
    for (auto& v : ms) std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < c[0].size(); ++i) {
      err2 += (double{c[1][i]} - c[0][i]) * (double{c[1][i]} - c[0][i]);
      ref2 += double{c[0][i]} * c[0][i];
    }
    const double f32 = ms[0][ms[0].size() / 2], bf = ms[1][ms[1].size() / 2];
    fmt::print("{:<22} {:>7} {:>7} {:>7} {:>3}{:>3} {:>10.3f} {:>10.3f} {:>7.2f}x {:>9.2e}\n", s.what, s.m, s.n, s.k,
               s.ta ? "T" : "-", s.tb ? "T" : "-", f32, bf, f32 / bf, ref2 > 0 ? err2 / ref2 : err2);
  }
  fmt::print("load average after: {}\n", load_average());
}
