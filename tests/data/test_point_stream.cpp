// A streamed packed points file (core/data/point_stream.h): the tallies recorded while packing give
// the statistics and label counts compute_stats and LabelCounts::of give of the set in memory (less a
// held-back share); an epoch's stream gives every point that is not held back exactly once over the
// ranks, each rank from its own blocks, the ranks agreeing on the steps; the held-back share is the
// size asked, seeded, and its points are the file's; a damaged label-count section is named.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "core/check.h"
#include "core/propensity.h"
#include "core/data/dataset_stats.h"
#include "core/data/packed_file.h"
#include "core/data/point_stream.h"
#include "core/data/synth_xmc.h"
#include "temp_dir.h"

using namespace frugal;

namespace {

// A synthetic set whose first feature id is the point's index (so a point can be recognized), with
// points without labels or features among them, packed in blocks of `block` points.
data::Dataset tagged_set(size_t n) {
  data::SynthXmcOptions o;
  o.features = 400;
  o.labels = 60;
  o.train = n;
  o.test = 10;
  o.nnz = 8;
  const data::Dataset d = data::generate_synth_xmc(o).train;
  data::Dataset out;
  out.num_features = static_cast<uint32_t>(n + o.features);
  out.num_labels = d.num_labels;
  out.source = "tagged";
  for (size_t i = 0; i < d.size(); ++i) {
    std::vector<uint32_t> ids = {static_cast<uint32_t>(i)};
    std::vector<float> values = {1.0f};
    for (const uint32_t f : d.points.features_of(i)) ids.push_back(static_cast<uint32_t>(n) + f);
    values.resize(ids.size(), 0.5f);
    const auto labels = d.points.labels_of(i);
    if (i % 97 == 5) out.points.add_point(ids, values, {});  // no labels
    else out.points.add_point(ids, values, labels);
  }
  return out;
}

data::Dataset without(const data::Dataset& d, const std::vector<uint64_t>& held) {
  std::vector<uint32_t> keep;
  for (uint32_t i = 0; i < d.size(); ++i)
    if (!std::binary_search(held.begin(), held.end(), i)) keep.push_back(i);
  data::Dataset out;
  out.num_features = d.num_features;
  out.num_labels = d.num_labels;
  d.gather(keep, out.points);
  return out;
}

}  // namespace

TEST_CASE("a packed set's tallies give the statistics and label counts of the set in memory") {
  TempDir dir;
  const data::Dataset d = tagged_set(1500);
  const std::string path = dir / "set.fpk";
  data::pack_dataset(d, path, 128);
  data::PackedReader reader(path);
  const data::DatasetStats want = data::compute_stats(d);
  REQUIRE(reader.header().tallies.has_value());
  const data::PackedHeader::Tallies& t = *reader.header().tallies;
  CHECK(t.points_without_labels == want.points_without_labels);
  CHECK(t.points_without_features == want.points_without_features);
  CHECK(t.features_used == want.features_used);
  CHECK(t.labels_used == want.labels_used);

  // Less a held-back share: what compute_stats and LabelCounts::of say of the rest.
  const data::PointHeldBack held = data::hold_back_point_blocks(reader, 150, {.seed = 9, .stratified = true});
  const data::Dataset rest = without(d, held.indices);
  const data::StreamedSet s = data::streamed_set(reader, held.points);
  const data::DatasetStats r = data::compute_stats(rest);
  CHECK(s.points == rest.size());
  CHECK(s.stats.points == r.points);
  CHECK(s.stats.average_nonzeros == Approx(r.average_nonzeros));
  CHECK(s.stats.average_labels == Approx(r.average_labels));
  CHECK(s.stats.points_without_labels == r.points_without_labels);
  CHECK(s.stats.labels_used == r.labels_used);
  CHECK(s.stats.max_label_frequency == r.max_label_frequency);
  CHECK(s.stats.median_label_support == r.median_label_support);
  CHECK(s.stats.rare_label_share == Approx(r.rare_label_share));
  const LabelCounts counts = LabelCounts::of(rest);
  CHECK(s.label_counts.points == counts.points);
  REQUIRE(s.label_counts.per_label.size() >= counts.per_label.size());
  for (size_t l = 0; l < s.label_counts.per_label.size(); ++l)
    REQUIRE(s.label_counts.per_label[l] == (l < counts.per_label.size() ? counts.per_label[l] : 0));
}

TEST_CASE("the held-back share of a packed set: its size, its points, seeded") {
  TempDir dir;
  const data::Dataset d = tagged_set(3000);
  const std::string path = dir / "set.fpk";
  data::pack_dataset(d, path, 100);
  data::PackedReader reader(path);
  const data::PointHeldBack a = data::hold_back_point_blocks(reader, 120, {.seed = 5, .stratified = true});
  CHECK(a.indices.size() >= 100);
  CHECK(a.indices.size() <= 130);
  REQUIRE(std::is_sorted(a.indices.begin(), a.indices.end()));
  REQUIRE(a.points.size() == a.indices.size());
  for (size_t i = 0; i < a.indices.size(); ++i) REQUIRE(a.points.points.features_of(i)[0] == a.indices[i]);
  // From several blocks, and the same seed picks the same points; another seed others.
  std::set<uint64_t> blocks;
  for (const uint64_t i : a.indices) blocks.insert(i / 100);
  CHECK(blocks.size() >= 4);
  CHECK(data::hold_back_point_blocks(reader, 120, {.seed = 5, .stratified = true}).indices == a.indices);
  CHECK(data::hold_back_point_blocks(reader, 120, {.seed = 6, .stratified = true}).indices != a.indices);
}

TEST_CASE("a points stream gives every point once an epoch over the ranks, each rank from its own blocks") {
  TempDir dir;
  const data::Dataset d = tagged_set(1037);
  const std::string path = dir / "set.fpk";
  data::pack_dataset(d, path, 64);  // 17 blocks, the last one partial
  data::PackedReader reader(path);
  const std::vector<uint64_t> held = {2, 64, 65, 700, 1036};
  for (const size_t ranks : {1, 2, 3}) {
    INFO("ranks " << ranks);
    std::multiset<uint64_t> seen;
    std::vector<std::vector<size_t>> global(ranks);
    for (size_t r = 0; r < ranks; ++r) {
      data::PointStream s(reader, {.batch = 30, .seed = 11, .rank = r, .ranks = ranks, .window_blocks = 2,
                                   .held_back = held});
      const auto mine = s.blocks_of(r);
      SparseBatch part;
      size_t g = 0, mine_points = 0;
      while (s.next(part, &g)) {
        global[r].push_back(g);
        for (size_t i = 0; i < part.size(); ++i) {
          const uint64_t id = part.features_of(i)[0];
          seen.insert(id);
          REQUIRE(std::find(mine.begin(), mine.end(), id / 64) != mine.end());
          // The point as the file holds it: its labels too.
          REQUIRE(std::equal(part.labels_of(i).begin(), part.labels_of(i).end(), d.points.labels_of(id).begin(),
                             d.points.labels_of(id).end()));
        }
        mine_points += part.size();
      }
      CHECK(mine_points == s.samples());
      CHECK(global[r].size() == s.steps());
    }
    for (size_t r = 1; r < ranks; ++r) REQUIRE(global[r] == global[0]);
    REQUIRE(seen.size() == 1037 - held.size());
    for (uint64_t i = 0; i < 1037; ++i)
      REQUIRE(seen.count(i) == (std::find(held.begin(), held.end(), i) == held.end() ? 1u : 0u));
  }
  // Skipping steps gives what next() would have given after them.
  data::PointStream a(reader, {.batch = 30, .seed = 11, .held_back = held});
  data::PointStream b(reader, {.batch = 30, .seed = 11, .held_back = held});
  SparseBatch x, y;
  for (int i = 0; i < 7; ++i) a.next(x);
  b.skip(7);
  REQUIRE(a.next(x));
  REQUIRE(b.next(y));
  CHECK(x.feature_ids == y.feature_ids);
  CHECK(b.step() == 8);
}

TEST_CASE("the points of a packed set in file order, in batches, the held-back ones left out") {
  TempDir dir;
  const data::Dataset d = tagged_set(500);
  const std::string path = dir / "set.fpk";
  data::pack_dataset(d, path, 64);
  data::PackedReader reader(path);
  const std::vector<uint64_t> held = {0, 63, 64, 499};
  const auto next = data::file_order_batches(reader, held, 50);
  SparseBatch batch;
  std::vector<uint64_t> order;
  while (next(batch)) {
    CHECK(batch.size() <= 50);
    for (size_t i = 0; i < batch.size(); ++i) order.push_back(batch.features_of(i)[0]);
  }
  std::vector<uint64_t> want;
  for (uint64_t i = 0; i < 500; ++i)
    if (!std::binary_search(held.begin(), held.end(), i)) want.push_back(i);
  CHECK(order == want);
}

TEST_CASE("a damaged label-count section is named") {
  TempDir dir;
  const std::string path = dir / "set.fpk";
  data::pack_dataset(tagged_set(300), path, 64);
  uint64_t at = 0;
  {
    data::PackedReader reader(path);
    at = reader.header().sections.at(5).offset + 4;
  }
  flip_byte(path, at);
  data::PackedReader reader(path);
  CHECK_THROWS_WITH(reader.label_points(), Catch::Contains("its label counts (section 6) are damaged"));
  // The points themselves still read (their blocks are checked on their own).
  SparseBatch b;
  reader.read_points(0, b);
  CHECK(b.size() == 64);
}
