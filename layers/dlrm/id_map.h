// IdMap: which embedding row each categorical id of each field uses (`frugal train --ids`).
//  - full: every id seen at least min_count times in the training data gets a row of its own;
//    row 0 is shared by the rest (rare, unseen and missing ids). The vocabulary comes from a
//    counting pass over the training data (IdCounts) and is saved beside the model.
//  - hash: row = a seeded hash of (field, id) modulo hash_rows (rows per field); no counting pass,
//    collisions shared. Missing ids hash like any other value.
// Deterministic: the same counts and options give the same rows on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "layers/dlrm/ctr_view.h"

namespace frugal::layers {

enum class IdMode { full, hash };
std::string_view to_string(IdMode mode);  // "full", "hash" (as --ids names them)

struct IdMapOptions {
  IdMode mode = IdMode::full;
  size_t min_count = 2;           // full: ids seen fewer times share row 0 (seen once: as if unseen)
  size_t hash_rows = 1 << 16;     // hash: rows per field
  uint64_t seed = 0x1d5;
  void validate() const;
};

// Per field, how often each id occurs in the training data (the full mode's counting pass).
class IdCounts {
 public:
  explicit IdCounts(size_t num_fields) : counts_(num_fields) {}
  void add(const CtrView& batch);
  size_t num_fields() const { return counts_.size(); }
  const std::unordered_map<uint64_t, uint32_t>& field(size_t f) const { return counts_.at(f); }

 private:
  std::vector<std::unordered_map<uint64_t, uint32_t>> counts_;
};

class IdMap {
 public:
  IdMap() = default;
  // full: from the counts; hash: the counts are not needed (num_fields only).
  IdMap(const IdMapOptions& options, const IdCounts& counts);
  IdMap(const IdMapOptions& options, size_t num_fields);

  const IdMapOptions& options() const { return options_; }
  size_t num_fields() const { return rows_.size(); }
  // Rows of field f's table.
  size_t rows(size_t field) const { return rows_.at(field); }
  size_t total_rows() const;
  // The row of `id` in field f's table.
  uint32_t row(size_t field, uint64_t id) const;
  // rows_out[i * num_fields + f] for every sample and field of the batch.
  void map(const CtrView& batch, std::vector<uint32_t>& rows_out) const;

  // The full mode's vocabulary as text (one line per field: its ids in row order, hex), for the
  // file beside a model; load() reads it back. The hash mode writes only its options.
  std::string save() const;
  static IdMap load(const std::string& text, const std::string& where);

 private:
  IdMapOptions options_;
  std::vector<size_t> rows_;
  std::vector<std::unordered_map<uint64_t, uint32_t>> vocab_;  // full: id -> row (>= 1)
};

}  // namespace frugal::layers
