#include "core/data/batch_loader.h"

#include <numeric>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <tbb/task_group.h>

#include "core/check.h"
#include "core/rng.h"

namespace frugal::data {

struct BatchLoader::Impl {
  const Dataset& data;
  BatchOptions options;
  std::vector<uint32_t> order;
  size_t position = 0;  // start of the next global batch in `order`
  SparseBatch prefetched;
  size_t prefetched_global = 0;
  std::vector<uint32_t> picked;
  bool has_prefetched = false;
  tbb::task_group tasks;

  Impl(const Dataset& d, const BatchOptions& o) : data(d), options(o) {}

  void build(SparseBatch& out) {
    out.clear();
    const size_t n = std::min(options.batch, order.size() - position);
    picked.clear();
    for (size_t p = options.shard; p < n; p += options.num_shards) picked.push_back(order[position + p]);
    data.gather(picked, out);
    prefetched_global = n;
    position += n;
  }
  void prefetch() {
    if (position >= order.size()) return;
    has_prefetched = true;
    tasks.run([this] { build(prefetched); });
  }
};

BatchLoader::BatchLoader(const Dataset& data, const BatchOptions& options)
    : impl_(std::make_unique<Impl>(data, options)) {
  FRUGAL_CHECK(options.batch > 0, "batch size must be > 0");
  FRUGAL_CHECK(options.num_shards > 0 && options.shard < options.num_shards,
               fmt::format("bad shard {} of {}", options.shard, options.num_shards));
  std::vector<uint32_t> all(data.size());
  std::iota(all.begin(), all.end(), 0u);
  if (options.shuffle) {
    Rng rng = Rng(options.seed).split(0xb1);
    for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[rng.below(i)]);
  }
  impl_->order = std::move(all);
  impl_->prefetch();
}

BatchLoader::~BatchLoader() { impl_->tasks.wait(); }

bool BatchLoader::next(SparseBatch& out, size_t* global_size) {
  if (!impl_->has_prefetched) return false;
  impl_->tasks.wait();
  std::swap(out, impl_->prefetched);
  if (global_size != nullptr) *global_size = impl_->prefetched_global;
  impl_->has_prefetched = false;
  impl_->prefetch();
  return true;
}

size_t BatchLoader::num_points() const {
  const size_t n = impl_->order.size(), d = impl_->options.num_shards, s = impl_->options.shard;
  // Points of this shard: per full batch its stride share, plus its share of the last partial one.
  const size_t b = impl_->options.batch, full = n / b, rest = n % b;
  auto share = [&](size_t len) { return len > s ? (len - s + d - 1) / d : 0; };
  return full * share(b) + share(rest);
}

size_t BatchLoader::num_batches() const {
  return (impl_->order.size() + impl_->options.batch - 1) / impl_->options.batch;  // global batches
}

}  // namespace frugal::data
