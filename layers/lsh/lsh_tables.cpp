#include "layers/lsh/lsh_tables.h"

#include <algorithm>

#include <cereal/archives/binary.hpp>
#include <cereal/types/vector.hpp>
#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/backend.h"
#include "core/bucket_build.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/step_profile.h"

namespace frugal::lsh {

LshTables::LshTables(std::shared_ptr<const HashFamily> family, size_t bucket_capacity)
    : family_(std::move(family)), capacity_(bucket_capacity), num_tables_(family_->tables()) {
  FRUGAL_CHECK(capacity_ >= 1, "LSH: bucket capacity must be >= 1");
}

void LshTables::build(Backend& backend, const Tensor& weights, uint64_t seed, const std::vector<uint8_t>* changed) {
  if (!backend.device().is_host()) return build_on_device(backend, weights, seed);
  drop_device_tables();
  // Codes of up to 16 bits (tables of at most 65,536 buckets) are kept in half the memory.
  if (family_->buckets_per_table() <= (uint32_t{1} << 16)) {
    wide_codes_.clear();
    build_with(narrow_codes_, backend, weights, seed, changed);
  } else {
    narrow_codes_.clear();
    build_with(wide_codes_, backend, weights, seed, changed);
  }
  renew_view();
}

void LshTables::renew_view() {
  offset_spans_.clear();
  id_spans_.clear();
  if (stride_ > 0) {
    for (size_t t = 0; t < num_tables_; ++t) {
      offset_spans_.emplace_back(offsets_.data() + t * stride_, stride_);
      id_spans_.emplace_back(ids_.data() + t * num_neurons_, id_counts_[t]);
    }
  }
  generation_ = new_bucket_generation();
}

void LshTables::build_on_device(Backend& backend, const Tensor& weights, uint64_t seed) {
  clear_tables();
  narrow_codes_.clear();
  wide_codes_.clear();
  for (Tensor* t : {&device_codes_, &built_offsets_, &built_ids_}) keep_on(*t, backend);
  family_->hash(backend, weights, {}, device_codes_);
  backend.bucket_build({.codes = &device_codes_, .buckets = family_->buckets_per_table(), .capacity = capacity_,
                        .seed = seed},
                       built_offsets_, built_ids_);
  num_neurons_ = weights.rows();
  built_on_ = &backend;
  renew_view();
}

void LshTables::drop_device_tables() {
  for (Tensor* t : {&device_codes_, &built_offsets_, &built_ids_}) *t = Tensor(0, 0, Dtype::u32);
  built_on_ = nullptr;
}

void LshTables::host_copy(HugePageVector<uint32_t>& offsets, HugePageVector<uint32_t>& ids,
                          std::vector<size_t>& counts) const {
  const Tensor o = to_host(built_offsets_), i = to_host(built_ids_);
  const size_t stride = o.cols();
  offsets.assign(o.u32().begin(), o.u32().end());
  ids.assign(i.u32().begin(), i.u32().end());
  counts.resize(num_tables_);
  for (size_t t = 0; t < num_tables_; ++t) counts[t] = offsets[t * stride + stride - 1];
}

void LshTables::bring_home() {
  if (built_on_ == nullptr) return;
  host_copy(offsets_, ids_, id_counts_);
  stride_ = built_offsets_.cols();
  drop_device_tables();
  renew_view();
}

std::span<const uint32_t> LshTables::bucket(size_t table, uint32_t code) const {
  FRUGAL_CHECK(built_on_ == nullptr, "LSH: bucket() of tables built on a device (bring_home() first)");
  const uint32_t* o = offsets_.data() + table * stride_;
  return {ids_.data() + table * num_neurons_ + o[code], o[code + 1] - o[code]};
}

void LshTables::clear_tables() {
  offsets_.clear();
  ids_.clear();
  id_counts_.clear();
  stride_ = 0;
}

BucketTables LshTables::view() const {
  if (built_on_ != nullptr)
    return {.owner = this, .generation = generation_, .buckets = family_->buckets_per_table(),
            .neurons = num_neurons_, .offsets = {}, .ids = {}, .built_offsets = &built_offsets_,
            .built_ids = &built_ids_, .capacity = capacity_};
  return {.owner = this, .generation = generation_, .buckets = family_->buckets_per_table(),
          .neurons = num_neurons_, .offsets = offset_spans_, .ids = id_spans_, .capacity = capacity_};
}

template <class Code>
void LshTables::build_with(HugePageVector<Code>& codes, Backend& backend, const Tensor& weights, uint64_t seed,
                           const std::vector<uint8_t>* changed) {
  const size_t n = weights.rows(), nt = num_tables_;
  const uint32_t nb = family_->buckets_per_table();
  const bool all = changed == nullptr || codes.size() != n * nt;
  FRUGAL_CHECK(all || changed->size() == n, "LSH: change flags do not match the neuron count");
  num_neurons_ = n;
  codes.resize(n * nt);
  // The codes are table-major (each table's contiguous, for its counting sort below); the hash
  // family writes vector-major codes, which are transposed in blocks of rows that stay in cache.
  std::vector<uint32_t> rows;
  for (size_t i = 0; i < n; ++i)
    if (all || (*changed)[i] != 0) rows.push_back(static_cast<uint32_t>(i));
  // Blocks one after the other (each hashed in parallel by the backend, on this thread's behalf),
  // each block's codes then moved into every table's array in parallel over tiles of its rows.
  constexpr size_t kBlock = 16384, kTile = 256;
  std::vector<uint32_t> fresh;
  for (size_t begin = 0; begin < rows.size(); begin += kBlock) {
    const auto block = std::span<const uint32_t>(rows).subspan(begin, std::min(kBlock, rows.size() - begin));
    fresh.resize(block.size() * nt);
    // Read here on the host (a device's codes come down).
    Tensor codes_out = Tensor::wrap(fresh.data(), block.size(), nt, Dtype::u32);
    family_->hash(backend, weights, block, codes_out);
    // In tiles of rows whose codes stay in cache while every table takes its own from them (a
    // table at a time over the whole block read each cache line of it once per table).
    tbb::parallel_for(tbb::blocked_range<size_t>(0, block.size(), kTile), [&](const auto& tile) {
      for (size_t t = 0; t < nt; ++t) {
        Code* out = &codes[t * n];
        for (size_t j = tile.begin(); j < tile.end(); ++j) out[block[j]] = static_cast<Code>(fresh[j * nt + t]);
      }
    });
  }
  stride_ = size_t{nb} + 1;
  offsets_.resize(nt * stride_);
  ids_.resize(nt * n);
  id_counts_.assign(nt, n);
  tbb::parallel_for(size_t{0}, nt, [&](size_t t) {
    // The table from its codes (core/bucket_build.h: what a device's build makes too).
    const Code* table_codes = &codes[t * n];
    std::vector<uint32_t> aside;
    id_counts_[t] = bucket_build::build_table([table_codes](uint64_t i) { return table_codes[i]; }, n, nb, capacity_,
                                              seed, t, offsets_.data() + t * stride_, ids_.data() + t * n, aside);
  });
  // Each neuron's code per table read and its id placed; each table's offsets written and read.
  // (Hashing the changed rows counts itself.)
  const double entries = static_cast<double>(n) * static_cast<double>(nt);
  profile::count_here(0.0, 8.0 * entries + 8.0 * static_cast<double>(nb) * static_cast<double>(nt));
}

size_t LshTables::bytes() const {
  return (wide_codes_.size() + offsets_.size() + ids_.size()) * sizeof(uint32_t) +
         narrow_codes_.size() * sizeof(uint16_t) + device_codes_.bytes() + built_offsets_.bytes() +
         built_ids_.bytes();
}

void LshTables::save(cereal::BinaryOutputArchive& ar) const {
  if (built_on_ != nullptr) {  // a device's tables come down, in the host layout
    HugePageVector<uint32_t> offsets, ids;
    std::vector<size_t> counts;
    host_copy(offsets, ids, counts);
    return save_arrays(ar, offsets, ids, counts, built_offsets_.cols());
  }
  save_arrays(ar, offsets_, ids_, id_counts_, stride_);
}

void LshTables::save_arrays(cereal::BinaryOutputArchive& ar, const HugePageVector<uint32_t>& offsets,
                            const HugePageVector<uint32_t>& ids, const std::vector<size_t>& counts,
                            size_t stride) const {
  ar(static_cast<uint64_t>(num_neurons_), static_cast<uint64_t>(num_tables_));
  // Each table as the two std::vector<uint32_t> it was saved as before the tables shared blocks
  // (cereal's binary form of a vector: its size, then its bytes), so checkpoints read either way.
  for (size_t t = 0; t < num_tables_; ++t) {
    const size_t num_offsets = stride, num_ids = stride > 0 ? counts[t] : 0;
    ar(cereal::make_size_tag(static_cast<cereal::size_type>(num_offsets)));
    ar(cereal::binary_data(offsets.data() + t * stride, num_offsets * sizeof(uint32_t)));
    ar(cereal::make_size_tag(static_cast<cereal::size_type>(num_ids)));
    ar(cereal::binary_data(ids.data() + t * num_neurons_, num_ids * sizeof(uint32_t)));
  }
}

bool LshTables::load(cereal::BinaryInputArchive& ar) {
  uint64_t n = 0, nt = 0;
  ar(n, nt);
  FRUGAL_CHECK(nt == num_tables_, fmt::format("checkpoint has {} LSH tables, the layer {}", nt, num_tables_));
  // Read whole, checked, then laid out in the blocks.
  std::vector<std::vector<uint32_t>> offsets(nt), ids(nt);
  bool same_width = true;
  for (size_t t = 0; t < nt; ++t) {
    ar(offsets[t], ids[t]);
    const auto& o = offsets[t];
    same_width = same_width && o.size() == size_t{family_->buckets_per_table()} + 1;
    FRUGAL_CHECK(ids[t].size() <= n, "checkpoint: an LSH table holds more ids than the layer has neurons");
    for (const uint32_t id : ids[t]) FRUGAL_CHECK(id < n, "checkpoint: LSH table holds an out-of-range neuron id");
    // bucket() reads ids[offsets[b] .. offsets[b + 1]): they must rise from 0 to the entry count.
    bool ordered = !o.empty() && o.front() == 0 && o.back() == ids[t].size();
    for (size_t b = 1; ordered && b < o.size(); ++b) ordered = o[b - 1] <= o[b];
    FRUGAL_CHECK(ordered, "checkpoint: an LSH table's bucket offsets do not rise from 0 to its entry count");
  }
  // Hashed with another width (a checkpoint from before the automatic width changed): the tables
  // are derived state, so they are dropped and must be rebuilt from the weights.
  clear_tables();
  drop_device_tables();
  narrow_codes_.clear();
  wide_codes_.clear();
  num_neurons_ = n;
  if (same_width && nt > 0) {
    stride_ = offsets[0].size();
    offsets_.resize(nt * stride_);
    ids_.resize(nt * n);
    id_counts_.resize(nt);
    for (size_t t = 0; t < nt; ++t) {
      std::copy(offsets[t].begin(), offsets[t].end(), offsets_.begin() + t * stride_);
      std::copy(ids[t].begin(), ids[t].end(), ids_.begin() + t * n);
      id_counts_[t] = ids[t].size();
    }
  }
  renew_view();
  return same_width;
}

}  // namespace frugal::lsh
