#include "core/data/packed_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <tbb/parallel_for.h>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/huge_pages.h"
#include "core/regular_file.h"
#include "core/staged_file.h"
#include "core/data/ctr_reader.h"
#include "core/data/point_checks.h"
#include "core/data/xmc_file.h"
#include "core/data/xmc_reader.h"

namespace frugal::data {
namespace {

constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'P', 'K'};
constexpr uint64_t kPrefixBytes = 32;
constexpr uint64_t kFirstSection = 64;
constexpr uint64_t kAlign = 64;
// A header larger than this is no header of ours (a block checksum per 65,536 points: 4 billion
// points take a few megabytes).
constexpr uint64_t kMaxHeaderBytes = uint64_t{256} << 20;

template <class T>
std::span<const std::byte> bytes_of(std::span<const T> values) {
  return std::as_bytes(values);
}

void put_u32(std::byte* at, uint32_t v) { std::memcpy(at, &v, 4); }
void put_u64(std::byte* at, uint64_t v) { std::memcpy(at, &v, 8); }
uint32_t get_u32(const std::byte* at) {
  uint32_t v;
  std::memcpy(&v, at, 4);
  return v;
}
uint64_t get_u64(const std::byte* at) {
  uint64_t v;
  std::memcpy(&v, at, 8);
  return v;
}

// One click row as the file holds it (kPackedClickBytes).
void encode_click(const CtrRecord& r, std::byte* at) {
  uint64_t flags = r.label != 0 ? 1 : 0;
  for (size_t i = 0; i < kCtrDense; ++i) flags |= r.int_missing[i] ? uint64_t{1} << (i + 1) : 0;
  put_u64(at, flags);
  for (size_t i = 0; i < kCtrDense; ++i) put_u64(at + 8 + 8 * i, static_cast<uint64_t>(r.ints[i]));
  for (size_t i = 0; i < kCtrCats; ++i) put_u64(at + 8 + 8 * kCtrDense + 8 * i, r.cats[i]);
}

// False for a row no Criteo line parses to (flags beyond the 14 bits, an id past the missing one).
bool decode_click(const std::byte* at, CtrRecord& r) {
  const uint64_t flags = get_u64(at);
  if ((flags >> (kCtrDense + 1)) != 0) return false;
  r.label = static_cast<int>(flags & 1);
  for (size_t i = 0; i < kCtrDense; ++i) {
    r.int_missing[i] = ((flags >> (i + 1)) & 1) != 0;
    r.ints[i] = static_cast<int64_t>(get_u64(at + 8 + 8 * i));
    if (r.int_missing[i] && r.ints[i] != 0) return false;
  }
  for (size_t i = 0; i < kCtrCats; ++i) {
    r.cats[i] = get_u64(at + 8 + 8 * kCtrDense + 8 * i);
    if (r.cats[i] > kMissingCategory) return false;
  }
  return true;
}

uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

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
    std::array<std::byte, kFirstSection> prefix{};
    uint64_t at = kFirstSection;
    h.sections.clear();
    for (const Temp& t : temps_) {
      h.sections.push_back({at, t.bytes});
      at = align_up(at + t.bytes);
    }
    const uint64_t header_offset = at;
    const std::string json = header_json(h);
    std::memcpy(prefix.data(), kMagic, 8);
    put_u32(prefix.data() + 8, kPackedVersion);
    put_u64(prefix.data() + 16, header_offset);
    put_u64(prefix.data() + 24, json.size());
    f.write({reinterpret_cast<const char*>(prefix.data()), prefix.size()});
    std::vector<char> buf(size_t{4} << 20);
    uint64_t written = kFirstSection;
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
    uint32_t crc = crc32c(std::span<const std::byte>(prefix.data(), kPrefixBytes));
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
    return j.dump();
  }

  std::string out_;
  std::vector<Temp> temps_;
  uint32_t crc_ = 0;
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

void finish_points(PackWriter& w, PackedHeader& h) {
  w.append(0, bytes_of(std::span<const uint64_t>(&h.feature_nnz, 1)), false);
  w.append(3, bytes_of(std::span<const uint64_t>(&h.label_nnz, 1)), false);
  w.finish(h);
}

}  // namespace

std::string_view to_string(PackedKind kind) { return kind == PackedKind::clicks ? "clicks" : "points"; }

uint64_t PackedHeader::block_size(uint64_t block) const {
  const uint64_t first = block_first(block);
  return first >= points ? 0 : std::min(block_points, points - first);
}

std::string PackedHeader::content_hash() const {
  if (!source_hash.empty()) return source_hash;
  const auto crcs = std::as_bytes(std::span<const uint32_t>(block_crcs));
  return fmt::format("packed {} points in {} blocks, block checksums crc32c {:08x}", points, blocks(), crc32c(crcs));
}

bool is_packed_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in.read(magic, 8) && std::memcmp(magic, kMagic, 8) == 0;
}

PackedReader::PackedReader(const std::string& path) : path_(path) {
  fd_ = open_regular_fd(path, "a packed data file");
  try {
    struct stat st {};
    const uint64_t size = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    std::array<std::byte, kPrefixBytes> prefix{};
    if (size < kPrefixBytes) throw Error(fmt::format("{}: truncated packed data file ({} bytes)", path, size));
    read_at(0, prefix.data(), kPrefixBytes);
    if (std::memcmp(prefix.data(), kMagic, 8) != 0) throw Error(fmt::format("{}: not a packed data file", path));
    if (const uint32_t v = get_u32(prefix.data() + 8); v != kPackedVersion)
      throw Error(fmt::format("{}: packed data format version {}; this frugal reads version {} (pack the text again)",
                              path, v, kPackedVersion));
    const uint64_t at = get_u64(prefix.data() + 16), len = get_u64(prefix.data() + 24);
    if (len > kMaxHeaderBytes || at < kFirstSection || at > size || size - at != len + 4)
      throw Error(fmt::format("{}: truncated or damaged packed data file: its prefix puts the header at byte {} "
                              "({} bytes) of a {}-byte file",
                              path, at, len, size));
    std::string json(len, '\0');
    read_at(at, json.data(), len);
    std::array<std::byte, 4> tail{};
    read_at(at + len, tail.data(), 4);
    uint32_t crc = crc32c(std::span<const std::byte>(prefix.data(), kPrefixBytes));
    crc = crc32c(std::as_bytes(std::span<const char>(json.data(), json.size())), crc);
    if (crc != get_u32(tail.data()))
      throw Error(fmt::format("{}: the packed file's header is damaged (its checksum does not match)", path));
    const auto j = nlohmann::json::parse(json, nullptr, false);
    const auto bad = [&](const std::string& what) {
      return Error(fmt::format("{}: the packed file's header is damaged: {}", path, what));
    };
    if (j.is_discarded() || !j.is_object()) throw bad("not JSON");
    try {
      const std::string kind = j.at("kind").get<std::string>();
      if (kind != "points" && kind != "clicks") throw bad(fmt::format("kind '{}'", kind));
      header_.kind = kind == "clicks" ? PackedKind::clicks : PackedKind::points;
      header_.points = j.at("points").get<uint64_t>();
      header_.features = j.at("features").get<uint32_t>();
      header_.labels = j.at("labels").get<uint32_t>();
      header_.feature_nnz = j.at("feature_nnz").get<uint64_t>();
      header_.label_nnz = j.at("label_nnz").get<uint64_t>();
      header_.block_points = j.at("block_points").get<uint64_t>();
      header_.block_crcs = j.at("block_crcs").get<std::vector<uint32_t>>();
      for (const auto& s : j.at("sections")) header_.sections.push_back({s.at(0).get<uint64_t>(), s.at(1).get<uint64_t>()});
      header_.source = j.at("source").get<std::string>();
      header_.source_hash = j.at("source_hash").get<std::string>();
    } catch (const nlohmann::json::exception&) {
      throw bad("a field is missing or of the wrong type");
    }
    // The sections must be where the counts put them, inside the file and before the header.
    const PackedHeader& h = header_;
    if (h.block_points == 0 || h.points > (uint64_t{1} << 40) || h.feature_nnz > (uint64_t{1} << 50) ||
        h.label_nnz > (uint64_t{1} << 50))
      throw bad("impossible counts");
    if (h.blocks() != (h.points + h.block_points - 1) / h.block_points)
      throw bad(fmt::format("{} block checksums for {} points in blocks of {}", h.blocks(), h.points, h.block_points));
    std::vector<uint64_t> expect;
    if (h.kind == PackedKind::points)
      expect = {8 * (h.points + 1), 4 * h.feature_nnz, 4 * h.feature_nnz, 8 * (h.points + 1), 4 * h.label_nnz};
    else
      expect = {kPackedClickBytes * h.points};
    if (h.sections.size() != expect.size()) throw bad(fmt::format("{} sections", h.sections.size()));
    for (size_t s = 0; s < expect.size(); ++s)
      if (h.sections[s].bytes != expect[s] || h.sections[s].offset < kFirstSection ||
          h.sections[s].offset + h.sections[s].bytes > at)
        throw bad(fmt::format("section {} does not hold what the counts say", s + 1));
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

PackedReader::~PackedReader() {
  if (fd_ >= 0) ::close(fd_);
}

void PackedReader::read_at(uint64_t offset, void* to, uint64_t bytes) {
  auto* p = static_cast<char*>(to);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, p, std::min<uint64_t>(bytes, uint64_t{1} << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw Error(fmt::format("{}: cannot read {} bytes at byte {}: {}", path_, bytes, offset,
                              got == 0 ? "the file is shorter (truncated?)" : std::strerror(errno)));
    p += got;
    offset += static_cast<uint64_t>(got);
    bytes -= static_cast<uint64_t>(got);
    bytes_read_.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
  }
}

void PackedReader::damaged(uint64_t block, const std::string& why) const {
  const uint64_t first = header_.block_first(block);
  throw Error(fmt::format("{}: block {} of {} (points {}-{}) is damaged: {} (pack the data again with `frugal data "
                          "pack`)",
                          path_, block + 1, header_.blocks(), first, first + header_.block_size(block) - 1, why));
}

void PackedReader::read_points(uint64_t block, SparseBatch& out, uint32_t feature_limit, const std::string& limit_what) {
  FRUGAL_CHECK(header_.kind == PackedKind::points, fmt::format("{}: packed click logs, not points", path_));
  const PackedRange r = range(block, block + 1);
  const size_t points = out.size(), features = out.feature_ids.size(), labels = out.label_ids.size();
  out.feature_offsets.resize(points + 1 + r.points);
  out.label_offsets.resize(points + 1 + r.points);
  out.feature_ids.resize(features + r.feature_nnz);
  out.feature_values.resize(features + r.feature_nnz);
  out.label_ids.resize(labels + r.label_nnz);
  try {
    read_points_into(block, {.feature_offsets = out.feature_offsets.data() + points,
                             .ids = out.feature_ids.data() + features,
                             .values = out.feature_values.data() + features,
                             .label_offsets = out.label_offsets.data() + points,
                             .labels = out.label_ids.data() + labels,
                             .feature_base = features,
                             .label_base = labels,
                             .features = r.feature_nnz,
                             .label_count = r.label_nnz},
                     feature_limit, limit_what);
  } catch (...) {  // taken back: `out` holds what it held
    out.feature_offsets.resize(points + 1);
    out.label_offsets.resize(points + 1);
    out.feature_ids.resize(features);
    out.feature_values.resize(features);
    out.label_ids.resize(labels);
    throw;
  }
}

void PackedReader::read_points_into(uint64_t block, const PointArrays& to, uint32_t feature_limit,
                                    const std::string& limit_what) {
  const PackedHeader& h = header_;
  FRUGAL_CHECK(block < h.blocks(), fmt::format("{}: no block {} of {}", path_, block + 1, h.blocks()));
  const uint64_t first = h.block_first(block), n = h.block_size(block);
  std::vector<uint64_t> fo(n + 1), lo(n + 1);
  read_at(h.sections[0].offset + 8 * first, fo.data(), 8 * (n + 1));
  read_at(h.sections[3].offset + 8 * first, lo.data(), 8 * (n + 1));
  for (size_t i = 0; i < n; ++i)
    if (fo[i] > fo[i + 1] || lo[i] > lo[i + 1]) damaged(block, "its point offsets are not in order");
  if (fo[n] > h.feature_nnz || lo[n] > h.label_nnz) damaged(block, "its point offsets run past the data");
  const uint64_t nf = fo[n] - fo[0], nl = lo[n] - lo[0];
  if (nf > to.features || nl > to.label_count) damaged(block, "its point offsets disagree with its neighbours'");
  uint32_t* ids = to.ids;
  float* values = to.values;
  uint32_t* labels = to.labels;
  read_at(h.sections[1].offset + 4 * fo[0], ids, 4 * nf);
  read_at(h.sections[2].offset + 4 * fo[0], values, 4 * nf);
  read_at(h.sections[4].offset + 4 * lo[0], labels, 4 * nl);
  uint32_t crc = crc32c(bytes_of(std::span<const uint64_t>(fo.data(), n)));
  crc = crc32c(bytes_of(std::span<const uint32_t>(ids, nf)), crc);
  crc = crc32c(bytes_of(std::span<const float>(values, nf)), crc);
  crc = crc32c(bytes_of(std::span<const uint64_t>(lo.data(), n)), crc);
  crc = crc32c(bytes_of(std::span<const uint32_t>(labels, nl)), crc);
  if (crc != h.block_crcs[block]) damaged(block, "its bytes do not match its checksum");
  if (block + 1 == h.blocks() && (fo[n] != h.feature_nnz || lo[n] != h.label_nnz))
    damaged(block, "the last point's end is not the data's end");
  // The entry checks every reader makes (core/data/point_checks.h): a file forged with matching
  // checksums is refused as its text would be. A scan that vectorizes first (an id past its bound, a
  // value whose exponent is all ones: inf or NaN); the message from the checks.
  const uint32_t feature_bound = std::min(h.features, feature_limit);
  uint32_t max_id = 0, max_label = 0, bad_value = 0;
  for (uint64_t k = 0; k < nf; ++k) {
    uint32_t bits;
    std::memcpy(&bits, values + k, 4);
    max_id = std::max(max_id, ids[k]);
    bad_value |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  for (uint64_t k = 0; k < nl; ++k) max_label = std::max(max_label, labels[k]);
  if ((nf > 0 && max_id >= feature_bound) || bad_value != 0 || (nl > 0 && max_label >= h.labels)) {
    const PointLimits limits{.num_features = h.features, .num_labels = h.labels, .feature_limit = feature_limit,
                             .limit_what = limit_what};
    for (size_t i = 0; i < n; ++i) {
      for (uint64_t k = fo[i] - fo[0]; k < fo[i + 1] - fo[0]; ++k)
        if (std::string why = feature_problem(limits, ids[k], values[k]); !why.empty())
          throw Error(fmt::format("{}: point {}: {}", path_, first + i, why));
      for (uint64_t k = lo[i] - lo[0]; k < lo[i + 1] - lo[0]; ++k)
        if (std::string why = label_problem(limits, labels[k]); !why.empty())
          throw Error(fmt::format("{}: point {}: {}", path_, first + i, why));
    }
  }
  for (size_t i = 1; i <= n; ++i) {
    to.feature_offsets[i] = to.feature_base + (fo[i] - fo[0]);
    to.label_offsets[i] = to.label_base + (lo[i] - lo[0]);
  }
}

PackedRange PackedReader::range(uint64_t first_block, uint64_t end_block) {
  const PackedHeader& h = header_;
  FRUGAL_CHECK(first_block <= end_block && end_block <= h.blocks(),
               fmt::format("{}: no blocks {}-{} of {}", path_, first_block + 1, end_block, h.blocks()));
  const uint64_t first = h.block_first(first_block), end = std::min(h.points, h.block_first(end_block));
  PackedRange r{.points = end - first};
  if (h.kind != PackedKind::points || r.points == 0) return r;
  uint64_t at[2];
  read_at(h.sections[0].offset + 8 * first, &at[0], 8);
  read_at(h.sections[0].offset + 8 * end, &at[1], 8);
  r.feature_nnz = at[1] >= at[0] && at[1] <= h.feature_nnz ? at[1] - at[0] : 0;  // damaged: read_points names it
  read_at(h.sections[3].offset + 8 * first, &at[0], 8);
  read_at(h.sections[3].offset + 8 * end, &at[1], 8);
  r.label_nnz = at[1] >= at[0] && at[1] <= h.label_nnz ? at[1] - at[0] : 0;
  return r;
}

void PackedReader::read_clicks(uint64_t block, std::vector<CtrRecord>& out) {
  const PackedHeader& h = header_;
  FRUGAL_CHECK(h.kind == PackedKind::clicks, fmt::format("{}: packed points, not click logs", path_));
  FRUGAL_CHECK(block < h.blocks(), fmt::format("{}: no block {} of {}", path_, block + 1, h.blocks()));
  const uint64_t first = h.block_first(block), n = h.block_size(block);
  std::vector<std::byte> rows(kPackedClickBytes * n);
  read_at(h.sections[0].offset + kPackedClickBytes * first, rows.data(), rows.size());
  if (crc32c(rows) != h.block_crcs[block]) damaged(block, "its bytes do not match its checksum");
  for (uint64_t i = 0; i < n; ++i) {
    CtrRecord r;
    if (!decode_click(rows.data() + kPackedClickBytes * i, r))
      throw Error(fmt::format("{}: sample {}: no Criteo line holds these values (a forged file?)", path_, first + i));
    out.push_back(r);
  }
}

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
  // The arrays at their final size at once (growing them would hold up to three times the data).
  const PackedRange r = reader.range(first_block, end);
  // Huge pages for the big arrays, advised before they are first written: a 4 KB page fault and
  // clear per 4 KB took a third of the load, and the batch loader gathers points in random order.
  const auto reserve = [](auto& v, size_t n) {
    v.reserve(n);
    advise_huge_pages(v.data(), n * sizeof(v[0]));
  };
  reserve(data.points.feature_offsets, r.points + 1);
  reserve(data.points.label_offsets, r.points + 1);
  reserve(data.points.feature_ids, r.feature_nnz);
  reserve(data.points.feature_values, r.feature_nnz);
  reserve(data.points.label_ids, r.label_nnz);
  data.points.feature_offsets.assign(r.points + 1, 0);
  data.points.label_offsets.assign(r.points + 1, 0);
  data.points.feature_ids.resize(r.feature_nnz);
  data.points.feature_values.resize(r.feature_nnz);
  data.points.label_ids.resize(r.label_nnz);
  // Blocks in parallel (each writes its own part of the arrays): the checksums and checks run at the
  // speed of the cores, the copies at the memory's.
  SparseBatch& p = data.points;
  const uint64_t point0 = h.block_first(first_block);
  tbb::parallel_for(first_block, end, [&](uint64_t b) {
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
  });
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
  PackWriter w(out, 5);
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
  }
  h.source_hash = fmt::format("{} bytes, crc32c {:08x} (whole file)", text_bytes, crc);
  finish_points(w, h);
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
  PackWriter w(out, 5);
  SparseBatch batch;
  for (size_t first = 0; first < data.size(); first += h.block_points) {
    batch.assign_points(data.points, first, std::min<size_t>(h.block_points, data.size() - first));
    write_points_block(w, h, batch);
  }
  finish_points(w, h);
  return h;
}

PackedHeader pack_ctr_file(const std::string& in, const std::string& out, uint64_t block_points) {
  FRUGAL_CHECK(block_points > 0, "pack: blocks hold at least one point");
  CtrReader reader(in);
  PackedHeader h;
  h.block_points = block_points;
  h.kind = PackedKind::clicks;
  h.source = in;
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
