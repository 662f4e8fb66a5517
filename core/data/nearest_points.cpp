#include "core/data/nearest_points.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "core/data/checked_file.h"

#include "core/check.h"

namespace frugal::data {
namespace {
constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'N', 'P'};
constexpr uint32_t kVersion = 1;
}  // namespace

NearestPoints::NearestPoints(const Dataset& train) : num_labels_(train.num_labels) {
  std::vector<InvertedIndex::Entry> entries;
  entries.reserve(train.points.feature_ids.size());
  label_offsets_.assign(train.size() + size_t{1}, 0);
  for (uint32_t i = 0; i < train.size(); ++i) {
    const auto ids = train.points.features_of(i);
    const auto vals = train.points.values_of(i);
    const float inv = inverse_norm(vals);
    for (size_t j = 0; j < ids.size(); ++j)
      if (vals[j] != 0.0f) entries.push_back({ids[j], i, vals[j] * inv});
    const auto labels = train.points.labels_of(i);
    label_ids_.insert(label_ids_.end(), labels.begin(), labels.end());
    label_offsets_[i + size_t{1}] = label_ids_.size();
  }
  index_ = InvertedIndex(train.num_features, train.size(), entries);
}

NearestPoints::Scratch NearestPoints::scratch() const {
  return Scratch{std::vector<float>(num_points(), 0.0f), std::vector<float>(num_labels_, 0.0f), {}, {}, {}};
}

void NearestPoints::nearest(std::span<const uint32_t> ids, std::span<const float> vals, size_t n, Scratch& s) const {
  s.touched.clear();
  index_.accumulate(ids, vals, s.sims, s.touched);
  const float inv = inverse_norm(vals);
  s.best.clear();
  for (const uint32_t p : s.touched) {
    const float cosine = s.sims[p] * inv;
    if (cosine > 0.0f) s.best.emplace_back(cosine, p);
    s.sims[p] = 0.0f;
  }
  keep_best(s.best, n);
}

void NearestPoints::vote(std::span<const uint32_t> ids, std::span<const float> vals, size_t neighbours, size_t labels,
                         Scratch& s, std::vector<std::pair<float, uint32_t>>& out) const {
  nearest(ids, vals, neighbours, s);
  // In similarity order: the sums are the same whatever thread runs the query.
  s.voted.clear();
  for (const auto& [sim, point] : s.best)
    for (const uint32_t l : labels_of(point)) {
      if (s.votes[l] == 0.0f) s.voted.push_back(l);
      s.votes[l] += sim;
    }
  out.clear();
  for (const uint32_t l : s.voted) {
    out.emplace_back(s.votes[l], l);
    s.votes[l] = 0.0f;
  }
  keep_best(out, labels);
}

void NearestPoints::save(const std::string& dir) const {
  save_checked_file(dir, kNearestPointsFile, kMagic, kVersion, [&](std::ostream& out) {
    index_.write(out);
    const uint64_t sizes[2] = {num_labels_, label_ids_.size()};
    out.write(reinterpret_cast<const char*>(sizes), sizeof sizes);
    out.write(reinterpret_cast<const char*>(label_offsets_.data()),
              static_cast<std::streamsize>(label_offsets_.size() * sizeof(uint64_t)));
    out.write(reinterpret_cast<const char*>(label_ids_.data()),
              static_cast<std::streamsize>(label_ids_.size() * sizeof(uint32_t)));
  });
}

bool NearestPoints::exists(const std::string& dir) {
  return std::filesystem::exists(std::filesystem::path(dir) / kNearestPointsFile);
}

NearestPoints NearestPoints::load(const std::string& dir) {
  const std::string name = (std::filesystem::path(dir) / kNearestPointsFile).string();
  const std::string bytes = load_checked_file(dir, kNearestPointsFile, kMagic, kVersion, "a frugal nearest-points file");
  std::istringstream in(bytes, std::ios::binary);
  NearestPoints n;
  n.index_.read(in, bytes.size(), name);
  uint64_t sizes[2] = {0, 0};
  in.read(reinterpret_cast<char*>(sizes), sizeof sizes);
  const uint64_t left = bytes.size() - static_cast<uint64_t>(std::max<std::streamoff>(in.tellg(), 0));
  const uint64_t points = n.index_.num_items();
  // Each count bounded by the bytes left before it is multiplied: a forged count whose product
  // wraps around 2^64 would otherwise pass the sum and size a vector beyond memory.
  FRUGAL_CHECK(in.good() && sizes[0] < (uint64_t{1} << 32) && points < left / sizeof(uint64_t) &&
                   sizes[1] <= left / sizeof(uint32_t) &&
                   left == (points + 1) * sizeof(uint64_t) + sizes[1] * sizeof(uint32_t),
               fmt::format("{}: label lists of {} points do not fit the file", name, points));
  n.num_labels_ = sizes[0];
  n.label_offsets_.resize(points + 1);
  n.label_ids_.resize(sizes[1]);
  in.read(reinterpret_cast<char*>(n.label_offsets_.data()), static_cast<std::streamsize>((points + 1) * sizeof(uint64_t)));
  in.read(reinterpret_cast<char*>(n.label_ids_.data()), static_cast<std::streamsize>(sizes[1] * sizeof(uint32_t)));
  FRUGAL_CHECK(n.label_offsets_.front() == 0 && n.label_offsets_.back() == sizes[1] &&
                   std::is_sorted(n.label_offsets_.begin(), n.label_offsets_.end()) &&
                   std::all_of(n.label_ids_.begin(), n.label_ids_.end(), [&](uint32_t l) { return l < n.num_labels_; }),
               fmt::format("{}: inconsistent label lists", name));
  return n;
}

}  // namespace frugal::data
