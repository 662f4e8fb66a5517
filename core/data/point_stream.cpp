#include "core/data/point_stream.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"
#include "core/data/packed_file.h"

namespace frugal::data {

PointHeldBack hold_back_point_blocks(PackedReader& reader, size_t count, const SplitOptions& options) {
  const PackedHeader& h = reader.header();
  FRUGAL_CHECK(h.kind == PackedKind::points,
               fmt::format("{}: packed Criteo click logs, not a sparse data set", reader.path()));
  PointHeldBack out;
  out.points.num_features = h.features;
  out.points.num_labels = h.labels;
  out.points.source = reader.path();
  if (count == 0 || h.points == 0) return out;
  std::vector<uint64_t> chosen;
  uint64_t points = 0;
  for (const uint32_t b : shuffled_order(h.blocks(), Rng(options.seed).split(0x4e1d).next_u64())) {
    if (points >= 4 * static_cast<uint64_t>(count)) break;
    chosen.push_back(b);
    points += h.block_size(b);
  }
  std::sort(chosen.begin(), chosen.end());
  Dataset pool;
  pool.num_features = h.features;
  pool.num_labels = h.labels;
  pool.source = reader.path();
  std::vector<uint64_t> index;  // pool's points' indices in the file
  for (const uint64_t b : chosen) {
    reader.read_points(b, pool.points);
    for (uint64_t i = 0; i < h.block_size(b); ++i) index.push_back(h.block_first(b) + i);
  }
  SplitOptions o = options;
  o.test_fraction = std::min(0.5, static_cast<double>(count) / static_cast<double>(pool.size()));
  Split split = data::split(pool, o);
  std::vector<uint32_t> rows = split.test_rows;
  std::sort(rows.begin(), rows.end());  // the file's order (a stratified split's already is)
  for (const uint32_t i : rows) out.indices.push_back(index[i]);
  pool.gather(rows, out.points.points);
  return out;
}

StreamedSet streamed_set(PackedReader& reader, const Dataset& held_back) {
  const PackedHeader& h = reader.header();
  const std::vector<std::pair<uint32_t, uint32_t>> label_points = reader.label_points();  // names a file without
  const PackedHeader::Tallies& t = *h.tallies;
  StreamedSet out;
  const SparseBatch& held = held_back.points;
  FRUGAL_CHECK(held.size() <= h.points, fmt::format("{}: more points held back than it has", reader.path()));
  out.points = h.points - held.size();
  out.label_counts.points = out.points;
  out.label_counts.per_label.assign(h.labels, 0);
  for (const auto& [label, n] : label_points) out.label_counts.per_label[label] = n;
  for (const uint32_t l : held.label_ids)
    if (l < h.labels && out.label_counts.per_label[l] > 0) --out.label_counts.per_label[l];
  DatasetStats& s = out.stats;
  s.points = out.points;
  s.features = h.features;
  s.labels = h.labels;
  const double n = static_cast<double>(std::max<uint64_t>(out.points, 1));
  s.average_nonzeros = static_cast<double>(h.feature_nnz - std::min<uint64_t>(h.feature_nnz, held.feature_ids.size())) / n;
  s.average_labels = static_cast<double>(h.label_nnz - std::min<uint64_t>(h.label_nnz, held.label_ids.size())) / n;
  size_t held_without_labels = 0, held_without_features = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    held_without_labels += held.labels_of(i).empty();
    held_without_features += held.features_of(i).empty();
  }
  s.points_without_labels = t.points_without_labels - std::min<uint64_t>(t.points_without_labels, held_without_labels);
  s.points_without_features =
      t.points_without_features - std::min<uint64_t>(t.points_without_features, held_without_features);
  s.features_used = t.features_used;
  s.adjacent_same_label = h.points > 1 ? static_cast<double>(t.adjacent_same_label) / static_cast<double>(h.points - 1) : 0.0;
  std::vector<uint64_t> freq;
  for (const uint64_t c : out.label_counts.per_label)
    if (c > 0) freq.push_back(c);
  add_label_stats(s, freq);
  return out;
}

std::function<bool(SparseBatch&)> file_order_batches(PackedReader& reader, std::span<const uint64_t> held_back,
                                                     size_t batch) {
  FRUGAL_CHECK(batch > 0, "file_order_batches: batches of at least one point");
  struct State {
    uint64_t next_block = 0;
    SparseBatch block;
    size_t served = 0;
  };
  auto state = std::make_shared<State>();
  return [&reader, held_back, batch, state](SparseBatch& out) {
    while (state->served >= state->block.size()) {
      if (state->next_block >= reader.header().blocks()) return false;
      state->block.clear();
      read_stream_block(reader, state->next_block++, held_back, state->block);
      state->served = 0;
    }
    const size_t n = std::min(batch, state->block.size() - state->served);
    out.assign_points(state->block, state->served, n);
    state->served += n;
    return true;
  };
}

}  // namespace frugal::data
