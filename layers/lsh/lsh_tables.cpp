#include "layers/lsh/lsh_tables.h"

#include <algorithm>

#include <cereal/archives/binary.hpp>
#include <cereal/types/vector.hpp>
#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/rng.h"
#include "core/step_profile.h"

namespace frugal::lsh {

LshTables::LshTables(std::shared_ptr<const HashFamily> family, size_t bucket_capacity)
    : family_(std::move(family)), capacity_(bucket_capacity), tables_(family_->tables()) {
  FRUGAL_CHECK(capacity_ >= 1, "LSH: bucket capacity must be >= 1");
}

void LshTables::build(Backend& backend, const Tensor& weights, uint64_t seed, const std::vector<uint8_t>* changed) {
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
  for (const Table& t : tables_) {
    offset_spans_.emplace_back(t.offsets);
    id_spans_.emplace_back(t.ids);
  }
  generation_ = new_bucket_generation();
}

BucketTables LshTables::view() const {
  return {.owner = this, .generation = generation_, .buckets = family_->buckets_per_table(),
          .neurons = num_neurons_, .offsets = offset_spans_, .ids = id_spans_};
}

template <class Code>
void LshTables::build_with(std::vector<Code>& codes, Backend& backend, const Tensor& weights, uint64_t seed,
                           const std::vector<uint8_t>* changed) {
  const size_t n = weights.rows(), nt = tables_.size();
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
  // each block's codes then moved into every table's array in parallel over the tables.
  constexpr size_t kBlock = 16384;
  std::vector<uint32_t> fresh;
  for (size_t begin = 0; begin < rows.size(); begin += kBlock) {
    const auto block = std::span<const uint32_t>(rows).subspan(begin, std::min(kBlock, rows.size() - begin));
    fresh.resize(block.size() * nt);
    family_->hash(backend, weights, block, fresh.data());
    tbb::parallel_for(size_t{0}, nt, [&](size_t t) {
      Code* out = &codes[t * n];
      for (size_t j = 0; j < block.size(); ++j) out[block[j]] = static_cast<Code>(fresh[j * nt + t]);
    });
  }
  tbb::parallel_for(size_t{0}, nt, [&](size_t t) {
    Table& table = tables_[t];
    const Code* table_codes = &codes[t * n];
    table.offsets.assign(nb + 1, 0);
    for (size_t i = 0; i < n; ++i) ++table.offsets[table_codes[i] + 1];
    bool overfull = false;
    for (uint32_t b = 0; b < nb; ++b) {
      overfull = overfull || table.offsets[b + 1] > capacity_;
      table.offsets[b + 1] += table.offsets[b];
    }
    std::vector<uint32_t> placed(n);
    std::vector<uint32_t> fill(table.offsets.begin(), table.offsets.end() - 1);
    for (size_t i = 0; i < n; ++i) placed[fill[table_codes[i]]++] = static_cast<uint32_t>(i);
    if (!overfull) {  // every bucket fits: the placed ids are the table
      table.ids = std::move(placed);
      return;
    }
    // Keep at most capacity_ per bucket: a seeded shuffle of an overfull bucket, then its prefix.
    table.ids.clear();
    std::vector<uint32_t> kept(nb + 1, 0);
    Rng rng = Rng(seed).split(t);
    for (uint32_t b = 0; b < nb; ++b) {
      uint32_t* first = placed.data() + table.offsets[b];
      const size_t count = table.offsets[b + 1] - table.offsets[b];
      if (count > capacity_)
        for (size_t j = 0; j < capacity_; ++j) std::swap(first[j], first[j + rng.below(count - j)]);
      const size_t keep = std::min(count, capacity_);
      table.ids.insert(table.ids.end(), first, first + keep);
      kept[b + 1] = kept[b] + static_cast<uint32_t>(keep);
    }
    table.offsets = std::move(kept);
  });
  // Each neuron's code per table read and its id placed; each table's offsets written and read.
  // (Hashing the changed rows counts itself.)
  const double entries = static_cast<double>(n) * static_cast<double>(nt);
  profile::count_here(0.0, 8.0 * entries + 8.0 * static_cast<double>(nb) * static_cast<double>(nt));
}

size_t LshTables::bytes() const {
  size_t n = wide_codes_.size();
  for (const Table& t : tables_) n += t.offsets.size() + t.ids.size();
  return n * sizeof(uint32_t) + narrow_codes_.size() * sizeof(uint16_t);
}

void LshTables::save(cereal::BinaryOutputArchive& ar) const {
  ar(static_cast<uint64_t>(num_neurons_), static_cast<uint64_t>(tables_.size()));
  for (const Table& t : tables_) ar(t.offsets, t.ids);
}

bool LshTables::load(cereal::BinaryInputArchive& ar) {
  uint64_t n = 0, nt = 0;
  ar(n, nt);
  FRUGAL_CHECK(nt == tables_.size(), fmt::format("checkpoint has {} LSH tables, the layer {}", nt, tables_.size()));
  num_neurons_ = n;
  bool same_width = true;
  for (Table& t : tables_) {
    ar(t.offsets, t.ids);
    same_width = same_width && t.offsets.size() == size_t{family_->buckets_per_table()} + 1;
    for (const uint32_t id : t.ids) FRUGAL_CHECK(id < n, "checkpoint: LSH table holds an out-of-range neuron id");
    // bucket() reads ids[offsets[b] .. offsets[b + 1]): they must rise from 0 to the entry count.
    bool ordered = !t.offsets.empty() && t.offsets.front() == 0 && t.offsets.back() == t.ids.size();
    for (size_t b = 1; ordered && b < t.offsets.size(); ++b) ordered = t.offsets[b - 1] <= t.offsets[b];
    FRUGAL_CHECK(ordered, "checkpoint: an LSH table's bucket offsets do not rise from 0 to its entry count");
  }
  renew_view();
  if (same_width) return true;
  // Hashed with another width (a checkpoint from before the automatic width changed): the tables
  // are derived state, so they are dropped and rebuilt from the weights.
  for (Table& t : tables_) t = Table{};
  narrow_codes_.clear();
  wide_codes_.clear();
  renew_view();
  return false;
}

}  // namespace frugal::lsh
