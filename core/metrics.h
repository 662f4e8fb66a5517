// Precision at k for multi-label predictions: |top-k ∩ labels| / k, averaged over points. A point
// without labels counts with precision 0 (as in the XMC repository's evaluation).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/sparse_batch.h"

namespace frugal {

class PrecisionAtK {
 public:
  explicit PrecisionAtK(std::vector<size_t> ks);
  size_t max_k() const { return max_k_; }
  // top: batch.size() x max_k() labels, best first.
  void add(const SparseBatch& batch, const std::vector<uint32_t>& top);
  double value(size_t k) const;
  std::map<size_t, double> values() const;
  size_t points() const { return points_; }

 private:
  std::vector<size_t> ks_;
  size_t max_k_ = 0;
  std::vector<double> hits_;
  size_t points_ = 0;
};

}  // namespace frugal
