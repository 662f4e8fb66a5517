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

#include "core/device.h"
#include "core/tensor.h"

namespace frugal::lsh {

// The widest table: 2^18 buckets (a 1 MiB offsets array per table); DWTA codes wider than this
// are folded by hashing.
inline constexpr int kMaxBucketBits = 18;

struct SimHash {
  int k = 8;  // bits per table
};
struct Dwta {
  int k = 6;          // bins per table
  int bin_size = 8;   // coordinates per bin (a power of two); log2(bin_size) bits per bin
  // Buckets per table = 2^bucket_bits (1..18). 0: k * log2(bin_size), at most 18. A table whose
  // code is wider than this folds it by hashing (core/backend.h, DwtaSpec), so the width of the
  // tables can be chosen bit by bit rather than by whole bins.
  int bucket_bits = 0;
};
using Family = std::variant<Dwta, SimHash>;

std::string family_name(const Family& f);

// The automatic hash width aims at an active set (labels a point gets from the tables: tables x
// neurons / buckets per table, before overlap and correlation) of `active_target` labels, or, when
// that is 0, of 1.5% of the neurons bounded to [kMinDefaultActive, kMaxDefaultActive]: enough hard
// negatives to learn from at any label count, and a cost per point that stops growing with the
// label count (issue 13). The random negatives (LshOptions::negatives) keep the softmax's normalizer
// estimate unbiased whatever the tables return.
inline constexpr size_t kMinDefaultActive = 256;
inline constexpr size_t kMaxDefaultActive = 1024;
// What a training point computes at most by default (--max-active auto): its labels, the candidates
// found in the most tables, then its random negatives (LshOptions::negatives, 64). The tables' union
// alone grows with the label count at a fixed target (bucket imbalance, the bucket-width cap: ~1,500-
// 1,970 labels a point at 100k, 2,200-4,500 at 1M), and with it the step's cost: the rows a batch
// gathers, updates and re-hashes. Measured (bench/REPORT.md, issue 64), 128 against no cap: per epoch
// within 0.5 points of P@1 on GCIDE min5 (+0.09), the synthetic few-shot set (-0.07), the skewed sets
// and two 100k/1M sets, -0.24 on GCIDE full and -2.0 on a 1M-label set still learning (0.69 against
// 0.71 after 3 epochs), where it trains 6x the samples a second and passes 0.71 after 5 epochs in a
// third of the time.
inline constexpr size_t kDefaultActiveBudget = 128;
// Tables a layer keeps by default. With the capped active set the tables rank candidates rather
// than supply them all, and 32 find what 100 did: measured (issue 64, bench/REPORT.md) per epoch at
// the cap, 32 against 100 tables: P@1 -0.25 points on a 1M-label set, +0.05 on a harder 1M set still
// learning, +0.02 on GCIDE full, +0.04 on GCIDE min5, within 0.1 on the few-shot, skewed and
// 100k-label sets (16 tables: -0.6 and -0.35 on the two 1M sets); the tables take a third of the
// memory (~1.5 bytes a parameter at hidden 128 instead of 4.9) and of the rebuild and bucket scan.
inline constexpr size_t kDefaultTables = 32;
// Tables built for LSH inference over a model trained without them (the exact softmax, or loaded
// by predict / evaluate): there the tables' union is every candidate a point gets, with no cap
// ranking them, so they keep the count LSH inference was measured with (bench/REPORT.md).
inline constexpr size_t kInferenceTables = 100;
size_t default_active_target(size_t neurons);
// `f` (its kind, and for DWTA its bin size) with the width chosen for `neurons` labels hashed into
// `tables` tables: the fewest buckets per table (a power of two, at most 2^18) whose expected active
// set is still at least the target; DWTA gets enough bins to fill them and folds the rest.
Family auto_family(Family f, size_t tables, size_t neurons, size_t active_target = 0);

class HashFamily {
 public:
  virtual ~HashFamily() = default;
  virtual size_t tables() const = 0;
  virtual uint32_t buckets_per_table() const = 0;
  // codes (u32, shaped n x tables() where it lives: the backend's memory, or the host's) row j,
  // column t = bucket in table t of row rows[j] of x (of row j, for every row of x, when rows is
  // empty).
  virtual void hash(Backend& backend, const Tensor& x, std::span<const uint32_t> rows, Tensor& codes) const = 0;

  static std::unique_ptr<HashFamily> create(const Family& family, size_t dim, size_t tables, uint64_t seed);
};

}  // namespace frugal::lsh
