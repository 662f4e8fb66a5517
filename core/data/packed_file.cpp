#include "core/data/packed_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/regular_file.h"
#include "core/data/point_checks.h"

namespace frugal::data {
namespace {

// A header larger than this is no header of ours (a block checksum per 65,536 points: 4 billion
// points take a few megabytes).
constexpr uint64_t kMaxHeaderBytes = uint64_t{256} << 20;

template <class T>
std::span<const std::byte> bytes_of(std::span<const T> values) {
  return std::as_bytes(values);
}

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

std::string PackedHeader::block_list() const {
  const auto crcs = std::as_bytes(std::span<const uint32_t>(block_crcs));
  return fmt::format("{} blocks of {} points, block checksums crc32c {:08x}", blocks(), block_points, crc32c(crcs));
}

bool is_packed_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  return in.read(magic, 8) && std::memcmp(magic, kPackedMagic, 8) == 0;
}

PackedReader::PackedReader(const std::string& path) : path_(path) {
  fd_ = open_regular_fd(path, "a packed data file");
  try {
    struct stat st {};
    const uint64_t size = ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    std::array<std::byte, kPackedPrefixBytes> prefix{};
    if (size < kPackedPrefixBytes) throw Error(fmt::format("{}: truncated packed data file ({} bytes)", path, size));
    read_at(0, prefix.data(), kPackedPrefixBytes);
    if (std::memcmp(prefix.data(), kPackedMagic, 8) != 0) throw Error(fmt::format("{}: not a packed data file", path));
    if (const uint32_t v = get_u32(prefix.data() + 8); v != kPackedVersion)
      throw Error(fmt::format("{}: packed data format version {}; this frugal reads version {} (pack the text again)",
                              path, v, kPackedVersion));
    const uint64_t at = get_u64(prefix.data() + 16), len = get_u64(prefix.data() + 24);
    if (len > kMaxHeaderBytes || at < kPackedFirstSection || at > size || size - at != len + 4)
      throw Error(fmt::format("{}: truncated or damaged packed data file: its prefix puts the header at byte {} "
                              "({} bytes) of a {}-byte file",
                              path, at, len, size));
    std::string json(len, '\0');
    read_at(at, json.data(), len);
    std::array<std::byte, 4> tail{};
    read_at(at + len, tail.data(), 4);
    uint32_t crc = crc32c(std::span<const std::byte>(prefix.data(), kPackedPrefixBytes));
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
      if (j.contains("tallies")) {
        const auto& t = j.at("tallies");
        header_.tallies = PackedHeader::Tallies{
            .points_without_labels = t.at("points_without_labels").get<uint64_t>(),
            .points_without_features = t.at("points_without_features").get<uint64_t>(),
            .features_used = t.at("features_used").get<uint64_t>(),
            .labels_used = t.at("labels_used").get<uint64_t>(),
            .adjacent_same_label = t.at("adjacent_same_label").get<uint64_t>()};
        header_.label_counts_crc = j.at("label_counts_crc").get<uint32_t>();
      }
      if (j.contains("source_fingerprint")) {
        const auto& f = j.at("source_fingerprint");
        header_.source_fingerprint = Fingerprint{.size = f.at("size").get<uint64_t>(),
                                                 .header = f.at("header").get<std::string>(),
                                                 .hash = f.at("hash").get<uint64_t>()};
      }
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
    if (h.kind == PackedKind::points) {
      expect = {8 * (h.points + 1), 4 * h.feature_nnz, 4 * h.feature_nnz, 8 * (h.points + 1), 4 * h.label_nnz};
      if (h.tallies) {
        const PackedHeader::Tallies& t = *h.tallies;
        if (t.labels_used > h.labels || t.features_used > h.features || t.points_without_labels > h.points ||
            t.points_without_features > h.points || t.adjacent_same_label > h.points)
          throw bad("impossible tallies");
        expect.push_back(8 * t.labels_used);
      }
    } else {
      expect = {kPackedClickBytes * h.points};
    }
    if (h.sections.size() != expect.size()) throw bad(fmt::format("{} sections", h.sections.size()));
    for (size_t s = 0; s < expect.size(); ++s)
      if (h.sections[s].bytes != expect[s] || h.sections[s].offset < kPackedFirstSection ||
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

std::vector<std::pair<uint32_t, uint32_t>> PackedReader::label_points() {
  FRUGAL_CHECK(header_.kind == PackedKind::points, fmt::format("{}: packed click logs, not points", path_));
  FRUGAL_CHECK(header_.tallies.has_value(),
               fmt::format("{}: packed by an older frugal, without the counts of its labels that a streamed run "
                           "reads: pack the text again (`frugal data pack`)", path_));
  const PackedSection& s = header_.sections.at(5);
  std::vector<uint32_t> raw(2 * header_.tallies->labels_used);
  read_at(s.offset, raw.data(), s.bytes);
  if (crc32c(std::as_bytes(std::span<const uint32_t>(raw))) != header_.label_counts_crc)
    throw Error(fmt::format("{}: its label counts (section 6) are damaged: their bytes do not match their checksum "
                            "(pack the data again with `frugal data pack`)", path_));
  std::vector<std::pair<uint32_t, uint32_t>> out;
  out.reserve(raw.size() / 2);
  for (size_t i = 0; i < raw.size(); i += 2) {
    const uint32_t label = raw[i], points = raw[i + 1];
    FRUGAL_CHECK(label < header_.labels && (out.empty() || label > out.back().first) && points > 0 &&
                     points <= header_.points,
                 fmt::format("{}: its label counts (section 6) do not fit its header: entry {} is label {} with {} "
                             "points", path_, i / 2 + 1, label, points));
    out.emplace_back(label, points);
  }
  return out;
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

}  // namespace frugal::data
