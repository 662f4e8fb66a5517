#include "layers/dlrm/id_map.h"

#include <algorithm>
#include <cmath>

#include <sstream>

#include <cereal/archives/binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/vector.hpp>
#include <fmt/format.h>

#include "core/bounded_read.h"
#include "core/check.h"

namespace frugal::layers {
namespace {

uint64_t mix64(uint64_t x) {  // SplitMix64's finalizer: every input bit reaches every output bit
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The ids seen at least min_count times, most frequent first (ties: smaller id first), so the
// numbering is independent of the hash map's iteration order: every rank and run agrees.
std::vector<uint64_t> kept_by_frequency(const std::unordered_map<uint64_t, uint32_t>& counts, size_t min_count) {
  std::vector<std::pair<uint32_t, uint64_t>> kept;
  for (const auto& [id, n] : counts)
    if (n >= min_count) kept.emplace_back(n, id);
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<uint64_t> ids(kept.size());
  for (size_t i = 0; i < kept.size(); ++i) ids[i] = kept[i].second;
  return ids;
}

}  // namespace

std::string_view to_string(IdMode mode) {
  switch (mode) {
    case IdMode::hash: return "hash";
    case IdMode::freq_double: return "freq-double";
    case IdMode::qr: return "qr";
    case IdMode::full: break;
  }
  return "full";
}

std::string_view to_string(Combine c) { return c == Combine::product ? "product" : "sum"; }

void IdMapOptions::validate() const {
  FRUGAL_CHECK(min_count >= 1, "--min-id-count must be at least 1");
  FRUGAL_CHECK(hash_rows >= 1 && hash_rows <= (size_t{1} << 31),
               fmt::format("--hash-rows must be in [1, 2^31], not {}", hash_rows));
  FRUGAL_CHECK(compression >= 1 && std::isfinite(compression),
               fmt::format("--id-compression must be at least 1, not {}", compression));
}

void CtrView::validate() const {
  FRUGAL_CHECK(labels.size() == size && dense.size() == size * num_dense && cats.size() == size * num_fields,
               fmt::format("CTR batch of {} samples: {} labels, {} dense values ({} expected), {} ids ({} expected)",
                           size, labels.size(), dense.size(), size * num_dense, cats.size(), size * num_fields));
  for (size_t i = 0; i < size; ++i)
    FRUGAL_CHECK(labels[i] == 0.0f || labels[i] == 1.0f,
                 fmt::format("CTR batch: sample {} has label {}, not 0 or 1", i, labels[i]));
}

void IdCounts::add(const CtrView& batch) {
  FRUGAL_CHECK(batch.num_fields == counts_.size(),
               fmt::format("id counts: the batch has {} fields, the counts {}", batch.num_fields, counts_.size()));
  for (size_t i = 0; i < batch.size; ++i)
    for (size_t f = 0; f < counts_.size(); ++f) {
      const uint64_t id = batch.cats[i * batch.num_fields + f];
      if (id == kMissingId) continue;
      uint32_t& c = counts_[f][id];
      if (c != UINT32_MAX) ++c;
    }
}

IdMap::IdMap(const IdMapOptions& options, size_t num_fields) : options_(options), fields_(num_fields) {
  options_.validate();
  FRUGAL_CHECK(options_.mode == IdMode::hash,
               fmt::format("--ids {} needs the training data's id counts", to_string(options_.mode)));
  for (Field& f : fields_) {
    f.mode = IdMode::hash;
    f.tables = {options_.hash_rows};
  }
}

IdMap::IdMap(const IdMapOptions& options, const IdCounts& counts) : options_(options), fields_(counts.num_fields()) {
  options_.validate();
  if (options_.mode == IdMode::hash) {
    *this = IdMap(options_, counts.num_fields());
    return;
  }
  const bool squeeze = options_.mode == IdMode::freq_double || options_.mode == IdMode::qr;
  lookups_ = squeeze ? 2 : 1;
  for (size_t fi = 0; fi < fields_.size(); ++fi) {
    Field& f = fields_[fi];
    const std::vector<uint64_t> kept = kept_by_frequency(counts.field(fi), options_.min_count);
    FRUGAL_CHECK(kept.size() < UINT32_MAX / 2,
                 fmt::format("field C{} has {} ids, too many for 32-bit rows", fi + 1, kept.size()));
    const size_t full_rows = kept.size() + 1;  // row 0: ids below min_count, unseen and missing
    const size_t budget = static_cast<size_t>(std::ceil(static_cast<double>(full_rows) / options_.compression));
    if (!squeeze || full_rows < kSmallField || budget < 8) {
      f.mode = IdMode::full;
      for (size_t r = 0; r < kept.size(); ++r) f.vocab.emplace(kept[r], static_cast<uint32_t>(r + 1));
      f.tables = {full_rows};
      continue;
    }
    f.mode = options_.mode;
    if (options_.mode == IdMode::freq_double) {
      // Table 0: the B/2 most frequent ids (row 0 stays the shared "other" row), then B/4 hashed
      // rows; table 1: B/4 hashed rows.
      f.frequent = budget / 2;
      f.hashed = budget / 4;
      for (size_t r = 0; r + 1 < f.frequent && r < kept.size(); ++r)
        f.vocab.emplace(kept[r], static_cast<uint32_t>(r + 1));
      f.tables = {f.frequent + f.hashed, f.hashed};
    } else {
      // m + ceil(V / m) rows in all, about the budget: m = budget - ceil(V / budget).
      for (size_t r = 0; r < kept.size(); ++r) f.vocab.emplace(kept[r], static_cast<uint32_t>(r + 1));
      const size_t quotient_guess = (full_rows + budget - 1) / budget;
      f.modulus = std::max<size_t>(2, budget > quotient_guess ? budget - quotient_guess : budget);
      f.combine = options_.qr_combine;
      f.tables = {(full_rows + f.modulus - 1) / f.modulus, f.modulus};
    }
  }
}

size_t IdMap::total_rows() const {
  size_t total = 0;
  for (const Field& f : fields_)
    for (size_t r : f.tables) total += r;
  return total;
}

uint32_t IdMap::hash(size_t field, uint64_t id, uint64_t salt, size_t n) const {
  return static_cast<uint32_t>(mix64(id ^ mix64(options_.seed + field * 0x9e3779b97f4a7c15ULL + salt)) % n);
}

void IdMap::rows(size_t field, uint64_t id, uint32_t* out) const {
  const Field& f = fields_[field];
  for (size_t l = 1; l < lookups_; ++l) out[l] = kNoRow;
  switch (f.mode) {
    case IdMode::hash:
      out[0] = hash(field, id, 0, options_.hash_rows);
      return;
    case IdMode::full: {
      const auto it = f.vocab.find(id);
      out[0] = it == f.vocab.end() ? 0u : it->second;
      return;
    }
    case IdMode::freq_double: {
      const auto it = f.vocab.find(id);
      if (it != f.vocab.end()) {
        out[0] = it->second;
      } else if (id == kMissingId) {
        out[0] = 0;  // missing: the shared row, as in the full mode
      } else {
        out[0] = static_cast<uint32_t>(f.frequent + hash(field, id, 1, f.hashed));
        out[1] = hash(field, id, 2, f.hashed);
      }
      return;
    }
    case IdMode::qr: {
      const auto it = f.vocab.find(id);
      const uint32_t v = it == f.vocab.end() ? 0u : it->second;
      out[0] = static_cast<uint32_t>(v / f.modulus);
      out[1] = static_cast<uint32_t>(v % f.modulus);
      return;
    }
  }
}

void IdMap::map(const CtrView& batch, std::vector<uint32_t>& rows_out) const {
  FRUGAL_CHECK(batch.num_fields == fields_.size(),
               fmt::format("id map of {} fields given a batch of {} fields", fields_.size(), batch.num_fields));
  rows_out.resize(batch.size * batch.num_fields * lookups_);
  for (size_t i = 0; i < batch.size; ++i)
    for (size_t f = 0; f < batch.num_fields; ++f)
      rows(f, batch.cats[i * batch.num_fields + f], rows_out.data() + (i * batch.num_fields + f) * lookups_);
}

}  // namespace frugal::layers

namespace frugal::layers {

std::string IdMap::to_bytes() const {
  std::ostringstream out;
  {
    cereal::BinaryOutputArchive ar(out);
    ar(std::string("frugal-idmap-1"), static_cast<uint32_t>(options_.mode), static_cast<uint64_t>(options_.min_count),
       static_cast<uint64_t>(options_.hash_rows), options_.compression, static_cast<uint32_t>(options_.qr_combine),
       options_.seed, static_cast<uint64_t>(lookups_), static_cast<uint64_t>(fields_.size()));
    for (const Field& f : fields_) {
      std::vector<uint64_t> tables(f.tables.begin(), f.tables.end());
      // The vocabulary in row order (a hash map's order would make the bytes differ run to run).
      std::vector<std::pair<uint64_t, uint32_t>> vocab(f.vocab.begin(), f.vocab.end());
      std::sort(vocab.begin(), vocab.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      ar(tables, static_cast<uint32_t>(f.combine), static_cast<uint32_t>(f.mode), vocab,
         static_cast<uint64_t>(f.frequent), static_cast<uint64_t>(f.hashed), static_cast<uint64_t>(f.modulus));
    }
  }
  return out.str();
}

IdMap IdMap::from_bytes(const std::string& bytes, const std::string& where) {
  IdMap m;
  try {
    std::istringstream in(bytes);
    cereal::BinaryInputArchive ar(in);
    std::string magic;
    read_string(ar, in, magic, where + ": id map header");
    FRUGAL_CHECK(magic == "frugal-idmap-1", fmt::format("{}: not an id map (no frugal-idmap-1 header)", where));
    uint32_t mode = 0, combine = 0;
    uint64_t min_count = 0, hash_rows = 0, lookups = 0, fields = 0;
    ar(mode, min_count, hash_rows, m.options_.compression, combine, m.options_.seed, lookups, fields);
    FRUGAL_CHECK(mode <= 3 && combine <= 1 && (lookups == 1 || lookups == 2) && fields > 0 && fields < 100000,
                 fmt::format("{}: corrupt id map header", where));
    m.options_.mode = static_cast<IdMode>(mode);
    m.options_.min_count = min_count;
    m.options_.hash_rows = hash_rows;
    m.options_.qr_combine = static_cast<Combine>(combine);
    m.options_.validate();
    m.lookups_ = lookups;
    m.fields_.resize(fields);
    for (size_t fi = 0; fi < m.fields_.size(); ++fi) {
      Field& f = m.fields_[fi];
      const auto fail = [&](const std::string& what) {
        throw Error(fmt::format("{}: corrupt id map: field C{} ({}): {}", where, fi + 1, to_string(f.mode), what));
      };
      std::vector<uint64_t> tables;
      uint32_t fcombine = 0, fmode = 0;
      uint64_t frequent = 0, hashed = 0, modulus = 0;
      read_vector(ar, in, tables, where + ": id map tables");
      ar(fcombine, fmode);
      FRUGAL_CHECK(!tables.empty() && tables.size() <= lookups && fcombine <= 1 && fmode <= 3,
                   fmt::format("{}: corrupt id map field", where));
      f.tables.assign(tables.begin(), tables.end());
      f.combine = static_cast<Combine>(fcombine);
      f.mode = static_cast<IdMode>(fmode);
      // The vocabulary: cereal's vector of (id, row) pairs, 12 bytes each.
      const uint64_t vocab = read_count(ar, in, 12, where + ": id map vocabulary");
      f.vocab.reserve(vocab);
      for (uint64_t i = 0; i < vocab; ++i) {
        uint64_t id = 0;
        uint32_t row = 0;
        ar(id, row);
        f.vocab.emplace(id, row);
      }
      ar(frequent, hashed, modulus);
      f.frequent = frequent;
      f.hashed = hashed;
      f.modulus = modulus;
      // What rows() computes must index the field's tables (embedding rows are 32-bit, kNoRow aside).
      for (const uint64_t t : tables)
        if (t == 0 || t >= kNoRow) fail(fmt::format("a table of {} rows", t));
      const size_t want_tables = f.mode == IdMode::freq_double || f.mode == IdMode::qr ? 2 : 1;
      if (tables.size() != want_tables) fail(fmt::format("{} tables, expected {}", tables.size(), want_tables));
      switch (f.mode) {
        case IdMode::full:
          for (const auto& [id, row] : f.vocab)
            if (row >= tables[0]) fail(fmt::format("row {} of a {}-row table", row, tables[0]));
          break;
        case IdMode::hash:
          if (tables[0] != m.options_.hash_rows)
            fail(fmt::format("{} rows, the map hashes into {}", tables[0], m.options_.hash_rows));
          break;
        case IdMode::freq_double:
          if (hashed == 0 || frequent > tables[0] || hashed > tables[0] - frequent || hashed > tables[1])
            fail(fmt::format("{} frequent and {} hashed rows do not fit tables of {} and {} rows", frequent, hashed,
                             tables[0], tables[1]));
          for (const auto& [id, row] : f.vocab)
            if (row >= tables[0]) fail(fmt::format("row {} of a {}-row table", row, tables[0]));
          break;
        case IdMode::qr:
          if (modulus == 0 || modulus > tables[1])
            fail(fmt::format("modulus {} for a remainder table of {} rows", modulus, tables[1]));
          for (const auto& [id, row] : f.vocab)
            if (row / modulus >= tables[0])
              fail(fmt::format("row {} has quotient {}, past the quotient table's {} rows", row, row / modulus, tables[0]));
          break;
      }
    }
  } catch (const cereal::Exception&) {
    throw Error(fmt::format("{}: truncated or corrupt id map", where));
  }
  return m;
}

}  // namespace frugal::layers
