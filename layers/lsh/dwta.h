#pragma once

#include <vector>

#include "layers/lsh/hash_family.h"

namespace frugal::lsh {

class DwtaFamily : public HashFamily {
 public:
  DwtaFamily(const Dwta& options, size_t dim, size_t tables, uint64_t seed);
  size_t tables() const override { return tables_; }
  uint32_t buckets_per_table() const override { return 1u << bucket_bits_; }
  void hash(Backend& backend, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes) const override;

 private:
  int k_, bin_size_, bin_bits_, bucket_bits_;
  size_t dim_, tables_;
  std::vector<uint32_t> coords_;  // (tables * k * bin_size) coordinate ids
  uint64_t seed_;
  // coords_ where a device backend computes, sent on its first use there (not at every batch).
  mutable Tensor placed_coords_{0, 0, Dtype::u32};
};

}  // namespace frugal::lsh
