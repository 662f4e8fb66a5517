// DWTA hashing on the CPU: the kernel that LSH rebuilds spend most of their time in (every
// neuron's weight row hashed into every table) against its scalar loop, on random rows, with the
// codes compared. bench/REPORT.md, "Less CPU per step", gives the figures.
//
//   build/bench/lsh/hash_bench [--rows 100000] [--dim 128] [--tables 100] [--k 6] [--bin-size 8]
//                              [--threads 1] [--reps 3]
#include <chrono>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <tbb/global_control.h>

#include "core/backend.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "kernels/lsh_ops.h"

using namespace frugal;

int main(int argc, char** argv) {
  CLI::App app("DWTA codes: the vectorized kernel against the scalar loop");
  size_t rows = 100000, dim = 128, tables = 100, threads = 1, reps = 3;
  int k = 6, bin_size = 8;
  app.add_option("--rows", rows, "vectors hashed (a rebuild hashes every neuron's weight row)");
  app.add_option("--dim", dim, "their dimension (the hidden width)")->check(CLI::PositiveNumber);
  app.add_option("--tables", tables, "hash tables")->check(CLI::PositiveNumber);
  app.add_option("--k", k, "bins per table")->check(CLI::Range(1, 16));
  app.add_option("--bin-size", bin_size, "coordinates per bin (a power of two, 2..256)");
  app.add_option("--threads", threads, "oneTBB threads")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed repetitions of each path")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  int bin_bits = 0;
  while ((1 << bin_bits) < bin_size) ++bin_bits;
  if ((1 << bin_bits) != bin_size || bin_size < 2 || bin_size > 256) {
    std::fprintf(stderr, "hash_bench: --bin-size must be a power of two in 2..256, got %d\n", bin_size);
    return 2;
  }
  const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  Rng rng(1);
  Tensor x(rows, dim);
  for (size_t i = 0; i < rows; ++i)
    for (size_t c = 0; c < dim; ++c) x.at(i, c) = rng.uniform(-1, 1);
  std::vector<uint32_t> coords(tables * k * bin_size);
  for (uint32_t& c : coords) c = static_cast<uint32_t>(rng.below(dim));
  const DwtaSpec spec{.coords = coords, .k = k, .bin_size = bin_size, .bin_bits = bin_bits,
                      .bucket_bits = std::min(k * bin_bits, 18), .max_bucket_bits = 18, .tables = tables, .seed = 3};
  std::vector<uint32_t> fast(rows * tables), scalar(rows * tables);
  auto time = [&](bool vectorized, std::vector<uint32_t>& codes) {
    const auto start = std::chrono::steady_clock::now();
    kernels::dwta_codes(spec, x, {}, codes.data(), vectorized);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3;
  };
  fmt::print("dwta_codes: {} rows x {} dims, {} tables of {} bins of {}, {} thread(s)\n", rows, dim, tables, k,
             bin_size, threads);
  for (size_t r = 0; r < reps; ++r) {
    const double v = time(true, fast), s = time(false, scalar);
    fmt::print("vectorized {:.1f} ms, scalar {:.1f} ms, {:.2f}x, codes {}\n", v, s, s / v,
               fast == scalar ? "identical" : "DIFFER");
    if (fast != scalar) return 1;
  }
}
