// Streaming a packed click log (core/data/ctr_stream.h): over the ranks, an epoch gives every sample
// that is not held back exactly once; each rank's samples come from its own blocks only; the ranks
// agree on the steps and the global batch sizes; the same seed gives the same stream and another
// epoch's seed another order. The held-back share is the size asked, in both classes, and the same
// seed picks the same samples.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "core/data/ctr_format.h"
#include "core/data/ctr_stream.h"
#include "core/data/packed_file.h"
#include "core/staged_file.h"
#include "temp_dir.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

// `n` samples whose C1 is their index (so a sample can be recognized) and whose label alternates in
// runs, packed in blocks of `block` samples.
std::string packed_log(const TempDir& dir, size_t n, size_t block) {
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    data::CtrRecord r;
    r.label = (i / 3) % 2 == 0 ? 1 : 0;
    r.ints[0] = static_cast<int64_t>(i % 17);
    r.cats[0] = i;
    for (size_t c = 1; c < data::kCtrCats; ++c) r.cats[c] = (i * 7 + c) % 11;
    data::format_ctr_line(r, text);
  }
  const std::string tsv = dir / "log.tsv", packed = dir / "log.fpk";
  StagedFile f(tsv);
  f.write(text);
  f.commit();
  data::pack_ctr_file(tsv, packed, block);
  return packed;
}

// Each rank's samples over one epoch (C1 of each), and the global sizes it saw.
struct Epoch {
  std::vector<std::vector<uint64_t>> ids;  // per rank, in order
  std::vector<std::vector<size_t>> global;
};

Epoch run_epoch(data::PackedReader& reader, size_t ranks, size_t batch, uint64_t seed, std::span<const uint64_t> held) {
  Epoch e;
  e.ids.resize(ranks);
  e.global.resize(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    data::CtrStream s(reader, {.batch = batch, .seed = seed, .rank = r, .ranks = ranks, .window_blocks = 2,
                               .held_back = held});
    data::CtrBatch part;
    size_t g = 0;
    while (s.next(part, &g)) {
      for (size_t i = 0; i < part.size; ++i) e.ids[r].push_back(part.cats_of(i)[0]);
      e.global[r].push_back(g);
    }
    CHECK(e.global[r].size() == s.steps());
    CHECK(e.ids[r].size() == s.samples());
    // Only its own blocks.
    const auto mine = s.blocks_of(r);
    for (const uint64_t id : e.ids[r])
      REQUIRE(std::find(mine.begin(), mine.end(), id / reader.header().block_points) != mine.end());
  }
  return e;
}

}  // namespace

TEST_CASE("a stream gives every sample once an epoch over the ranks, each rank from its own blocks") {
  TempDir dir;
  const std::string path = packed_log(dir, 537, 40);  // 14 blocks, the last one partial
  data::PackedReader reader(path);
  const std::vector<uint64_t> held = {3, 41, 42, 300, 536};
  for (const size_t ranks : {1, 2, 3}) {
    INFO("ranks " << ranks);
    const Epoch e = run_epoch(reader, ranks, 24, 77, held);
    std::multiset<uint64_t> seen;
    for (const auto& ids : e.ids) seen.insert(ids.begin(), ids.end());
    REQUIRE(seen.size() == 537 - held.size());
    for (uint64_t i = 0; i < 537; ++i)
      REQUIRE(seen.count(i) == (std::find(held.begin(), held.end(), i) == held.end() ? 1u : 0u));
    // The ranks agree on the steps and each step's global size, which is the sum of their parts.
    for (size_t r = 1; r < ranks; ++r) REQUIRE(e.global[r] == e.global[0]);
    size_t total = 0;
    for (const size_t g : e.global[0]) total += g;
    CHECK(total == 537 - held.size());
    // The same seed, the same stream; another epoch's seed, another order.
    CHECK(run_epoch(reader, ranks, 24, 77, held).ids == e.ids);
    CHECK(run_epoch(reader, ranks, 24, 78, held).ids != e.ids);
  }
  // A window shuffles across its blocks: the first batch mixes two blocks.
  const Epoch one = run_epoch(reader, 1, 24, 77, held);
  std::set<uint64_t> blocks;
  for (size_t i = 0; i < 24; ++i) blocks.insert(one.ids[0][i] / 40);
  CHECK(blocks.size() == 2);
}

TEST_CASE("the held-back share of a packed log: its size, both classes, seeded") {
  TempDir dir;
  const std::string path = packed_log(dir, 2000, 100);
  data::PackedReader reader(path);
  const data::CtrHeldBack a = data::hold_back_blocks(reader, 60, 5);
  CHECK(a.indices.size() == a.samples.size);
  CHECK(a.samples.size >= 58);
  CHECK(a.samples.size <= 62);
  CHECK(std::is_sorted(a.indices.begin(), a.indices.end()));
  for (size_t i = 0; i < a.samples.size; ++i) REQUIRE(a.samples.cats_of(i)[0] == a.indices[i]);
  const auto clicks = std::count_if(a.samples.labels.begin(), a.samples.labels.end(), [](float y) { return y > 0.5f; });
  CHECK(clicks > 0);
  CHECK(static_cast<size_t>(clicks) < a.samples.size);
  CHECK(data::hold_back_blocks(reader, 60, 5).indices == a.indices);
  CHECK(data::hold_back_blocks(reader, 60, 6).indices != a.indices);
  // A pass over the file leaves them out.
  size_t passed = 0;
  data::for_each_block(reader, a.indices, [&](const data::CtrBatch& b) { passed += b.size; });
  CHECK(passed == 2000 - a.indices.size());
}
