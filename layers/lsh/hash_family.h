// LSH hash families over neuron weight vectors and hidden activations. A family holds `tables`
// independent hash functions; hash() gives each table's bucket for a batch of vectors, computed
// by a Backend (its simhash_codes / dwta_codes ops, core/backend.h).
//  - SimHash: K signed random projections (Gaussian hyperplanes) per table -> K-bit bucket.
//  - DWTA (densified winner-take-all): K bins of `bin_size` random coordinates per table; each bin
//    gives the position of its largest value; a bin with no positive value borrows the code of
//    another bin chosen by a fixed hash (densification), so sparse ReLU outputs still hash well.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>

#include "core/backend.h"
#include "core/tensor.h"

namespace frugal::lsh {

struct SimHash {
  int k = 8;  // bits per table
};
struct Dwta {
  int k = 6;          // bins per table
  int bin_size = 8;   // coordinates per bin (a power of two); log2(bin_size) bits per bin
};
using Family = std::variant<Dwta, SimHash>;

std::string family_name(const Family& f);

// The K that makes the expected active set (tables x neurons / buckets, before correlation) about
// 1.5% of the neurons and at least 256: enough negatives to learn from, few enough to be cheap.
int default_k(const Family& f, size_t tables, size_t neurons);

class HashFamily {
 public:
  virtual ~HashFamily() = default;
  virtual size_t tables() const = 0;
  virtual uint32_t buckets_per_table() const = 0;
  // codes[j * tables() + t] = bucket in table t of row rows[j] of x (of row j, for every row of x,
  // when rows is empty).
  virtual void hash(Backend& backend, const Tensor& x, std::span<const uint32_t> rows, uint32_t* codes) const = 0;

  static std::unique_ptr<HashFamily> create(const Family& family, size_t dim, size_t tables, uint64_t seed);
};

}  // namespace frugal::lsh
