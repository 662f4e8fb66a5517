// CtrStream: one epoch of a packed click log streamed block by block (core/data/block_stream.h: the
// block order, the shard of each rank, the read-ahead and the windowed shuffle), and the passes over
// such a file that DLRM's set-up makes without holding it: the id counts, the validation share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/data/block_stream.h"
#include "core/data/ctr_format.h"

namespace frugal::data {

using CtrStreamOptions = BlockStreamOptions;
using CtrStream = BlockStream<CtrBatch>;

// Every block of a packed click log in file order, as batches, the `held_back` samples left out: a
// pass over a file larger than memory (DLRM's id counts).
void for_each_block(PackedReader& reader, std::span<const uint64_t> held_back,
                    const std::function<void(const CtrBatch&)>& visit);

// The validation share of a packed click log without reading it whole: the samples split_ctr
// (core/data/ctr_split.h) holds back at `fraction` from a seeded set of blocks holding at least
// 4 x `count` samples, at the rate that makes `count` of them. Returns their indices in the file
// (ascending) and the samples.
struct CtrHeldBack {
  std::vector<uint64_t> indices;
  CtrDataset samples;
};
CtrHeldBack hold_back_blocks(PackedReader& reader, size_t count, uint64_t seed);

}  // namespace frugal::data
