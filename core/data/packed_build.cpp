#include "core/data/packed_file.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/regular_file.h"
#include "core/staged_file.h"
#include "core/data/ctr_reader.h"
#include "core/data/xmc_reader.h"

// The whole-file operations on packed files (core/data/packed_file.h): packing (streamed through
// temporary section files) and loading a range of blocks in parallel. The reader itself
// (packed_file.cpp) stays free of threads and writers, so the fuzz targets of the text readers that
// detect packed files link it alone.
namespace frugal::data {
namespace {

template <class T>
std::span<const std::byte> bytes_of(std::span<const T> values) {
  return std::as_bytes(values);
}

void put_u32(std::byte* at, uint32_t v) { std::memcpy(at, &v, 4); }
void put_u64(std::byte* at, uint64_t v) { std::memcpy(at, &v, 8); }

// One click row as the file holds it (kPackedClickBytes).
void encode_click(const CtrRecord& r, std::byte* at) {
  uint64_t flags = r.label != 0 ? 1 : 0;
  for (size_t i = 0; i < kCtrDense; ++i) flags |= r.int_missing[i] ? uint64_t{1} << (i + 1) : 0;
  put_u64(at, flags);
  for (size_t i = 0; i < kCtrDense; ++i) put_u64(at + 8 + 8 * i, static_cast<uint64_t>(r.ints[i]));
  for (size_t i = 0; i < kCtrCats; ++i) put_u64(at + 8 + 8 * kCtrDense + 8 * i, r.cats[i]);
}

uint64_t align_up(uint64_t x) { return (x + kPackedAlign - 1) / kPackedAlign * kPackedAlign; }

// Writes the sections of a packed file while the data streams in: each to its own temporary file
// beside OUT (so memory holds one block), each block's checksum over its bytes in every section in
// order; finish() writes OUT (prefix, sections copied in, header) through a StagedFile.
class PackWriter {
 public:
  PackWriter(const std::string& out, size_t sections) : out_(out) {
    for (size_t s = 0; s < sections; ++s) {
      const std::string path = fmt::format("{}.section{}.tmp-{}", out, s, ::getpid());
      std::FILE* f = std::fopen(path.c_str(), "w+b");
      if (f == nullptr) throw Error(fmt::format("{}: cannot create {}: {}", out, path, std::strerror(errno)));
      temps_.push_back({path, f, 0});
    }
  }
  ~PackWriter() {
    for (auto& t : temps_) {
      if (t.file != nullptr) std::fclose(t.file);
      std::remove(t.path.c_str());
    }
  }
  PackWriter(const PackWriter&) = delete;
  PackWriter& operator=(const PackWriter&) = delete;

  void append(size_t section, std::span<const std::byte> bytes, bool in_block = true) {
    Temp& t = temps_[section];
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), t.file) != bytes.size())
      throw Error(fmt::format("{}: cannot write {}: {}", out_, t.path, std::strerror(errno)));
    t.bytes += bytes.size();
    if (in_block) crc_ = crc32c(bytes, crc_);
  }
  void end_block(PackedHeader& h) {
    h.block_crcs.push_back(crc_);
    crc_ = 0;
  }
  void finish(PackedHeader& h) {
    StagedFile f(out_);
    std::array<std::byte, kPackedFirstSection> prefix{};
    uint64_t at = kPackedFirstSection;
    h.sections.clear();
    for (const Temp& t : temps_) {
      h.sections.push_back({at, t.bytes});
      at = align_up(at + t.bytes);
    }
    const uint64_t header_offset = at;
    const std::string json = header_json(h);
    std::memcpy(prefix.data(), kPackedMagic, 8);
    put_u32(prefix.data() + 8, kPackedVersion);
    put_u64(prefix.data() + 16, header_offset);
    put_u64(prefix.data() + 24, json.size());
    f.write({reinterpret_cast<const char*>(prefix.data()), prefix.size()});
    std::vector<char> buf(size_t{4} << 20);
    uint64_t written = kPackedFirstSection;
    for (const Temp& t : temps_) {
      const uint64_t start = h.sections[&t - temps_.data()].offset;
      f.write(std::string(start - written, '\0'));
      std::rewind(t.file);
      for (uint64_t left = t.bytes; left > 0;) {
        const size_t got = std::fread(buf.data(), 1, std::min<uint64_t>(buf.size(), left), t.file);
        if (got == 0) throw Error(fmt::format("{}: cannot read back {}", out_, t.path));
        f.write({buf.data(), got});
        left -= got;
      }
      written = start + t.bytes;
    }
    f.write(std::string(header_offset - written, '\0'));
    f.write(json);
    uint32_t crc = crc32c(std::span<const std::byte>(prefix.data(), kPackedPrefixBytes));
    crc = crc32c(std::as_bytes(std::span<const char>(json.data(), json.size())), crc);
    std::array<std::byte, 4> tail{};
    put_u32(tail.data(), crc);
    f.write({reinterpret_cast<const char*>(tail.data()), tail.size()});
    f.commit();
  }

 private:
  struct Temp {
    std::string path;
    std::FILE* file = nullptr;
    uint64_t bytes = 0;
  };
  static std::string header_json(const PackedHeader& h) {
    nlohmann::json j;
    j["kind"] = std::string(to_string(h.kind));
    j["points"] = h.points;
    j["features"] = h.features;
    j["labels"] = h.labels;
    j["feature_nnz"] = h.feature_nnz;
    j["label_nnz"] = h.label_nnz;
    j["block_points"] = h.block_points;
    j["block_crcs"] = h.block_crcs;
    nlohmann::json sections = nlohmann::json::array();
    for (const PackedSection& s : h.sections) sections.push_back({s.offset, s.bytes});
    j["sections"] = sections;
    j["source"] = h.source;
    j["source_hash"] = h.source_hash;
    if (h.tallies) {
      j["tallies"] = {{"points_without_labels", h.tallies->points_without_labels},
                      {"points_without_features", h.tallies->points_without_features},
                      {"features_used", h.tallies->features_used},
                      {"labels_used", h.tallies->labels_used},
                      {"adjacent_same_label", h.tallies->adjacent_same_label}};
      j["label_counts_crc"] = h.label_counts_crc;
    }
    if (h.source_fingerprint)
      j["source_fingerprint"] = {{"size", h.source_fingerprint->size},
                                 {"header", h.source_fingerprint->header},
                                 {"hash", h.source_fingerprint->hash}};
    return j.dump();
  }

  std::string out_;
  std::vector<Temp> temps_;
  uint32_t crc_ = 0;
};

// What data::compute_stats tallies, over the points as they stream through the packer (its memory:
// a byte per declared feature and a count per declared label where those are modest, else the ids
// that occur, as compute_stats counts them).
class PointTallies {
 public:
  PointTallies(uint32_t features, uint32_t labels)
      : features_(features), labels_(labels), dense_features_(features <= kDenseIds), dense_labels_(labels <= kDenseIds) {
    if (dense_features_) feature_seen_.assign(features, 0);
    if (dense_labels_) label_points_.assign(labels, 0);
  }
  void add(const SparseBatch& batch) {
    for (size_t i = 0; i < batch.size(); ++i) {
      const auto labels = batch.labels_of(i);
      const auto features = batch.features_of(i);
      t_.points_without_labels += labels.empty();
      t_.points_without_features += features.empty();
      for (const uint32_t f : features)
        if (f < features_) {
          if (dense_features_) feature_seen_[f] = 1;
          else sparse_features_.insert(f);
        }
      for (const uint32_t l : labels)
        if (l < labels_) {
          if (dense_labels_) ++label_points_[l];
          else ++sparse_labels_[l];
        }
      if (!labels.empty()) {
        t_.adjacent_same_label += has_previous_ && previous_first_ == static_cast<int64_t>(labels[0]);
        previous_first_ = labels[0];
      } else {
        previous_first_ = -1;
      }
      has_previous_ = true;
    }
  }
  // The tallies and the label counts as the sixth section holds them.
  PackedHeader::Tallies finish(std::vector<uint32_t>& pairs) {
    t_.features_used = dense_features_ ? static_cast<uint64_t>(std::count(feature_seen_.begin(), feature_seen_.end(), 1))
                                       : sparse_features_.size();
    if (dense_labels_) {
      for (uint32_t l = 0; l < labels_; ++l)
        if (label_points_[l] > 0) pairs.insert(pairs.end(), {l, label_points_[l]});
    } else {
      for (const auto& [l, n] : sparse_labels_) pairs.insert(pairs.end(), {l, n});
    }
    t_.labels_used = pairs.size() / 2;
    return t_;
  }

 private:
  static constexpr uint32_t kDenseIds = 1u << 24;  // 16M: a byte or a count each is affordable
  uint32_t features_, labels_;
  bool dense_features_, dense_labels_;
  std::vector<uint8_t> feature_seen_;
  std::vector<uint32_t> label_points_;
  std::unordered_set<uint32_t> sparse_features_;
  std::map<uint32_t, uint32_t> sparse_labels_;
  PackedHeader::Tallies t_;
  bool has_previous_ = false;
  int64_t previous_first_ = -1;
};

// Appends `batch` (points whose offsets start at 0) as one block: offsets made global.
void write_points_block(PackWriter& w, PackedHeader& h, const SparseBatch& batch) {
  std::vector<uint64_t> offsets(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) offsets[i] = h.feature_nnz + batch.feature_offsets[i];
  w.append(0, bytes_of(std::span<const uint64_t>(offsets)));
  w.append(1, bytes_of(std::span<const uint32_t>(batch.feature_ids)));
  w.append(2, bytes_of(std::span<const float>(batch.feature_values)));
  for (size_t i = 0; i < batch.size(); ++i) offsets[i] = h.label_nnz + batch.label_offsets[i];
  w.append(3, bytes_of(std::span<const uint64_t>(offsets)));
  w.append(4, bytes_of(std::span<const uint32_t>(batch.label_ids)));
  w.end_block(h);
  h.points += batch.size();
  h.feature_nnz += batch.feature_ids.size();
  h.label_nnz += batch.label_ids.size();
}

void finish_points(PackWriter& w, PackedHeader& h, PointTallies& tallies) {
  w.append(0, bytes_of(std::span<const uint64_t>(&h.feature_nnz, 1)), false);
  w.append(3, bytes_of(std::span<const uint64_t>(&h.label_nnz, 1)), false);
  std::vector<uint32_t> pairs;
  h.tallies = tallies.finish(pairs);
  h.label_counts_crc = crc32c(std::as_bytes(std::span<const uint32_t>(pairs)));
  w.append(5, bytes_of(std::span<const uint32_t>(pairs)), false);
  w.finish(h);
}

}  // namespace

Dataset load_packed_points(const std::string& path, uint64_t first_block, uint64_t blocks) {
  PackedReader reader(path);
  const PackedHeader& h = reader.header();
  if (h.kind != PackedKind::points)
    throw Error(fmt::format("{}: packed Criteo click logs, not a sparse data set (they train --model dlrm)", path));
  const uint64_t end = blocks >= h.blocks() - std::min(first_block, h.blocks()) ? h.blocks() : first_block + blocks;
  Dataset data;
  data.source = path;
  data.num_features = h.features;
  data.num_labels = h.labels;
  data.content_hash = h.content_hash();
  // The arrays at their final size at once (growing them would hold up to three times the data), on
  // 4 KB pages: huge pages advised before the first write made the 1.7M-point set's read 0.2-2.3 s
  // against 0.38-0.44 s (a VM's fresh 2 MB pages are slow to fault in; bench/history/quality.md,
  // "Packed data files and DLRM streaming").
  const PackedRange r = reader.range(first_block, end);
  data.points.feature_offsets.assign(r.points + 1, 0);
  data.points.label_offsets.assign(r.points + 1, 0);
  data.points.feature_ids.resize(r.feature_nnz);
  data.points.feature_values.resize(r.feature_nnz);
  data.points.label_ids.resize(r.label_nnz);
  // Blocks in parallel (each writes its own part of the arrays): the checksums and checks run at the
  // speed of the cores, the copies at the memory's.
  SparseBatch& p = data.points;
  const uint64_t point0 = h.block_first(first_block);
  // A damaged file names its first damaged block, whichever thread met it first.
  std::vector<std::exception_ptr> failed(end - first_block);
  tbb::parallel_for(first_block, end, [&](uint64_t b) {
    try {
      const PackedRange at = reader.range(first_block, b);  // the blocks before it in the range
      const uint64_t local = h.block_first(b) - point0;
      const PackedRange mine = reader.range(b, b + 1);
      if (at.feature_nnz + mine.feature_nnz > r.feature_nnz || at.label_nnz + mine.label_nnz > r.label_nnz)
        throw Error(fmt::format("{}: block {} of {}: its point offsets disagree with the range's", path, b + 1, h.blocks()));
      reader.read_points_into(b, {.feature_offsets = p.feature_offsets.data() + local,
                                  .ids = p.feature_ids.data() + at.feature_nnz,
                                  .values = p.feature_values.data() + at.feature_nnz,
                                  .label_offsets = p.label_offsets.data() + local,
                                  .labels = p.label_ids.data() + at.label_nnz,
                                  .feature_base = at.feature_nnz,
                                  .label_base = at.label_nnz,
                                  .features = mine.feature_nnz,
                                  .label_count = mine.label_nnz});
    } catch (...) {
      failed[b - first_block] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  return data;
}

PackedHeader pack_xmc_file(const std::string& in, const std::string& out, uint64_t block_points) {
  FRUGAL_CHECK(block_points > 0, "pack: blocks hold at least one point");
  XmcReader reader(in);
  PackedHeader h;
  h.block_points = block_points;
  h.kind = PackedKind::points;
  h.features = reader.num_features();
  h.labels = reader.num_labels();
  h.source = in;
  PackWriter w(out, 6);
  PointTallies tallies(h.features, h.labels);
  SparseBatch batch;
  uint32_t crc = 0;  // of the whole text, as XmcFile::open computes it (Dataset::content_hash)
  uint64_t text_bytes = 0;
  {
    std::FILE* f = fopen_regular_file(in, "an XMC data file");
    std::vector<char> buf(1 << 22);
    size_t got = 0;
    while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
      crc = crc32c(std::as_bytes(std::span<const char>(buf.data(), got)), crc);
      text_bytes += got;
    }
    std::fclose(f);
  }
  while (true) {
    batch.clear();
    if (reader.read(batch, h.block_points) == 0) break;
    write_points_block(w, h, batch);
    tallies.add(batch);
  }
  h.source_hash = fmt::format("{} bytes, crc32c {:08x} (whole file)", text_bytes, crc);
  h.source_fingerprint = file_fingerprint(in);
  finish_points(w, h, tallies);
  return h;
}

PackedHeader pack_dataset(const Dataset& data, const std::string& out, uint64_t block_points) {
  FRUGAL_CHECK(block_points > 0, "pack: blocks hold at least one point");
  PackedHeader h;
  h.block_points = block_points;
  h.kind = PackedKind::points;
  h.features = data.num_features;
  h.labels = data.num_labels;
  h.source = data.source;
  h.source_hash = data.content_hash;
  PackWriter w(out, 6);
  PointTallies tallies(h.features, h.labels);
  SparseBatch batch;
  for (size_t first = 0; first < data.size(); first += h.block_points) {
    batch.assign_points(data.points, first, std::min<size_t>(h.block_points, data.size() - first));
    write_points_block(w, h, batch);
    tallies.add(batch);
  }
  finish_points(w, h, tallies);
  return h;
}

PackedHeader pack_ctr_file(const std::string& in, const std::string& out, uint64_t block_points) {
  FRUGAL_CHECK(block_points > 0, "pack: blocks hold at least one point");
  CtrReader reader(in);
  PackedHeader h;
  h.block_points = block_points;
  h.kind = PackedKind::clicks;
  h.source = in;
  h.source_fingerprint = file_fingerprint(in);
  PackWriter w(out, 1);
  std::vector<std::byte> rows;
  CtrRecord r;
  bool more = true;
  while (more) {
    rows.clear();
    uint64_t n = 0;
    while (n < h.block_points && (more = reader.next_record(r))) {
      rows.resize(rows.size() + kPackedClickBytes);
      encode_click(r, rows.data() + kPackedClickBytes * n);
      ++n;
    }
    if (n == 0) break;
    w.append(0, rows);
    w.end_block(h);
    h.points += n;
  }
  w.finish(h);
  return h;
}

}  // namespace frugal::data
