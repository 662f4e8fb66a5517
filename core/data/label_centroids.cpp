#include "core/data/label_centroids.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/crc32c.h"
#include "core/tensor_io.h"

namespace frugal::data {
namespace fs = std::filesystem;
namespace {
constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'C', 'T'};
constexpr uint32_t kVersion = 1;

uint32_t checksum(const std::string& bytes) {
  return crc32c(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
}
}  // namespace

LabelCentroids::LabelCentroids(const Dataset& train) : num_labels_(train.num_labels) {
  // Points of each label (CSR).
  std::vector<uint64_t> start(train.num_labels + size_t{1}, 0);
  for (const uint32_t l : train.points.label_ids) ++start[l + size_t{1}];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<uint32_t> members(start.back());
  std::vector<uint64_t> fill(start.begin(), start.end() - 1);
  for (uint32_t i = 0; i < train.size(); ++i)
    for (const uint32_t l : train.points.labels_of(i)) members[fill[l]++] = i;

  // Each centroid summed densely over the features its points touch, then normalized.
  struct Entry {
    uint32_t feature, label;
    float weight;
  };
  std::vector<Entry> entries;
  std::vector<float> dense(train.num_features, 0.0f);
  std::vector<uint8_t> seen(train.num_features, 0);
  std::vector<uint32_t> touched;
  for (uint32_t l = 0; l < train.num_labels; ++l) {
    touched.clear();
    for (uint64_t m = start[l]; m < start[l + 1]; ++m) {
      const auto ids = train.points.features_of(members[m]);
      const auto vals = train.points.values_of(members[m]);
      for (size_t j = 0; j < ids.size(); ++j) {
        if (seen[ids[j]] == 0) {
          seen[ids[j]] = 1;
          touched.push_back(ids[j]);
        }
        dense[ids[j]] += vals[j];
      }
    }
    double norm = 0.0;
    for (const uint32_t f : touched) norm += static_cast<double>(dense[f]) * dense[f];
    const float scale = norm > 0.0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
    for (const uint32_t f : touched) {
      if (dense[f] != 0.0f) entries.push_back({f, l, dense[f] * scale});
      dense[f] = 0.0f;
      seen[f] = 0;
    }
  }
  // Feature-major, labels ascending within a feature (entries are in label order already).
  offsets_.assign(train.num_features + size_t{1}, 0);
  for (const Entry& e : entries) ++offsets_[e.feature + size_t{1}];
  std::partial_sum(offsets_.begin(), offsets_.end(), offsets_.begin());
  labels_.resize(entries.size());
  weights_.resize(entries.size());
  std::vector<uint64_t> pos(offsets_.begin(), offsets_.end() - 1);
  for (const Entry& e : entries) {
    labels_[pos[e.feature]] = e.label;
    weights_[pos[e.feature]++] = e.weight;
  }
}

size_t LabelCentroids::bytes() const {
  return offsets_.size() * sizeof(uint64_t) + labels_.size() * sizeof(uint32_t) + weights_.size() * sizeof(float);
}

void LabelCentroids::accumulate(std::span<const uint32_t> ids, std::span<const float> vals, Scratch& s) const {
  const size_t features = num_features();
  for (size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] >= features) continue;
    for (uint64_t q = offsets_[ids[j]]; q < offsets_[ids[j] + size_t{1}]; ++q) {
      const uint32_t l = labels_[q];
      if (s.scores[l] == 0.0f) s.touched.push_back(l);
      s.scores[l] += vals[j] * weights_[q];
      if (s.scores[l] == 0.0f) s.scores[l] = 1e-30f;  // keep it marked as touched
    }
  }
}

void LabelCentroids::nearest(std::span<const uint32_t> ids, std::span<const float> vals, size_t n, Scratch& s,
                             std::vector<std::pair<float, uint32_t>>& out) const {
  s.touched.clear();
  accumulate(ids, vals, s);
  double sq = 0.0;
  for (const float v : vals) sq += static_cast<double>(v) * v;
  const float inv = sq > 0.0 ? static_cast<float>(1.0 / std::sqrt(sq)) : 0.0f;
  out.clear();
  for (const uint32_t l : s.touched) {
    const float cosine = s.scores[l] * inv;
    if (cosine > 0.0f) out.emplace_back(cosine, l);
    s.scores[l] = 0.0f;
  }
  const auto better = [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  const size_t m = std::min(n, out.size());
  std::partial_sort(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(m), out.end(), better);
  out.resize(m);
}

void LabelCentroids::save(const std::string& dir) const {
  std::ostringstream buf(std::ios::binary);
  {
    cereal::BinaryOutputArchive ar(buf);
    save_file_header(ar, kMagic, kVersion);
    ar(num_labels_, uint64_t{offsets_.size()}, uint64_t{labels_.size()});
    ar(cereal::binary_data(offsets_.data(), offsets_.size() * sizeof(uint64_t)));
    ar(cereal::binary_data(labels_.data(), labels_.size() * sizeof(uint32_t)));
    ar(cereal::binary_data(weights_.data(), weights_.size() * sizeof(float)));
  }
  std::string bytes = buf.str();
  const uint32_t crc = checksum(bytes);
  bytes.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  fs::create_directories(dir);
  write_atomically(fs::path(dir) / kLabelCentroidsFile, bytes);
}

bool LabelCentroids::exists(const std::string& dir) { return fs::exists(fs::path(dir) / kLabelCentroidsFile); }

LabelCentroids LabelCentroids::load(const std::string& dir) {
  const fs::path path = fs::path(dir) / kLabelCentroidsFile;
  const std::string name = path.string();
  std::error_code ec;
  FRUGAL_CHECK(fs::is_regular_file(path, ec), fmt::format("{}: {}", name, fs::exists(path, ec)
                                                                           ? "not a regular file"
                                                                           : "no such file (the checkpoint holds no label centroids)"));
  std::ifstream in(path, std::ios::binary);
  FRUGAL_CHECK(in.good(), fmt::format("{}: cannot open", name));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  FRUGAL_CHECK(bytes.size() >= sizeof(uint32_t) + 8, fmt::format("{}: truncated ({} bytes)", name, bytes.size()));
  uint32_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - sizeof stored, sizeof stored);
  bytes.resize(bytes.size() - sizeof stored);
  FRUGAL_CHECK(checksum(bytes) == stored,
               fmt::format("{}: checksum mismatch (the file is damaged or truncated): retrain, or infer without "
                           "--infer ensemble", name));
  LabelCentroids c;
  std::istringstream is(bytes, std::ios::binary);
  try {
    cereal::BinaryInputArchive ar(is);
    check_file_header(ar, kMagic, kVersion, name, "a frugal label-centroid file");
    uint64_t offsets = 0, entries = 0;
    ar(c.num_labels_, offsets, entries);
    const uint64_t left = bytes.size() - static_cast<uint64_t>(is.tellg());
    FRUGAL_CHECK(c.num_labels_ < (uint64_t{1} << 32) && offsets >= 1 && offsets <= left / sizeof(uint64_t) &&
                     entries <= left / (sizeof(uint32_t) + sizeof(float)) &&
                     offsets * sizeof(uint64_t) + entries * (sizeof(uint32_t) + sizeof(float)) == left,
                 fmt::format("{}: sizes in the header ({} labels, {} features, {} entries) do not match the file",
                             name, c.num_labels_, offsets - 1, entries));
    c.offsets_.resize(offsets);
    c.labels_.resize(entries);
    c.weights_.resize(entries);
    ar(cereal::binary_data(c.offsets_.data(), offsets * sizeof(uint64_t)));
    ar(cereal::binary_data(c.labels_.data(), entries * sizeof(uint32_t)));
    ar(cereal::binary_data(c.weights_.data(), entries * sizeof(float)));
  } catch (const cereal::Exception&) {
    throw Error(fmt::format("{}: truncated label centroids", name));
  }
  // The checksum guards against damage; these guard the scoring loops against a forged file.
  FRUGAL_CHECK(c.offsets_.front() == 0 && c.offsets_.back() == c.labels_.size() &&
                   std::is_sorted(c.offsets_.begin(), c.offsets_.end()),
               fmt::format("{}: inconsistent feature offsets", name));
  FRUGAL_CHECK(std::all_of(c.labels_.begin(), c.labels_.end(), [&](uint32_t l) { return l < c.num_labels_; }),
               fmt::format("{}: a label id beyond its {} labels", name, c.num_labels_));
  return c;
}

}  // namespace frugal::data
