#include "layers/dlrm/id_map.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::layers {
namespace {

uint64_t mix64(uint64_t x) {  // SplitMix64's finalizer: every input bit reaches every output bit
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::string_view to_string(IdMode mode) { return mode == IdMode::hash ? "hash" : "full"; }

void IdMapOptions::validate() const {
  FRUGAL_CHECK(min_count >= 1, "--min-id-count must be at least 1");
  FRUGAL_CHECK(hash_rows >= 1 && hash_rows <= (size_t{1} << 31),
               fmt::format("--hash-rows must be in [1, 2^31], not {}", hash_rows));
}

void CtrView::validate() const {
  FRUGAL_CHECK(labels.size() == size && dense.size() == size * num_dense && cats.size() == size * num_fields,
               fmt::format("CTR batch of {} samples: {} labels, {} dense values ({} expected), {} ids ({} expected)",
                           size, labels.size(), dense.size(), size * num_dense, cats.size(), size * num_fields));
  for (size_t i = 0; i < size; ++i)
    FRUGAL_CHECK(labels[i] == 0.0f || labels[i] == 1.0f,
                 fmt::format("CTR batch: sample {} has label {}, not 0 or 1", i, labels[i]));
}

void IdCounts::add(const CtrView& batch) {
  FRUGAL_CHECK(batch.num_fields == counts_.size(),
               fmt::format("id counts: the batch has {} fields, the counts {}", batch.num_fields, counts_.size()));
  for (size_t i = 0; i < batch.size; ++i)
    for (size_t f = 0; f < counts_.size(); ++f) {
      const uint64_t id = batch.cats[i * batch.num_fields + f];
      if (id == kMissingId) continue;
      uint32_t& c = counts_[f][id];
      if (c != UINT32_MAX) ++c;
    }
}

IdMap::IdMap(const IdMapOptions& options, size_t num_fields) : options_(options), rows_(num_fields) {
  options_.validate();
  FRUGAL_CHECK(options_.mode == IdMode::hash, "IdMap: the full mode needs the training data's id counts");
  std::fill(rows_.begin(), rows_.end(), options_.hash_rows);
}

IdMap::IdMap(const IdMapOptions& options, const IdCounts& counts) : options_(options), rows_(counts.num_fields()) {
  options_.validate();
  if (options_.mode == IdMode::hash) {
    std::fill(rows_.begin(), rows_.end(), options_.hash_rows);
    return;
  }
  vocab_.resize(counts.num_fields());
  for (size_t f = 0; f < counts.num_fields(); ++f) {
    // Rows in id order: independent of the hash map's iteration order, so every rank (and every
    // run) numbers the vocabulary alike.
    std::vector<uint64_t> kept;
    for (const auto& [id, n] : counts.field(f))
      if (n >= options_.min_count) kept.push_back(id);
    std::sort(kept.begin(), kept.end());
    FRUGAL_CHECK(kept.size() < UINT32_MAX, fmt::format("field {} has {} ids, too many for 32-bit rows", f + 1,
                                                       kept.size()));
    auto& v = vocab_[f];
    v.reserve(kept.size());
    for (size_t r = 0; r < kept.size(); ++r) v.emplace(kept[r], static_cast<uint32_t>(r + 1));
    rows_[f] = kept.size() + 1;  // row 0: ids below min_count, unseen and missing
  }
}

size_t IdMap::total_rows() const {
  size_t total = 0;
  for (size_t r : rows_) total += r;
  return total;
}

uint32_t IdMap::row(size_t field, uint64_t id) const {
  if (options_.mode == IdMode::hash)
    return static_cast<uint32_t>(mix64(id ^ mix64(options_.seed + field)) % options_.hash_rows);
  const auto& v = vocab_[field];
  const auto it = v.find(id);
  return it == v.end() ? 0u : it->second;
}

void IdMap::map(const CtrView& batch, std::vector<uint32_t>& rows_out) const {
  FRUGAL_CHECK(batch.num_fields == rows_.size(),
               fmt::format("id map of {} fields given a batch of {} fields", rows_.size(), batch.num_fields));
  rows_out.resize(batch.size * batch.num_fields);
  for (size_t i = 0; i < batch.size; ++i)
    for (size_t f = 0; f < batch.num_fields; ++f)
      rows_out[i * batch.num_fields + f] = row(f, batch.cats[i * batch.num_fields + f]);
}

}  // namespace frugal::layers
