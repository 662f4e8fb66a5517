#include "apps/plan/plan_probes.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "comm/codec.h"
#include "comm/dct/thresholder.h"
#include "comm/local_communicator.h"
#include "core/rng.h"

namespace frugal::plan {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

ProbeResult probe_machine(double keep, size_t cols) {
  ProbeResult r;
  // DCT-DP: every row of a 16k-row parameter touched, normal gradients; the best of 3 steps.
  constexpr size_t kRows = 16384;
  cols = std::max<size_t>(cols, 1);
  std::vector<float> grad(kRows * cols);
  Rng rng(7);
  for (float& g : grad) g = static_cast<float>(rng.normal());
  std::vector<uint32_t> rows(kRows);
  std::iota(rows.begin(), rows.end(), 0u);
  comm::Thresholder t({.keep = static_cast<float>(keep), .reestimate_every = 1, .per_row = true}, kRows * cols);
  std::vector<uint32_t> indices;
  std::vector<float> sent;
  std::vector<std::byte> message;
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = Clock::now();
    t.compress_rows(cols, rows, grad.data(), comm::ValueType::bf16, indices, sent);
    message = comm::encode_sparse(kRows * cols, indices, sent, comm::ValueType::bf16);
    best = std::min(best, seconds_since(start));
  }
  r.compress_seconds_per_entry = best / static_cast<double>(kRows * cols);
  std::vector<float> sum(kRows * cols, 0.0f);
  best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = Clock::now();
    const comm::SparseVector v = comm::decode(message);
    for (size_t i = 0; i < v.indices.size(); ++i) sum[v.indices[i]] += v.values[i];
    best = std::min(best, seconds_since(start));
  }
  r.merge_seconds_per_entry = indices.empty() ? 0.0 : best / static_cast<double>(indices.size());
  // Collectives: a 2-rank in-process ring all-reduce of 32 MB (copies into frames, reductions).
  constexpr size_t kFloats = size_t{8} << 20;
  double seconds = 0, bytes = 0;
  comm::run_local(2, [&](comm::Communicator& c) {
    std::vector<float> v(kFloats, 1.0f);
    c.all_reduce(v).wait();  // warm-up: pages touched, frames allocated
    const auto before = c.stats().total().sent;
    const auto start = Clock::now();
    c.all_reduce(v).wait();
    if (c.rank() == 0) {
      seconds = seconds_since(start);
      bytes = static_cast<double>(c.stats().total().sent - before);
    }
  });
  r.collective_seconds_per_byte = bytes > 0 ? seconds / bytes : 0.0;
  return r;
}

}  // namespace frugal::plan
