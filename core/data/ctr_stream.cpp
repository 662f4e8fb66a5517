#include "core/data/ctr_stream.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/check.h"
#include "core/rng.h"
#include "core/data/ctr_split.h"
#include "core/data/dataset_split.h"
#include "core/data/packed_file.h"

namespace frugal::data {

void for_each_block(PackedReader& reader, std::span<const uint64_t> held_back,
                    const std::function<void(const CtrBatch&)>& visit) {
  for (uint64_t b = 0; b < reader.header().blocks(); ++b) {
    CtrBatch batch;
    read_stream_block(reader, b, held_back, batch);
    visit(batch);
  }
}

CtrHeldBack hold_back_blocks(PackedReader& reader, size_t count, uint64_t seed) {
  const PackedHeader& h = reader.header();
  FRUGAL_CHECK(h.kind == PackedKind::clicks, fmt::format("{}: a packed sparse data set, not click logs", reader.path()));
  CtrHeldBack out;
  if (count == 0 || h.points == 0) return out;
  // Blocks in a seeded order until they hold 4 x count samples: the share comes from several places
  // in the file (a log in time order), at most a quarter of each.
  std::vector<uint64_t> chosen;
  uint64_t samples = 0;
  for (const uint32_t b : shuffled_order(h.blocks(), Rng(seed).split(0x4e1d).next_u64())) {
    if (samples >= 4 * static_cast<uint64_t>(count)) break;
    chosen.push_back(b);
    samples += h.block_size(b);
  }
  std::sort(chosen.begin(), chosen.end());
  CtrDataset pool;
  std::vector<uint64_t> index;  // pool's samples' indices in the file
  for (const uint64_t b : chosen) {
    read_stream_block<CtrBatch>(reader, b, {}, pool);
    for (uint64_t i = 0; i < h.block_size(b); ++i) index.push_back(h.block_first(b) + i);
  }
  const double rate = std::min(0.5, static_cast<double>(count) / static_cast<double>(pool.size));
  CtrSplit split = split_ctr(pool, rate, seed);
  for (const uint32_t i : split.test_rows) out.indices.push_back(index[i]);
  out.samples = std::move(split.test);
  return out;
}

}  // namespace frugal::data
