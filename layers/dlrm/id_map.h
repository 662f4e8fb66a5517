// IdMap: which embedding rows each categorical id of each field uses (`frugal train --ids`). A
// field has one or two tables; a lookup gives one row per table (kNoRow: none), and the field's
// vector is their sum or, for qr, their element-wise product (Combine).
//  - full: every id seen at least min_count times in the training data gets a row of its own;
//    row 0 is shared by the rest (rare, unseen and missing ids). One table per field.
//  - hash: row = a seeded hash of (field, id) modulo hash_rows; collisions shared, no counting.
//  - freq-double (Zhang et al., RecSys 2020): the field's budget of B = ceil(V / compression) rows
//    (V: its full-mode rows) goes half to its most frequent ids, a row each in table 0, and half
//    to the rest, which are double-hashed: one row among the hashed part of table 0 and one in
//    table 1 (B / 4 rows each), summed.
//  - qr (Shi et al., KDD 2020): the id's full-mode row v is split into quotient and remainder,
//    v / m in table 0 (ceil(V / m) rows) and v % m in table 1 (m rows), added (or, with
//    qr_combine product, multiplied element-wise): every id keeps a distinct vector with about
//    V / compression rows in all.
// freq-double and qr leave fields of fewer than kSmallField full-mode rows as full tables (they
// cost nothing and lose quality when squeezed). Deterministic: the same counts and options give
// the same rows on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "layers/dlrm/ctr_view.h"

namespace frugal::layers {

enum class IdMode { full, hash, freq_double, qr };
std::string_view to_string(IdMode mode);  // "full", "hash", "freq-double", "qr" (as --ids names them)
enum class Combine { sum, product };
std::string_view to_string(Combine c);  // "sum", "product" (as --qr-combine names them)

inline constexpr uint32_t kNoRow = UINT32_MAX;

struct IdMapOptions {
  IdMode mode = IdMode::full;
  size_t min_count = 2;           // full/freq-double/qr: ids seen fewer times share row 0
  size_t hash_rows = 1 << 16;     // hash: rows per field
  double compression = 10;        // freq-double/qr: full-mode rows / rows kept, per large field
  Combine qr_combine = Combine::sum;  // qr: the two rows added (measured best here) or multiplied
  uint64_t seed = 0x1d5;
  void validate() const;
};

// Per field, how often each id occurs in the training data (the counting pass).
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
  static constexpr size_t kSmallField = 1024;

  IdMap() = default;
  IdMap(const IdMapOptions& options, const IdCounts& counts);
  // The hash mode needs no counts.
  IdMap(const IdMapOptions& options, size_t num_fields);

  const IdMapOptions& options() const { return options_; }
  size_t num_fields() const { return fields_.size(); }
  // Lookups per field (1, or 2 for freq-double and qr): the stride of map()'s rows.
  size_t lookups() const { return lookups_; }
  // The rows of each table of field f (one entry per lookup slot it uses; 1 or 2 tables).
  const std::vector<size_t>& table_rows(size_t field) const { return fields_.at(field).tables; }
  Combine combine(size_t field) const { return fields_.at(field).combine; }
  size_t total_rows() const;
  // Field f's rows for `id`, one per lookup slot (kNoRow where the slot is unused).
  void rows(size_t field, uint64_t id, uint32_t* out) const;
  // rows_out[(i * num_fields + f) * lookups() + l] for every sample i, field f and slot l.
  void map(const CtrView& batch, std::vector<uint32_t>& rows_out) const;

  // The whole map as bytes (options and every field's vocabulary), for checkpoints; from_bytes
  // throws frugal::Error naming `where` when the bytes are not a map.
  std::string to_bytes() const;
  static IdMap from_bytes(const std::string& bytes, const std::string& where);

 private:
  struct Field {
    std::vector<size_t> tables;
    Combine combine = Combine::sum;
    IdMode mode = IdMode::full;                   // what this field does (small fields: full)
    std::unordered_map<uint64_t, uint32_t> vocab;  // full/qr: id -> row >= 1; freq-double: frequent id -> row
    size_t frequent = 0, hashed = 0, modulus = 0;  // freq-double: rows of each part; qr: m
  };
  uint32_t hash(size_t field, uint64_t id, uint64_t salt, size_t n) const;

  IdMapOptions options_;
  std::vector<Field> fields_;
  size_t lookups_ = 1;
};

}  // namespace frugal::layers
