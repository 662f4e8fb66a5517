#include "core/distinct_rows.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

void DistinctRows::list(std::span<const uint32_t> ids, std::vector<uint32_t>& out) {
  out.clear();
  size_t lowest = words_.size(), highest = 0;
  for (const uint32_t id : ids) {
    const size_t w = id / 64;
    if (w >= words_.size()) {
      std::fill(words_.begin(), words_.end(), 0);  // the next call starts clean
      throw Error(fmt::format("DistinctRows: id {} is not below {} rows", id, num_rows()));
    }
    words_[w] |= uint64_t{1} << (id % 64);
    lowest = std::min(lowest, w);
    highest = std::max(highest, w);
  }
  for (size_t w = lowest; w <= highest && w < words_.size(); ++w) {
    for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
      out.push_back(static_cast<uint32_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits))));
    words_[w] = 0;
  }
}

}  // namespace frugal
