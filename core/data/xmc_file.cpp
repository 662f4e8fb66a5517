#include "core/data/xmc_file.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "core/crc32c.h"
#include "core/host_memory.h"
#include "core/regular_file.h"
#include "core/staged_file.h"
#include "core/data/packed_file.h"
#include "core/data/xmc_reader.h"

namespace frugal::data {
namespace {

// Sizes counted in a first pass over the raw bytes, so the point arrays are allocated once at their
// final size: growing them by doubling would hold up to three times the data at the moment of a
// reallocation, which is what runs a small machine out of memory on Amazon-670K-sized files.
struct Counts {
  uint64_t colons = 0, commas = 0, lines = 0;
  uint64_t bytes = 0;
  uint32_t crc = 0;  // CRC32C of the whole file (Dataset::content_hash)
};

Counts count_bytes(const std::string& path) {
  Counts c;
  std::FILE* f = fopen_regular_file(path, "an XMC data file");
  std::vector<char> buf(1 << 22);
  size_t got = 0;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    c.crc = crc32c(std::as_bytes(std::span<const char>(buf.data(), got)), c.crc);
    c.bytes += got;
    for (size_t i = 0; i < got; ++i) {
      c.colons += buf[i] == ':';
      c.commas += buf[i] == ',';
      c.lines += buf[i] == '\n';
    }
  }
  std::fclose(f);
  return c;
}

Dataset read_xmc(XmcReader& reader, const Counts* counts) {
  Dataset data;
  data.source = reader.name();
  data.num_features = reader.num_features();
  data.num_labels = reader.num_labels();
  // N is the header's word, not yet the file's: reserve no more than the lines the file has (or, from
  // a stream, a modest start), and grow as points come.
  const uint64_t n = std::min<uint64_t>(reader.num_points(), counts != nullptr ? counts->lines + 1 : uint64_t{1} << 16);
  data.points.feature_offsets.reserve(n + 1);
  data.points.label_offsets.reserve(n + 1);
  if (counts != nullptr) {
    data.points.feature_ids.reserve(counts->colons);
    data.points.feature_values.reserve(counts->colons);
    data.points.label_ids.reserve(counts->commas + std::min<uint64_t>(n, counts->lines));
  }
  while (reader.read(data.points, SIZE_MAX) > 0) {
  }
  return data;
}

}  // namespace

Dataset XmcFile::open(const std::string& path) {
  if (is_packed_file(path)) return load_packed_points(path);  // read without parsing, each block checked
  XmcReader reader(path);
  const Counts counts = count_bytes(path);
  // The arrays the points take, known from the first pass before any is allocated: a file this
  // machine cannot hold is refused here, not by std::bad_alloc or the OOM killer half-way.
  const double need = 8.0 * static_cast<double>(counts.colons) +
                      4.0 * static_cast<double>(counts.commas + counts.lines) + 16.0 * static_cast<double>(counts.lines);
  if (const auto available = host_memory_available(); available && need > static_cast<double>(*available))
    throw Error(fmt::format("{}: reading it takes {:.1f} GiB ({} lines, {} feature values), more than the {:.1f} GiB "
                            "this machine has available",
                            path, need / 1073741824.0, counts.lines, counts.colons,
                            static_cast<double>(*available) / 1073741824.0));
  Dataset data = read_xmc(reader, &counts);
  data.content_hash = fmt::format("{} bytes, crc32c {:08x} (whole file)", counts.bytes, counts.crc);
  return data;
}

Dataset XmcFile::read(std::istream& in, const std::string& name) {
  XmcReader reader(in, name);
  return read_xmc(reader, nullptr);
}

void XmcFile::write(const Dataset& data, const std::string& path) {
  StagedFile f(path);  // renamed to `path` once complete: a full disk leaves no partial file
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "{} {} {}\n", data.size(), data.num_features, data.num_labels);
  for (size_t i = 0; i < data.size(); ++i) {
    const auto labels = data.points.labels_of(i);
    for (size_t j = 0; j < labels.size(); ++j)
      fmt::format_to(std::back_inserter(buf), fmt::runtime(j == 0 ? "{}" : ",{}"), labels[j]);
    const auto ids = data.points.features_of(i);
    const auto vals = data.points.values_of(i);
    for (size_t j = 0; j < ids.size(); ++j)
      fmt::format_to(std::back_inserter(buf), " {}:{}", ids[j], vals[j]);
    if (labels.empty() && ids.empty()) buf.push_back(' ');  // a point with neither: a line of one space, not a blank one
    buf.push_back('\n');
    if (buf.size() > (1u << 20)) {
      f.write({buf.data(), buf.size()});
      buf.clear();
    }
  }
  f.write({buf.data(), buf.size()});
  f.commit();
}

}  // namespace frugal::data
