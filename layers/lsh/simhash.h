#pragma once

#include <vector>

#include "core/tensor.h"
#include "layers/lsh/hash_family.h"

namespace frugal::lsh {

class SimHashFamily : public HashFamily {
 public:
  SimHashFamily(const SimHash& options, size_t dim, size_t tables, uint64_t seed);
  size_t tables() const override { return tables_; }
  uint32_t buckets_per_table() const override { return 1u << k_; }
  void hash(Backend& backend, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes) const override;

 private:
  int k_;
  size_t dim_, tables_;
  Tensor planes_;  // (tables * k) x dim
  // planes_ where a device backend computes, sent on its first use there (not at every batch).
  mutable Tensor placed_planes_;
};

}  // namespace frugal::lsh
