#include "core/data/inverted_index.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::data {
namespace fs = std::filesystem;
namespace {

template <class T>
void put(std::ostream& out, const T* data, size_t n) {
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(T)));
}

template <class T>
void get(std::istream& in, T* data, size_t n, const std::string& name) {
  in.read(reinterpret_cast<char*>(data), static_cast<std::streamsize>(n * sizeof(T)));
  FRUGAL_CHECK(static_cast<size_t>(in.gcount()) == n * sizeof(T), fmt::format("{}: truncated", name));
}

}  // namespace

InvertedIndex::InvertedIndex(size_t features, size_t items, const std::vector<Entry>& entries) : num_items_(items) {
  offsets_.assign(features + 1, 0);
  for (const Entry& e : entries) ++offsets_[e.feature + size_t{1}];
  std::partial_sum(offsets_.begin(), offsets_.end(), offsets_.begin());
  items_.resize(entries.size());
  weights_.resize(entries.size());
  std::vector<uint64_t> pos(offsets_.begin(), offsets_.end() - 1);
  for (const Entry& e : entries) {
    items_[pos[e.feature]] = e.item;
    weights_[pos[e.feature]++] = e.weight;
  }
}

size_t InvertedIndex::bytes() const {
  return offsets_.size() * sizeof(uint64_t) + items_.size() * sizeof(uint32_t) + weights_.size() * sizeof(float);
}

void InvertedIndex::accumulate(std::span<const uint32_t> ids, std::span<const float> vals, std::vector<float>& scores,
                               std::vector<uint32_t>& touched) const {
  const size_t features = num_features();
  for (size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] >= features) continue;
    for (uint64_t q = offsets_[ids[j]]; q < offsets_[ids[j] + size_t{1}]; ++q) {
      const uint32_t item = items_[q];
      if (scores[item] == 0.0f) touched.push_back(item);
      scores[item] += vals[j] * weights_[q];
      if (scores[item] == 0.0f) scores[item] = 1e-30f;  // keep it marked as touched
    }
  }
}

void InvertedIndex::write(std::ostream& out) const {
  const uint64_t sizes[3] = {num_items_, offsets_.size(), items_.size()};
  put(out, sizes, 3);
  put(out, offsets_.data(), offsets_.size());
  put(out, items_.data(), items_.size());
  put(out, weights_.data(), weights_.size());
}

void InvertedIndex::read(std::istream& in, uint64_t bytes_left, const std::string& name) {
  uint64_t sizes[3] = {0, 0, 0};
  FRUGAL_CHECK(bytes_left >= sizeof sizes, fmt::format("{}: truncated", name));
  get(in, sizes, 3, name);
  bytes_left -= sizeof sizes;
  const uint64_t items = sizes[0], offsets = sizes[1], entries = sizes[2];
  FRUGAL_CHECK(items < (uint64_t{1} << 32) && offsets >= 1 && offsets <= bytes_left / sizeof(uint64_t) &&
                   entries <= (bytes_left - offsets * sizeof(uint64_t)) / (sizeof(uint32_t) + sizeof(float)),
               fmt::format("{}: sizes in the file ({} items, {} features, {} entries) exceed it", name, items,
                           offsets - 1, entries));
  num_items_ = items;
  offsets_.resize(offsets);
  items_.resize(entries);
  weights_.resize(entries);
  get(in, offsets_.data(), offsets, name);
  get(in, items_.data(), entries, name);
  get(in, weights_.data(), entries, name);
  // The checksum guards against damage; these guard the scoring loops against a forged file.
  FRUGAL_CHECK(offsets_.front() == 0 && offsets_.back() == entries && std::is_sorted(offsets_.begin(), offsets_.end()),
               fmt::format("{}: inconsistent feature offsets", name));
  FRUGAL_CHECK(std::all_of(items_.begin(), items_.end(), [&](uint32_t i) { return i < num_items_; }),
               fmt::format("{}: an id beyond its {} items", name, num_items_));
}

float inverse_norm(std::span<const float> v) {
  double sq = 0.0;
  for (const float x : v) sq += static_cast<double>(x) * x;
  return sq > 0.0 ? static_cast<float>(1.0 / std::sqrt(sq)) : 0.0f;
}

void keep_best(std::vector<std::pair<float, uint32_t>>& scored, size_t n) {
  const auto better = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  const size_t m = std::min(n, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(m), scored.end(), better);
  scored.resize(m);
}

}  // namespace frugal::data
